"""Python helpers spiderd ships to the jobs it runs.

The daemon puts this directory on every job's PYTHONPATH (next to
spiderd_runner), so a spider imports them with no install step:

    from spiderd.queue import Queue, schedule      # the task queue client
    SCHEDULER = "spiderd.scrapy.Scheduler"         # a shared crawl frontier
    DUPEFILTER_CLASS = "spiderd.scrapy.DupeFilter"

`spiderd.queue` uses the standard library only.
"""
