BOT_NAME = "tinyproj"

SPIDER_MODULES = ["tinyproj.spiders"]
NEWSPIDER_MODULE = "tinyproj.spiders"

ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
# Silences Scrapy 2.7+'s deprecation warning about the default fingerprinter.
REQUEST_FINGERPRINTER_IMPLEMENTATION = "2.7"
