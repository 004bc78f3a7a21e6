"""The crawl's heartbeat, for the daemon's supervisor.

While the crawl's Twisted reactor runs, a task.LoopingCall touches the file
named by SPIDERD_HEARTBEAT_FILE every SPIDERD_HEARTBEAT_INTERVAL seconds
(default 5). It runs on the reactor on purpose: a spider that blocks the
reactor (a callback stuck in time.sleep, a busy loop) stops the beats, and
the daemon, seeing the file's mtime grow old, kills the crawl as lost.

The beat starts when Scrapy's engine starts (and ends with the reactor), so the time spent importing the
project and building the crawler does not count; the daemon only enforces
heartbeats once it has seen the first one. Touching never raises: a full
disk must not fail the crawl (it only stops the beats).
"""

import os
import sys

EXTENSION_PATH = "spiderd_runner.heartbeat.HeartbeatExtension"
EXTENSION_ORDER = 1001
DEFAULT_INTERVAL = 5.0


def interval_from_env():
    try:
        value = float(os.environ.get("SPIDERD_HEARTBEAT_INTERVAL", DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value > 0 else DEFAULT_INTERVAL


def touch(path):
    try:
        try:
            os.utime(path, None)
        except FileNotFoundError:
            with open(path, "w", encoding="ascii"):
                pass
    except OSError as e:
        sys.stderr.write(f"spiderd_runner: cannot touch heartbeat file {path}: {e}\n")


class HeartbeatExtension:
    """Scrapy extension; enabled by the runner only for `crawl` with
    SPIDERD_HEARTBEAT_FILE set."""

    def __init__(self, path, interval):
        self.path = path
        self.interval = interval
        self.loop = None

    @classmethod
    def from_crawler(cls, crawler):
        from scrapy import signals
        from scrapy.exceptions import NotConfigured

        path = os.environ.get("SPIDERD_HEARTBEAT_FILE")
        if not path:
            raise NotConfigured
        ext = cls(path, interval_from_env())
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        return ext

    def engine_started(self):
        from twisted.internet import task

        # Never stopped by hand: it beats until the reactor itself stops, so
        # a slow close (feed exports, a draining spider) is not taken for a
        # wedged one.
        self.loop = task.LoopingCall(touch, self.path)
        self.loop.start(self.interval, now=True)
