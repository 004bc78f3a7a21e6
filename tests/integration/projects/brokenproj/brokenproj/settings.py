BOT_NAME = "brokenproj"
SPIDER_MODULES = ["brokenproj.spiders"]

# The point of this project: its settings cannot be imported, so `list` and
# `crawl` fail with a traceback.
raise RuntimeError("brokenproj settings fail to import on purpose")
