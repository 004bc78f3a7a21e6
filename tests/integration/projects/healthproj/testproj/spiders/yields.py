import json

import scrapy


class YieldsSpider(scrapy.Spider):
    """Yields `count` items (default 20) from one data: URL, each with the
    fields name and price; the first `missing` carry no price, and `errors`
    errors are logged. With `plan`, a JSON file, these come from it
    instead, so that runs with the same arguments yield differently: the
    health tests make a run yield less than the runs before it. A plan with
    "fail" makes the crawl fail at its start (exit 1)."""

    name = "yields"

    def __init__(self, count=20, missing=0, errors=0, plan=None, **kwargs):
        super().__init__(**kwargs)
        if plan:
            with open(plan, encoding="utf-8") as f:
                p = json.load(f)
            count, missing, errors = p.get("count", 20), p.get("missing", 0), p.get("errors", 0)
            if p.get("fail"):
                raise RuntimeError("yields spider fails on purpose (its plan says so)")
        self.count = int(count)
        self.missing = int(missing)
        self.errors = int(errors)

    def start_requests(self):
        yield scrapy.Request("data:,yields")

    def parse(self, response):
        for i in range(self.errors):
            self.logger.error("yields spider logs an error on purpose (%d)", i)
        for i in range(self.count):
            item = {"name": f"item {i}", "price": i}
            if i < self.missing:
                del item["price"]
            yield item
