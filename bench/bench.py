"""spiderd benchmarks, each against a fresh real daemon.

Figures (issue targets on a 2-core machine in brackets):
  daemonstatus requests/s with wrk, keep-alive             [>= 50,000/s]
  schedule.json jobs/s on ONE keep-alive connection, each
    committed to SQLite before the answer                  [>= 10,000/s]
  schedule -> process start when a slot is free, p50/p99   [< 50 ms]
  20 tiny Scrapy jobs at max_proc=4, end to end
  idle RSS of the daemon                                   [< 10 MB]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from eggs import build_egg  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --store: a shared store's URL whose "{}" each daemon fills with a name of
# its own (postgresql://...?schema={}, redis://...?prefix={}); empty: SQLite.
STORE = ""


class Daemon:
    def __init__(self, binary, max_proc=4, extra="", python="/usr/bin/python3"):
        self.dir = tempfile.mkdtemp(prefix="spiderd-bench-")
        if STORE:
            extra += "\nstore = " + STORE.replace("{}", "b" + os.path.basename(self.dir)[-8:]) + "\n"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = os.path.join(self.dir, "scrapyd.conf")
        with open(conf, "w") as f:
            f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {self.port}\n"
                    f"max_proc = {max_proc}\nfinished_to_keep = 0\n"
                    f"[spiderd]\npython = {python}\nlog_level = warning\n{extra}")
        env = dict(os.environ, SPIDERD_CONFIG_FILES=conf)
        self.log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.proc = subprocess.Popen([binary, "serve"], cwd=self.dir, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                self.get("/daemonstatus.json")
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not start")

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def post(self, path, data):
        body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
        with urllib.request.urlopen(self.url + path, body, timeout=30) as r:
            return json.loads(r.read())

    def deploy(self, name="testproj", version="1"):
        egg = build_egg(name, self.dir)
        boundary = "spiderdbench"
        with open(egg, "rb") as f:
            egg_bytes = f.read()
        parts = []
        for k, v in (("project", "testproj"), ("version", version)):
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="egg"; filename="x.egg"\r\n'
                     f'Content-Type: application/octet-stream\r\n\r\n'.encode() + egg_bytes + b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        req = urllib.request.Request(self.url + "/addversion.json", b"".join(parts),
                                     {"Content-Type": f"multipart/form-data; boundary={boundary}"})
        with urllib.request.urlopen(req, timeout=60) as r:
            res = json.loads(r.read())
        assert res["status"] == "ok", res
        return res

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def wrk(url, connections, seconds, script=None, threads=1):
    cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s"]
    if script:
        cmd += ["-s", script]
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return rate, out


def bench_daemonstatus(binary):
    d = Daemon(binary)
    try:
        wrk(d.url + "/daemonstatus.json", 50, 2)  # warm-up
        rate, _ = wrk(d.url + "/daemonstatus.json", 50, 5)
        return rate
    finally:
        d.stop()


def bench_schedule(binary):
    # max_proc=1 and a long spider: one crawl runs, every other job stays
    # pending, so the figure is the API + durable insert, not process spawning.
    d = Daemon(binary, max_proc=1)
    try:
        d.deploy()
        d.post("/schedule.json", {"project": "testproj", "spider": "slow", "seconds": "600"})
        rate, out = wrk(d.url + "/schedule.json", 1, 5, os.path.join(HERE, "schedule.lua"))
        errors = int(re.search(r"schedule_errors=(\d+)", out).group(1))
        pending = d.get("/daemonstatus.json")["pending"]
        return rate, errors, pending
    finally:
        d.stop()


def bench_start_latency(binary, n=20):
    # One job at a time into an idle daemon: every job finds a free slot, so
    # the figure is dispatch latency, not queueing behind other crawls.
    d = Daemon(binary, max_proc=4)
    try:
        d.deploy()
        sent = {}
        for i in range(n):
            sent[f"lat{i}"] = time.time() * 1000
            d.post("/schedule.json", {"project": "testproj", "spider": "quick", "jobid": f"lat{i}"})
            deadline = time.time() + 60
            while time.time() < deadline:
                s = d.get("/daemonstatus.json")
                if s["pending"] == 0 and s["running"] == 0:
                    break
                time.sleep(0.01)
        db = sqlite3.connect(os.path.join(d.dir, "dbs", "spiderd.db"))
        # From the client sending schedule.json to the daemon starting the
        # crawl (start_ms is stamped right before its spawn), one clock.
        waits = sorted(start - sent[job] for job, start in db.execute(
            "SELECT jobid, start_ms FROM jobs WHERE jobid LIKE 'lat%' AND start_ms > 0"))
        db.close()
        p50 = statistics.median(waits)
        p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
        return p50, p99, len(waits)
    finally:
        d.stop()


def bench_twenty(binary):
    d = Daemon(binary, max_proc=4)
    try:
        d.deploy()
        d.get("/listspiders.json?project=testproj")  # warm the spider list cache
        t0 = time.time()
        for i in range(20):
            d.post("/schedule.json", {"project": "testproj", "spider": "quick", "jobid": f"j{i}"})
        while True:
            s = d.get("/daemonstatus.json")
            if s["pending"] == 0 and s["running"] == 0 and s["finished"] >= 20:
                break
            time.sleep(0.05)
        elapsed = time.time() - t0
        states = [j["state"] for j in d.get("/listjobs.json")["finished"]]
        return elapsed, states.count("finished")
    finally:
        d.stop()


def bench_idle_rss(binary):
    d = Daemon(binary)
    try:
        for _ in range(100):
            d.get("/daemonstatus.json")
        time.sleep(0.5)
        return d.rss_kb()
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--store", default="", help='a shared store, "{}" for each daemon\'s name')
    a = ap.parse_args()
    global STORE
    STORE = a.store
    a.bin = os.path.abspath(a.bin)
    only = set(a.only.split(",")) if a.only else None

    def want(name):
        return only is None or name in only

    print(f"# spiderd benchmarks, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M')}")
    if want("daemonstatus"):
        print(f"daemonstatus: {bench_daemonstatus(a.bin):,.0f} requests/s "
              "(wrk -t1 -c50 -d5s, keep-alive)")
    if want("schedule"):
        rate, errors, pending = bench_schedule(a.bin)
        print(f"schedule.json: {rate:,.0f} jobs/s on one keep-alive connection "
              f"(wrk -t1 -c1 -d5s; {errors} errors; {pending:,} pending after)")
    if want("latency"):
        p50, p99, n = bench_start_latency(a.bin)
        print(f"schedule -> start: p50 {p50:.1f} ms, p99 {p99:.1f} ms over {n} jobs "
              "(client send -> daemon's start stamp)")
    if want("twenty"):
        elapsed, ok = bench_twenty(a.bin)
        print(f"20 quick Scrapy jobs at max_proc=4: {elapsed:.2f} s end to end ({ok} finished)")
    if want("rss"):
        print(f"idle RSS: {bench_idle_rss(a.bin) / 1024:.1f} MB")


if __name__ == "__main__":
    main()
