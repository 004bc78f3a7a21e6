import scrapy


class NeverSpider(scrapy.Spider):
    name = "never"
