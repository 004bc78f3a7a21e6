"""The crawl's stats file, written for the daemon.

Format (one JSON object, replaced atomically: temp file + os.replace; not
synced to disk: the daemon reads it as soon as the crawl ends and keeps it in
its store, and a machine that crashes first has lost the daemon too, which
then recovers the job whatever the file says):

  {"items": int, "requests": int, "responses": int, "errors": int,
   "finish_reason": str | null, "elapsed": float | null,
   "start_time": str | null, "finish_time": str | null,
   "peak_memory_bytes": int, "cpu_time_seconds": float,
   "scrapy": {every Scrapy stat; values JSON cannot hold are str()}}

peak_memory_bytes and cpu_time_seconds are the runner's own rusage (its peak
RSS; user + system CPU of it and the children it reaped) when written.

items/requests/responses/errors are item_scraped_count,
downloader/request_count, response_received_count and log_count/ERROR (0 when
absent). Times are ISO 8601 in UTC with an explicit offset.

When it is written:
  * at spider_closed, as soon as the spider starts closing, so the file exists
    even if the process is then killed during a long close (second SIGINT);
  * again when the runner exits, with whatever stats are known by then. This
    covers a crawl that never opened (spider __init__ raised, unknown spider,
    bad egg, settings import error): finish_reason, times and elapsed are null
    and the counters 0 (or what was counted before the failure).
So after a `crawl` run with SPIDERD_STATS_FILE set, the file always exists
unless the process was killed by a signal it cannot handle (SIGKILL).
"""

import datetime
import json
import math
import os
import sys
import tempfile

EXTENSION_PATH = "spiderd_runner.stats.StatsExtension"
# After CoreStats (0), whose spider_closed handler sets finish_reason,
# finish_time and elapsed_time_seconds: handlers run in connection order.
EXTENSION_ORDER = 1000

_writer = None
_mode = 0o644  # what open() would give; mkstemp makes 0600


def install(path):
    """Creates the process's writer for path and removes a stale file."""
    global _writer, _mode
    umask = os.umask(0o022)
    os.umask(umask)
    _mode = 0o666 & ~umask
    _writer = StatsWriter(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return _writer


def installed():
    return _writer


def _iso(value):
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:  # Scrapy 2.8 stores datetime.utcnow()
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.isoformat()
    if value is None:
        return None
    return str(value)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _count(stats, key):
    value = stats.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def build(stats, reason=None):
    """The stats file object from a Scrapy stats dict (reason: the close
    reason, used when the stats lack finish_reason)."""
    elapsed = stats.get("elapsed_time_seconds")
    start, finish = stats.get("start_time"), stats.get("finish_time")
    if elapsed is None and isinstance(start, datetime.datetime) and isinstance(
        finish, datetime.datetime
    ):
        elapsed = (finish - start).total_seconds()
    finish_reason = stats.get("finish_reason", reason)
    return {
        "items": _count(stats, "item_scraped_count"),
        "requests": _count(stats, "downloader/request_count"),
        "responses": _count(stats, "response_received_count"),
        "errors": _count(stats, "log_count/ERROR"),
        "finish_reason": None if finish_reason is None else str(finish_reason),
        "elapsed": float(elapsed) if isinstance(elapsed, (int, float)) else None,
        "start_time": _iso(start),
        "finish_time": _iso(finish),
        "scrapy": _jsonable(dict(stats)),
        **_usage(),
    }


def _usage():
    """The process's own peak memory and CPU time so far (the daemon samples
    them too, but only every sweep: this is exact at the runner's end)."""
    try:
        import resource

        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    except (ImportError, OSError):
        return {}
    return {
        "peak_memory_bytes": int(me.ru_maxrss) * 1024,  # KiB on Linux
        "cpu_time_seconds": round(
            me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 3),
    }


def write_atomic(path, obj):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(
        prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fchmod(f.fileno(), _mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class StatsWriter:
    def __init__(self, path):
        self.path = path
        self.crawler = None
        self.reason = None

    def _stats(self):
        if self.crawler is None:
            return {}
        try:
            return dict(self.crawler.stats.get_stats())
        except Exception:
            return {}

    def write(self):
        """Never raises: a stats file that cannot be written must not change
        the crawl's outcome (nor count as a Scrapy error)."""
        try:
            write_atomic(self.path, build(self._stats(), self.reason))
        except Exception as e:
            sys.stderr.write(f"spiderd_runner: cannot write stats to {self.path}: {e}\n")

    def spider_closed(self, spider, reason):
        self.reason = reason
        self.write()

    def write_final(self):
        self.write()


class StatsExtension:
    """Scrapy extension: created with the Crawler (before the spider, so it
    exists even when the spider's __init__ raises)."""

    @classmethod
    def from_crawler(cls, crawler):
        from scrapy import signals
        from scrapy.exceptions import NotConfigured

        writer = _writer
        if writer is None:
            raise NotConfigured
        writer.crawler = crawler
        ext = cls()
        crawler.signals.connect(writer.spider_closed, signal=signals.spider_closed)
        return ext
