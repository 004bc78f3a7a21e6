"""Object storage of logs and items ([spiderd] object_store), against a local
S3 server (tests/s3server.sh: Ceph's radosgw, objects in memory):

  crawl   a crawl's own time (the daemon's start and end stamps) writing
          LINES log lines and as many items of ITEM_BYTES, with and without
          the object store, RUNS times each, alternated
  loss    how many seconds of a running crawl's log a kill -9 of its node
          loses, at the default object_store_flush (5 s): the daemon is
          killed at a random moment, the store's copy is read with awscli
          and compared with what the crawl had written at that moment
  big     upload throughput of a 1 GB items file: a crawl writes it, and the
          time from the job's end to its whole object in the bucket is the
          upload (a multipart upload of 16 MB parts)

  paced   the same with a crawl that writes 500 lines and items a second

usage: /usr/bin/python3 bench/objstore_bench.py BINARY [crawl] [paced] [loss] [big]
"""
import datetime
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(HERE, "..", "tests", "integration")
sys.path.insert(0, TESTS)
import eggs  # noqa: E402
import s3util  # noqa: E402
import requests  # noqa: E402

LOGCRAWL = os.path.join(TESTS, "logcrawl.py")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Node:
    def __init__(self, binary, base, srv, store=True, flush=5):
        self.base, self.port = base, free_port()
        os.makedirs(base, exist_ok=True)
        conf = os.path.join(base, "scrapyd.conf")
        with open(conf, "w") as f:
            f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {self.port}\n"
                    "items_dir = items\nlogs_dir = logs\ndbs_dir = dbs\neggs_dir = eggs\n"
                    f"[spiderd]\npython = {LOGCRAWL}\n")
            if store:
                f.write(f"object_store = s3://{srv['S3_BUCKET']}/bench\n"
                        f"object_store_endpoint = {srv['S3_ENDPOINT']}\n"
                        f"object_store_flush = {flush}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPIDERD_", "AWS_"))}
        env.update({k: v for k, v in srv.items() if k.startswith("AWS_")})
        env["SPIDERD_CONFIG_FILES"] = conf
        self.proc = subprocess.Popen([binary, "serve"], cwd=base, env=env,
                                     stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(base, "stderr"), "ab"),
                                     start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        for _ in range(200):
            try:
                requests.get(self.url + "/daemonstatus.json", timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.05)
        raise SystemExit("the daemon did not start: " + open(os.path.join(base, "stderr")).read())

    def deploy(self, egg):
        with open(egg, "rb") as f:
            r = requests.post(self.url + "/addversion.json", data={"project": "testproj", "version": "1"},
                              files={"egg": ("p.egg", f.read())}, timeout=60)
        assert r.json()["status"] == "ok", r.text

    def schedule(self, **args):
        data = {"project": "testproj", "spider": "quick"}
        data.update({k: str(v) for k, v in args.items()})
        r = requests.post(self.url + "/schedule.json", data=data, timeout=30)
        return r.json()["jobid"]

    def job(self, jobid):
        for sec in ("running", "finished", "pending"):
            for e in requests.get(self.url + "/listjobs.json", timeout=30).json()[sec]:
                if e["id"] == jobid:
                    return sec, e
        return None, None

    def wait(self, jobid, state="finished", limit=600):
        end = time.time() + limit
        while time.time() < end:
            sec, e = self.job(jobid)
            if sec == state:
                return e
            time.sleep(0.05)
        raise SystemExit(f"job {jobid} not {state} in {limit} s")

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        self.proc.wait()


def stamp(text):
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return datetime.datetime.strptime(text, fmt).timestamp()


def empty_bucket(srv):
    s3util.aws(srv, "s3", "rm", "--recursive", "--only-show-errors",
               f"s3://{srv['S3_BUCKET']}/bench/")


def bench_crawl(binary, srv, egg, top, lines, every, item_bytes, runs=5):
    """A crawl's own time, alternately without and with the store."""
    out = {False: [], True: []}
    for run in range(runs):
        for store in (False, True):
            n = Node(binary, os.path.join(top, f"crawl-{run}-{store}"), srv, store=store)
            n.deploy(egg)
            job = n.schedule(lines=lines, every=every, item_bytes=item_bytes)
            e = n.wait(job)
            out[store].append(stamp(e["end_time"]) - stamp(e["start_time"]))
            n.stop()
            shutil.rmtree(n.base)
            if store:
                empty_bucket(srv)
    mb = lines * (item_bytes + 50 + 29) / 1e6
    for store in (False, True):
        v = sorted(out[store])
        print(f"crawl of {lines} lines + items (~{mb:.0f} MB), every {every} s, "
              f"{'with' if store else 'without'} the object store: "
              f"{', '.join(f'{x:.2f}' for x in out[store])} s (median {v[len(v)//2]:.2f} s)")
    a, b = sorted(out[False])[runs // 2], sorted(out[True])[runs // 2]
    print(f"difference of the medians: {100 * (b - a) / a:+.1f}%")


def bench_loss(binary, srv, egg, top, tries=5):
    losses = []
    for i in range(tries):
        n = Node(binary, os.path.join(top, f"loss-{i}"), srv)
        n.deploy(egg)
        job = n.schedule(lines=4000, every=0.01)
        pid = n.wait(job, "running").get("pid")
        while not pid:
            pid = n.job(job)[1].get("pid")
        time.sleep(4 + random.uniform(0, 10))
        t_kill = time.time()
        n.stop(signal.SIGKILL)  # the crawl goes on: only what it wrote before counts
        key = f"bench/logs/testproj/quick/{job}.log"
        parts = sorted(k for k in s3util.keys(srv, key) if ".part-" in k)
        stored = b"".join(s3util.get(srv, k) for k in parts).decode().splitlines()
        last = float(stored[-1].split("t=")[1]) if stored else None
        with open(os.path.join(n.base, "logs", "testproj", "quick", f"{job}.log")) as f:
            before = [ln for ln in f.read().splitlines() if float(ln.split("t=")[1]) <= t_kill]
        lost = t_kill - last if last else float("inf")
        losses.append(lost)
        print(f"kill -9 at {t_kill:.2f}: {len(before)} lines written, {len(stored)} in the store, "
              f"{len(before) - len(stored)} lost = {lost:.2f} s of log")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        shutil.rmtree(n.base, ignore_errors=True)
    print(f"seconds of log lost by kill -9 (flush 5 s): max {max(losses):.2f}, "
          f"mean {sum(losses)/len(losses):.2f}")


def bench_big(binary, srv, egg, top):
    # No parts while it is written (flush 3600 s): the server keeps its
    # objects in memory, and the figure is the whole object's upload.
    n = Node(binary, os.path.join(top, "big"), srv, flush=3600)
    n.deploy(egg)
    # 1 GB of items: 250,000 items of 4,000 bytes, written as fast as it can.
    job = n.schedule(lines=250000, every=0, item_bytes=4000)
    e = n.wait(job, limit=1800)
    t_end = stamp(e["end_time"])
    key = f"bench/items/testproj/quick/{job}.jl"
    while True:
        h = s3util.head(srv, key)
        if h and not any(".part-" in k for k in s3util.keys(srv, key)):
            break
        time.sleep(0.2)
    t_up = time.time() - t_end
    size = h["ContentLength"]
    print(f"1 GB items file ({size / 1e9:.2f} GB) whole in the store {t_up:.1f} s after the "
          f"job's end: {size / 1e6 / t_up:.0f} MB/s (parts deleted included)")
    path = os.path.join(n.base, "items", "testproj", "quick", f"{job}.jl")
    empty_bucket(srv)
    t = time.time()
    s3util.upload(srv, path, "bench/awscli-copy.jl")
    dt = time.time() - t
    print(f"the same file with `aws s3 cp` (awscli's multipart, for comparison): {dt:.1f} s, "
          f"{size / 1e6 / dt:.0f} MB/s")
    n.stop()
    shutil.rmtree(n.base)


def main():
    binary = os.path.abspath(sys.argv[1])
    which = sys.argv[2:] or ["crawl", "paced", "loss", "big"]
    top = tempfile.mkdtemp(prefix="spiderd-objbench-")
    srv = s3util.start_server(os.path.join(top, "s3"))
    try:
        egg = eggs.build_egg("testproj", os.path.join(top, "eggs"))
        if "crawl" in which:  # as fast as Python writes: CPU-bound, the worst case
            bench_crawl(binary, srv, egg, top, lines=2000000, every=0, item_bytes=50)
        if "paced" in which:  # 500 lines and items a second for 20 s
            bench_crawl(binary, srv, egg, top, lines=10000, every=0.002, item_bytes=1000)
        if "loss" in which:
            bench_loss(binary, srv, egg, top)
        if "big" in which:
            bench_big(binary, srv, egg, top)
    finally:
        s3util.stop_server(srv)
        shutil.rmtree(top, ignore_errors=True)
    print("load", os.getloadavg())


if __name__ == "__main__":
    main()
