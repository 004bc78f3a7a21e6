import json
import os

import scrapy

from testproj.apicall import call as _call


class MetasetSpider(scrapy.Spider):
    """Merges `patch` (a JSON object) into its own job's meta through the
    daemon's API with SPIDERD_TOKEN (its job's id is the token's part before
    the dot; without a token, SPIDERD_JOB), tries another job's meta when
    `other` is given, and writes what it saw as JSON to `out`."""

    name = "metaset"

    def __init__(self, patch="{}", other=None, out=None, **kwargs):
        super().__init__(**kwargs)
        self.patch = json.loads(patch)
        self.other = other
        self.out = out

    def start_requests(self):
        yield scrapy.Request("data:,metaset")

    def parse(self, response):
        token = os.environ.get("SPIDERD_TOKEN", "")
        me = token.split(".")[0] if token else os.environ["SPIDERD_JOB"]
        seen = {"me": me, "own": _call("PATCH", f"/api/v1/jobs/{me}/meta", {"meta": self.patch})}
        if self.other:
            seen["other"] = _call("PATCH", f"/api/v1/jobs/{self.other}/meta",
                                  {"meta": {"x": "y"}})[0]
            seen["history"] = _call("POST", f"/api/v1/jobs/{self.other}/history",
                                    {"note": "x"})[0]
        if self.out:
            tmp = self.out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(seen, f)
            os.replace(tmp, self.out)
        yield {"status": seen["own"][0]}
