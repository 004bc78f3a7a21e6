"""jobs.stats (GET /api/v1/stats) over a million ended jobs, on SQLite.

A fresh daemon makes its store; it is stopped and --jobs ended jobs are
written straight into its database (running a million crawls takes hours):
spread evenly over --days days up to now, across 4 projects of 5 spiders,
85% finished, 10% failed, 5% cancelled, durations 1-600 s, item counts
0-999 in their stats. The daemon is started again and each query is
timed (best and median of --repeat, over HTTP on one connection):
a 1-day and a 30-day window, grouped by project and by spider, and the
1-day window of one project.

usage: bench/stats_bench.py --bin build/spiderd [--jobs 1000000] [--days 60]
       [--repeat 5] [--keep]
"""
import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from million_bench import Daemon  # noqa: E402

DAY = 86400 * 1000


def fill(db_path, jobs, days, now):
    rnd = random.Random(7)
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA journal_mode=WAL")
    span = days * DAY
    rows = []
    for i in range(jobs):
        end = now - span + (span * i) // jobs
        dur = rnd.randint(1000, 600000)
        r = rnd.random()
        state = 2 if r < 0.85 else 3 if r < 0.95 else 4
        items = rnd.randint(0, 999)
        rows.append((uuid.UUID(int=i).hex, f"p{i % 4}", f"s{i % 5}", state, end - dur - 100,
                     end - dur, end, 0 if state == 2 else 1,
                     json.dumps({"items": items, "finish_reason": "finished"})))
        if len(rows) == 50000:
            db.executemany("INSERT INTO jobs (jobid, project, spider, state, created_ms, "
                           "start_ms, end_ms, exit_code, stats) VALUES (?,?,?,?,?,?,?,?,?)", rows)
            rows = []
    if rows:
        db.executemany("INSERT INTO jobs (jobid, project, spider, state, created_ms, "
                       "start_ms, end_ms, exit_code, stats) VALUES (?,?,?,?,?,?,?,?,?)", rows)
    db.commit()
    db.execute("ANALYZE")
    db.close()


def timed(d, path, repeat):
    times, body = [], None
    for _ in range(repeat):
        t0 = time.monotonic()
        status, body = d.get(path)
        times.append(time.monotonic() - t0)
        assert status == 200, body
    return min(times), statistics.median(times), json.loads(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jobs", type=int, default=1000000)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="spiderd-stats-bench-")
    d = Daemon(os.path.abspath(a.bin), tmp, 1)
    try:
        d.start()
        d.stop()
        now = int(time.time() * 1000)
        t0 = time.monotonic()
        fill(d.db_path, a.jobs, a.days, now)
        print(f"filled {a.jobs} ended jobs over {a.days} days in {time.monotonic() - t0:.1f} s")
        d.start()
        for label, days, extra in (("1-day window, by project", 1, "by=project"),
                                   ("1-day window, by spider", 1, "by=spider"),
                                   ("1-day window, one project", 1, "project=p1"),
                                   ("30-day window, by project", 30, "by=project"),
                                   ("30-day window, by spider", 30, "by=spider")):
            path = f"/api/v1/stats?from={now - days * DAY}&to={now + 1}&{extra}"
            best, med, body = timed(d, path, a.repeat)
            print(f"{label:28s} {body['scanned']:8d} jobs  best {best * 1000:8.1f} ms"
                  f"  median {med * 1000:8.1f} ms  ({len(body['groups'])} groups)")
    finally:
        d.stop()
        if a.keep:
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
