#!/usr/bin/python3
"""A stand-in crawl interpreter (`[spiderd] python`) for the object-storage
tests: it writes numbered, timestamped log lines and items at a set pace,
so a test knows exactly what a log and an items file must hold, and how
many seconds of them a kill -9 lost.

Spider arguments (-a): lines (100), every (seconds between lines, 0.02),
item_bytes (padding per item, 0). Each line i is
"line NNNNNN t=UNIXTIME\\n" on stdout (the job's log); item i is
{"n": i, "t": UNIXTIME, "pad": "..."} in the items file (FEEDS)."""

import json
import os
import sys
import time

from standin import crawl_args

args = crawl_args()
opts = {}
for i, a in enumerate(args):
    if a == "-a" and i + 1 < len(args) and "=" in args[i + 1]:
        k, v = args[i + 1].split("=", 1)
        opts[k] = v
lines = int(opts.get("lines", "100"))
every = float(opts.get("every", "0.02"))
pad = "x" * int(opts.get("item_bytes", "0"))
items_path = os.environ.get("SPIDERD_ITEMS_FILE")
for i, a in enumerate(args):  # a Scrapy project gets its items file as FEEDS
    if a == "-s" and i + 1 < len(args) and args[i + 1].startswith("FEEDS="):
        feeds = json.loads(args[i + 1][len("FEEDS="):])
        uri = next(iter(feeds), "")
        if uri.startswith("file://"):
            items_path = uri[len("file://"):]
items = open(items_path, "a", encoding="utf-8") if items_path else None
out = sys.stdout
for i in range(lines):
    t = time.time()
    out.write("line %06d t=%.3f\n" % (i, t))
    out.flush()
    if items:
        items.write(json.dumps({"n": i, "t": round(t, 3), "pad": pad}) + "\n")
        items.flush()
    if every:
        time.sleep(every)
if items:
    items.close()
with open(os.environ["SPIDERD_STATS_FILE"], "w") as f:
    json.dump({"finish_reason": "finished", "item_scraped_count": lines}, f)
