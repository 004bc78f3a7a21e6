#!/usr/bin/python3
"""A stand-in for the crawl interpreter (`[spiderd] python`) in
test_limits.py: each crawl does what its spider argument `mode` says, in a
second or two, without importing Scrapy.

  ok     0.5 s of CPU and 40 MB, then exits 0 with a finished stats file
  hog    allocates 8 MB every 10 ms until something stops it
  flood  writes 16 KB lines into its log every 5 ms, forever
  burn   spins the CPU forever
  items  writes 16 KB items into its feed file (SCRAPYD_FEED_URI) every 5 ms
  hold   prints HOLDING and sleeps 60 s (for a test to look at it meanwhile)
  forks  forks children that wait for its end, until a fork is refused;
         prints FORKS n and exits 1. As root it first becomes an unused uid:
         RLIMIT_NPROC counts the processes of the crawl's user, and does not
         hold root (spiderd runs as its own user in production)

Before that it prints its argv and /proc/self/limits into the job's log
(stdout), so a test sees what reached the crawl and which rlimits hold.
Anything but `-m spiderd_runner crawl` (the spider listing at schedule time)
goes to the real interpreter."""

import json
import os
import sys
import time

from standin import crawl_args

args = crawl_args()

spider_args = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-a")
mode = spider_args.get("mode", "ok")
print("ARGV " + json.dumps(args), flush=True)
with open("/proc/self/limits") as f:
    for line in f:
        if line.startswith(("Max address space", "Max cpu time", "Max processes")):
            print("LIMIT " + line.rstrip(), flush=True)


def finished():
    with open(os.environ["SPIDERD_STATS_FILE"], "w") as f:
        json.dump({"finish_reason": "finished", "items": 0}, f)
    sys.exit(0)


if mode == "ok":
    x = 0
    while time.process_time() < 0.5:  # CPU time, however loaded the machine
        x += 1
    ballast = b"y" * (40 << 20)
    time.sleep(1.2)
    print("ok done", len(ballast), flush=True)
    finished()
elif mode == "hog":
    held = []
    while True:
        held.append(b"z" * (8 << 20))
        time.sleep(0.01)
elif mode == "flood":
    line = ("f" * 16383 + "\n").encode()
    out = sys.stdout.buffer
    while True:
        out.write(line)
        out.flush()
        time.sleep(0.005)
elif mode == "items":
    path = os.environ["SCRAPYD_FEED_URI"][len("file://"):]
    item = (json.dumps({"pad": "i" * 16000}) + "\n").encode()
    with open(path, "ab") as f:
        while True:
            f.write(item)
            f.flush()
            time.sleep(0.005)
elif mode == "burn":
    while True:
        pass
elif mode == "hold":
    print("HOLDING", flush=True)
    time.sleep(60)
elif mode == "forks":
    if os.getuid() == 0:
        uid = 200000 + os.getpid() % 100000
        os.setgid(uid)
        os.setuid(uid)
    r, w = os.pipe()
    n = 0
    why = "none refused"
    while n < 500:  # a bound of its own, should the limit not hold
        try:
            pid = os.fork()
        except OSError as e:
            why = e.strerror
            break
        if pid == 0:
            os.close(w)
            os.read(r, 1)  # end of file: the crawl has gone
            os._exit(0)
        n += 1
    print(f"FORKS {n} ({why})", flush=True)
    sys.exit(1)
