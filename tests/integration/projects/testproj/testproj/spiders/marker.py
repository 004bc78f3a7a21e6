import os

import scrapy


class MarkerSpider(scrapy.Spider):
    """Writes its pid to the file <dir>/<_job>, yields one item, then stays
    `wait` seconds (default 0) with a request held in the downloader."""

    name = "marker"

    def __init__(self, dir=None, wait=0, **kwargs):
        super().__init__(**kwargs)
        if not dir:
            raise ValueError("marker spider needs the argument dir")
        self.dir = dir
        self.wait = float(wait)

    def start_requests(self):
        yield scrapy.Request("data:,marker")

    def parse(self, response):
        job = getattr(self, "_job", None) or "nojob"
        path = os.path.join(self.dir, job)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, path)
        yield {"marker": path, "pid": os.getpid()}
        if self.wait > 0:
            yield scrapy.Request(
                "data:,wait", callback=self.done, meta={"delay": self.wait}
            )

    def done(self, response):
        return None
