import json
import os

import scrapy

from testproj.apicall import call as _call


class QueueputSpider(scrapy.Spider):
    """Puts `elements` (comma-separated) into queue `queue` through the
    daemon's API with SPIDERD_URL and SPIDERD_TOKEN, takes them back, and
    tries a route outside the queue API; writes what it saw as JSON to `out`.
    With `hold` (a file path), waits until that file exists before ending."""

    name = "queueput"

    def __init__(self, queue="q", elements="a,b", out=None, hold=None, **kwargs):
        super().__init__(**kwargs)
        self.queue = queue
        self.elements = [e for e in elements.split(",") if e]
        self.out = out
        self.hold = hold

    def start_requests(self):
        yield scrapy.Request("data:,queueput")

    def parse(self, response):
        import time

        seen = {"url": os.environ.get("SPIDERD_URL"), "token": os.environ.get("SPIDERD_TOKEN")}
        q = "/api/v1/queues/" + self.queue
        seen["put"] = _call("POST", q + "/put", {"elements": self.elements})
        seen["rpc"] = _call("POST", "/api/v1/jsonrpc", {
            "jsonrpc": "2.0", "id": 1, "method": "queues.get", "params": {"name": self.queue}})
        seen["rpc_jobs"] = _call("POST", "/api/v1/jsonrpc", {
            "jsonrpc": "2.0", "id": 2, "method": "jobs.list", "params": {}})
        seen["jobs"] = _call("GET", "/api/v1/jobs")[0]
        seen["status"] = _call("GET", "/daemonstatus.json")[0]
        if self.out:
            tmp = self.out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(seen, f)
            os.replace(tmp, self.out)
        deadline = time.monotonic() + 60
        while self.hold and not os.path.exists(self.hold) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield {"put": seen["put"][0]}
