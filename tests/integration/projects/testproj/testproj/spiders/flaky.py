import os

import scrapy


class FlakySpider(scrapy.Spider):
    """Fails (raises in __init__, exit 1) on its first `fails` runs (default
    1), then crawls one data: URL and finishes. Runs are counted in the file
    <dir>/<key>, one line per run, so retries of one job share the count."""

    name = "flaky"

    def __init__(self, dir=None, key="flaky", fails=1, **kwargs):
        super().__init__(**kwargs)
        if not dir:
            raise ValueError("flaky spider needs the argument dir")
        path = os.path.join(dir, key)
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        with open(path, encoding="utf-8") as f:
            runs = sum(1 for _ in f)
        if runs <= int(fails):
            raise RuntimeError(f"flaky spider fails on purpose (run {runs} of {fails} failing)")

    def start_requests(self):
        yield scrapy.Request("data:,flaky")

    def parse(self, response):
        yield {"ok": True}
