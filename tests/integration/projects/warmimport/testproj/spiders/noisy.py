import sys
import warnings

import scrapy

# Output at import time, as project code sometimes has: on a cold start it
# lands in the job's log (the crawl's stdout and stderr).
print("noisy: imported, a line on stdout", flush=True)
sys.stderr.write("noisy: imported, a line on stderr\n")
warnings.warn("noisy: a warning at import", UserWarning)


class NoisySpider(scrapy.Spider):
    """Says things when its module is imported; crawls one data: URL."""

    name = "noisy"

    def start_requests(self):
        yield scrapy.Request("data:,noisy")

    def parse(self, response):
        yield {"noisy": True}
