import scrapy


class QuickSpider(scrapy.Spider):
    """Yields `count` (default 3) items, one per data: URL, and ends."""

    name = "quick"

    def __init__(self, count=3, **kwargs):
        super().__init__(**kwargs)
        self.count = int(count)

    def start_requests(self):
        for i in range(self.count):
            yield scrapy.Request(f"data:,quick{i}", cb_kwargs={"n": i})

    def parse(self, response, n):
        yield {"n": n, "url": response.url, "text": response.text}
