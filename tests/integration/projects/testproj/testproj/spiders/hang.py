import time

import scrapy


class HangSpider(scrapy.Spider):
    """Wedges its own reactor: its first callback blocks in time.sleep for
    `seconds` (default 60), so nothing else on the reactor runs (heartbeats
    included). With `init_sleep`, it first blocks that long in __init__,
    before the engine (and the heartbeat) starts; `seconds=0` then makes it
    an ordinary quick crawl."""

    name = "hang"

    def __init__(self, seconds=60, init_sleep=0, **kwargs):
        super().__init__(**kwargs)
        self.seconds = float(seconds)
        if float(init_sleep) > 0:
            time.sleep(float(init_sleep))

    def start_requests(self):
        yield scrapy.Request("data:,hang")

    def parse(self, response):
        if self.seconds > 0:
            time.sleep(self.seconds)
        yield {"hung": self.seconds}
