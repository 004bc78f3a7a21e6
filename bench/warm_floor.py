"""The floor of a Scrapy crawl: crawls one after another in ONE process.

Usage: python3 warm_floor.py PROJECT_DIR SETTINGS_MODULE SPIDER URL N LOG_FILE

Imports Scrapy and the project (not counted), then runs N crawls of SPIDER
with the spider argument url=URL through one CrawlerRunner, one after
another, logging to LOG_FILE as a real crawl logs (configure_logging with
the project's settings). Prints one JSON object: each crawl's CPU
(getrusage, user + system, ms) and wall time (ms). The first crawl pays what
Scrapy imports and builds on first use; the later ones are the floor no
process-per-crawl start can go below: a warm crawl adds to it the process's
own start and exit.
"""
import json
import os
import resource
import sys
import time


def cpu_ms():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1000


def main():
    project_dir, settings_module, spider, url, n, log_file = sys.argv[1:7]
    sys.path.insert(0, project_dir)
    os.environ["SCRAPY_SETTINGS_MODULE"] = settings_module
    from scrapy.crawler import CrawlerRunner
    from scrapy.utils.log import configure_logging
    from scrapy.utils.project import get_project_settings
    from twisted.internet import defer, reactor

    settings = get_project_settings()
    settings.set("LOG_FILE", log_file)
    configure_logging(settings)
    runner = CrawlerRunner(settings)
    out = {"cpu_ms": [], "wall_ms": []}

    @defer.inlineCallbacks
    def crawls():
        try:
            for _ in range(int(n)):
                c0, t0 = cpu_ms(), time.monotonic()
                yield runner.crawl(spider, url=url)
                out["cpu_ms"].append(cpu_ms() - c0)
                out["wall_ms"].append((time.monotonic() - t0) * 1000)
        finally:
            reactor.stop()

    reactor.callWhenRunning(crawls)
    reactor.run()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
