import json
import os
import urllib.error
import urllib.request

import scrapy


def _post(path, body):
    """(status, answer) of a POST to the daemon with this job's token."""
    req = urllib.request.Request(
        os.environ["SPIDERD_URL"] + "/api/v1" + path, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Authorization": "Bearer " + os.environ["SPIDERD_TOKEN"]})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class FanoutSpider(scrapy.Spider):
    """A crawl that fans out as Grepsr's child tasks do: with its job's
    token (SPIDERD_TOKEN, "<job id>.<mac>") it creates two children of its
    own job, one through POST /jobs and one through Grepsr's OneTimeRun,
    then tries what the token must not do (no parent, another parent,
    another project, a schedule) and logs every answer on a FANOUT line."""

    name = "fanout"

    def __init__(self, child="quick", other_project="none", **kwargs):
        super().__init__(**kwargs)
        self.child = child
        self.other_project = other_project

    def start_requests(self):
        yield scrapy.Request("data:,fanout", dont_filter=True)

    def parse(self, response):
        me = int(os.environ["SPIDERD_TOKEN"].split(".", 1)[0])
        project = os.environ["SCRAPY_PROJECT"]
        child = {"project": project, "spider": self.child, "args": {"count": "1"}}
        out = {"me": me}
        out["rest"] = _post("/jobs", dict(child, parent=me))
        out["rpc"] = _post("/jsonrpc", {"jsonrpc": "2.0", "id": 1, "method": "OneTimeRun",
                                        "params": dict(child, parent=me)})
        out["no_parent"] = _post("/jobs", child)
        out["other_parent"] = _post("/jobs", dict(child, parent=me + 1000))
        out["other_project"] = _post("/jobs", dict(child, parent=me,
                                                   project=self.other_project))
        out["rpc_no_parent"] = _post("/jsonrpc", {"jsonrpc": "2.0", "id": 2,
                                                  "method": "OneTimeRun", "params": child})
        out["schedule"] = _post("/jsonrpc", {"jsonrpc": "2.0", "id": 3, "method": "Schedule",
                                             "params": {"name": "fan", "project": project,
                                                        "spider": self.child,
                                                        "interval": 3600}})
        self.logger.info("FANOUT %s", json.dumps(out, sort_keys=True))
        yield {"children": 2}
