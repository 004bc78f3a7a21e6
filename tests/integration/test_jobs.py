"""Crawls under spiderd: the argv/environment contract (Scrapyd §5.1-5.2),
job records in listjobs/status (with spiderd's state, exit_code, signal and
stats), cancel and its signals, priority and dispatch, retention."""

import contextlib
import datetime
import io
import json
import os
import time
import zipfile
import zoneinfo

import pytest

from conftest import SLOW, TIME_RE, parse_time, pid_alive, read_json_lines, wait_for

API = "/api/v1"

TZ = "Asia/Kolkata"  # the daemon's local zone: listjobs times must be in it


def local_now():
    return datetime.datetime.now(zoneinfo.ZoneInfo(TZ)).replace(tzinfo=None)


@pytest.fixture(scope="module")
def jd(module_spiderd, egg):
    """items_dir relative, jobs_dir absolute, TZ set, 8 slots; project "jobs"."""
    d = module_spiderd(
        name="jobs",
        scrapyd={"items_dir": "items", "jobs_dir": os.path.join(module_spiderd.base, "jobdirs"),
                 "max_proc": 8},
        spiderd={"cancel_grace": 30},
        env={"TZ": TZ})
    d.upload("jobs", "1.0", egg("testproj"))
    return d


@pytest.fixture(scope="module")
def single(module_spiderd, egg):
    """One slot; projects "one" and "two"."""
    d = module_spiderd(name="single", scrapyd={"max_proc": 1})
    d.upload("one", "1.0", egg("testproj"))
    d.upload("two", "1.0", egg("testproj"))
    return d


@contextlib.contextmanager
def blocked(d, project):
    """Occupies the daemon's only slot with a slow crawl for the block's duration."""
    job = d.schedule(project, "slow", seconds=120)
    d.wait_running(job)
    try:
        yield job
    finally:
        d.cancel(project, job, "KILL")
        d.wait_finished(job, 15)


def status(d, job, project=None):
    params = {"job": job}
    if project:
        params["project"] = project
    return d.api("status.json", **params)


# ---- the launch contract ----------------------------------------------

def test_crawl_argv_environment_and_settings(jd, tmp_path):
    job = "env1"
    out = str(tmp_path / "env.json")
    form = [("project", "jobs"), ("spider", "envdump"),
            ("setting", "DOWNLOAD_DELAY=0.5"), ("setting", "USER_AGENT=ua-test"),
            ("arg1", "val1"), ("arg1", "val2"), ("jobid", job), ("priority", "3"),
            ("_version", "1.0"), ("zz", "last"), ("out", out)]
    assert jd.call("schedule.json", data=form)["jobid"] == job
    entry = jd.wait_finished(job)
    with open(out, encoding="utf-8") as f:
        dump = json.load(f)

    work = os.path.realpath(jd.workdir)
    log = os.path.join(work, "logs", "jobs", "envdump", f"{job}.log")
    items = os.path.join(work, "items", "jobs", "envdump", f"{job}.jl")
    feed = "file://" + items
    jobdir = os.path.join(os.path.realpath(jd.scrapyd["jobs_dir"]), "jobs", "envdump", job)
    feeds = json.dumps({feed: {"format": "jsonlines"}})

    # Scrapy's cmdline drops argv[0] in place, so a spider sees "crawl" first.
    assert dump["argv"] == [
        "crawl", "envdump",
        "-s", "DOWNLOAD_DELAY=0.5", "-s", "USER_AGENT=ua-test",
        "-s", f"LOG_FILE={log}", "-s", f"FEEDS={feeds}", "-s", f"JOBDIR={jobdir}",
        "-a", f"_job={job}", "-a", "arg1=val1", "-a", "zz=last", "-a", f"out={out}",
        "-a", "_version=1.0"]
    env = dump["env"]
    assert env["SCRAPY_PROJECT"] == "jobs"
    assert env["SCRAPYD_EGG_VERSION"] == "1.0"
    assert env["SCRAPY_SETTINGS_MODULE"] == "testproj.settings"
    # The variables Scrapyd set before 1.5.
    assert env["SCRAPYD_JOB"] == job
    assert env["SCRAPYD_SPIDER"] == "envdump"
    assert env["SCRAPYD_SLOT"].isdigit()
    assert env["SCRAPYD_LOG_FILE"] == log
    assert env["SCRAPYD_FEED_URI"] == feed
    assert dump["kwargs"] == {"_job": job, "arg1": "val1", "zz": "last", "out": out, "_version": "1.0"}
    assert dump["settings"] == {"DOWNLOAD_DELAY": "0.5", "USER_AGENT": "ua-test", "LOG_FILE": log,
                                "FEEDS": {feed: {"format": "jsonlines"}}, "JOBDIR": jobdir}
    assert dump["cwd"] == work
    assert dump["project_version"] == "1.0"
    assert "/eggs/jobs/1_0.egg/" in dump["module_file"]

    assert entry["log_url"] == f"/logs/jobs/envdump/{job}.log"
    assert entry["items_url"] == f"/items/jobs/envdump/{job}.jl"
    assert os.path.isfile(log)
    assert [i["argv"] for i in read_json_lines(items)] == [dump["argv"]]
    assert os.path.isdir(jobdir)


# Prints each descriptor the crawl holds (the listing's own is closed by
# the time it is read, and left out).
FDS_PY = """
import os
for n in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        print("fd", n, os.readlink("/proc/self/fd/" + n))
    except OSError:
        pass
"""
FDS_MANIFEST = json.dumps({"spiders": {"fds": {"command": ["python3", "-c", FDS_PY]}}})


def test_a_crawl_holds_none_of_the_daemons_descriptors(spiderd, tmp_path):
    """What the daemon keeps open (the store's connections, its log file, its
    listening socket, its pipes) is not handed to the crawls it starts: a
    crawl gets its standard input, output and error, nothing more. On Redis
    the store's connections used to leak into every crawl and template."""
    d = spiderd(spiderd={"log_file": str(tmp_path / "daemon.log")})
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("spiderd.json", FDS_MANIFEST)
    r = d.request("POST", f"{API}/projects/fdcheck/versions", params={"version": "1"},
                  data=buf.getvalue(), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    # Two at once, so that one starts while the other's end is being written.
    jobs = [d.schedule("fdcheck", "fds") for _ in range(2)]
    for job in jobs:
        assert d.wait_finished(job)["state"] == "finished"
        with open(d.log_path("fdcheck", "fds", job), encoding="utf-8") as f:
            fds = dict(line.split(" ", 2)[1:] for line in f.read().splitlines()
                       if line.startswith("fd "))
        assert set(fds) >= {"0", "1", "2"}, fds
        assert {fd: what for fd, what in fds.items() if int(fd) > 2} == {}, fds


def test_crawl_without_logs_with_remote_items_and_no_version(spiderd, egg, tmp_path):
    d = spiderd(scrapyd={"logs_dir": "", "items_dir": "s3://bucket/base?x=1#frag"})
    d.upload("p", "1.0", egg("testproj"))
    out = str(tmp_path / "env.json")
    job = d.schedule("p", "envdump", b="2", a="1", out=out, jobid="env2")
    entry = d.wait_finished(job)
    with open(out, encoding="utf-8") as f:
        dump = json.load(f)
    feed = "s3://bucket/base/p/envdump/env2.jl?x=1#frag"
    assert dump["argv"] == [
        "crawl", "envdump", "-s", "FEEDS=" + json.dumps({feed: {"format": "jsonlines"}}),
        "-a", "_job=env2", "-a", "b=2", "-a", "a=1", "-a", f"out={out}"]
    env = dump["env"]
    assert "SCRAPYD_EGG_VERSION" not in env
    assert "SCRAPYD_LOG_FILE" not in env
    assert env["SCRAPYD_FEED_URI"] == feed
    assert env["SCRAPY_SETTINGS_MODULE"] == "testproj.settings"
    assert dump["kwargs"] == {"_job": "env2", "b": "2", "a": "1", "out": out}
    assert dump["settings"]["LOG_FILE"] is None
    # No jobs_dir, so no -s JOBDIR on the command line (Scrapyd's argv above);
    # the runner makes spiderd's state directory the JOBDIR, so the job can
    # be paused (docs/api.md, "Pause and resume").
    job_id = d.get("/api/v1/jobs/" + job).json()["id"]
    assert dump["settings"]["JOBDIR"] == d.path("dbs", "jobstate", str(job_id))
    assert entry["log_url"] is None and entry["items_url"] is None
    # Neither tree is served; the home page still links to /logs/ (as Scrapyd).
    assert d.get("/logs/").status_code == 404
    assert d.get("/items/").status_code == 404
    home = d.get("/").text
    assert 'href="/logs/"' in home and 'href="/items/"' not in home
    jobs_page = d.get("/jobs").text
    assert "<th>Log</th>" in jobs_page and "<th>Items</th>" not in jobs_page


# ---- outcomes and job records ------------------------------------------

def test_finished_failed_and_callback_error_records(jd):
    quick = jd.schedule("jobs", "quick", count=5)
    crash = jd.schedule("jobs", "crash")
    fail = jd.schedule("jobs", "fail")

    e = jd.wait_finished(quick)
    assert {"id", "project", "spider", "start_time", "end_time", "log_url", "items_url",
            "state", "exit_code", "signal", "stats"} <= set(e)
    assert "pid" not in e
    assert (e["id"], e["project"], e["spider"]) == (quick, "jobs", "quick")
    start, end = parse_time(e["start_time"]), parse_time(e["end_time"])
    assert start <= end
    # Naive local time of the daemon's zone (TZ=Asia/Kolkata, UTC+05:30).
    assert abs(end - local_now()) < datetime.timedelta(seconds=120 * SLOW)
    assert (e["state"], e["exit_code"], e["signal"]) == ("finished", 0, None)
    stats = e["stats"]
    assert (stats["items"], stats["requests"], stats["responses"], stats["errors"]) == (5, 5, 5, 0)
    assert stats["finish_reason"] == "finished"
    assert isinstance(stats["elapsed"], (int, float)) and 0 <= stats["elapsed"] < 60
    assert e["log_url"] == f"/logs/jobs/quick/{quick}.log"
    assert e["items_url"] == f"/items/jobs/quick/{quick}.jl"
    assert sorted(i["n"] for i in read_json_lines(jd.items_path("jobs", "quick", quick))) == [0, 1, 2, 3, 4]
    assert "Spider closed (finished)" in jd.read_log("jobs", "quick", quick)
    st = status(jd, quick)
    assert (st["currstate"], st["state"]) == ("finished", "finished")
    assert (st["exit_code"], st["signal"]) == (0, None)
    assert st["stats"] == e["stats"]

    e = jd.wait_finished(crash)
    assert (e["state"], e["exit_code"], e["signal"]) == ("failed", 1, None)
    assert e["stats"] is None or isinstance(e["stats"], dict)
    assert "crash spider fails in __init__ on purpose" in jd.read_log("jobs", "crash", crash)
    st = status(jd, crash, "jobs")
    assert (st["currstate"], st["state"]) == ("finished", "failed")
    assert (st["exit_code"], st["signal"]) == (1, None)

    # An exception in a callback does not fail a Scrapy crawl: exit 0, counted.
    e = jd.wait_finished(fail)
    assert (e["state"], e["exit_code"], e["signal"]) == ("finished", 0, None)
    assert e["stats"]["items"] == 1 and e["stats"]["errors"] >= 1

    lj = jd.listjobs()
    assert jd.api("daemonstatus.json")["finished"] == len(lj["finished"])
    ends = [parse_time(f["end_time"]) for f in lj["finished"]]
    assert ends == sorted(ends, reverse=True), "finished jobs must be listed newest first"


def test_running_job_record_and_kill(jd):
    job = jd.schedule("jobs", "slow", seconds=60)
    e = jd.wait_running(job)
    assert {"id", "project", "spider", "pid", "start_time"} <= set(e)
    assert (e["id"], e["project"], e["spider"]) == (job, "jobs", "slow")
    assert TIME_RE.match(e["start_time"])
    pid = e["pid"]
    assert isinstance(pid, int) and pid_alive(pid)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read().split(b"\0")
    assert b"crawl" in cmdline and b"slow" in cmdline
    assert os.readlink(f"/proc/{pid}/cwd") == os.path.realpath(jd.workdir)

    # log_url/items_url appear once the files exist.
    def urls():
        _, entry = jd.find(job)
        return entry["log_url"] and entry["items_url"] and entry
    e = wait_for(urls, 20, "log_url and items_url of the running job")
    assert e["log_url"] == f"/logs/jobs/slow/{job}.log"
    assert e["items_url"] == f"/items/jobs/slow/{job}.jl"
    st = status(jd, job)
    assert (st["currstate"], st["state"]) == ("running", "running")
    assert jd.api("daemonstatus.json")["running"] >= 1

    assert jd.cancel("jobs", job, "KILL") == "running"
    e = jd.wait_finished(job, 5)
    assert (e["state"], e["signal"], e["exit_code"]) == ("cancelled", 9, None)
    assert not pid_alive(pid)


def test_log_url_and_items_url_only_while_the_files_exist(jd):
    job = jd.schedule("jobs", "quick", count=1)
    e = jd.wait_finished(job)
    assert e["log_url"] and e["items_url"]
    os.remove(jd.log_path("jobs", "quick", job))
    _, e = jd.find(job)
    assert e["log_url"] is None and e["items_url"] == f"/items/jobs/quick/{job}.jl"
    os.remove(jd.items_path("jobs", "quick", job))
    _, e = jd.find(job)
    assert e["items_url"] is None


# ---- cancel ------------------------------------------------------------

def test_cancel_signals(jd):
    debug = ["LOG_LEVEL=DEBUG"]
    jobs = {
        "int_drain": jd.schedule("jobs", "slow", settings=debug, drain=1),
        "int_twice": jd.schedule("jobs", "slow", settings=debug, drain=60),
        "term": jd.schedule("jobs", "slow", settings=debug),
        "num15": jd.schedule("jobs", "slow", settings=debug),
        "foo": jd.schedule("jobs", "slow", settings=debug),
    }
    for job in jobs.values():
        jd.wait_crawling("jobs", "slow", job)

    # First INT: Scrapy stops gracefully.
    assert jd.cancel("jobs", jobs["int_drain"]) == "running"
    assert jd.cancel("jobs", jobs["int_twice"]) == "running"
    assert jd.cancel("jobs", jobs["term"], "TERM") == "running"
    assert jd.cancel("jobs", jobs["num15"], "15") == "running"
    assert jd.api_error("cancel.json", project="jobs", job=jobs["foo"], signal="FOO") == \
        "TypeError: 'str' object cannot be interpreted as an integer"

    e = jd.wait_finished(jobs["int_drain"], 20)
    assert e["state"] == "cancelled"
    assert e["stats"]["finish_reason"] == "shutdown", e
    assert "Received SIGINT, shutting down gracefully. Send again to force" in \
        jd.read_log("jobs", "slow", jobs["int_drain"])

    # Still draining after a second: a graceful stop; the second INT forces it.
    jd.wait_log("jobs", "slow", jobs["int_twice"], "Draining for", 20)
    time.sleep(1)
    assert jd.find(jobs["int_twice"])[0] == "running"
    assert jd.cancel("jobs", jobs["int_twice"]) == "running"
    e = jd.wait_finished(jobs["int_twice"], 10)
    assert e["state"] == "cancelled"
    assert "Received SIGINT twice, forcing unclean shutdown" in \
        jd.read_log("jobs", "slow", jobs["int_twice"])

    for name in ("term", "num15"):
        e = jd.wait_finished(jobs[name], 20)
        assert e["state"] == "cancelled"
        assert "Received SIGTERM, shutting down gracefully" in jd.read_log("jobs", "slow", jobs[name])

    # The bad signal name changed nothing.
    assert jd.find(jobs["foo"])[0] == "running"
    assert jd.cancel("jobs", jobs["foo"], "KILL") == "running"
    e = jd.wait_finished(jobs["foo"], 5)
    assert (e["state"], e["signal"]) == ("cancelled", 9)


def test_cancel_grace_escalates_to_kill(spiderd, egg):
    d = spiderd(spiderd={"cancel_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    job = d.schedule("p", "slow", settings=["LOG_LEVEL=DEBUG"], drain=60)
    d.wait_crawling("p", "slow", job)
    t0 = time.monotonic()
    assert d.cancel("p", job) == "running"
    e = d.wait_finished(job, 2 + 8)
    waited = time.monotonic() - t0
    assert waited >= 1.5, f"killed after {waited:.1f}s, before cancel_grace (2s)"
    assert (e["state"], e["signal"]) == ("cancelled", 9)
    assert "Received SIGINT, shutting down gracefully" in d.read_log("p", "slow", job)


def test_cancel_signals_every_running_process_with_the_id(jd):
    jd.schedule("jobs", "slow", jobid="twin")
    jd.schedule("jobs", "slow", jobid="twin")

    def twins(section):
        return [e for e in jd.listjobs()[section] if e["id"] == "twin"]
    wait_for(lambda: len(twins("running")) == 2, 20, "both twins to run")
    assert jd.cancel("jobs", "twin", "KILL") == "running"
    wait_for(lambda: len(twins("finished")) == 2, 10, "both twins to end")
    assert [(e["state"], e["signal"]) for e in twins("finished")] == [("cancelled", 9)] * 2


def test_cancel_prefers_running_and_removes_every_pending_entry(single):
    single.schedule("one", "slow", jobid="both")
    single.wait_running("both")
    single.schedule("one", "quick", jobid="both")
    single.schedule("one", "quick", jobid="both")
    assert [e["id"] for e in single.listjobs()["pending"]] == ["both", "both"]
    assert single.cancel("one", "both", "KILL") == "running"
    assert single.listjobs()["pending"] == []

    def ended():
        done = [e for e in single.listjobs()["finished"] if e["id"] == "both"]
        return done if single.find("both")[0] == "finished" else None
    done = wait_for(ended, 10, "the running 'both' to end")
    assert [(e["spider"], e["state"], e["signal"]) for e in done] == [("slow", "cancelled", 9)]


def test_pending_job_record_and_cancel(single):
    with blocked(single, "one"):
        form = [("project", "one"), ("spider", "quick"), ("setting", "DOWNLOAD_DELAY=2"),
                ("setting", "X=y=z"), ("_version", "1.0"), ("a", "1"), ("jobid", "pend1"),
                ("priority", "3"), ("b", "x\x7fy\u00f1")]
        assert single.call("schedule.json", data=form)["jobid"] == "pend1"
        single.schedule("one", "quick", jobid="pend2")
        lj = single.listjobs()
        pend = {e["id"]: e for e in lj["pending"]}
        assert set(pend) == {"pend1", "pend2"}
        e = pend["pend1"]
        assert {k: e[k] for k in ("id", "project", "spider", "version", "settings", "args")} == {
            "id": "pend1", "project": "one", "spider": "quick", "version": "1.0",
            "settings": {"DOWNLOAD_DELAY": "2", "X": "y=z"}, "args": {"a": "1", "b": "x\x7fy\u00f1"}}
        # Escaped as Python's json.dumps escapes them, DEL included.
        assert b'"b": "x\\u007fy\\u00f1"' in single.get("/listjobs.json").content
        assert "pid" not in e and "start_time" not in e
        e = pend["pend2"]
        assert (e["version"], e["settings"], e["args"]) == (None, {}, {})
        assert single.api("daemonstatus.json")["pending"] == 2
        st = status(single, "pend1")
        assert (st["currstate"], st["state"]) == ("pending", "pending")

        assert single.cancel("one", "pend1") == "pending"
        assert single.cancel("one", "pend2") == "pending"
        section, entry = single.find("pend1")
        assert section in (None, "finished")
        if section == "finished":
            assert entry["state"] == "cancelled"
        assert single.listjobs()["pending"] == []
        assert single.api("daemonstatus.json")["pending"] == 0
        assert single.cancel("one", "pend1") is None


def test_duplicate_job_ids_and_status_lookup_order(single):
    single.schedule("one", "quick", count=1, jobid="dup")
    single.wait_finished("dup")
    with blocked(single, "one") as blocker:
        assert single.schedule("one", "quick", jobid="dup") == "dup"  # duplicates accepted
        single.schedule("two", "quick", jobid="only-pending")
        lj = single.listjobs()
        assert sorted(e["id"] for e in lj["pending"]) == ["dup", "only-pending"]
        assert "dup" in [e["id"] for e in lj["finished"]]
        # finished -> running -> pending: the first match wins.
        assert status(single, "dup")["currstate"] == "finished"
        assert status(single, "dup", "one")["currstate"] == "finished"
        assert status(single, "dup", "two")["currstate"] is None
        assert status(single, blocker)["currstate"] == "running"
        assert status(single, "only-pending")["currstate"] == "pending"
        assert status(single, "only-pending", "one")["currstate"] is None
        assert single.cancel("one", "dup") == "pending"
        assert single.cancel("two", "only-pending") == "pending"
        assert single.listjobs()["pending"] == []
        assert status(single, "dup")["currstate"] == "finished"


def test_priority_is_global_and_dispatch_is_immediate(single):
    order = [("s1", "one", "0"), ("s2", "two", "5"), ("s3", "one", "1"),
             ("s4", "two", "0"), ("s5", "one", "5"), ("s6", "two", "-1.5")]
    with blocked(single, "one") as blocker:
        for job, project, priority in order:
            single.schedule(project, "quick", count=1, jobid=job, priority=priority)
        pending = single.listjobs()["pending"]
        # Within a project: priority descending, then first come first served.
        assert [e["id"] for e in pending if e["project"] == "one"] == ["s5", "s3", "s1"]
        assert [e["id"] for e in pending if e["project"] == "two"] == ["s2", "s4", "s6"]
    for job, _, _ in order:
        single.wait_finished(job, 60)
    finished = {e["id"]: e for e in single.listjobs()["finished"]}
    runs = sorted((parse_time(finished[j]["start_time"]), j) for j, _, _ in order)
    # Across projects too: priority descending, then first come first served.
    assert [j for _, j in runs] == ["s2", "s5", "s3", "s1", "s4", "s6"]
    # Each job started as soon as the slot was free: no poll interval.
    chain = [blocker] + [j for _, j in runs]
    for prev, nxt in zip(chain, chain[1:]):
        gap = (parse_time(finished[nxt]["start_time"]) - parse_time(finished[prev]["end_time"])).total_seconds()
        assert gap < 1.0 * SLOW, f"{nxt} started {gap:.2f}s after {prev} ended"


def test_schedule_to_start_is_immediate(jd):
    t0 = time.monotonic()
    job = jd.schedule("jobs", "slow")

    def running():
        return jd.api("status.json", job=job)["currstate"] == "running"
    wait_for(running, 5, f"{job} to start", interval=0.01)
    latency = time.monotonic() - t0
    assert latency < 1.0 * SLOW, f"schedule-to-start took {latency:.2f}s"
    jd.cancel("jobs", job, "KILL")
    jd.wait_finished(job, 10)


def test_twenty_quick_jobs_at_max_proc_4(spiderd, egg):
    # jobs_to_keep = 0 deletes nothing: all 20 logs stay.
    d = spiderd(scrapyd={"max_proc": 4, "jobs_to_keep": 0})
    d.upload("p", "1.0", egg("testproj"))
    jobs = [d.schedule("p", "quick", count=2, jobid=f"q{i:02d}") for i in range(20)]
    peak = 0
    unaccounted = []  # daemonstatus answers where a job was in no state
    unlisted = []  # ends daemonstatus counted that listjobs did not show next

    def done():
        nonlocal peak
        st = d.api("daemonstatus.json")
        assert st["running"] <= 4, st
        if st["pending"] + st["running"] + st["finished"] != 20:
            unaccounted.append(st)
        peak = max(peak, st["running"])
        # A client that saw an end counted finds that job ended when it asks.
        listed = len(d.listjobs()["finished"])
        if listed < st["finished"]:
            unlisted.append((st["finished"], listed))
        return st["finished"] == 20
    wait_for(done, 120, "20 jobs to finish", interval=0.1)
    assert peak == 4, f"never ran 4 at once (peak {peak})"
    finished = {e["id"]: e for e in d.listjobs()["finished"]}
    assert set(finished) == set(jobs)
    for job, e in finished.items():
        assert (e["state"], e["exit_code"]) == ("finished", 0), e
        assert e["stats"]["items"] == 2, e
        assert os.path.isfile(d.log_path("p", "quick", job))
    # Every job is always pending, running or finished: none is ever missing.
    assert unaccounted == [], unaccounted[:3]
    assert unlisted == [], unlisted[:3]


def test_jobs_to_keep_and_finished_to_keep(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 1, "jobs_to_keep": 1, "finished_to_keep": 3, "items_dir": "items"})
    d.upload("p", "1.0", egg("testproj"))
    old = time.time() - 86400
    foreign = []
    for path in (d.log_path("p", "quick", "foreign"), d.items_path("p", "quick", "foreign")):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("not made by a job\n")
        os.utime(path, (old, old))
        foreign.append(path)
    for i in range(1, 5):
        d.schedule("p", "quick", count=1, jobid=f"k{i}")
    for i in range(1, 5):
        d.wait_finished(f"k{i}", 60)
    lj = d.listjobs()
    assert [e["id"] for e in lj["finished"]] == ["k4", "k3", "k2"]
    assert d.api("daemonstatus.json")["finished"] == 3
    for path in foreign:
        assert not os.path.exists(path), f"{path} should have been pruned"
    for job in ("k1", "k2"):
        assert not os.path.exists(d.log_path("p", "quick", job))
        assert not os.path.exists(d.items_path("p", "quick", job))
    assert os.path.isfile(d.log_path("p", "quick", "k4"))
    assert os.path.isfile(d.items_path("p", "quick", "k4"))
    entries = {e["id"]: e for e in lj["finished"]}
    assert entries["k2"]["log_url"] is None and entries["k2"]["items_url"] is None
    assert entries["k4"]["log_url"] == "/logs/p/quick/k4.log"
    assert entries["k4"]["items_url"] == "/items/p/quick/k4.jl"


def test_finished_to_keep_zero_keeps_all(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 8, "finished_to_keep": 0})
    d.upload("p", "1.0", egg("testproj"))
    jobs = [d.schedule("p", "slow", jobid=f"k{i:03d}") for i in range(105)]

    def all_finished():
        lj = d.listjobs()
        for e in lj["running"]:
            d.cancel("p", e["id"], "KILL")
        return len(lj["finished"]) == len(jobs)
    wait_for(all_finished, 180, "105 killed jobs to finish", interval=0.05)
    assert d.api("daemonstatus.json")["finished"] == 105
    finished = d.listjobs()["finished"]
    assert sorted(e["id"] for e in finished) == jobs
    assert all(e["state"] == "cancelled" for e in finished)


def test_unknown_signal_number_format(jd):
    # A digit string is a signal number; anything else Twisted does not map is an error.
    job = jd.schedule("jobs", "slow")
    jd.wait_running(job)
    assert jd.api_error("cancel.json", project="jobs", job=job, signal="SIGKILLX") == \
        "TypeError: 'str' object cannot be interpreted as an integer"
    assert jd.cancel("jobs", job, "9") == "running"
    e = jd.wait_finished(job, 5)
    assert (e["state"], e["signal"]) == ("cancelled", 9)

