import time

import scrapy
from twisted.internet import reactor, task


class SlowSpider(scrapy.Spider):
    """Crawls one data: URL after another (DOWNLOAD_DELAY 0.5 s, an item each)
    for `seconds` (default 60), then finishes.

    A graceful stop (first SIGINT/SIGTERM, close reason "shutdown") then takes
    `drain` more seconds (default 0): closed() returns a Deferred that Scrapy
    waits for while the reactor keeps running, so a second signal still gets
    through and forces the process out at once."""

    name = "slow"
    custom_settings = {"DOWNLOAD_DELAY": 0.5, "RANDOMIZE_DOWNLOAD_DELAY": False}

    def __init__(self, seconds=60, drain=0, **kwargs):
        super().__init__(**kwargs)
        self.seconds = float(seconds)
        self.drain = float(drain)
        self.deadline = None

    def start_requests(self):
        self.deadline = time.monotonic() + self.seconds
        yield scrapy.Request("data:,tick0", cb_kwargs={"n": 0})

    def parse(self, response, n):
        yield {"tick": n}
        if time.monotonic() < self.deadline:
            yield scrapy.Request(f"data:,tick{n + 1}", cb_kwargs={"n": n + 1})

    def closed(self, reason):
        if reason == "shutdown" and self.drain > 0:
            self.logger.info("Draining for %s s before closing", self.drain)
            return task.deferLater(reactor, self.drain, lambda: None)
        return None
