import scrapy


class PagesSpider(scrapy.Spider):
    """Crawls a tree of n pages from `base` (page i links to 2i+1 and 2i+2),
    one item per page. Its start request is filtered like any other, so a
    crawl resumed from its JOBDIR does not fetch page 0 again."""

    name = "pages"

    def __init__(self, base=None, n="200", **kwargs):
        super().__init__(**kwargs)
        self.base = base
        self.n = int(n)

    def start_requests(self):
        yield scrapy.Request(f"{self.base}/p/0", callback=self.parse)

    def parse(self, response):
        i = int(response.url.rsplit("/", 1)[1])
        yield {"page": i, "url": response.url}
        for k in (2 * i + 1, 2 * i + 2):
            if k < self.n:
                yield scrapy.Request(f"{self.base}/p/{k}", callback=self.parse)
