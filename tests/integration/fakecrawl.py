#!/usr/bin/python3
"""A stand-in for the crawl interpreter (`[spiderd] python`) in the cluster
tests: hundreds of jobs on two cores cannot each import Scrapy.

The daemon runs `<python> -m spiderd_runner crawl SPIDER ...`; this writes a
marker file per run (start and end times, node, pid), sleeps FAKE_SECONDS,
writes the stats file the runner would (finish_reason "finished") and exits
0. Anything else (the spider listing at deploy and schedule time) goes to the
real interpreter. Like the runner, it dies with its node on a shared store
(SPIDERD_DIE_WITH_NODE)."""

import json
import os
import time

from standin import crawl_args

args = crawl_args()

job = os.environ["SPIDERD_JOB"]
node = os.environ.get("NODE_TAG", "?")
base = os.path.join(os.environ["MARKER_DIR"], f"{job}.{node}.{os.getpid()}")


def mark(suffix):
    """Writes the time into base + suffix whole (a reader never sees it empty)."""
    with open(base + suffix + ".tmp", "w") as f:
        f.write(repr(time.time()))
    os.replace(base + suffix + ".tmp", base + suffix)


mark(".start")
print(f"fake crawl of {job} on {node}", flush=True)
time.sleep(float(os.environ.get("FAKE_SECONDS", "0.3")))
with open(os.environ["SPIDERD_STATS_FILE"], "w") as f:
    json.dump({"finish_reason": "finished", "item_scraped_count": 0}, f)
mark(".end")
