import scrapy


class HogSpider(scrapy.Spider):
    """Allocates (and touches) `mb` MiB (default 3072) in 16 MiB blocks in
    its __init__: under a smaller memory limit the allocation fails, the
    MemoryError is not caught and the crawl exits 1. Given the memory, it
    crawls one data: URL and finishes."""

    name = "hog"

    def __init__(self, mb=3072, **kwargs):
        super().__init__(**kwargs)
        held = []
        for _ in range(int(mb) // 16):
            held.append(b"h" * (16 << 20))
        self.held_mb = 16 * len(held)
        del held

    def start_requests(self):
        yield scrapy.Request("data:,hog")

    def parse(self, response):
        yield {"held_mb": self.held_mb}
