import json
import os
import sys

import scrapy

from testproj.version import VERSION

ENV_NAMES = (
    "SCRAPY_PROJECT",
    "SCRAPYD_EGG_VERSION",
    "SCRAPY_SETTINGS_MODULE",
    "SCRAPYD_JOB",
    "SCRAPYD_SPIDER",
    "SCRAPYD_SLOT",
    "SCRAPYD_LOG_FILE",
    "SCRAPYD_FEED_URI",
    "SPIDERD_URL",
    "SPIDERD_JOB",
    "SPIDERD_EGG",
    "SCHEDULED_TIME",
)


class EnvdumpSpider(scrapy.Spider):
    """Yields one item describing how it was launched; with `out`, also
    writes it as JSON to that file."""

    name = "envdump"

    def __init__(self, out=None, **kwargs):
        self.spider_kwargs = dict(kwargs)
        if out is not None:
            self.spider_kwargs["out"] = out
        super().__init__(**kwargs)
        self.out = out

    def start_requests(self):
        yield scrapy.Request("data:,envdump")

    def parse(self, response):
        import testproj

        s = self.settings
        dump = {
            "argv": list(sys.argv),
            "env": {k: os.environ[k] for k in ENV_NAMES if k in os.environ},
            "kwargs": self.spider_kwargs,
            "settings": {
                "DOWNLOAD_DELAY": s.get("DOWNLOAD_DELAY"),
                "USER_AGENT": s.get("USER_AGENT"),
                "LOG_FILE": s.get("LOG_FILE"),
                "FEEDS": s.getdict("FEEDS"),
                "JOBDIR": s.get("JOBDIR"),
            },
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "project_version": VERSION,
            "module_file": testproj.__file__,
        }
        dump = json.loads(json.dumps(dump, default=str))
        if self.out:
            tmp = self.out + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(dump, f)
            os.replace(tmp, self.out)
        yield dump
