import scrapy


class CrashSpider(scrapy.Spider):
    """Fails in __init__: the crawl never opens and the process exits 1."""

    name = "crash"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        raise RuntimeError("crash spider fails in __init__ on purpose")
