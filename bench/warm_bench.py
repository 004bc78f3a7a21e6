"""Crawl starts, end to end: spiderd cold, spiderd warm, and Scrapyd 1.6 side by side.

Usage: python3 warm_bench.py BUILD/spiderd [--reps 3] [--jobs 20] [--first 10]
           [--crawls 20] [--seconds 5] [--modes cold,warm,warm-fresh]
           [--sections e2e,crawl,schedule] [--python PATH] [--pythonpath DIR]
           [--scrapyd-src GITDIR [--scrapyd-rev 1.6.0] | --scrapyd COMMAND]

Every measurement runs real Scrapy crawls against a fresh daemon in a
temporary directory, its egg deployed with addversion.json.

Scrapyd: not packaged in Debian, it runs from its source on Debian's Scrapy
and Twisted. --scrapyd-src names a git directory of it (a clone of
scrapy/scrapyd); --scrapyd-rev (1.6.0) is extracted with `git archive` into
a temporary directory, removed at the end, and started there as
`PYTHONPATH=DIR python3 -m scrapyd` with a scrapyd.conf of its own
(poll_interval left at Scrapyd's default, 5 s). --scrapyd COMMAND is any
shell command that starts Scrapyd in the current directory. Without either,
Scrapyd is measured only if `python3 -c 'import scrapyd'` works.

Section e2e (bench/tinyproj, spider `one`: one request to the URL given as
its argument `url`, one item, against a page server in this process;
max_proc = 4), per target:

  cold        spiderd, [spiderd] warm_templates = 0: every crawl starts Python
  warm        spiderd, warm_templates at its default; one warm-up job is run
              and waited for first, then up to 5 s for a template (a child of
              the daemon that is not a crawl) to appear and its CPU to settle
  warm-fresh  spiderd, default, no warm-up: the 20 jobs include the first,
              cold one and the template's own start
  scrapyd     Scrapyd, when found (above)

  end to end     schedule.json 20 times back to back, then listjobs.json every
                 20 ms until all 20 are finished: seconds from the first send
  first request  10 jobs one after another, each into an idle daemon: from
                 sending schedule.json to the page server receiving that job's
                 request (time.monotonic() in this process, both sides)
                 (not run on warm-fresh)
  CPU per job    over the end-to-end run, utime+stime+cutime+cstime of the
                 daemon (/proc/PID/stat: finished crawls are its reaped
                 children) plus the same of its live children that are not
                 crawls (warm templates: their forked crawls are theirs),
                 divided by the number of jobs; beside it, the crawls' own
                 CPU as spiderd recorded it (stats cpu_time_seconds)

Section crawl: one warm crawl at a time, --crawls of them in a row on a
warm daemon after a warm-up, for tinyproj/one and testproj/quick (count=1),
each one page from a data: URL: the crawl's whole CPU (the daemon's cutime +
cstime delta, its start, run and exit, divided by the number of crawls:
/proc counts in ticks), wall time claim to end (the job's started_ms to
ended_ms, the daemon's stamps), minor page faults (cminflt), and the
template's CPU per fork. Beside it, the floor: bench/warm_floor.py runs
tinyproj's crawl several times in ONE process (first crawl, then each later
one). Then the template's memory (testproj; Rss and Pss from
/proc/PID/smaps_rollup) idle and with one warm crawl running.

Section schedule: schedule.json with one keep-alive client (wrk -t1 -c1,
--seconds), spiderd against Scrapyd, each with max_proc = 1 and its slot
held by a real crawl waiting for its page, so every scheduled job stays
pending: the API and the durable insert, as users schedule while crawls run.

Figures are min / median over the repetitions (--reps), each repetition on
fresh daemons. job.started events (GET /api/v1/events) are counted by their
data "start" ("warm", "cold" or absent) to show which crawls really started
warm. --python and --pythonpath set the daemon's [spiderd] python and
pythonpath: another interpreter, or another tree's spiderd_runner (to
measure a before against an after with one binary).
"""
import argparse
import http.server
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

from bench import Daemon, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
PROJECT = "tinyproj"
SPIDER = "one"
TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


# ---- the egg -------------------------------------------------------------------

def build_tinyproj_egg():
    """Builds bench/tinyproj's egg in a temporary copy; returns the egg's bytes."""
    work = tempfile.mkdtemp(prefix="warm-bench-egg-")
    try:
        src = os.path.join(work, "src")
        dist = os.path.join(work, "dist")
        shutil.copytree(os.path.join(HERE, "tinyproj"), src, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", "*.pyc"))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([PYTHON, "setup.py", "-q", "bdist_egg", "-d", dist], cwd=src,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building tinyproj's egg failed:\n{proc.stdout}")
        eggs = [f for f in os.listdir(dist) if f.endswith(".egg")]
        if len(eggs) != 1:
            raise RuntimeError(f"building tinyproj made {eggs!r}, not one egg")
        with open(os.path.join(dist, eggs[0]), "rb") as f:
            return f.read()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def addversion(url, egg, version="1"):
    boundary = "warmbench"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in (("project", PROJECT), ("version", version))]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="egg"; '
                 f'filename="{PROJECT}.egg"\r\nContent-Type: application/octet-stream\r\n\r\n'
                 .encode() + egg + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    req = urllib.request.Request(url + "/addversion.json", b"".join(parts),
                                 {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(req, timeout=120) as r:
        res = json.loads(r.read())
    if res.get("status") != "ok":
        raise RuntimeError(f"addversion.json: {res}")
    return res


# ---- the page server -----------------------------------------------------------

class PageServer:
    """http.server on a thread; records the monotonic arrival of each job's first request."""

    def __init__(self):
        self.arrivals = {}
        self.cond = threading.Condition()
        self.released = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                now = time.monotonic()
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                job = query.get("job", [""])[0]
                with outer.cond:
                    outer.arrivals.setdefault(job, now)
                    outer.cond.notify_all()
                if query.get("hold"):  # a crawl that runs until release() (120 s at most)
                    outer.released.wait(120)
                body = f"<html><body><p>page for {job}</p></body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, job, hold=False):
        return (f"http://127.0.0.1:{self.port}/page?job={urllib.parse.quote(job)}"
                + ("&hold=1" if hold else ""))

    def release(self):
        """Answers every held page, and every later one at once."""
        self.released.set()

    def hold_again(self):
        self.released.clear()

    def wait(self, job, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while job not in self.arrivals:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.arrivals[job]

    def stop(self):
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- /proc ---------------------------------------------------------------------

def own_cpu_ms(pid):
    """utime+stime of pid alone, in ms (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return 0.0
    fields = data[data.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


def proc_stat(pid):
    """(ppid, utime+stime+cutime+cstime in ms) of pid, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2:].split()  # fields[0] is field 3, the state
    ppid = int(fields[1])
    ticks = sum(int(x) for x in fields[11:15])   # fields 14-17: utime stime cutime cstime
    return ppid, ticks * TICK_MS


def children(pid):
    """{child pid: its CPU ms} for the live children of pid."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st and st[0] == pid:
                out[int(name)] = st[1]
    return out


def listening_pid(port, among):
    """The pid, among the given ones, that holds the TCP socket listening on port."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(cols[9])
        except OSError:
            pass
    for pid in among:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return pid
        except OSError:
            continue
    return None


def descendants(pid):
    found, todo = [], [pid]
    while todo:
        kids = list(children(todo.pop()))
        found += kids
        todo += kids
    return found


# ---- the targets ---------------------------------------------------------------

class Spiderd(Daemon):
    """bench.py's Daemon with [spiderd] warm_templates set (None: the default)."""

    def __init__(self, binary, warm_templates=None, max_proc=4, python=PYTHON, pythonpath=""):
        extra = "" if warm_templates is None else f"warm_templates = {warm_templates}\n"
        if pythonpath:
            extra += f"pythonpath = {pythonpath}\n"
        super().__init__(binary, max_proc=max_proc, extra=extra, python=python)
        self.pid = self.proc.pid

    def cpu_ms(self):
        """The daemon's CPU and {pid: CPU} of its live children that are not crawls."""
        running = {j.get("pid") for j in self.get("/listjobs.json").get("running", [])}
        kids = {p: ms for p, ms in children(self.pid).items() if p not in running}
        return proc_stat(self.pid)[1], kids

    def crawl_cpu_ms(self, jobids):
        """The crawls' own CPU as the daemon recorded it (stats cpu_time_seconds), summed."""
        want, total, cursor = set(jobids), 0.0, None
        while True:
            page = self.get(f"/api/v1/jobs?project={PROJECT}&limit=500"
                            + (f"&cursor={urllib.parse.quote(str(cursor))}" if cursor else ""))
            for j in page.get("jobs", []):
                if j.get("job") in want:
                    cpu = (j.get("stats") or {}).get("cpu_time_seconds")
                    if cpu is None:
                        return None
                    total += cpu * 1000
                    want.discard(j["job"])
            cursor = page.get("next_cursor")
            if not cursor:
                return None if want else total

    def wait_templates(self, appear=5.0, settle=30.0):
        """After the warm-up: waits up to `appear` s for a non-crawl child (a
        template) and then until the CPU of those children has stopped
        growing for 0.3 s (at most `settle` s). Returns (templates, seconds)."""
        t0 = time.monotonic()
        last, still = None, 0
        while True:
            kids = self.cpu_ms()[1]
            waited = time.monotonic() - t0
            if not kids:
                if waited > appear:
                    return 0, waited
            else:
                total = sum(kids.values())
                still = still + 1 if total == last else 0
                last = total
                if still >= 3 or waited > appear + settle:
                    return len(kids), waited
            time.sleep(0.1)

    def start_kinds(self):
        """Counts of the job.started events' data "start": warm, cold, or absent."""
        counts, after = {}, 0
        while True:
            page = self.get(f"/api/v1/events?type=job.started&limit=1000&after={after}")
            for ev in page.get("events", []):
                data = ev.get("data") or {}
                kind = data.get("start", "unmarked") if isinstance(data, dict) else "unmarked"
                counts[kind] = counts.get(kind, 0) + 1
            if not page.get("events") or page.get("next_after") in (None, after):
                return counts
            after = page["next_after"]

    def stop(self):
        kids = list(children(self.pid))
        super().stop()
        # Anything the daemon left behind (a template that outlived it by
        # more than 5 s) is reported and ended here, by pid.
        for _ in range(50):
            left = [p for p in kids if proc_stat(p)]
            if not left:
                break
            time.sleep(0.1)
        for p in left:
            print(f"  warning: pid {p}, a child of the daemon, still alive after its stop; "
                  "killing it", flush=True)
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


class Scrapyd:
    """Scrapyd started by a shell command in a fresh directory with its own scrapyd.conf."""

    def __init__(self, command, max_proc=4):
        self.dir = tempfile.mkdtemp(prefix="scrapyd-bench-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with open(os.path.join(self.dir, "scrapyd.conf"), "w") as f:
            f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {self.port}\n"
                    f"max_proc = {max_proc}\neggs_dir = eggs\nlogs_dir = logs\ndbs_dir = dbs\n")
        env = dict(os.environ, SCRAPYD_HTTP_PORT=str(self.port),
                   SCRAPYD_BIND_ADDRESS="127.0.0.1")
        self.log = open(os.path.join(self.dir, "scrapyd.log"), "w")
        self.proc = subprocess.Popen(command, shell=True, cwd=self.dir, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        for _ in range(600):
            if self.proc.poll() is not None:
                break
            try:
                self.get("/daemonstatus.json")
                break
            except OSError:
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError("Scrapyd did not answer within 60 s")
        if self.proc.poll() is not None:
            with open(os.path.join(self.dir, "scrapyd.log")) as f:
                tail = f.read()[-2000:]
            self.stop()
            raise RuntimeError(f"Scrapyd exited ({self.proc.returncode}):\n{tail}")
        # The shell may have exec'd Scrapyd or be its parent: the process that
        # listens on the port is the one whose CPU counts.
        self.pid = listening_pid(self.port, [self.proc.pid] + descendants(self.proc.pid))
        if self.pid is None:
            self.stop()
            raise RuntimeError("could not find the process listening for Scrapyd")

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return json.loads(r.read())

    def post(self, path, data):
        body = urllib.parse.urlencode(data).encode()
        with urllib.request.urlopen(self.url + path, body, timeout=30) as r:
            return json.loads(r.read())

    def cpu_ms(self):
        # Crawls are Scrapyd's reaped children (cutime); it keeps no others.
        return proc_stat(self.pid)[1], {}

    def crawl_cpu_ms(self, jobids):
        return None

    def start_kinds(self):
        return None

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- measurements --------------------------------------------------------------

def schedule(d, pages, jobid):
    res = d.post("/schedule.json", {"project": PROJECT, "spider": SPIDER, "jobid": jobid,
                                    "url": pages.url(jobid)})
    if res.get("status") != "ok":
        raise RuntimeError(f"schedule.json: {res}")


def wait_finished(d, jobids, timeout=600, project=PROJECT):
    """Polls listjobs.json every 20 ms until every job id is finished; returns their rows."""
    want = set(jobids)
    deadline = time.monotonic() + timeout
    while True:
        done = {j["id"]: j for j in d.get(f"/listjobs.json?project={project}")["finished"]
                if j["id"] in want}
        if len(done) == len(want):
            return done
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(want) - len(done)} of {len(want)} jobs not finished "
                               f"after {timeout} s")
        time.sleep(0.02)


def cpu_total(before, after):
    """CPU ms between two cpu_ms() snapshots: the daemon's delta plus each
    non-crawl child's (all of it for a child that appeared in between)."""
    (d0, kids0), (d1, kids1) = before, after
    total = d1 - d0
    for pid, ms in kids1.items():
        total += ms - kids0.get(pid, 0.0)
    return total


def end_to_end(d, pages, tag, jobs):
    ids = [f"{tag}-e{i}" for i in range(jobs)]
    cpu0, own0 = d.cpu_ms(), own_cpu_ms(d.pid)
    t0 = time.monotonic()
    for jobid in ids:
        schedule(d, pages, jobid)
    rows = wait_finished(d, ids)
    elapsed = time.monotonic() - t0
    cpu1, own1 = d.cpu_ms(), own_cpu_ms(d.pid)
    states = [r.get("state", "finished") for r in rows.values()]
    fetched = sum(1 for j in ids if j in pages.arrivals)
    items = [(r.get("stats") or {}).get("items") for r in rows.values()]
    crawl_cpu = d.crawl_cpu_ms(ids)
    return {"seconds": elapsed, "cpu_ms_per_job": cpu_total(cpu0, cpu1) / jobs,
            "daemon_own_ms_per_job": (own1 - own0) / jobs,
            "crawl_cpu_ms_per_job": None if crawl_cpu is None else crawl_cpu / jobs,
            "ok": states.count("finished"), "fetched": fetched,
            "items": None if None in items else sum(items),
            "templates": len(cpu1[1])}


def first_requests(d, pages, tag, n):
    waits = []
    for i in range(n):
        jobid = f"{tag}-f{i}"
        t0 = time.monotonic()
        schedule(d, pages, jobid)
        seen = pages.wait(jobid, 120)
        if seen is None:
            raise RuntimeError(f"{jobid}: no request within 120 s")
        waits.append((seen - t0) * 1000)
        wait_finished(d, [jobid])
    return statistics.median(waits), waits


def run_target(mode, a, egg, pages, rep):
    tag = f"r{rep}-{mode}"
    if mode == "scrapyd":
        d = Scrapyd(a.scrapyd)
    else:
        d = Spiderd(a.binary, 0 if mode == "cold" else None, python=a.python,
                    pythonpath=a.pythonpath)
    try:
        addversion(d.url, egg)
        res = {}
        if mode == "warm":
            cpu0 = d.cpu_ms()
            t0 = time.monotonic()
            schedule(d, pages, f"{tag}-warmup")
            wait_finished(d, [f"{tag}-warmup"])
            res["warmup_s"] = time.monotonic() - t0
            res["warmup_templates"], res["warmup_wait_s"] = d.wait_templates()
            res["warmup_cpu_ms"] = cpu_total(cpu0, d.cpu_ms())
        res.update(end_to_end(d, pages, tag, a.jobs))
        if mode != "warm-fresh":
            res["first_ms"], res["first_all"] = first_requests(d, pages, tag, a.first)
        res["starts"] = d.start_kinds()
        return res
    finally:
        d.stop()


# ---- one warm crawl at a time: CPU, wall, the floor, the template's memory ------

DATA_URL = "data:text/html,<p>one page</p>"
# (project, spider, spider arguments): one page each, a data: URL
CRAWLS = (("tinyproj", "one", {"url": DATA_URL}), ("testproj", "quick", {"count": "1"}))


def deploy(d, project):
    if project == PROJECT:
        addversion(d.url, build_tinyproj_egg())
    else:
        d.deploy(project)  # bench.py's: tests/integration/projects/<project>


def stat_fields(pid):
    """minflt, cminflt, utime+stime and cutime+cstime (ms) of pid."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    x = data[data.rindex(")") + 2:].split()
    return {"cminflt": int(x[8]), "own_ms": (int(x[11]) + int(x[12])) * TICK_MS,
            "reaped_ms": (int(x[13]) + int(x[14])) * TICK_MS}


def start_kind(d, jobid):
    row = d.get(f"/api/v1/jobs/{urllib.parse.quote(jobid)}")["id"]
    events = d.get(f"/api/v1/events?job={row}&type=job.started")["events"]
    return (events[0].get("data") or {}).get("start") if events else None


def run_one(d, project, spider, args, jobid):
    res = d.post("/schedule.json", dict(args, project=project, spider=spider, jobid=jobid))
    if res.get("status") != "ok":
        raise RuntimeError(f"schedule.json: {res}")
    wait_finished(d, [jobid], project=project)


def warm_up_one(d, project, spider, args, tag):
    """Crawls one after another until one starts warm; then lets the template settle."""
    for i in range(60):
        jobid = f"{tag}-w{i}"
        run_one(d, project, spider, args, jobid)
        if start_kind(d, jobid) == "warm":
            d.wait_templates()
            return i + 1
        time.sleep(0.2)
    raise RuntimeError(f"{project}: no warm start after 60 crawls")


def crawl_costs(a, project, spider, args, n, tag):
    """n crawls one after another on a warm daemon (max_proc = 4, nothing
    else running): each crawl's CPU is what the daemon reaps (cutime +
    cstime; /proc counts it in ticks, so it is given as the mean of the n),
    wall is the daemon's own stamps, claim to end."""
    d = Spiderd(a.binary, None, python=a.python, pythonpath=a.pythonpath)
    try:
        deploy(d, project)
        warm_up_one(d, project, spider, args, tag)
        tpl0 = d.cpu_ms()[1]
        s0 = stat_fields(d.pid)
        ids = [f"{tag}-c{i}" for i in range(n)]
        for jobid in ids:
            run_one(d, project, spider, args, jobid)
        s1 = stat_fields(d.pid)
        tpl1 = d.cpu_ms()[1]
        walls, kinds = [], {}
        for jobid in ids:
            job = d.get(f"/api/v1/jobs/{urllib.parse.quote(jobid)}")
            if job.get("state") != "finished" or job.get("exit_code") != 0:
                raise RuntimeError(f"{jobid}: {job.get('state')}, exit {job.get('exit_code')}")
            walls.append(job["ended_ms"] - job["started_ms"])
            kind = start_kind(d, jobid)
            kinds[kind] = kinds.get(kind, 0) + 1
        return {"cpu_ms": (s1["reaped_ms"] - s0["reaped_ms"]) / n,
                "faults": (s1["cminflt"] - s0["cminflt"]) / n,
                "template_ms": sum(tpl1.get(p, 0) - tpl0.get(p, 0) for p in tpl1) / n,
                "daemon_ms": (s1["own_ms"] - s0["own_ms"]) / n,
                "wall_min": min(walls), "wall_med": statistics.median(walls), "starts": kinds}
    finally:
        d.stop()


def smaps_rollup(pid):
    """(Rss, Pss) of pid in MB."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss"):
                out[k] = int(rest.split()[0]) / 1024
    return out["Rss"], out["Pss"]


def template_memory(a, tag):
    """testproj's template, idle and with one warm crawl running (slow, 30 s):
    (Rss, Pss) of each, MB."""
    d = Spiderd(a.binary, None, python=a.python, pythonpath=a.pythonpath)
    try:
        deploy(d, "testproj")
        warm_up_one(d, "testproj", "quick", {"count": "1"}, tag)
        tpls = list(d.cpu_ms()[1])
        if len(tpls) != 1:
            raise RuntimeError(f"{len(tpls)} templates, not one")
        idle = smaps_rollup(tpls[0])
        jobid = f"{tag}-mem"
        d.post("/schedule.json", {"project": "testproj", "spider": "slow", "seconds": "30",
                                  "jobid": jobid})
        for _ in range(300):
            running = d.get("/listjobs.json?project=testproj")["running"]
            if running and running[0].get("pid"):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the slow crawl did not start")
        pid = running[0]["pid"]
        time.sleep(1.0)  # its spider is open and waiting
        res = {"idle": idle, "template": smaps_rollup(tpls[0]), "crawl": smaps_rollup(pid),
               "warm": start_kind(d, jobid) == "warm"}
        d.post("/cancel.json", {"project": "testproj", "job": jobid})
        return res
    finally:
        d.stop()


def floor(a, n=6):
    """warm_floor.py: n crawls of tinyproj's spider in one process."""
    log = tempfile.NamedTemporaryFile(prefix="warm-floor-", suffix=".log", delete=False)
    log.close()
    try:
        proc = subprocess.run([a.python, os.path.join(HERE, "warm_floor.py"),
                               os.path.join(HERE, "tinyproj"), "tinyproj.settings", SPIDER,
                               DATA_URL, str(n), log.name],
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"warm_floor.py failed:\n{proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(log.name)


# ---- schedule.json on one keep-alive connection, a crawl running ------------

SCHEDULE_LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "project=%s&spider=%s&url=data%%3A%%2Cx"
local errors = 0
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"ok"', 1, true) then errors = errors + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("schedule_errors=%%d\\n", errors))
end
"""


def keepalive_schedule(a, target, pages, tag, seconds):
    """max_proc = 1, its slot held by a crawl waiting for its page; then
    `wrk -t1 -c1` POSTs schedule.json back to back for `seconds` (every job
    stays pending). Returns (jobs/s, errors)."""
    if target == "scrapyd":
        d = Scrapyd(a.scrapyd, max_proc=1)
    else:
        d = Spiderd(a.binary, None, max_proc=1, python=a.python, pythonpath=a.pythonpath)
    script = tempfile.NamedTemporaryFile("w", prefix="warm-bench-", suffix=".lua", delete=False)
    try:
        script.write(SCHEDULE_LUA % (PROJECT, SPIDER))
        script.close()
        addversion(d.url, build_tinyproj_egg())
        pages.hold_again()
        held = f"{tag}-held"
        d.post("/schedule.json", {"project": PROJECT, "spider": SPIDER, "jobid": held,
                                  "url": pages.url(held, hold=True)})
        if pages.wait(held, 60) is None:
            raise RuntimeError(f"{target}: the held crawl sent no request within 60 s")
        out = subprocess.run(["wrk", "-t1", "-c1", f"-d{seconds}s", "-s", script.name,
                              d.url + "/schedule.json"], capture_output=True, text=True,
                             check=True).stdout
        rate = float(out.split("Requests/sec:")[1].split()[0])
        errors = int(out.split("schedule_errors=")[1].split()[0])
        return rate, errors
    finally:
        pages.release()
        os.unlink(script.name)
        d.stop()


# ---- report --------------------------------------------------------------------

LABELS = {"cold": "spiderd cold (warm_templates = 0)",
          "warm": "spiderd warm (default, after 1 warm-up job)",
          "warm-fresh": "spiderd warm (default, no warm-up)",
          "scrapyd": "Scrapyd 1.6 (poll_interval default, 5 s)"}


def min_med(values):
    return (min(values), statistics.median(values)) if values else (None, None)


def fmt(pair, spec):
    lo, med = pair
    return "-" if med is None else f"{format(lo, spec)} / {format(med, spec)}"


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def report(modes, results, jobs, first):
    summary = {}
    for m in modes:
        rs = results[m]
        summary[m] = {
            "e2e": min_med([r["seconds"] for r in rs]),
            "rate": (jobs / min(r["seconds"] for r in rs),
                     jobs / statistics.median([r["seconds"] for r in rs])),
            "first": min_med([r["first_ms"] for r in rs if "first_ms" in r]),
            "cpu": min_med([r["cpu_ms_per_job"] for r in rs]),
            "crawl": min_med([r["crawl_cpu_ms_per_job"] for r in rs
                              if r.get("crawl_cpu_ms_per_job") is not None]),
        }
    rows = [("end to end, %d jobs (s)" % jobs, "e2e", ".2f"),
            ("  rate (jobs/s)", "rate", ".2f"),
            ("first request, median of %d (ms)" % first, "first", ".0f"),
            ("CPU per job, daemon + templates (ms)", "cpu", ".0f"),
            ("  of which the crawl itself, its stats (ms)", "crawl", ".0f")]
    base = "cold" if "cold" in summary else None
    head = ["figure: best / median"] + [m for m in modes]
    others = [m for m in modes if m != base] if base else []
    head += [f"{m}/cold" for m in others]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, key, spec in rows:
        cells = [label] + [fmt(summary[m][key], spec) for m in modes]
        cells += [ratio(summary[m][key][1], summary[base][key][1]) for m in others]
        lines.append("| " + " | ".join(cells) + " |")
    print("\n".join(lines))
    print("(ratios are of the medians; a rate ratio above 1 and a time or CPU ratio "
          "below 1 favour the column)")
    for m in modes:
        print(f"{m}: {LABELS[m]}")
        for i, r in enumerate(results[m], 1):
            extra = ""
            if "warmup_s" in r:
                extra += (f", warm-up job {r['warmup_s']:.2f} s then {r['warmup_wait_s']:.1f} s "
                          f"for {r['warmup_templates']} template(s) to appear and settle, "
                          f"{r['warmup_cpu_ms']:.0f} ms CPU in all")
            extra += f", the daemon process alone {r['daemon_own_ms_per_job']:.1f} ms/job"
            if r.get("crawl_cpu_ms_per_job") is not None:
                extra += f", the crawls' own CPU {r['crawl_cpu_ms_per_job']:.0f} ms/job"
            if "first_all" in r:
                extra += ", first request " + " ".join(f"{w:.0f}" for w in r["first_all"]) + " ms"
            print(f"  rep {i}: {r['seconds']:.2f} s, {r['cpu_ms_per_job']:.0f} ms CPU/job, "
                  f"{r['ok']} finished, {r['fetched']} pages fetched, "
                  + (f"{r['items']} items, " if r["items"] is not None else "") +
                  f"{r['templates']} non-crawl children at the end{extra}; "
                  f"job.started by start: {r['starts'] if r['starts'] is not None else 'n/a'}")


def scrapyd_from_source(src, rev):
    """Extracts Scrapyd at rev from src (a git directory, e.g. a bare clone
    of scrapy/scrapyd, or a checkout) into a temporary directory; returns
    (that directory, the command that runs it there). Raises SystemExit with
    what is missing."""
    if not os.path.isdir(src):
        raise SystemExit(f"--scrapyd-src {src}: no such directory (give a git directory or "
                         "checkout of Scrapyd's source, https://github.com/scrapy/scrapyd)")
    out = tempfile.mkdtemp(prefix="scrapyd-src-")
    archive = subprocess.run(["git", "--git-dir", src, "archive", rev], capture_output=True)
    if archive.returncode != 0:  # a checkout rather than a git directory
        archive = subprocess.run(["git", "-C", src, "archive", rev], capture_output=True)
    if archive.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise SystemExit(f"--scrapyd-src {src}: `git archive {rev}` failed: "
                         f"{archive.stderr.decode(errors='replace').strip()} (is it Scrapyd's "
                         "git repository, with the tag?)")
    subprocess.run(["tar", "-x", "-C", out], input=archive.stdout, check=True)
    if not os.path.isfile(os.path.join(out, "scrapyd", "__main__.py")):
        shutil.rmtree(out, ignore_errors=True)
        raise SystemExit(f"--scrapyd-src {src}: {rev} holds no scrapyd/__main__.py")
    # PYTHONPATH reaches Scrapyd's crawls too (its launcher passes its
    # environment on), which run `python3 -m scrapyd.runner`.
    return out, f"PYTHONPATH={shlex.quote(out)} {shlex.quote(PYTHON)} -m scrapyd"


def find_scrapyd(a):
    if a.scrapyd:
        return a.scrapyd, None
    if a.scrapyd_src:
        a.scrapyd_dir, command = scrapyd_from_source(a.scrapyd_src, a.scrapyd_rev)
        return command, None
    probe = subprocess.run([PYTHON, "-c", "import scrapyd"], capture_output=True)
    if probe.returncode == 0:
        return f"{PYTHON} -m scrapyd", None
    return None, ("Scrapyd 1.6 not measured: it is not importable here (not packaged in "
                  "Debian) and neither --scrapyd-src DIR (a git directory of Scrapyd's "
                  "source: it runs from there on Debian's Scrapy and Twisted) nor --scrapyd "
                  "COMMAND was given")


def report_crawls(costs, floor_runs, memory):
    print("\n## One warm crawl at a time (claim to end), beside the floor")
    print("| figure: best / median of the repetitions | " + " | ".join(costs) + " |")
    print("|---|" + "---|" * len(costs))
    rows = [("crawl CPU (ms, cutime+cstime / crawl)", "cpu_ms", ".1f"),
            ("wall, claim to end (ms, each rep's median)", "wall_med", ".0f"),
            ("wall, fastest crawl (ms)", "wall_min", ".0f"),
            ("minor page faults / crawl", "faults", ".0f"),
            ("template CPU / fork (ms)", "template_ms", ".1f"),
            ("daemon CPU / crawl (ms; polled every 20 ms)", "daemon_ms", ".1f")]
    for label, key, spec in rows:
        cells = [fmt(min_med([r[key] for r in rs]), spec) for rs in costs.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")
    for name, rs in costs.items():
        print(f"{name}: starts {[r['starts'] for r in rs]}")
    firsts = [f["cpu_ms"][0] for f in floor_runs]
    later = [statistics.median(f["cpu_ms"][1:]) for f in floor_runs]
    later_wall = [statistics.median(f["wall_ms"][1:]) for f in floor_runs]
    print(f"floor (bench/warm_floor.py, tinyproj, crawls in one process): first crawl "
          f"{fmt(min_med(firsts), '.0f')} ms CPU; each later one {fmt(min_med(later), '.1f')} ms "
          f"CPU, {fmt(min_med(later_wall), '.0f')} ms wall (best / median)")
    if costs and later:
        base = statistics.median(later)
        for name, rs in costs.items():
            med = statistics.median([r["cpu_ms"] for r in rs])
            print(f"  {name}: a warm crawl's CPU is {med / base:.1f}x the floor's "
                  f"({med - base:.1f} ms more)")
    for m in memory:
        print("template memory (testproj, MB, Rss / Pss): idle {:.1f} / {:.1f}; with one warm "
              "crawl running {:.1f} / {:.1f}, the crawl {:.1f} / {:.1f}{}".format(
                  *m["idle"], *m["template"], *m["crawl"],
                  "" if m["warm"] else " (the crawl started COLD)"))


def report_schedule(rates):
    print("\n## schedule.json, one keep-alive connection (wrk -t1 -c1), a crawl running")
    for target, rs in rates.items():
        print(f"{target}: {fmt(min_med([r for r, _ in rs]), ',.0f')} jobs/s (best / median); "
              f"errors {[e for _, e in rs]}")
    if "spiderd" in rates and "scrapyd" in rates:
        sp = statistics.median([r for r, _ in rates["spiderd"]])
        sc = statistics.median([r for r, _ in rates["scrapyd"]])
        print(f"spiderd / Scrapyd: {sp / sc:.1f}x (medians)")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary", help="the spiderd binary")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=20)
    ap.add_argument("--first", type=int, default=10)
    ap.add_argument("--crawls", type=int, default=20,
                    help="crawls one after another per project and repetition (crawl)")
    ap.add_argument("--seconds", type=int, default=5, help="wrk's duration (schedule)")
    ap.add_argument("--modes", default="cold,warm,warm-fresh")
    ap.add_argument("--sections", default="e2e,crawl,schedule",
                    help="e2e: 20 jobs end to end per mode; crawl: one warm crawl at a time, "
                         "the floor and the template's memory; schedule: schedule.json "
                         "keep-alive against Scrapyd")
    ap.add_argument("--python", default=PYTHON,
                    help="the interpreter of the crawls and templates ([spiderd] python)")
    ap.add_argument("--pythonpath", default="",
                    help="[spiderd] pythonpath: another spiderd_runner (e.g. an older tree's)")
    ap.add_argument("--scrapyd-src", default="",
                    help="Scrapyd's git directory: --scrapyd-rev is extracted into a temporary "
                         "directory and run there with python3 -m scrapyd")
    ap.add_argument("--scrapyd-rev", default="1.6.0")
    ap.add_argument("--scrapyd", default="",
                    help="shell command that starts Scrapyd 1.6 in the current directory")
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    a.scrapyd_dir = None
    a.sections = [x for x in a.sections.split(",") if x]
    for x in a.sections:
        if x not in ("e2e", "crawl", "schedule"):
            ap.error(f"unknown section {x!r}")
    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in LABELS or m == "scrapyd":
            ap.error(f"unknown mode {m!r}")
    return a


def run_e2e(a, pages, egg, modes):
    results = {m: [] for m in modes}
    for rep in range(a.reps):
        order = modes[rep % len(modes):] + modes[:rep % len(modes)]  # rotate against drift
        for m in order:
            r = run_target(m, a, egg, pages, rep + 1)
            results[m].append(r)
            print(f"  rep {rep + 1} {m}: {r['seconds']:.2f} s end to end, "
                  f"{r['cpu_ms_per_job']:.0f} ms CPU/job"
                  + (f", first request median {r['first_ms']:.0f} ms"
                     if "first_ms" in r else ""), flush=True)
    return results


def run_crawls(a):
    costs, floors, memory = {f"{p}/{s}": [] for p, s, _ in CRAWLS}, [], []
    for rep in range(a.reps):
        for project, spider, args in CRAWLS:
            r = crawl_costs(a, project, spider, args, a.crawls, f"r{rep + 1}-{project}")
            costs[f"{project}/{spider}"].append(r)
            print(f"  rep {rep + 1} {project}/{spider}: {r['cpu_ms']:.1f} ms CPU/crawl, "
                  f"wall median {r['wall_med']:.0f} ms, {r['faults']:.0f} faults, "
                  f"starts {r['starts']}", flush=True)
        floors.append(floor(a))
        print(f"  rep {rep + 1} floor: {floors[-1]}", flush=True)
    memory.append(template_memory(a, "mem"))
    return costs, floors, memory


def run_schedule(a, pages):
    targets = ["spiderd"] + (["scrapyd"] if a.scrapyd else [])
    rates = {t: [] for t in targets}
    for rep in range(a.reps):
        for t in targets:
            rates[t].append(keepalive_schedule(a, t, pages, f"r{rep + 1}-ka-{t}", a.seconds))
            print(f"  rep {rep + 1} {t}: schedule.json {rates[t][-1][0]:,.0f}/s", flush=True)
    return rates


def main():
    a = parse_args()
    command = f"cd {shlex.quote(os.getcwd())} && " + shlex.join([sys.executable] + sys.argv)
    a.scrapyd, why_not = find_scrapyd(a)
    modes = a.modes + (["scrapyd"] if a.scrapyd else [])
    try:
        rev = subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
    except OSError:
        rev = ""
    print(f"# crawl starts, {os.cpu_count()} cpus, {time.strftime('%Y-%m-%d %H:%M %Z')}, "
          f"tree {rev or '?'}, load {os.getloadavg()[0]:.2f}")
    print(f"command: {command}")
    print(f"sections: {', '.join(a.sections)}; targets: {', '.join(modes)}; {a.reps} "
          f"repetitions, {a.jobs} jobs end to end, {a.first} first-request jobs; max_proc = 4; "
          "a fresh daemon per target and repetition")
    if why_not:
        print(why_not)
    egg = build_tinyproj_egg()
    pages = PageServer()
    results = costs = rates = None
    try:
        if "e2e" in a.sections:
            results = run_e2e(a, pages, egg, modes)
        if "crawl" in a.sections:
            costs = run_crawls(a)
        if "schedule" in a.sections:
            rates = run_schedule(a, pages)
    finally:
        pages.stop()
        if a.scrapyd_dir:
            shutil.rmtree(a.scrapyd_dir, ignore_errors=True)
    print(f"# done {time.strftime('%H:%M %Z')}, load {os.getloadavg()[0]:.2f}")
    if results:
        report(modes, results, a.jobs, a.first)
        if "scrapyd" in results and "warm" in results:
            med = {m: statistics.median([r["seconds"] for r in results[m]])
                   for m in ("warm", "scrapyd")}
            print(f"end to end, Scrapyd / spiderd warm: {med['scrapyd'] / med['warm']:.1f}x "
                  "(medians)")
    if costs:
        report_crawls(*costs)
    if rates:
        report_schedule(rates)
    if why_not:
        print(why_not)


if __name__ == "__main__":
    main()
