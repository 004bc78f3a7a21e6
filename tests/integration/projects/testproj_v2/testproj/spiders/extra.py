import scrapy

from testproj.version import VERSION


class ExtraSpider(scrapy.Spider):
    """Only in version 2.0 of testproj: yields one item naming the version."""

    name = "extra"

    def start_requests(self):
        yield scrapy.Request("data:,extra")

    def parse(self, response):
        yield {"extra": True, "version": VERSION}
