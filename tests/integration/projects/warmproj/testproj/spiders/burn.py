import scrapy


class BurnSpider(scrapy.Spider):
    """Spins the CPU in its first callback until something stops it (or
    `seconds` of CPU time, default 60, have gone)."""

    name = "burn"

    def __init__(self, seconds=60, **kwargs):
        super().__init__(**kwargs)
        self.seconds = float(seconds)

    def start_requests(self):
        yield scrapy.Request("data:,burn")

    def parse(self, response):
        import time

        end = time.process_time() + self.seconds
        n = 0
        while time.process_time() < end:
            n += 1
        yield {"spins": n}
