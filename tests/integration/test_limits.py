"""Limits per job: memory, CPU, log size and items size, per job
(`_memory_limit`, ... as spider arguments spiderd keeps for itself) and as
[spiderd] defaults. A crawl over a limit is stopped and recorded failed with
the limit as its end reason, in its stats (GET /api/v1/jobs/{id}) and in its
end event; every crawl's peak memory and CPU time are in its stats; a job
with no limits runs exactly as before.

The crawls are limitcrawl.py's scripted stand-ins, not Scrapy. This machine
has no delegated cgroup v2, so the rlimit path (prlimit) is what runs here;
the tests say so by checking the daemon's start-up line."""

import json
import os

import pytest

from conftest import SLOW

API = "/api/v1"
HERE = os.path.dirname(os.path.abspath(__file__))
CRAWL = os.path.join(HERE, "limitcrawl.py")
MB = 1 << 20


@pytest.fixture(scope="module")
def ld(module_spiderd, egg):
    """No default limits; a 0.2 s sweep so sizes are checked often."""
    d = module_spiderd(name="limits", scrapyd={"max_proc": 4, "items_dir": "items"},
                       spiderd={"python": CRAWL, "heartbeat_interval": 0.2,
                                "cancel_grace": 3})
    d.upload("p", "1.0", egg("testproj"))
    return d


def job(d, jobid):
    r = d.request("GET", f"{API}/jobs/{jobid}")
    assert r.status_code == 200, r.text
    return r.json()


def end_event(d, jobid):
    """(type, data) of the job's end event."""
    row = d.sql("SELECT id FROM jobs WHERE jobid = ?", jobid)[0]
    rows = d.sql("SELECT type, data FROM events WHERE job_id = ? ORDER BY id", row["id"])
    ends = [(r["type"], json.loads(r["data"]) if r["data"] else {}) for r in rows
            if r["type"] in ("job.finished", "job.failed", "job.cancelled", "job.lost")]
    assert len(ends) == 1, rows
    return ends[0]


def crawl_lines(d, jobid, prefix):
    text = d.read_log("p", "quick", jobid)
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


def ended(d, jobid, seconds=30):
    d.wait_finished(jobid, seconds * SLOW)
    return job(d, jobid)


def test_start_up_names_the_mechanism(ld):
    assert "job limits: enforced by rlimits" in ld.stderr_text()


def test_no_limits_runs_as_before_and_records_usage(ld):
    j = ld.schedule("p", "quick", mode="ok")
    got = ended(ld, j)
    assert got["state"] == "finished"
    assert got["exit_code"] == 0 and got["signal"] is None
    stats = got["stats"]
    assert "end_reason" not in stats
    # 40 MB of ballast and 0.5 s of CPU, as the sweep saw them
    assert stats["peak_memory_bytes"] >= 40 * MB, stats
    assert stats["cpu_time_seconds"] >= 0.4, stats
    # Not wrapped: the crawl runs with the daemon's own (unlimited) rlimits,
    # and its argv is Scrapyd's.
    limits = " ".join(crawl_lines(ld, j, "LIMIT "))
    assert "Max address space" in limits and "unlimited" in limits
    argv = json.loads(crawl_lines(ld, j, "ARGV ")[0])
    assert argv[:4] == ["-m", "spiderd_runner", "crawl", "quick"]
    assert "mode=ok" in argv
    assert end_event(ld, j)[1].get("reason") is None


def test_under_its_limits_a_job_finishes_and_its_limits_held(ld):
    j = ld.schedule("p", "quick", mode="ok", _memory_limit="1G", _cpu_limit="60",
                    _log_limit="10M")
    got = ended(ld, j)
    assert got["state"] == "finished", got
    assert "end_reason" not in got["stats"]
    assert got["stats"]["peak_memory_bytes"] >= 40 * MB
    assert got["stats"]["cpu_time_seconds"] > 0
    limits = crawl_lines(ld, j, "LIMIT ")
    assert any(line.startswith("Max address space") and str(1 << 30) in line for line in limits)
    assert any(line.startswith("Max cpu time") and " 60 " in line for line in limits), limits
    # The limits are spiderd's: stored with the job's args, never the spider's.
    argv = json.loads(crawl_lines(ld, j, "ARGV ")[0])
    assert not [a for a in argv if a.startswith(("_memory_limit", "_cpu_limit", "_log_limit"))]
    assert got["args"]["_memory_limit"] == "1G"


def test_memory_hog_is_stopped_at_its_limit(ld):
    j = ld.schedule("p", "quick", mode="hog", _memory_limit="200M")
    got = ended(ld, j)
    assert got["state"] == "failed", got
    assert got["stats"]["end_reason"] == "memory_limit", got
    # the crawl may die before the sweep's first look
    assert got["stats"].get("peak_memory_bytes", 0) <= 200 * MB
    assert "MemoryError" in ld.read_log("p", "quick", j)
    etype, data = end_event(ld, j)
    assert etype == "job.failed" and data["reason"] == "memory_limit"


def test_log_flood_is_cut_at_its_log_limit(ld):
    j = ld.schedule("p", "quick", mode="flood", _log_limit="1M")
    got = ended(ld, j)
    assert got["state"] == "failed", got
    assert got["stats"]["end_reason"] == "log_limit"
    size = os.path.getsize(ld.log_path("p", "quick", j))
    # ~3 MB/s, checked every 0.2 s and stopped by TERM: well under 4 MB over
    assert MB < size < 5 * MB, size
    etype, data = end_event(ld, j)
    assert etype == "job.failed" and data["reason"] == "log_limit"
    assert "went over its log_limit" in ld.stderr_text()


def test_items_flood_is_cut_at_its_items_limit(ld):
    j = ld.schedule("p", "quick", mode="items", _items_limit="1M")
    got = ended(ld, j)
    assert got["state"] == "failed", got
    assert got["stats"]["end_reason"] == "items_limit"
    size = os.path.getsize(ld.items_path("p", "quick", j))
    assert MB < size < 5 * MB, size


def test_cpu_burner_is_stopped_at_its_cpu_limit(ld):
    j = ld.schedule("p", "quick", mode="burn", _cpu_limit="1")
    got = ended(ld, j)
    assert got["state"] == "failed", got
    assert got["stats"]["end_reason"] == "cpu_limit", got
    assert got["signal"] == 24  # SIGXCPU, at the soft limit
    assert got["stats"].get("cpu_time_seconds", 0) <= 1.5


def test_a_bad_limit_is_refused(ld):
    msg = ld.api_error("schedule.json", project="p", spider="quick", _memory_limit="lots")
    assert "_memory_limit is invalid" in msg
    msg = ld.api_error("schedule.json", project="p", spider="quick", _cpu_limit="-1")
    assert "_cpu_limit is invalid" in msg
    r = ld.request("POST", API + "/jobs", json={"project": "p", "spider": "quick",
                                                "args": {"_max_procs": "many"}})
    assert r.status_code == 400, r.text
    assert "_max_procs is invalid" in r.text


def test_a_schedule_passes_its_limits_to_its_jobs(ld):
    r = ld.request("POST", API + "/schedules", json={
        "name": "flooder", "project": "p", "spider": "quick", "cron": "0 0 1 1 *",
        "tz": "UTC", "args": {"mode": "flood", "_log_limit": "1M"}})
    assert r.status_code == 201, r.text
    r = ld.request("POST", API + "/schedules/flooder/run")
    assert r.status_code == 201, r.text
    got = ended(ld, r.json()["job"])
    assert got["schedule_id"] is not None
    assert got["stats"]["end_reason"] == "log_limit"
    r = ld.request("POST", API + "/schedules", json={
        "name": "bad", "project": "p", "spider": "quick", "cron": "0 0 1 1 *",
        "args": {"_cpu_limit": "forever"}})
    assert r.status_code == 400 and "_cpu_limit is invalid" in r.text, r.text
    r = ld.request("PATCH", API + "/schedules/flooder", json={"args": {"_log_limit": "1T"}})
    assert r.status_code == 400 and "_log_limit is invalid" in r.text, r.text


def test_config_defaults_apply_to_jobs_without_their_own(spiderd, egg):
    d = spiderd(spiderd={"python": CRAWL, "heartbeat_interval": 0.2, "cancel_grace": 3,
                         "job_log_limit": "1M", "job_memory_limit": "2G"})
    d.upload("p", "1.0", egg("testproj"))
    j = d.schedule("p", "quick", mode="flood")
    got = ended(d, j)
    assert got["stats"]["end_reason"] == "log_limit"
    limits = crawl_lines(d, j, "LIMIT ")
    assert any(line.startswith("Max address space") and str(2 << 30) in line for line in limits)
    # A job's own value replaces the default.
    j = d.schedule("p", "quick", mode="ok", _log_limit="50M")
    assert ended(d, j)["state"] == "finished"


def test_job_limits_off_enforces_only_sizes(spiderd, egg):
    d = spiderd(spiderd={"python": CRAWL, "heartbeat_interval": 0.2, "job_limits": "off"})
    d.upload("p", "1.0", egg("testproj"))
    assert "limits are off" in d.stderr_text()
    j = d.schedule("p", "quick", mode="ok", _memory_limit="1G")
    assert ended(d, j)["state"] == "finished"
    assert "unlimited" in " ".join(l for l in crawl_lines(d, j, "LIMIT ")
                                   if l.startswith("Max address space"))


def test_a_scrapy_crawl_reports_its_own_usage(spiderd, egg):
    """spiderd_runner adds its getrusage at its end, exact even for a crawl
    shorter than one sweep; a memory limit it stays under changes nothing."""
    d = spiderd()
    d.upload("p", "1.0", egg("testproj"))
    j = d.schedule("p", "quick", count=1, _memory_limit="4G")
    got = ended(d, j, 60)
    assert got["state"] == "finished", got
    assert got["stats"]["peak_memory_bytes"] > 10 * MB  # Scrapy and Twisted loaded
    assert got["stats"]["cpu_time_seconds"] > 0.1
