"""Robust jobs: per-job timeouts, retries with exponential backoff,
heartbeats from the crawl's reactor, recovery of crawls that died while the
daemon was down, and the job events recorded for every transition.

Events are read from the SQLite store directly (table `events`): the events
API is not this module's subject."""

import json
import os
import signal
import time

import pytest

from conftest import SLOW, parse_time, pid_alive, wait_for

# Small enough for fast tests, large enough that a loaded 2-core machine
# does not miss beats: 10 beats per timeout.
HEARTBEAT = {"heartbeat_interval": 0.2, "heartbeat_timeout": 2 * SLOW}


def db_rows(d, sql, *args):
    return d.sql(sql, *args)


def job_row(d, jobid):
    rows = db_rows(d, "SELECT * FROM jobs WHERE jobid = ? ORDER BY id", jobid)
    assert len(rows) == 1, f"{jobid}: {rows}"
    return rows[0]


def events_of(d, jobid):
    """(type, data) of every event of the job with this Scrapyd id, in order."""
    row = job_row(d, jobid)
    rows = db_rows(d, "SELECT * FROM events WHERE job_id = ? ORDER BY id", row["id"])
    for r in rows:
        assert r["schedule_id"] == row["schedule_id"]
    return [(r["type"], json.loads(r["data"]) if r["data"] else None) for r in rows]


def event_types(d, jobid):
    return [t for t, _ in events_of(d, jobid)]


def finished(d, jobid, seconds=30):
    return d.wait_finished(jobid, seconds)


def wait_gone_quiet(d, jobid, seconds):
    """Waits `seconds`, then lists (sorted) the retries of jobid there are."""
    time.sleep(seconds)
    ids = [e["id"] for s in ("pending", "running", "finished") for e in d.listjobs()[s]]
    return sorted(i for i in ids if i.startswith(jobid + ".r"))


@pytest.fixture(scope="module")
def rd(module_spiderd, egg):
    """Heartbeats every 0.2 s, lost after 2 s of silence; TERM-to-KILL 3 s."""
    d = module_spiderd(name="robust", scrapyd={"max_proc": 6},
                       spiderd={"cancel_grace": 3, **HEARTBEAT})
    d.upload("p", "1.0", egg("testproj"))
    return d


def test_timeout_terminates_and_records_failed_with_the_marker(rd):
    # 3 s: a cold start (the first of a version) has Scrapy's signal
    # handlers in place by then, even beside its template's imports.
    job = rd.schedule("p", "slow", seconds=60, _timeout=3)
    rd.wait_running(job)
    t0 = time.monotonic()
    e = finished(rd, job)
    took = time.monotonic() - t0
    assert e["state"] == "failed", e
    assert e["end_reason"] == "timeout"
    assert e["timeout"] == 3 and e["attempt"] == 1 and e["retry_of"] is None
    # TERM is Scrapy's graceful shutdown: the spider closed, stats were written.
    assert e["stats"]["finish_reason"] == "shutdown"
    assert "Received SIGTERM" in rd.read_log("p", "slow", job)
    assert took < 10 * SLOW
    st = rd.api("status.json", job=job)
    assert (st["state"], st["end_reason"]) == ("failed", "timeout")
    assert event_types(rd, job) == ["job.queued", "job.started", "job.timeout", "job.failed"]
    data = dict(events_of(rd, job))["job.timeout"]
    assert data["timeout_ms"] == 3000 and data["jobid"] == job and data["spider"] == "slow"
    # Not retried: _retries defaults to the daemon's job_retries, 0.
    assert wait_gone_quiet(rd, job, 0.5) == []


def test_timeout_escalates_to_kill_when_term_is_not_enough(rd):
    # drain=60 keeps the crawl alive after TERM: cancel_grace (3 s) then KILLs the group.
    job = rd.schedule("p", "slow", seconds=60, drain=60, _timeout=3)
    e = finished(rd, job, 30)
    assert (e["state"], e["end_reason"], e["signal"]) == ("failed", "timeout", 9)


def test_failing_job_runs_exactly_three_attempts_with_growing_delays(rd):
    job = rd.schedule("p", "crash", _retries=2, _retry_backoff=0.5, jobid="cr",
                      settings=["DOWNLOAD_DELAY=0.25"], who="me")
    ids = ["cr", "cr.r2", "cr.r3"]
    entries = [finished(rd, i, 40) for i in ids]
    assert job == "cr"
    for n, e in enumerate(entries, 1):
        assert (e["state"], e["exit_code"], e["attempt"]) == ("failed", 1, n)
        assert e["max_retries"] == 2 and e["end_reason"] is None
        assert e["log_url"] == f"/logs/p/crash/{ids[n - 1]}.log"
    # Nothing more after the last attempt.
    assert wait_gone_quiet(rd, "cr", 1.5) == ["cr.r2", "cr.r3"]

    rows = [job_row(rd, i) for i in ids]
    assert [r["retry_of"] for r in rows] == [0, rows[0]["id"], rows[1]["id"]]
    # Each attempt is a job of its own, built from the first one's template only.
    for r in rows[1:]:
        for k in ("project", "spider", "version", "args", "settings", "priority",
                  "schedule_id", "parent_id", "max_retries", "retry_backoff_ms", "timeout_ms"):
            assert r[k] == rows[0][k], k
        assert r["pid"] != rows[0]["pid"]
    assert json.loads(rows[2]["args"]) == {"who": "me"}
    assert json.loads(rows[2]["settings"]) == {"DOWNLOAD_DELAY": "0.25"}

    starts = [parse_time(e["start_time"]) for e in entries]
    ends = [parse_time(e["end_time"]) for e in entries]
    gaps = [(starts[i + 1] - ends[i]).total_seconds() for i in range(2)]
    # 0.5 s then 1 s (+ up to 10 % jitter); loose lower bounds only.
    assert gaps[0] >= 0.45 and gaps[1] >= 0.95, gaps
    delays = [data["delay_ms"] for i in ids[:2] for t, data in events_of(rd, i) if t == "job.retried"]
    assert 500 <= delays[0] <= 550 and 1000 <= delays[1] <= 1100, delays
    for i, nxt in zip(ids, ids[1:]):
        assert event_types(rd, i) == ["job.queued", "job.started", "job.failed", "job.retried"]
        retried = dict(events_of(rd, i))["job.retried"]
        assert retried["retry_jobid"] == nxt and retried["retry_id"] == job_row(rd, nxt)["id"]
    assert event_types(rd, "cr.r3") == ["job.queued", "job.started", "job.failed"]
    failed = dict(events_of(rd, "cr.r3"))["job.failed"]
    assert failed == {"project": "p", "spider": "crash", "jobid": "cr.r3", "attempt": 3,
                      "exit_code": 1, "signal": None}


def test_job_that_succeeds_on_its_second_attempt(rd, tmp_path):
    rd.schedule("p", "flaky", dir=str(tmp_path), key="f", fails=1, _retries=3,
                _retry_backoff=0.1, jobid="fl")
    first, second = finished(rd, "fl"), finished(rd, "fl.r2")
    assert (first["state"], second["state"]) == ("failed", "finished")
    assert second["stats"]["items"] == 1 and second["retry_of"] == job_row(rd, "fl")["id"]
    assert wait_gone_quiet(rd, "fl", 0.5) == ["fl.r2"]
    assert (tmp_path / "f").read_text().count("\n") == 2
    assert event_types(rd, "fl.r2") == ["job.queued", "job.started", "job.finished"]


def test_wedged_reactor_is_killed_as_lost_and_retried(rd):
    job = rd.schedule("p", "hang", seconds=120, _retries=1, _retry_backoff=0.2, jobid="hg")
    pid = rd.wait_running(job)["pid"]
    e = finished(rd, job, 30)
    assert (e["state"], e["end_reason"], e["signal"]) == ("lost", "heartbeat", 9), e
    assert not pid_alive(pid)
    # The store saw its heartbeats while it lived.
    assert job_row(rd, job)["heartbeat_ms"] > 0
    retry = rd.wait_running("hg.r2")
    assert retry["attempt"] == 2 and retry["retry_of"] == job_row(rd, job)["id"]
    assert event_types(rd, job) == ["job.queued", "job.started", "job.lost", "job.retried"]
    assert dict(events_of(rd, job))["job.lost"]["reason"] == "heartbeat"
    rd.cancel("p", "hg.r2", "KILL")
    assert finished(rd, "hg.r2")["state"] == "cancelled"
    assert event_types(rd, "hg.r2") == ["job.queued", "job.started", "job.cancelled"]


def test_heartbeats_are_enforced_only_after_the_first_one(rd):
    # Silent for 3 s (> heartbeat_timeout) before its engine starts: not killed.
    job = rd.schedule("p", "hang", seconds=0, init_sleep=3 * SLOW)
    e = finished(rd, job, 30)
    assert (e["state"], e["end_reason"]) == ("finished", None), e
    # A healthy crawl longer than heartbeat_timeout keeps beating and finishes.
    job = rd.schedule("p", "slow", seconds=3 * SLOW)
    e = finished(rd, job, 30)
    assert (e["state"], e["end_reason"]) == ("finished", None), e


def test_cancelled_job_is_never_retried(rd):
    job = rd.schedule("p", "slow", seconds=60, _retries=2, _retry_backoff=0.1, jobid="cx")
    rd.wait_running(job)
    rd.cancel("p", job, "KILL")
    assert finished(rd, job)["state"] == "cancelled"
    assert wait_gone_quiet(rd, "cx", 1) == []
    assert event_types(rd, job) == ["job.queued", "job.started", "job.cancelled"]


def test_kill9_then_the_crawl_dies_lost_at_restart_and_retried(spiderd, egg, tmp_path):
    d = spiderd(scrapyd={"max_proc": 2})
    d.upload("p", "1.0", egg("testproj"))
    markers = tmp_path / "m"
    markers.mkdir()
    d.schedule("p", "marker", dir=str(markers), wait=60, _retries=1, _retry_backoff=0.3,
               jobid="k9")
    marker = markers / "k9"
    wait_for(marker.exists, 30, "the marker spider's pid file")
    pid = int(marker.read_text())
    d.kill9()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not pid_alive(pid), 10, "the crawl to die")
    d.start()
    e = finished(d, "k9")
    assert e["state"] == "lost" and e["end_reason"] is None, e
    wait_for((markers / "k9.r2").exists, 30, "the retry to run")
    r = d.wait_running("k9.r2")
    assert (r["attempt"], r["retry_of"]) == (2, job_row(d, "k9")["id"])
    assert event_types(d, "k9") == ["job.queued", "job.started", "job.lost", "job.retried"]
    d.cancel("p", "k9.r2", "KILL")
    finished(d, "k9.r2")


def test_daemon_defaults_apply_to_jobs_without_their_own(spiderd, egg):
    d = spiderd(spiderd={"job_retries": 1, "retry_backoff": 0.2, "job_timeout": 60})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "crash", jobid="df")
    e = finished(d, "df.r2")
    assert (e["attempt"], e["max_retries"], e["timeout"]) == (2, 1, 60.0)
    assert wait_gone_quiet(d, "df", 0.5) == ["df.r2"]
    # The first attempt keeps its own values (0: the daemon's default); the
    # retry carries the policy the first one ran under.
    assert (job_row(d, "df")["max_retries"], job_row(d, "df.r2")["max_retries"]) == (0, 1)


def test_retry_starts_promptly_at_its_not_before(spiderd, egg, tmp_path):
    d = spiderd(scrapyd={"max_proc": 1})
    d.upload("p", "1.0", egg("testproj"))
    d.schedule("p", "flaky", dir=str(tmp_path), key="w", fails=1, _retries=1,
               _retry_backoff=1, jobid="w")
    finished(d, "w")
    retry = job_row(d, "w.r2")
    assert retry["state"] in (0, 1)
    wait_for(lambda: job_row(d, "w.r2")["start_ms"], 10, "the retry to start")
    late = job_row(d, "w.r2")["start_ms"] - retry["not_before_ms"]
    assert 0 <= late < 100 * SLOW, f"the retry started {late} ms after its not_before"
    assert finished(d, "w.r2")["state"] == "finished"


@pytest.mark.parametrize("param,value,message", [
    ("_timeout", "soon", "_timeout is invalid: could not convert string to float: b'soon'"),
    ("_timeout", "-1", "_timeout is invalid: it must be a number of seconds from 0 to 315360000"),
    ("_retry_backoff", "nan",
     "_retry_backoff is invalid: it must be a number of seconds from 0 to 315360000"),
    ("_retries", "1.5", "_retries is invalid: it must be an integer from 0 to 100"),
    ("_retries", "101", "_retries is invalid: it must be an integer from 0 to 100"),
])
def test_schedule_parameters_are_validated(rd, param, value, message):
    assert rd.api_error("schedule.json", project="p", spider="quick", **{param: value}) == message


def test_schedule_parameters_are_not_spider_arguments(rd, tmp_path):
    out = str(tmp_path / "env.json")
    job = rd.schedule("p", "envdump", out=out, _timeout=30, _retries=1, _retry_backoff=2)
    e = finished(rd, job)
    assert e["state"] == "finished"
    with open(out, encoding="utf-8") as f:
        kwargs = json.load(f)["kwargs"]
    assert kwargs == {"_job": job, "out": out}
    assert (e["timeout"], e["max_retries"]) == (30.0, 1)
    assert job_row(rd, job)["retry_backoff_ms"] == 2000
