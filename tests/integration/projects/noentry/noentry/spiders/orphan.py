import scrapy


class OrphanSpider(scrapy.Spider):
    name = "orphan"
