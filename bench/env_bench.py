"""Python environments per project version: what they cost.

Usage: python3 env_bench.py BUILD/spiderd [--reps 3] [--starts 10]

A wheel directory is written first: 10 pure-Python packages (pkg0..pkg9),
each 20 modules of about 5 KB. Per repetition, a fresh daemon
(pip_index_url = none, pip_find_links = that directory) gets, with
addversion.json:

  A  a one-spider project requiring pkg0..pkg9 (==1.0): the environment is
     built, then the spiders listed: seconds for the whole addversion, and
     the build alone as the environment says (build_ms)
  B  another project with the same requirements: same key, nothing built
  C  the same project with no requirements: the listing alone

then the disk of A's environment (its size as spiderd-env.json says, and
`du -sk` of its directory, symlinks not followed), and starts: --starts jobs
of A's spider `stamp` one after another, each into an idle daemon, warm once
a template is ready (and the same for C): from sending schedule.json to the
spider's first line of code (it writes time.time() to a file; same clock).
Figures are min / median over the repetitions (starts: of the medians).
"""
import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import free_port  # noqa: E402


def wheel(dest, name, version, files):
    dist = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    members[f"{dist}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: env_bench\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n")
    rec = []
    for p, t in members.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()
        rec.append(f"{p},sha256={h},{len(t.encode())}")
    members[f"{dist}/RECORD"] = "\n".join(rec + [f"{dist}/RECORD,,"]) + "\n"
    with zipfile.ZipFile(os.path.join(dest, f"{name}-{version}-py3-none-any.whl"), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for p, t in members.items():
            z.writestr(p, t)


def wheels(dest):
    body = "".join(f"def f{i}(x):\n    return x * {i} + len({'abc' * 20!r})\n\n" for i in range(60))
    for k in range(10):
        files = {f"pkg{k}/__init__.py": "VERSION = '1.0'\n"}
        files.update({f"pkg{k}/m{i}.py": body for i in range(20)})
        wheel(dest, f"pkg{k}", "1.0", files)


SPIDER = """import sys, time
import scrapy


class Stamp(scrapy.Spider):
    name = "stamp"

    def start_requests(self):
        with open(self.out, "w") as f:
            f.write(repr(time.time()))
        import importlib
        for k in range(10):
            try:
                importlib.import_module("pkg%d" % k)
            except ImportError:
                pass
        return []
"""


def egg():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("EGG-INFO/PKG-INFO", "Metadata-Version: 1.1\nName: envb\nVersion: 1.0\n")
        z.writestr("EGG-INFO/entry_points.txt", "[scrapy]\nsettings = envb.settings\n")
        z.writestr("envb/__init__.py", "")
        z.writestr("envb/settings.py", 'BOT_NAME = "envb"\nSPIDER_MODULES = ["envb.spiders"]\n'
                   "TELNETCONSOLE_ENABLED = False\n")
        z.writestr("envb/spiders/__init__.py", "")
        z.writestr("envb/spiders/stamp.py", SPIDER)
    return out.getvalue()


class Daemon:
    def __init__(self, binary, wheel_dir):
        self.dir = tempfile.mkdtemp(prefix="spiderd-envbench-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        conf = os.path.join(self.dir, "scrapyd.conf")
        with open(conf, "w") as f:
            f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {self.port}\n"
                    f"max_proc = 4\n[spiderd]\npython = /usr/bin/python3\nlog_level = warning\n"
                    f"pip_index_url = none\npip_find_links = {wheel_dir}\n")
        self.log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.proc = subprocess.Popen([binary, "serve"], cwd=self.dir,
                                     env=dict(os.environ, SPIDERD_CONFIG_FILES=conf),
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            try:
                requests.get(self.url + "/daemonstatus.json", timeout=5)
                return
            except requests.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not start")

    def add(self, project, reqs=None):
        data = {"project": project, "version": "1"}
        if reqs:
            data["requirements"] = reqs
        t0 = time.monotonic()
        r = requests.post(self.url + "/addversion.json", data=data,
                          files={"egg": ("x.egg", egg())}, timeout=600).json()
        assert r["status"] == "ok", r
        return time.monotonic() - t0

    def env(self, project):
        return requests.get(f"{self.url}/api/v1/projects/{project}/versions/1/environment",
                            timeout=10).json()["environment"]

    def start(self, project, out):
        t0 = time.time()
        job = requests.post(self.url + "/schedule.json", timeout=10, data={
            "project": project, "spider": "stamp", "out": out}).json()["jobid"]
        while not os.path.exists(out) or not open(out).read():
            time.sleep(0.002)
        delay = float(open(out).read()) - t0
        while True:
            j = requests.get(f"{self.url}/api/v1/jobs/{job}", timeout=10).json()
            if j["state"] in ("finished", "failed"):
                break
            time.sleep(0.02)
        row = j["id"]
        ev = requests.get(f"{self.url}/api/v1/events",
                          params={"job": row, "type": "job.started"}, timeout=10).json()
        kind = ev["events"][0]["data"].get("start") if ev["events"] else None
        os.unlink(out)
        return delay, kind

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def starts(d, project, n):
    out = os.path.join(d.dir, f"{project}.stamp")
    for _ in range(60):  # until the template is ready
        if d.start(project, out)[1] == "warm":
            break
        time.sleep(0.2)
    cold = []
    warm = []
    for _ in range(n):
        delay, kind = d.start(project, out)
        (warm if kind == "warm" else cold).append(delay)
    return warm, cold


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--starts", type=int, default=10)
    a = ap.parse_args()
    wdir = tempfile.mkdtemp(prefix="spiderd-wheels-")
    wheels(wdir)
    reqs = "\n".join(f"pkg{k}==1.0" for k in range(10))
    res = {k: [] for k in ("A", "build", "B", "C", "size", "du", "warmA", "warmC")}
    for _ in range(a.reps):
        d = Daemon(a.binary, wdir)
        try:
            res["A"].append(d.add("a", reqs))
            e = d.env("a")
            res["build"].append(e["build_ms"] / 1000)
            res["B"].append(d.add("b", reqs))
            assert d.env("b")["key"] == e["key"]
            res["C"].append(d.add("c"))
            res["size"].append(e["size"] / 1e6)
            du = subprocess.run(["du", "-sk", os.path.join(d.dir, "dbs", "envs", e["key"])],
                                capture_output=True, text=True).stdout.split()[0]
            res["du"].append(int(du) / 1024)
            w, _ = starts(d, "a", a.starts)
            res["warmA"].append(statistics.median(w) * 1000)
            w, _ = starts(d, "c", a.starts)
            res["warmC"].append(statistics.median(w) * 1000)
        finally:
            d.stop()
    shutil.rmtree(wdir, ignore_errors=True)
    f = lambda k, u: f"{min(res[k]):.3f} / {statistics.median(res[k]):.3f} {u}"  # noqa: E731
    print(f"addversion A (build + list), 10 packages: {f('A', 's')}")
    print(f"  of which the build (build_ms):            {f('build', 's')}")
    print(f"addversion B, same requirements:           {f('B', 's')}")
    print(f"addversion C, no requirements:             {f('C', 's')}")
    print(f"environment size (spiderd-env.json):       {f('size', 'MB')}")
    print(f"environment on disk (du -sk):              {f('du', 'MiB')}")
    print(f"warm start in the environment, median:     {f('warmA', 'ms')}")
    print(f"warm start without one, median:            {f('warmC', 'ms')}")


if __name__ == "__main__":
    main()
