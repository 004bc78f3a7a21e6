import time

import scrapy


class AllocatesSpider(scrapy.Spider):
    """Holds `mb` megabytes (default 50) for `seconds` (default 2), touched
    so they are resident, then yields one item: the memory admission
    tests' crawl."""

    name = "allocates"

    def __init__(self, mb=50, seconds=2, **kwargs):
        super().__init__(**kwargs)
        self.mb = int(mb)
        self.seconds = float(seconds)

    def start_requests(self):
        yield scrapy.Request("data:,allocates")

    def parse(self, response):
        block = bytearray(self.mb << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(self.seconds)
        yield {"mb": self.mb, "held": len(block)}
