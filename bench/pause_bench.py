"""A pause-to-resume round trip of a real Scrapy crawl.

Usage: python3 pause_bench.py BUILD/spiderd [--reps 5] [--delay 0.05]

One daemon on SQLite in a temporary directory (the integration suite's
Daemon, tests/integration/conftest.py) crawls the suite's pauseproj
`pages` spider over a local site of 200 pages (DOWNLOAD_DELAY --delay, 2
requests at once). Per repetition a fresh job is started and, once it has
fetched 20 pages:

  pause     from sending POST /jobs/{id}/pause to GET /jobs/{id} saying
            paused (polled every 10 ms): Scrapy's graceful stop, its queue
            written, the end recorded
  resume    from sending POST /jobs/{id}/resume to the site receiving the
            crawl's next request: the claim, the start (warm or cold), the
            JOBDIR read back
  round trip  the two together

Figures: min / median / max over the repetitions, in milliseconds.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--delay", default="0.05")
    o = ap.parse_args()
    os.environ["SPIDERD_BIN"] = os.path.abspath(o.bin)
    import conftest
    import eggs
    from test_pause import Site

    conftest.BIN = os.path.abspath(o.bin)
    top = tempfile.mkdtemp(prefix="spiderd-pausebench-")
    egg = eggs.build_egg("pauseproj", top)
    d = conftest.Daemon(os.path.join(top, "d"), scrapyd={"items_dir": "items"}).start()
    d.upload("pauseproj", "1", egg)
    res = {"pause": [], "resume": [], "round trip": []}
    try:
        for rep in range(o.reps):
            site = Site()
            r = d.request("POST", "/api/v1/jobs", json={
                "project": "pauseproj", "spider": "pages", "args": {"base": site.url, "n": "200"},
                "settings": {"DOWNLOAD_DELAY": o.delay, "CONCURRENT_REQUESTS": "2"}})
            ident = r.json()["id"]
            while site.fetched() < 20:
                time.sleep(0.01)
            t0 = time.monotonic()
            d.request("POST", f"/api/v1/jobs/{ident}/pause", json={})
            while d.request("GET", f"/api/v1/jobs/{ident}").json()["state"] != "paused":
                time.sleep(0.01)
            t1 = time.monotonic()
            seen = site.fetched()
            d.request("POST", f"/api/v1/jobs/{ident}/resume", json={})
            while site.fetched() == seen:
                time.sleep(0.002)
            t2 = time.monotonic()
            res["pause"].append((t1 - t0) * 1000)
            res["resume"].append((t2 - t1) * 1000)
            res["round trip"].append((t2 - t0) * 1000)
            d.request("POST", f"/api/v1/jobs/{ident}/cancel", json={"signal": "KILL"})
            site.close()
    finally:
        d.close()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{o.reps} repetitions, DOWNLOAD_DELAY {o.delay}, load average {load} at the end")
    for k, v in res.items():
        print(f"{k:>10}: min {min(v):7.0f} ms  median {statistics.median(v):7.0f} ms  "
              f"max {max(v):7.0f} ms")


if __name__ == "__main__":
    main()
