import scrapy


class OneSpider(scrapy.Spider):
    """Fetches the one URL given as the spider argument `url` and yields one item."""

    name = "one"

    def __init__(self, url=None, **kwargs):
        super().__init__(**kwargs)
        if not url:
            raise ValueError("spider one needs the argument url")
        self.url = url

    def start_requests(self):
        yield scrapy.Request(self.url, dont_filter=True)

    def parse(self, response):
        yield {"url": response.url, "status": response.status, "bytes": len(response.body)}
