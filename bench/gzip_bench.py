"""What gzip costs the daemon on a big answer: listjobs.json of --jobs
pending jobs (a fresh SQLite daemon set up as million_bench.py does), fetched
with and without Accept-Encoding: gzip.

For each: the time to the last byte, the bytes on the wire, and how long the
loop was held meanwhile: a second connection asks /daemonstatus.json back
to back during the transfer and its worst and p99 latency are reported
(compared with the same probe on an idle daemon). Then zlib itself on the
same body at levels 1, 6 and 9, in this process (the library the daemon
links): the CPU time a level costs and the size it gives.

usage: bench/gzip_bench.py --bin build/spiderd [--jobs 100000] [--runs 3]
About a minute on 2 cores.
"""
import argparse
import http.client
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from million_bench import Daemon, fill, pct  # noqa: E402

PATH = "/listjobs.json?project=testproj"


def fetch(port, headers):
    """(seconds to the last byte, the bytes as sent, response headers)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t = time.perf_counter()
    c.request("GET", PATH, headers=headers)
    r = c.getresponse()
    body = r.read()  # http.client unchunks but never decodes gzip
    dt = time.perf_counter() - t
    c.close()
    return dt, body, dict(r.getheaders())


def probe_during(port, work):
    """Runs work() while a keep-alive connection asks /daemonstatus.json back
    to back; returns (work's result, probe latencies in ms)."""
    lat, stop = [], threading.Event()

    def loop():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        while not stop.is_set():
            t = time.perf_counter()
            c.request("GET", "/daemonstatus.json")
            c.getresponse().read()
            lat.append((time.perf_counter() - t) * 1000)
        c.close()
    th = threading.Thread(target=loop)
    th.start()
    time.sleep(0.2)
    try:
        out = work()
    finally:
        stop.set()
        th.join()
    return out, lat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="spiderd-gzip-")
    d = Daemon(os.path.abspath(args.bin), base, 1)
    try:
        d.start()
        d.deploy()
        d.schedule("slow")  # holds the one slot: every other job stays pending
        time.sleep(0.5)
        rate, dt = fill(d, args.jobs, 4, 64)
        print(f"{args.jobs:,} pending jobs in {dt:.0f} s", flush=True)
        _, idle = probe_during(d.port, lambda: time.sleep(2))
        print(f"probe on an idle daemon: p99 {pct(idle, 99):.2f} ms, max {max(idle):.2f} ms")
        plain = None
        for name, hdrs in (("identity", {}), ("gzip", {"Accept-Encoding": "gzip"})):
            times, worst, p99 = [], [], []
            for _ in range(args.runs):
                (t, body, h), lat = probe_during(d.port, lambda: fetch(d.port, hdrs))
                times.append(t)
                worst.append(max(lat))
                p99.append(pct(lat, 99))
            if name == "identity":
                plain = body
            else:
                assert h.get("Content-Encoding") == "gzip", h
                assert zlib.decompress(body, 16 + zlib.MAX_WBITS) == plain
            print(f"{name:8}: {statistics.median(times):.2f} s to the last byte, "
                  f"{len(body) / 1e6:.2f} MB sent; probe during it: p99 "
                  f"{statistics.median(p99):.2f} ms, max {statistics.median(worst):.2f} ms",
                  flush=True)
        for level in (1, 6, 9):
            t = time.process_time()
            z = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            size = len(z.compress(plain) + z.flush())
            cpu = time.process_time() - t
            print(f"zlib level {level}: {cpu * 1000:.0f} ms CPU for {len(plain) / 1e6:.1f} MB "
                  f"({len(plain) / cpu / 1e6:.0f} MB/s), {size / 1e6:.2f} MB "
                  f"({len(plain) / size:.1f}x)")
    finally:
        d.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
