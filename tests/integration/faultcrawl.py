#!/usr/bin/python3
"""A stand-in for the crawl interpreter (`[spiderd] python`) in the fault
tests (test_faults.py).

The daemon runs `<python> -m spiderd_runner crawl SPIDER ...`; this appends
one line when it starts and one when it ends to the file FAULT_RECORD, each
written whole with O_APPEND (so lines of concurrent crawls never mix):

    start <jobid> <pid> <time>
    end <jobid> <pid> <time>

In between it sleeps FAULT_SECONDS (default 0.3), or the spider argument
`seconds` when the job has one, and writes the stats file
the runner would (finish_reason "finished"). A line of FAULT_LOG_BYTES
bytes goes to the job's log (LOG_FILE) at its start and before its end. Anything else
(the spider listing at deploy and schedule time) goes to the real
interpreter. Like the runner, it dies with its node on a shared store
(SPIDERD_DIE_WITH_NODE)."""

import json
import os
import time

from standin import crawl_args

args = crawl_args()

job = os.environ["SPIDERD_JOB"]


def record(what):
    line = f"{what} {job} {os.getpid()} {time.time()!r}\n".encode()
    fd = os.open(os.environ["FAULT_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


settings = dict(a.split("=", 1) for k, a in zip(args, args[1:]) if k == "-s" and "=" in a)


def log():
    """Appends to the job's log, as Scrapy's LOG_FILE handler would."""
    try:
        with open(settings.get("LOG_FILE", "/dev/null"), "a") as f:
            f.write("x" * int(os.environ.get("FAULT_LOG_BYTES", "0")) + "\n")
    except OSError:
        pass  # a full disk under the log: the crawl goes on


record("start")
log()
spider_args = dict(a.split("=", 1) for k, a in zip(args, args[1:]) if k == "-a" and "=" in a)
time.sleep(float(spider_args.get("seconds", os.environ.get("FAULT_SECONDS", "0.3"))))
log()
with open(os.environ["SPIDERD_STATS_FILE"], "w") as f:
    json.dump({"finish_reason": "finished", "item_scraped_count": 0}, f)
record("end")
