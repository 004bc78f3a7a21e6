"""Warm starts: a Scrapy crawl forked from a template process that has
imported Scrapy and the project already must be indistinguishable from one
started cold, as a spider and as the daemon see it.

Every comparison runs the same job (same job id, same arguments) on two
daemons configured alike: `cold` with `warm_templates = 0` and `warm` with
the default, whose template is ready before the job is scheduled. Each job's
`job.started` event must say how it started ("start": "cold" or "warm"), and
the warm daemon's job must have started warm, else the comparison proves
nothing. What names the daemon itself (its directory, its port) and the
job's row id (in its stats file's name and token) is masked before the
comparison; everything else must be equal.

The crawls are real Scrapy crawls of projects/warmproj (testproj plus a
`probe` spider that reports everything about its process, a `hog` spider
that allocates memory and `coldonly`, which opts out in its
custom_settings), projects/warmoff (warmproj with `SPIDERD_WARM_START =
False` in its settings) and projects/warmimport (warmproj whose settings and
one spider module do things when imported)."""

import difflib
import json
import os
import re
import signal
import time

import pytest

from conftest import SHARED_STORE, SLOW, pid_alive, read_json_lines, timeout, wait_for

API = "/api/v1"
P = "w"  # the project every comparison runs (projects/warmproj)


# ---- processes ------------------------------------------------------------

def proc_stat(pid):
    """state, ppid, pgid and sid of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return {"state": rest[0], "ppid": int(rest[1]), "pgid": int(rest[2]), "sid": int(rest[3])}


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []


def children(ppid):
    """pids of the processes whose parent is ppid (zombies included)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = proc_stat(int(entry))
            if st and st["ppid"] == ppid:
                out.append(int(entry))
    return out


def zombies(ppid):
    return [pid for pid in children(ppid) if (proc_stat(pid) or {}).get("state") == "Z"]


def templates(d):
    """The daemon's warm start templates: its live children whose command
    line names spiderd_runner and template and that are no running job."""
    running = {e.get("pid") for e in d.listjobs()["running"]}
    out = []
    for pid in children(d.proc.pid):
        cmd = " ".join(cmdline(pid))
        if "spiderd_runner" in cmd and "template" in cmd and pid not in running and pid_alive(pid):
            out.append(pid)
    return sorted(out)


# ---- jobs and events ------------------------------------------------------

def api_job(d, jobid):
    r = d.request("GET", f"{API}/jobs/{jobid}")
    assert r.status_code == 200, r.text
    return r.json()


def job_events(d, jobid):
    """(type, data) of the job's events, oldest first."""
    row = api_job(d, jobid)["id"]
    r = d.request("GET", f"{API}/events", params={"job": row, "type": "job.", "limit": 1000})
    assert r.status_code == 200, r.text
    return [(e["type"], e["data"]) for e in r.json()["events"]]


def start_kind(d, jobid):
    """"warm" or "cold", as the job's job.started event says."""
    started = [data for t, data in job_events(d, jobid) if t == "job.started"]
    assert len(started) == 1, f"{jobid}: job.started events {started}"
    assert "start" in started[0], f"{jobid}: job.started has no 'start': {started[0]}"
    return started[0]["start"]


def warm_up(d, project, version=None, seconds=60):
    """Runs one-item quick crawls, one after another, until one starts
    warm; returns how each started (["cold", ..., "warm"])."""
    deadline = time.monotonic() + timeout(seconds)
    kinds = []
    while True:
        args = {"count": 1}
        if version is not None:
            args["_version"] = version
        job = d.schedule(project, "quick", **args)
        e = d.wait_finished(job, 60)
        assert e["state"] == "finished", e
        kinds.append(start_kind(d, job))
        if kinds[-1] == "warm":
            return kinds
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no warm start of {project} within {timeout(seconds):.0f}s: starts {kinds}")
        time.sleep(0.2)


def outcome(e):
    """What a finished listjobs entry says about how the crawl ended."""
    stats = e.get("stats") or {}
    return {"state": e["state"], "exit_code": e["exit_code"], "signal": e["signal"],
            "end_reason": e.get("end_reason"), "finish_reason": stats.get("finish_reason")}


# ---- comparing a cold and a warm run --------------------------------------

_ADDR = re.compile(r"0x[0-9a-f]{6,}")
_INODE = re.compile(r"(pipe|socket|anon_inode):\[\d+\]")
_RUNFILE = re.compile(r"/(\d+)\.(json|hb)\b")
_TOKEN = re.compile(r"\b\d+\.[0-9a-f]{64}\b")


def norm(value, d):
    """value with what names the daemon d itself masked: its directory, its
    port and pid, the row id in the job's stats and heartbeat file names and token,
    object addresses and pipe inodes."""
    work = os.path.realpath(d.workdir)

    def s(x):
        x = x.replace(work, "<DIR>").replace(d.workdir, "<DIR>")
        x = x.replace(f"127.0.0.1:{d.port}", "127.0.0.1:<PORT>")
        x = _RUNFILE.sub(r"/<ID>.\2", x)
        x = _ADDR.sub("0x<ADDR>", x)
        x = _INODE.sub(r"\1:[]", x)
        return _TOKEN.sub("<TOKEN>", x)

    if isinstance(value, str):
        return s(value)
    if isinstance(value, dict):
        # On a shared store a crawl is told its daemon's pid (to die with it).
        return {s(k): "<DAEMON PID>" if k == "SPIDERD_DIE_WITH_NODE" else norm(v, d)
                for k, v in value.items()}
    if isinstance(value, list):
        return [norm(v, d) for v in value]
    return value


def short(value, limit=300):
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def differences(cold_value, warm_value, path=""):
    """Lines naming every place where the two values differ."""
    if isinstance(cold_value, dict) and isinstance(warm_value, dict):
        out = []
        for k in sorted(set(cold_value) | set(warm_value)):
            if k not in warm_value:
                out.append(f"{path}/{k}: cold {short(cold_value[k])}, warm has none")
            elif k not in cold_value:
                out.append(f"{path}/{k}: warm {short(warm_value[k])}, cold has none")
            else:
                out += differences(cold_value[k], warm_value[k], f"{path}/{k}")
        return out
    if cold_value == warm_value:
        return []
    if isinstance(cold_value, list) and isinstance(warm_value, list):
        n = min(len(cold_value), len(warm_value))
        if cold_value[:n] == warm_value[:n]:
            name, tail = ("warm", warm_value[n:]) if len(warm_value) > n else ("cold", cold_value[n:])
            what = (f"{len(tail)} x {short(tail[0])}" if all(t == tail[0] for t in tail)
                    else short(tail))
            return [f"{path}: the same {n} entries, then {name} has {len(tail)} more: {what}"]
        if len(cold_value) == len(warm_value):
            out = [f"{path}[{i}]: cold {short(a)} != warm {short(b)}"
                   for i, (a, b) in enumerate(zip(cold_value, warm_value)) if a != b]
            return out[:10] + ([f"{path}: ... {len(out) - 10} more"] if len(out) > 10 else [])
        only_cold = [v for v in cold_value if v not in warm_value]
        only_warm = [v for v in warm_value if v not in cold_value]
        if only_cold or only_warm:
            return [f"{path}: only cold {short(only_cold, 1500)}; only warm {short(only_warm, 1500)}"]
        return [f"{path}: the same entries in another order or number:"
                f" cold {short(cold_value)}, warm {short(warm_value)}"]
    return [f"{path}: cold {short(cold_value)} != warm {short(warm_value)}"]


def assert_alike(cold_value, warm_value, what):
    diff = differences(cold_value, warm_value)
    assert not diff, f"{what} differ between a cold and a warm start:\n" + "\n".join(diff)


def schedule_both(pair, spider, jobid, settings=(), project=P, **args):
    """Schedules the same job on both daemons; an argument value holding
    "{dir}" names a path in each daemon's own directory."""
    for d in pair:
        mine = {k: v.replace("{dir}", d.workdir) if isinstance(v, str) else v
                for k, v in args.items()}
        assert d.schedule(project, spider, settings=settings, jobid=jobid, **mine) == jobid


def finish_both(pair, jobid, seconds=60):
    entries = [d.wait_finished(jobid, seconds) for d in pair]
    check_starts(pair, jobid)
    return entries


def check_starts(pair, jobid):
    cold, warm = pair
    assert start_kind(cold, jobid) == "cold", f"{jobid} on the warm_templates = 0 daemon"
    assert start_kind(warm, jobid) == "warm", \
        f"{jobid} did not start warm on the daemon whose template was ready"


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[([^\]]+)\] ([A-Z]+): (.*)$")


def log_shape(d, spider, jobid, project=P):
    """The job's log, line by line, with times, numbers and the daemon's
    own names masked: what a cold and a warm run of one crawl share."""
    out = []
    for line in d.read_log(project, spider, jobid).splitlines():
        m = LOG_LINE.match(line)
        if m:
            line = f"[{m.group(1)}] {m.group(2)}: {m.group(3)}"
        out.append(re.sub(r"\d+", "N", norm(line, d)))
    return out


def assert_same_log_shape(pair, spider, jobid, project=P):
    cold, warm = (log_shape(d, spider, jobid, project) for d in pair)
    assert cold == warm, "the logs of a cold and a warm run differ:\n" + "\n".join(
        difflib.unified_diff(cold, warm, "cold", "warm", lineterm=""))


# ---- the two daemons ------------------------------------------------------

CONF = {"scrapyd": {"items_dir": "items", "jobs_dir": "jobdirs", "max_proc": 4}}


@pytest.fixture(scope="module")
def pair(module_spiderd, egg):
    """(cold, warm): alike but for warm_templates; project "w" (warmproj)
    1.0 on both, the warm daemon's template ready."""
    cold = module_spiderd(name="cold", spiderd={"warm_templates": 0}, **CONF)
    warm = module_spiderd(name="warm", **CONF)
    for d in (cold, warm):
        d.upload(P, "1.0", egg("warmproj"))
    warm.first_starts = warm_up(warm, P)
    return cold, warm


@pytest.fixture
def ready(pair):
    """The pair, the warm daemon's template checked ready (another test may
    have ended it)."""
    warm_up(pair[1], P)
    return pair


def test_the_first_job_of_a_version_starts_cold_and_later_ones_warm(pair):
    kinds = pair[1].first_starts
    assert kinds[0] == "cold" and kinds[-1] == "warm", kinds
    assert templates(pair[1]), "no template process among the warm daemon's children"


# ---- 1. what the crawl sees -------------------------------------------------

@pytest.fixture(scope="module")
def probes(pair):
    """The probe spider's report of its process, cold and warm (masked), and
    the raw reports."""
    # A job that names its version has a template of its own (its
    # environment says SCRAPYD_EGG_VERSION): that one must be ready.
    warm_up(pair[1], P, version="1.0")
    schedule_both(pair, "probe", "probe1", settings=["DOWNLOAD_DELAY=0.25", "USER_AGENT=ua-warm"],
                  out="{dir}/probe1.json", arg1="val1", _version="1.0")
    entries = finish_both(pair, "probe1")
    for e in entries:
        assert e["state"] == "finished", e
    raw = []
    for d in pair:
        with open(d.path("probe1.json"), encoding="utf-8") as f:
            raw.append(json.load(f))
    return [norm(r, d) for r, d in zip(raw, pair)], raw


def test_argv_environment_arguments_settings_and_cwd_are_alike(probes):
    (cold, warm), _ = probes
    for key in ("argv", "env", "kwargs", "settings", "cwd", "executable"):
        assert_alike(cold[key], warm[key], key)
    assert cold["kwargs"] == {"_job": "probe1", "_version": "1.0", "arg1": "val1",
                              "out": "<DIR>/probe1.json"}
    assert cold["env"]["SPIDERD_JOB"] == "probe1" and cold["cwd"] == "<DIR>"


def test_a_warm_crawl_is_the_daemons_child_and_leads_its_own_session(pair, probes):
    _, raw = probes
    for d, dump in zip(pair, raw):
        kind = "cold" if d is pair[0] else "warm"
        assert dump["ppid"] == d.proc.pid, f"{kind}: parent {dump['ppid']}, daemon {d.proc.pid}"
        assert dump["pgid"] == dump["sid"] == dump["pid"], f"{kind}: {dump}"
        assert api_job(d, "probe1")["pid"] == dump["pid"]
        started = [data for t, data in job_events(d, "probe1") if t == "job.started"][0]
        assert started["pid"] == dump["pid"]


PROCESS_KEYS = ("umask", "fds", "stdio_tty", "signals", "sigmask", "proc_status", "rlimits",
                "nice", "sys_path", "flags", "reactor", "reactor_refs", "root_log_handlers",
                "root_log_level", "warning_filters", "spider_module")


def test_the_process_state_a_spider_can_see_is_alike(probes):
    """File descriptors (none of the template's left open), signal handlers
    and masks, rlimits, umask, sys.path, the reactor, logging and warnings."""
    (cold, warm), _ = probes
    cold_fds, warm_fds = (dict(x["fds"]) for x in (cold, warm))
    # fd numbers past stdio may differ; what is open must not.
    for fds in (cold_fds, warm_fds):
        fds["3+"] = sorted(v for k, v in list(fds.items()) if int(k) > 2 and not v.startswith("<"))
        for k in [k for k in fds if k != "3+" and int(k) > 2]:
            del fds[k]
    assert cold_fds["0"] == "/dev/null"
    assert cold_fds["1"] == cold_fds["2"] == "<DIR>/logs/w/probe/probe1.log"
    diff = differences(cold_fds, warm_fds, "fds")
    for key in PROCESS_KEYS:
        if key != "fds":
            diff += differences(cold[key], warm[key], key)
    assert not diff, "the process a spider runs in differs between a cold and a warm start:\n" + \
        "\n".join(diff)
    # The telnet console and the FTP handler import them in every crawl;
    # the template preloads them with a stand-in for the reactor.
    assert len(warm["reactor_refs"]) == 5 and all(warm["reactor_refs"].values()), warm


def test_the_main_module_is_spiderd_runners(probes):
    """sys.modules["__main__"] (multiprocessing's spawn re-imports it by
    path) is spiderd_runner.__main__, as `python3 -m spiderd_runner` makes it."""
    (cold, warm), _ = probes
    assert cold["main"][1] == "spiderd_runner.__main__", cold["main"]
    assert_alike(cold["main"], warm["main"], "__main__")


@pytest.mark.xfail(strict=True, reason="/proc/PID/cmdline: the cold argv, then the template's unused argv room as empty strings (docs/warm-starts.md, What differs from a cold start)")
def test_proc_cmdline_is_the_cold_argv(probes):
    """/proc/PID/cmdline, NUL-separated arguments as psutil's cmdline(),
    pgrep -a or monitoring tools split them, and /proc/PID/comm. (ps -o
    args drops trailing NULs, so a padded argument area still looks right
    there.)"""
    (cold, warm), _ = probes
    assert cold["cmdline"][:4] == ["/usr/bin/python3", "-m", "spiderd_runner", "crawl"]
    diff = differences(cold["cmdline"], warm["cmdline"], "cmdline")
    diff += differences(cold["comm"], warm["comm"], "comm")
    assert not diff, "/proc tells a warm crawl from a cold one:\n" + "\n".join(diff)


@pytest.mark.xfail(strict=True, reason="/proc/PID/environ shows the template's environment; os.environ is the crawl's (docs/warm-starts.md, What differs from a cold start)")
def test_proc_environ_is_the_crawls_environment(probes):
    """/proc/PID/environ (ps e, psutil's environ()): a cold crawl's is the
    environment it was started with, its job's variables included."""
    (cold, warm), _ = probes
    assert "SPIDERD_JOB=probe1" in cold["proc_environ"]
    assert_alike(cold["proc_environ"], warm["proc_environ"], "/proc/PID/environ")


def test_sys_orig_argv_is_the_cold_ones(probes):
    (cold, warm), _ = probes
    assert cold["orig_argv"][:3] == ["/usr/bin/python3", "-m", "spiderd_runner"]
    assert_alike(cold["orig_argv"], warm["orig_argv"], "sys.orig_argv")


@pytest.mark.xfail(strict=True, reason="the crawls of one template share its hash seed (docs/warm-starts.md, What differs from a cold start)")
def test_each_warm_crawl_gets_a_hash_seed_of_its_own(ready):
    """A cold crawl is a new interpreter with a random hash seed (str hashes,
    set order); warm crawls must not all share their template's."""
    warm_up(ready[1], P)
    seeds = {}
    for n in (1, 2):
        job = f"seed{n}"
        schedule_both(ready, "probe", job, out="{dir}/%s.json" % job)
        finish_both(ready, job)
        for d in ready:
            with open(d.path(f"{job}.json"), encoding="utf-8") as f:
                seeds.setdefault("cold" if d is ready[0] else "warm", []).append(json.load(f)["hash"])
    assert seeds["cold"][0] != seeds["cold"][1], seeds
    assert seeds["warm"][0] != seeds["warm"][1], \
        f"two warm crawls hash alike, as their template does: {seeds}"


@pytest.mark.parametrize("spider,state,exit_code", [("crash", "failed", 1), ("fail", "finished", 0)])
def test_a_failing_spider_ends_alike(ready, spider, state, exit_code):
    job = f"{spider}1"
    schedule_both(ready, spider, job)
    entries = finish_both(ready, job)
    assert_alike(*[outcome(e) for e in entries], f"how {spider} ended")
    assert (entries[0]["state"], entries[0]["exit_code"]) == (state, exit_code), entries[0]
    assert_alike(*[{k: v for k, v in e["stats"].items() if k not in VOLATILE_STATS}
                   for e in entries], "stats")
    why = {"crash": "RuntimeError: crash spider fails in __init__ on purpose",
           "fail": "ValueError: fail spider raises in a callback on purpose"}[spider]
    missing = [kind for kind, d in zip(("cold", "warm"), ready)
               if why not in d.read_log(P, spider, job)]
    assert not missing, f"{why!r} (the spider's traceback) is not in the log of the {missing} run"
    assert_same_log_shape(ready, spider, job)


def test_a_failed_warm_crawl_is_retried_as_a_cold_one(ready):
    schedule_both(ready, "crash", "rt", _retries=1, _retry_backoff=0.2)
    entries = [[d.wait_finished(j, 60) for j in ("rt", "rt.r2")] for d in ready]
    for job in ("rt", "rt.r2"):
        check_starts(ready, job)
    assert_alike(*[[outcome(e) for e in es] for es in entries], "how both attempts ended")
    assert_alike(*[[(e["attempt"], e["max_retries"]) for e in es] for es in entries], "attempts")
    assert [e["state"] for e in entries[0]] == ["failed", "failed"], entries[0]
    for job in ("rt", "rt.r2"):
        assert_alike(*[[t for t, _ in job_events(d, job)] for d in ready], f"{job}'s event types")


def warm_metrics(d):
    """(spiderd_jobs_started_warm_total, spiderd_warm_templates) from /metrics."""
    r = d.get("/metrics")
    assert r.status_code == 200, r.text[:300]
    found = dict(re.findall(r"^(spiderd_jobs_started_warm_total|spiderd_warm_templates) (\S+)$",
                            r.text, re.M))
    return float(found["spiderd_jobs_started_warm_total"]), float(found["spiderd_warm_templates"])


def test_crawls_fork_warm_side_by_side(ready):
    cold, warm = ready
    started_before, _ = warm_metrics(warm)
    jobs = [warm.schedule(P, "quick", count=2) for _ in range(4)]
    for job in jobs:
        e = warm.wait_finished(job, 60)
        assert (e["state"], e["stats"]["items"]) == ("finished", 2), e
    kinds = [start_kind(warm, job) for job in jobs]
    assert kinds == ["warm"] * 4, kinds
    assert not zombies(warm.proc.pid)
    started, live = warm_metrics(warm)
    assert (started - started_before, live) == (4, len(templates(warm)))
    assert warm_metrics(cold) == (0, 0)


@pytest.fixture(scope="module")
def imported(pair, egg):
    """A probe crawl of project "imp" (warmimport: its settings note when
    and by whom they were imported, a spider module prints at import), run
    cold and warm a while after the template imported the project; the
    time it was scheduled and both reports."""
    for d in pair:
        d.upload("imp", "1.0", egg("warmimport"))
    warm_up(pair[1], "imp")
    time.sleep(2 * SLOW)
    t0 = time.time()
    schedule_both(pair, "probe", "imp1", project="imp", out="{dir}/imp1.json")
    finish_both(pair, "imp1")
    dumps = []
    for d in pair:
        with open(d.path("imp1.json"), encoding="utf-8") as f:
            dumps.append(json.load(f))
    return t0, dumps


@pytest.mark.xfail(strict=True, reason="module-level code runs once, in the template (docs/warm-starts.md, What differs from a cold start)")
def test_the_project_settings_are_the_crawls_own_import(imported):
    """What settings.py computes when imported (a timestamp for a feed's
    name, the pid) is computed for each crawl, not once in the template."""
    t0, dumps = imported
    seen = []
    for kind, dump in zip(("cold", "warm"), dumps):
        s = dump["settings"]
        if s["SETTINGS_IMPORTED_BY"] != dump["pid"]:
            seen.append(f"{kind}: settings.py was imported by pid {s['SETTINGS_IMPORTED_BY']},"
                        f" not by the crawl (pid {dump['pid']})")
        if s["SETTINGS_IMPORTED_AT"] < t0:
            seen.append(f"{kind}: settings.py was imported {t0 - s['SETTINGS_IMPORTED_AT']:.1f} s"
                        " before the job was scheduled")
    assert not seen, "\n".join(seen)


def test_import_time_output_lands_in_the_jobs_log(pair, imported):
    """A cold crawl's stdout and stderr are its log from the first byte:
    what the project prints or warns while it is imported is there."""
    cold_log = pair[0].read_log("imp", "probe", "imp1")
    for line in ("warmimport: settings imported by", "noisy: imported, a line on stdout",
                 "noisy: imported, a line on stderr", "UserWarning: noisy: a warning at import"):
        assert line in cold_log, f"{line!r} not in the cold crawl's log:\n{cold_log}"
    assert_same_log_shape(pair, "probe", "imp1", project="imp")


def test_envdump_sees_the_same_launch(ready):
    warm_up(ready[1], P, version="1.0")
    schedule_both(ready, "envdump", "env1", settings=["DOWNLOAD_DELAY=0.5"],
                  out="{dir}/env1.json", zz="last", _version="1.0")
    entries = finish_both(ready, "env1")
    dumps, items = [], []
    for d, e in zip(ready, entries):
        assert e["state"] == "finished", e
        with open(d.path("env1.json"), encoding="utf-8") as f:
            dump = json.load(f)
        assert dump["pid"] == api_job(d, "env1")["pid"]
        dumps.append(norm({k: v for k, v in dump.items() if k != "pid"}, d))
        items.append(norm([{k: v for k, v in i.items() if k != "pid"}
                           for i in read_json_lines(d.items_path(P, "envdump", "env1"))], d))
    assert_alike(dumps[0], dumps[1], "envdump's report")
    assert dumps[0]["cwd"] == "<DIR>" and dumps[0]["project_version"] == "1.0"
    assert_alike(items[0], items[1], "envdump's items")
    assert_same_log_shape(ready, "envdump", "env1")


# ---- 2. items, stats, listings, logs ----------------------------------------

VOLATILE_STATS = ("elapsed", "start_time", "finish_time", "peak_memory_bytes", "cpu_time_seconds")
VOLATILE_SCRAPY = re.compile(r"^(elapsed_time_seconds|start_time|finish_time|memusage/.*)$")
VOLATILE_JOB = ("id", "pid", "created_at", "started_at", "ended_at", "created_ms", "started_ms",
                "ended_ms", "heartbeat_at", "stats")


def test_quick_crawl_items_stats_listings_and_log_are_alike(ready):
    schedule_both(ready, "quick", "q1", count=4)
    entries = finish_both(ready, "q1")
    cold, warm = entries
    assert cold["state"] == "finished" and cold["stats"]["items"] == 4, cold
    # Items: byte for byte.
    files = []
    for d in ready:
        with open(d.items_path(P, "quick", "q1"), encoding="utf-8") as f:
            files.append(f.read())
    assert files[0] == files[1]
    # listjobs.json: the same entry but for its times.
    listed = [{k: v for k, v in e.items() if k not in ("start_time", "end_time")} for e in entries]
    for e in listed:
        e["stats"] = {k: v for k, v in e["stats"].items() if k not in VOLATILE_STATS}
    assert_alike(listed[0], listed[1], "listjobs.json entries")
    statuses = [{k: v for k, v in d.api("status.json", job="q1").items()
                 if k not in ("start_time", "end_time")} for d in ready]
    for st in statuses:
        st["stats"] = {k: v for k, v in (st.get("stats") or {}).items() if k not in VOLATILE_STATS}
    assert_alike(*statuses, "status.json")
    # GET /api/v1/jobs/{id}: the same record, the same stats keys and counts.
    jobs = [api_job(d, "q1") for d in ready]
    assert_alike(*[{k: v for k, v in j.items() if k not in VOLATILE_JOB} for j in jobs],
                 "job records")
    stats = [j["stats"] for j in jobs]
    assert_alike(*[sorted(s) for s in stats], "stats keys")
    assert_alike(*[sorted(s.get("scrapy") or {}) for s in stats], "Scrapy stats keys")
    assert_alike(*[{k: v for k, v in s.items() if k not in VOLATILE_STATS and k != "scrapy"}
                   for s in stats], "stats")
    assert_alike(*[{k: v for k, v in (s.get("scrapy") or {}).items() if not VOLATILE_SCRAPY.match(k)}
                   for s in stats], "Scrapy stats")
    for s in stats:
        assert s["peak_memory_bytes"] > 0 and s["cpu_time_seconds"] > 0, s
    # The log: Scrapy's usual lines, in the same order.
    for d in ready:
        text = d.read_log(P, "quick", "q1")
        for line in ("Scrapy 2.", "started (bot: testproj)", "Overridden settings:",
                     "Enabled extensions:", "spiderd_runner.stats.StatsExtension",
                     "spiderd_runner.heartbeat.HeartbeatExtension", "Spider opened",
                     "Closing spider (finished)", "Dumping Scrapy stats:",
                     "Spider closed (finished)"):
            assert line in text, f"{line!r} not in the log of {d.workdir}:\n{text}"
    assert_same_log_shape(ready, "quick", "q1")
    assert_alike(*[[t for t, _ in job_events(d, "q1")] for d in ready], "event types")


# ---- 3. cancel --------------------------------------------------------------

@pytest.mark.parametrize("how", ["graceful", "forced", "kill"])
def test_cancel_is_alike(ready, how):
    job = f"cancel-{how}"
    schedule_both(ready, "slow", job, settings=["LOG_LEVEL=DEBUG"],
                  drain=60 if how == "forced" else 0)
    for d in ready:
        d.wait_crawling(P, "slow", job)
    check_starts(ready, job)
    if how == "kill":
        for d in ready:
            assert d.cancel(P, job, "KILL") == "running"
    else:
        for d in ready:
            assert d.cancel(P, job) == "running"
    if how == "forced":
        for d in ready:
            d.wait_log(P, "slow", job, "Draining for", 20)
        for d in ready:
            assert d.find(job)[0] == "running", "a graceful stop that drains is still running"
            assert d.cancel(P, job) == "running"
    entries = [d.wait_finished(job, 30) for d in ready]
    assert_alike(*[outcome(e) for e in entries], "how the cancelled crawl ended")
    assert_alike(*[[t for t, _ in job_events(d, job)] for d in ready], "event types")
    cold = entries[0]
    assert cold["state"] == "cancelled", cold
    logs = [d.read_log(P, "slow", job) for d in ready]
    if how == "graceful":
        assert cold["stats"]["finish_reason"] == "shutdown", cold
        for text in logs:
            assert "Received SIGINT, shutting down gracefully. Send again to force" in text
            assert "Closing spider (shutdown)" in text and "Spider closed (shutdown)" in text
    elif how == "forced":
        for text in logs:
            assert "Received SIGINT, shutting down gracefully. Send again to force" in text
            assert "Received SIGINT twice, forcing unclean shutdown" in text
    else:
        assert cold["signal"] == 9, cold
    for d in ready:
        assert not pid_alive(api_job(d, job)["pid"])
        assert not zombies(d.proc.pid), f"zombie children of {d.workdir}'s daemon"


# ---- the process tree, from outside ----------------------------------------

def test_a_running_crawl_sits_in_the_process_tree_alike(ready):
    """ppid == the daemon, pgid == sid == pid, seen from /proc while a slow
    crawl runs; after a group kill nothing of it remains."""
    schedule_both(ready, "slow", "tree1", seconds=60)
    pids = [d.wait_running("tree1")["pid"] for d in ready]
    check_starts(ready, "tree1")
    for d, pid in zip(ready, pids):
        st = proc_stat(pid)
        kind = "cold" if d is ready[0] else "warm"
        assert st["ppid"] == d.proc.pid, f"{kind}: {st}, daemon {d.proc.pid}"
        assert st["pgid"] == st["sid"] == pid, f"{kind}: {st}, pid {pid}"
    # listjobs.json's running entry, status.json and daemonstatus.json alike,
    # once both crawls have made their log and items files (a warm crawl
    # makes them sooner: the URLs appear with the files).
    for d in ready:
        wait_for(lambda: (lambda e: e["log_url"] and e["items_url"])(d.find("tree1")[1]),
                 20 * SLOW, "the running crawl's log and items files")
    running = []
    for d in ready:
        section, e = d.find("tree1")
        assert section == "running", (section, e)
        running.append({k: v for k, v in e.items() if k not in ("pid", "start_time")})
    assert_alike(*running, "listjobs.json running entries")
    assert_alike(*[{k: v for k, v in d.api("status.json", job="tree1").items()
                    if k not in ("pid", "start_time")} for d in ready], "status.json")
    assert_alike(*[{k: d.api("daemonstatus.json")[k] for k in ("running", "pending")}
                   for d in ready], "daemonstatus.json")
    for d in ready:
        d.cancel(P, "tree1", "KILL")
    for d, pid in zip(ready, pids):
        assert d.wait_finished("tree1", 30)["state"] == "cancelled"
        wait_for(lambda: proc_stat(pid) is None, 10, f"crawl {pid} to be reaped")


# ---- 5. timeout and memory limit --------------------------------------------

def test_a_timeout_ends_a_warm_crawl_as_a_cold_one(ready):
    schedule_both(ready, "slow", "to1", seconds=60, _timeout=2)
    entries = finish_both(ready, "to1", 40)
    assert_alike(*[outcome(e) for e in entries], "how the timed-out crawl ended")
    cold = entries[0]
    assert (cold["state"], cold["end_reason"]) == ("failed", "timeout"), cold
    assert cold["stats"]["finish_reason"] == "shutdown", cold
    assert_alike(*[[t for t, _ in job_events(d, "to1")] for d in ready], "event types")
    for d in ready:
        assert "Received SIGTERM" in d.read_log(P, "slow", "to1")
        assert api_job(d, "to1")["timeout"] == 2


def test_a_memory_limit_stops_a_warm_crawl_as_a_cold_one(ready):
    schedule_both(ready, "hog", "mem1", mb=3072, _memory_limit="1G")
    entries = [d.wait_finished("mem1", 90) for d in ready]
    assert_alike(*[outcome(e) for e in entries], "how the memory hog ended")
    cold = entries[0]
    assert (cold["state"], cold["end_reason"]) == ("failed", "memory_limit"), cold
    for d in ready:
        assert "MemoryError" in d.read_log(P, "hog", "mem1")
        ends = [data for t, data in job_events(d, "mem1") if t == "job.failed"]
        assert len(ends) == 1 and ends[0].get("reason") == "memory_limit", ends
    check_starts(ready, "mem1")


def test_a_cpu_limit_stops_a_warm_crawl_as_a_cold_one(ready):
    schedule_both(ready, "burn", "cpu1", _cpu_limit="3")
    entries = [d.wait_finished("cpu1", 90) for d in ready]
    assert_alike(*[outcome(e) for e in entries], "how the CPU burner ended")
    cold = entries[0]
    assert (cold["state"], cold["end_reason"]) == ("failed", "cpu_limit"), cold
    check_starts(ready, "cpu1")


def test_rlimits_reach_a_warm_crawl_as_a_cold_one(ready):
    schedule_both(ready, "probe", "lim1", out="{dir}/lim1.json", _memory_limit="2G",
                  _cpu_limit="300", _max_procs="50000")
    entries = [d.wait_finished("lim1", 60) for d in ready]
    for e in entries:
        assert e["state"] == "finished", e
    dumps = []
    for d in ready:
        with open(d.path("lim1.json"), encoding="utf-8") as f:
            dumps.append(json.load(f)["rlimits"])
    assert_alike(dumps[0], dumps[1], "rlimits")
    if "job limits: enforced by rlimits" in ready[0].stderr_text():
        assert dumps[0]["RLIMIT_AS"][0] == 2 << 30 and dumps[0]["RLIMIT_CPU"][0] == 300, dumps[0]
        assert dumps[0]["RLIMIT_NPROC"][0] == 50000, dumps[0]
    check_starts(ready, "lim1")


# ---- 6. bypass ----------------------------------------------------------------

def test_a_job_setting_makes_a_crawl_start_cold(ready):
    cold, warm = ready
    job = warm.schedule(P, "quick", settings=["SPIDERD_WARM_START=0"], count=2)
    e = warm.wait_finished(job, 60)
    assert (e["state"], e["stats"]["items"]) == ("finished", 2), e
    assert start_kind(warm, job) == "cold"
    # The template still serves the jobs that do not opt out.
    job = warm.schedule(P, "quick", count=2)
    assert warm.wait_finished(job, 60)["state"] == "finished"
    assert start_kind(warm, job) == "warm"


def test_a_spiders_custom_settings_make_its_crawls_start_cold(ready):
    warm = ready[1]
    job = warm.schedule(P, "coldonly")
    e = warm.wait_finished(job, 60)
    assert (e["state"], e["stats"]["items"]) == ("finished", 1), e
    assert start_kind(warm, job) == "cold"
    job = warm.schedule(P, "quick", count=1)
    assert warm.wait_finished(job, 60)["state"] == "finished"
    assert start_kind(warm, job) == "warm"


def test_a_project_setting_makes_every_crawl_start_cold(pair, egg):
    warm = pair[1]
    warm.upload("off", "1.0", egg("warmoff"))
    kinds = []
    for n in range(4):
        job = warm.schedule("off", "quick", count=1)
        e = warm.wait_finished(job, 60)
        assert e["state"] == "finished", e
        kinds.append(start_kind(warm, job))
        time.sleep(1.0 * SLOW)  # ample time for a template to be ready
    assert kinds == ["cold"] * 4


# ---- 4. a daemon killed while a warm crawl runs --------------------------------

@pytest.mark.parametrize("mode", ["adopted", "ended_while_down"])
def test_kill9_adopts_a_warm_crawl_as_a_cold_one(spiderd, egg, mode):
    """The daemon is killed while a slow crawl runs; it is restarted while
    the crawl still runs (adopted: seen running with its pid, recorded when
    it ends) or once it has ended (recorded from what it left)."""
    cold = spiderd(name="k9cold", spiderd={"warm_templates": 0}, **CONF)
    warm = spiderd(name="k9warm", **CONF)
    pair = (cold, warm)
    for d in pair:
        d.upload(P, "1.0", egg("warmproj"))
    warm_up(warm, P)
    old_templates = templates(warm)
    assert old_templates, "no template to watch"
    seconds = 10 * SLOW if mode == "adopted" else 3
    schedule_both(pair, "slow", "k9", settings=["LOG_LEVEL=DEBUG"], seconds=seconds)
    pids = [d.wait_running("k9")["pid"] for d in pair]
    for d in pair:
        d.wait_crawling(P, "slow", "k9")
    check_starts(pair, "k9")
    t0 = time.monotonic()
    for d in pair:
        d.kill9()
    if SHARED_STORE:
        for pid in pids:
            wait_for(lambda: not pid_alive(pid), 10, "the crawl to die with its node")
    else:
        for d, pid in zip(pair, pids):
            assert pid_alive(pid), f"the crawl of {d.workdir} died with its daemon"
    if mode == "ended_while_down":
        for pid in pids:
            wait_for(lambda: not pid_alive(pid), 30, f"crawl {pid} to end")
    for d in pair:
        d.start()
    if mode == "adopted":
        assert time.monotonic() - t0 < seconds, "restarting took longer than the crawl"
    seen_running = {}
    ended = {}

    def settled():
        # Both daemons in each round: the two crawls end at the same time.
        for d, pid in zip(pair, pids):
            if d.workdir in ended:
                continue
            section, e = d.find("k9")
            assert section in ("running", "finished"), f"k9 was forgotten ({section})"
            if section == "running":
                assert e["pid"] == pid, e
                seen_running[d.workdir] = True
            else:
                ended[d.workdir] = e
        return len(ended) == 2
    wait_for(settled, 60, "k9 to be recorded", interval=0.1)
    entries = [ended[d.workdir] for d in pair]
    if mode == "adopted":
        assert seen_running == {d.workdir: True for d in pair}, \
            f"not seen running, adopted, after the restart: {seen_running}"
    assert_alike(*[outcome(e) for e in entries], "how the adopted crawl was recorded")
    listed = [{k: v for k, v in e.items() if k not in ("start_time", "end_time", "stats")}
              for e in entries]
    assert_alike(*listed, "listjobs.json entries")
    assert_alike(*[[t for t, _ in job_events(d, "k9")] for d in pair], "event types")
    assert entries[0]["state"] in ("finished", "lost"), entries[0]
    if not SHARED_STORE:
        assert entries[0]["state"] == "finished", entries[0]
        assert_alike(*[{k: v for k, v in e["stats"].items() if k not in VOLATILE_STATS}
                       for e in entries], "stats")
    for d, pid in zip(pair, pids):
        assert not pid_alive(pid), f"crawl {pid} still runs after it was recorded"
        assert not zombies(d.proc.pid)
    # The killed daemon's template does not outlive it.
    for pid in old_templates:
        wait_for(lambda: not pid_alive(pid), 20, f"the old daemon's template {pid} to exit")
    # And the restarted daemon starts warm again.
    assert warm_up(warm, P)[-1] == "warm"


def fresh_pair(factory, egg, name, conf=None):
    """A cold and a warm daemon of their own (conf: their [spiderd] keys),
    project "w" on both, the warm one's template ready."""
    conf = conf or {}
    cold = factory(name=name + "cold", spiderd={**conf, "warm_templates": 0}, **CONF)
    warm = factory(name=name + "warm", spiderd=dict(conf), **CONF)
    for d in (cold, warm):
        d.upload(P, "1.0", egg("warmproj"))
    warm_up(warm, P)
    return cold, warm


def test_a_wedged_warm_crawl_loses_its_heartbeat_as_a_cold_one(spiderd, egg):
    pair = fresh_pair(spiderd, egg, "hb", {"heartbeat_interval": 0.2,
                                           "heartbeat_timeout": 2 * SLOW, "cancel_grace": 3})
    schedule_both(pair, "hang", "hang1", seconds=120)
    pids = [d.wait_running("hang1")["pid"] for d in pair]
    entries = finish_both(pair, "hang1", 40)
    assert_alike(*[outcome(e) for e in entries], "how the wedged crawl ended")
    assert (entries[0]["state"], entries[0]["end_reason"], entries[0]["signal"]) == \
        ("lost", "heartbeat", 9), entries[0]
    assert_alike(*[[t for t, _ in job_events(d, "hang1")] for d in pair], "event types")
    for d, pid in zip(pair, pids):
        wait_for(lambda: proc_stat(pid) is None, 10, f"crawl {pid} to be reaped")


def test_a_daemon_stop_ends_a_warm_crawl_as_a_cold_one(spiderd, egg):
    """SIGTERM to the daemon: the crawl gets TERM, is recorded cancelled,
    and nothing of the daemon (crawl or template) outlives it."""
    pair = fresh_pair(spiderd, egg, "st", {"shutdown_grace": 3})
    old = templates(pair[1])
    assert old
    schedule_both(pair, "slow", "st1", settings=["LOG_LEVEL=DEBUG"], seconds=60)
    pids = [d.wait_running("st1")["pid"] for d in pair]
    for d in pair:
        d.wait_crawling(P, "slow", "st1")
    check_starts(pair, "st1")
    for d in pair:
        assert d.stop() == 0
    for pid in pids + old:
        wait_for(lambda: not pid_alive(pid), 10, f"process {pid} to end with its daemon")
    for d in pair:
        assert "Received SIGTERM" in d.read_log(P, "slow", "st1")
        d.start()
    entries = [d.wait_finished("st1", 10) for d in pair]
    assert_alike(*[outcome(e) for e in entries], "how the stopped crawl was recorded")
    assert entries[0]["state"] == "cancelled", entries[0]


def test_an_idle_template_exits_after_warm_idle(spiderd, egg):
    d = spiderd(name="idle", spiderd={"warm_idle": 2 * SLOW}, **CONF)
    d.upload(P, "1.0", egg("warmproj"))
    warm_up(d, P)
    old = templates(d)
    assert old
    wait_for(lambda: not any(pid_alive(p) for p in old), 2 * SLOW + 10,
             "the idle template to exit")
    assert templates(d) == []
    assert not zombies(d.proc.pid)
    kinds = warm_up(d, P)
    assert kinds[0] == "cold", kinds
    new = templates(d)
    assert new and not set(new) & set(old)


def test_warm_templates_caps_how_many_templates_live(spiderd, egg):
    d = spiderd(name="cap", spiderd={"warm_templates": 1}, **CONF)
    d.upload("a", "1.0", egg("warmproj"))
    d.upload("b", "1.0", egg("warmproj"))
    warm_up(d, "a")
    assert len(templates(d)) == 1
    warm_up(d, "b")  # a's idle template makes room
    assert len(templates(d)) == 1
    kinds = warm_up(d, "a")
    assert kinds[0] == "cold", f"a's template should have made room for b's: {kinds}"
    assert len(templates(d)) == 1
    assert warm_metrics(d)[1] == 1


# ---- 6. lifecycle of templates ---------------------------------------------------

def test_delversion_then_a_new_version_warms_up_without_the_old_template(spiderd, egg, tmp_path):
    d = spiderd(name="dv", **CONF)
    d.upload("lc", "1", egg("testproj"))
    kinds = warm_up(d, "lc")
    assert kinds[0] == "cold", kinds
    old = templates(d)
    assert len(old) == 1, old
    d.api("delversion.json", project="lc", version="1")
    wait_for(lambda: not any(pid_alive(p) for p in old), 15, "the deleted version's template to exit")
    d.upload("lc", "2", egg("testproj_v2"))
    kinds = warm_up(d, "lc")
    assert kinds[0] == "cold", f"the first job of a new version started {kinds[0]}"
    out = str(tmp_path / "v2.json")
    job = d.schedule("lc", "envdump", out=out)
    assert d.wait_finished(job, 60)["state"] == "finished"
    assert start_kind(d, job) == "warm"
    with open(out, encoding="utf-8") as f:
        assert json.load(f)["project_version"] == "2.0"
    new = templates(d)
    assert len(new) == 1 and not set(new) & set(old), (old, new)
    assert not zombies(d.proc.pid)


def test_replacing_a_version_drops_its_template_and_serves_the_new_code(spiderd, egg, tmp_path):
    d = spiderd(name="rv", **CONF)
    d.upload("r", "1", egg("testproj"))
    warm_up(d, "r")
    out = str(tmp_path / "v1.json")
    job = d.schedule("r", "envdump", out=out)
    assert d.wait_finished(job, 60)["state"] == "finished" and start_kind(d, job) == "warm"
    with open(out, encoding="utf-8") as f:
        assert json.load(f)["project_version"] == "1.0"
    old = templates(d)
    assert old
    d.upload("r", "1", egg("testproj_v2"))  # the same version name, new code
    wait_for(lambda: not any(pid_alive(p) for p in old), 15, "the replaced egg's template to exit")
    kinds = warm_up(d, "r")
    assert kinds[0] == "cold", kinds
    out = str(tmp_path / "v2.json")
    job = d.schedule("r", "envdump", out=out)
    assert d.wait_finished(job, 60)["state"] == "finished" and start_kind(d, job) == "warm"
    with open(out, encoding="utf-8") as f:
        assert json.load(f)["project_version"] == "2.0", "a warm crawl ran the replaced egg's code"
    job = d.schedule("r", "extra")  # a spider only the new egg has
    e = d.wait_finished(job, 60)
    assert (e["state"], e["stats"]["items"]) == ("finished", 1), e
    assert start_kind(d, job) == "warm"
    assert read_json_lines(d.items_path("r", "extra", job)) == [{"extra": True, "version": "2.0"}]


def test_a_newer_version_is_what_an_unversioned_warm_crawl_runs(spiderd, egg, tmp_path):
    """A job without _version runs the latest version: uploading a newer one
    (or deleting the newest) changes that, and a template of the old latest
    must not keep serving it."""
    d = spiderd(name="lv", **CONF)
    d.upload("lv", "1", egg("testproj"))
    warm_up(d, "lv")

    def envdump_version():
        out = str(tmp_path / f"{time.monotonic_ns()}.json")
        job = d.schedule("lv", "envdump", out=out)
        assert d.wait_finished(job, 60)["state"] == "finished"
        with open(out, encoding="utf-8") as f:
            return start_kind(d, job), json.load(f)["project_version"]
    assert envdump_version() == ("warm", "1.0")
    d.upload("lv", "2", egg("testproj_v2"))
    seen = [envdump_version()]
    assert seen[0][1] == "2.0", f"the first crawl after version 2 was added ran {seen}"
    warm_up(d, "lv")
    seen.append(envdump_version())
    assert seen[-1] == ("warm", "2.0"), seen
    d.api("delversion.json", project="lv", version="2")
    seen.append(envdump_version())
    assert seen[-1][1] == "1.0", f"after version 2 was deleted: {seen}"
    warm_up(d, "lv")
    seen.append(envdump_version())
    assert seen[-1] == ("warm", "1.0"), seen


def test_a_template_killed_with_sigkill_is_replaced(spiderd, egg):
    d = spiderd(name="kt", **CONF)
    d.upload(P, "1.0", egg("warmproj"))
    warm_up(d, P)
    old = templates(d)
    assert old
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    # The daemon, its parent, reaps it.
    for pid in old:
        wait_for(lambda: proc_stat(pid) is None, 10, f"the killed template {pid} to be reaped")
    job = d.schedule(P, "quick", count=2)
    e = d.wait_finished(job, 60)
    assert (e["state"], e["stats"]["items"]) == ("finished", 2), e
    kinds = warm_up(d, P)
    assert kinds[-1] == "warm"
    new = templates(d)
    assert new and not set(new) & set(old), (old, new)
    assert not zombies(d.proc.pid)


def test_three_template_deaths_make_the_version_start_cold(spiderd, egg):
    """As documented: a template that dies is replaced by the next crawl of
    its version; three deaths within warm_idle and the version starts cold."""
    d = spiderd(name="deaths", **CONF)
    d.upload(P, "1.0", egg("warmproj"))
    killed = []
    for _ in range(3):
        warm_up(d, P)
        for pid in templates(d):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            wait_for(lambda: proc_stat(pid) is None, 10, f"the killed template {pid} to be reaped")
    assert len(killed) == 3, killed
    kinds = []
    for _ in range(3):
        job = d.schedule(P, "quick", count=1)
        assert d.wait_finished(job, 60)["state"] == "finished"
        kinds.append(start_kind(d, job))
        time.sleep(1.0 * SLOW)
    assert kinds == ["cold"] * 3, kinds
    assert templates(d) == []


def test_a_burst_while_the_template_starts_runs_every_job_once(spiderd, egg):
    d = spiderd(name="burst", **CONF)
    d.upload(P, "1.0", egg("warmproj"))
    jobs = [d.schedule(P, "quick", count=1) for _ in range(10)]
    for job in jobs:
        e = d.wait_finished(job, 120)
        assert (e["state"], e["stats"]["items"]) == ("finished", 1), e
    kinds = [start_kind(d, job) for job in jobs]
    assert kinds[0] == "cold", kinds
    assert len(d.listjobs()["finished"]) == 10  # each once (jobs_to_keep prunes their files)
    assert warm_up(d, P)[-1] == "warm"
    assert not zombies(d.proc.pid)


def test_warm_templates_zero_never_starts_a_template(pair):
    cold = pair[0]
    for _ in range(3):
        job = cold.schedule(P, "quick", count=1)
        assert cold.wait_finished(job, 60)["state"] == "finished"
        assert start_kind(cold, job) == "cold"
        assert templates(cold) == []
        time.sleep(0.5 * SLOW)
    # Every crawl this daemon ever started started cold.
    r = cold.request("GET", f"{API}/events", params={"type": "job.started", "limit": 1000})
    started = r.json()["events"]
    assert len(started) >= 3
    assert {e["data"].get("start") for e in started} == {"cold"}, started
    assert not [p for p in children(cold.proc.pid) if "spiderd_runner" in " ".join(cmdline(p))
                and "template" in " ".join(cmdline(p))]


# ---- descriptors the project's imports open ---------------------------------

def test_a_file_a_module_keeps_open_from_import_is_open_in_a_warm_crawl(spiderd, egg):
    d = spiderd(scrapyd={"items_dir": "items"})
    d.upload("files", "1.0", egg("warmfiles"))
    warm_up(d, "files")
    job = d.schedule("files", "keepfile")
    e = d.wait_finished(job, 60)
    assert start_kind(d, job) == "warm"
    assert e["state"] == "finished", e
    items = read_json_lines(d.items_path("files", "keepfile", job))
    assert len(items) == 1 and items[0]["bytes"] > 0, items


def test_a_socket_opened_at_import_keeps_the_version_cold(spiderd, egg):
    d = spiderd()
    d.upload("sock", "1.0", egg("warmsock"))
    kinds = []
    for _ in range(3):
        job = d.schedule("sock", "quick", count=1)
        assert d.wait_finished(job, 60)["state"] == "finished"
        kinds.append(start_kind(d, job))
        time.sleep(1 * SLOW)
    assert kinds == ["cold"] * 3, kinds
    wait_for(lambda: "a module opened a socket at import" in d.stderr_text(), 30 * SLOW,
             "the template's refusal in the daemon's log")
    assert "starts its crawls cold" in d.stderr_text()
