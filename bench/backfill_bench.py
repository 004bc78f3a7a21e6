"""A 10,000-slot backfill on SQLite: how long planning it takes (a dry
run), starting it, and the rate at which its runs are released and
started until the last one has ended.

A fresh daemon (million_bench's: a shell shim stands for the crawl, so
`quick` exits at once and the figure is the daemon's, not Scrapy's start-up)
gets a per-minute schedule; its backfill over the last --slots minutes runs
--max-running at once, with max_proc --max-proc.

usage: bench/backfill_bench.py --bin build/spiderd [--slots 10000]
       [--max-running 100] [--max-proc 50] [--keep]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from million_bench import Daemon  # noqa: E402


def rest(d, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(f"http://127.0.0.1:{d.port}/api/v1{path}", data=data,
                               method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(r, timeout=600) as f:
        return json.loads(f.read() or b"null")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--slots", type=int, default=10000)
    ap.add_argument("--max-running", type=int, default=100)
    ap.add_argument("--max-proc", type=int, default=50)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    top = tempfile.mkdtemp(prefix="spiderd-backfill-bench-")
    d = Daemon(os.path.abspath(a.bin), top, a.max_proc)
    try:
        d.start()
        d.deploy()
        s = rest(d, "POST", "/schedules", {"name": "bf", "project": "testproj",
                                           "spider": "quick", "cron": "* * * * *"})
        now = int(time.time() * 1000)
        window = {"from": str(now - a.slots * 60000 + 1), "to": str(now),
                  "max_running": a.max_running}
        t0 = time.monotonic()
        plan = rest(d, "POST", f"/schedules/{s['id']}/backfill", dict(window, dry_run=True))
        t1 = time.monotonic()
        print(f"dry run: {plan['count']} slots in {t1 - t0:.3f} s")
        bf = rest(d, "POST", f"/schedules/{s['id']}/backfill", window)["backfill"]
        t2 = time.monotonic()
        print(f"start: {t2 - t1:.3f} s")
        while True:
            b = rest(d, "GET", f"/backfills/{bf['id']}")
            if b["state"] != "running":
                break
            time.sleep(0.2)
        t3 = time.monotonic()
        print(f"all {b['slots']} runs ended ({b['children']}) in {t3 - t2:.1f} s: "
              f"{b['slots'] / (t3 - t2):.0f} runs/s; daemon CPU {d.cpu_s():.1f} s")
    finally:
        d.stop()
        if not a.keep:
            shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
