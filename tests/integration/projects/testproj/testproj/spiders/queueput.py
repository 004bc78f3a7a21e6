import json
import os
import urllib.error
import urllib.request

import scrapy


def _call(method, path, body=None):
    """(status, parsed JSON or text) of a call to the daemon that runs us,
    with the job's token."""
    url = os.environ["SPIDERD_URL"].rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    token = os.environ.get("SPIDERD_TOKEN")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


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
