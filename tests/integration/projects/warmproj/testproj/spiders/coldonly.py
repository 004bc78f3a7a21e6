import scrapy


class ColdonlySpider(scrapy.Spider):
    """Opts out of warm starts in its custom_settings; crawls one data: URL."""

    name = "coldonly"
    custom_settings = {"SPIDERD_WARM_START": False}

    def start_requests(self):
        yield scrapy.Request("data:,coldonly")

    def parse(self, response):
        yield {"coldonly": True}
