import socket

import scrapy

# A socket made at import would be one connection shared by every crawl
# forked from a template: spiderd refuses to keep such a template.
CONN = socket.socket(socket.AF_INET, socket.SOCK_STREAM)


class SockSpider(scrapy.Spider):
    name = "sockmod"

    def start_requests(self):
        yield scrapy.Request("data:,sockmod")

    def parse(self, response):
        yield {"socket": CONN.fileno() >= 0}
