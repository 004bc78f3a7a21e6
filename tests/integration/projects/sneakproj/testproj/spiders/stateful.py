import json
import os
import urllib.request

import scrapy


class StatefulSpider(scrapy.Spider):
    """A Sneakpeek-style scraper: starts from its scraper's state (the spider
    argument scraper_state, absent the first time), logs it, and hands on
    the next one through its job's token (set_scraper_state)."""

    name = "stateful"

    def __init__(self, scraper_state=None, mark="x", **kwargs):
        super().__init__(**kwargs)
        self.state_in = scraper_state
        self.mark = mark

    def start_requests(self):
        yield scrapy.Request("data:,state", dont_filter=True)

    def parse(self, response):
        runs = json.loads(self.state_in)["runs"] if self.state_in else 0
        self.logger.info("STATE-IN %s", self.state_in)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "set_scraper_state",
                           "params": {"state": json.dumps({"runs": runs + 1,
                                                           "mark": self.mark})}}).encode()
        req = urllib.request.Request(
            os.environ["SPIDERD_URL"] + "/api/v1/jsonrpc", data=body,
            headers={"Content-Type": "application/json",
                     "Authorization": "Bearer " + os.environ["SPIDERD_TOKEN"]})
        with urllib.request.urlopen(req, timeout=10) as resp:
            answer = json.loads(resp.read())
        self.logger.info("STATE-SET %s", json.dumps(answer, sort_keys=True))
        yield {"runs": runs + 1}
