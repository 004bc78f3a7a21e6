import scrapy


class FailSpider(scrapy.Spider):
    """Yields one item, then its callback raises: the crawl finishes
    normally (exit 0) with the error counted in the stats."""

    name = "fail"

    def start_requests(self):
        yield scrapy.Request("data:,fail")

    def parse(self, response):
        yield {"before": "error"}
        raise ValueError("fail spider raises in a callback on purpose")
