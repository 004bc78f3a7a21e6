BOT_NAME = "testproj"

SPIDER_MODULES = ["testproj.spiders"]
NEWSPIDER_MODULE = "testproj.spiders"

ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
# Silences Scrapy 2.7+'s deprecation warning about the default fingerprinter.
REQUEST_FINGERPRINTER_IMPLEMENTATION = "2.7"

# Lets a request wait in the downloader: Request(meta={"delay": seconds}).
DOWNLOADER_MIDDLEWARES = {"testproj.middlewares.DelayMiddleware": 100}

# This project opts out of warm starts: every crawl starts a fresh Python.
SPIDERD_WARM_START = False
