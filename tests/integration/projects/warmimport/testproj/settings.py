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

# Computed when the settings module is imported, as projects do for
# timestamped feed or log names: a crawl must see its own import.
import os as _os
import time as _time

SETTINGS_IMPORTED_AT = _time.time()
SETTINGS_IMPORTED_BY = _os.getpid()
print(f"warmimport: settings imported by {SETTINGS_IMPORTED_BY}", flush=True)
