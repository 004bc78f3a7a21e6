import scrapy


class FrontierSpider(scrapy.Spider):
    """Follows every link from `start` (a page of the test's local site), with
    the crawl frontier and the seen set in spiderd queues: several jobs of it
    with the same SPIDERD_QUEUE crawl the site together."""

    name = "frontier"
    custom_settings = {
        "SCHEDULER": "spiderd.scrapy.Scheduler",
        "DUPEFILTER_CLASS": "spiderd.scrapy.DupeFilter",
        "SPIDERD_QUEUE_POLL": 0.2,
        "CONCURRENT_REQUESTS": 2,
        "RETRY_ENABLED": False,
    }

    def __init__(self, start=None, **kwargs):
        super().__init__(**kwargs)
        self.start = start

    def start_requests(self):
        # Not dont_filter (what the default start_requests makes): the start
        # page is fetched once by all the jobs together. No start: the
        # frontier is seeded (a multi-process run's URLs).
        if self.start:
            yield scrapy.Request(self.start)

    def parse(self, response):
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)
