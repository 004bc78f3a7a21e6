"""History retention: [spiderd] history_per_spider, history_days and
events_days, [retention] overrides, applied by the janitor to the store and
to the jobs' log and items files."""

import os
import re
import time

from conftest import wait_for

API = "/api/v1"
DAY_MS = 86400 * 1000


def finished_ids(d, project, spider):
    return {e["id"] for e in d.listjobs(project)["finished"] if e["spider"] == spider}


def rest_jobs(d, spider):
    r = d.request("GET", API + "/jobs", params={"spider": spider, "limit": 1000})
    assert r.status_code == 200, r.text
    return {j["job"]: j["state"] for j in r.json()["jobs"]}


def idle(d, project):
    lj = d.listjobs(project)
    return not lj["pending"] and not lj["running"]


def db(d):
    return d.db()


def test_count_per_spider_with_override(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 1, "items_dir": "items", "jobs_to_keep": 0,
                         "finished_to_keep": 0},
                spiderd={"history_per_spider": 2, "janitor_interval": 0.5},
                extra_conf="[retention]\nrp/fail = 3\n")
    d.upload("rp", "1.0", egg("testproj"))
    # One slot and equal priorities: they run, and end, in this order.
    quick = [d.schedule("rp", "quick") for _ in range(5)]
    fail = [d.schedule("rp", "fail") for _ in range(5)]

    def settled():
        return (idle(d, "rp") and finished_ids(d, "rp", "quick") == set(quick[-2:])
                and finished_ids(d, "rp", "fail") == set(fail[-3:]))
    wait_for(settled, 120, "only the newest jobs of each spider to remain")

    assert set(rest_jobs(d, "quick")) == set(quick[-2:])
    assert set(rest_jobs(d, "fail")) == set(fail[-3:])
    # The janitor removes a pruned job's files after its rows' commit.
    gone = [p for spider, jobs, keep in (("quick", quick, 2), ("fail", fail, 3))
            for job in jobs[:-keep]
            for p in (d.log_path("rp", spider, job), d.items_path("rp", spider, job))]
    wait_for(lambda: not any(os.path.exists(p) for p in gone), 30,
             "the pruned jobs' logs and items to go")
    for spider, jobs, keep in (("quick", quick, 2), ("fail", fail, 3)):
        for job in jobs[-keep:]:
            assert os.path.exists(d.log_path("rp", spider, job)), job
            assert os.path.exists(d.items_path("rp", spider, job)), job
    # daemonstatus counts what is left, not what ever ran.
    assert d.api("daemonstatus.json")["finished"] == 5
    # Counts in the daemon's log, not one line per file.
    wait_for(lambda: re.search(r"history pruned: \d+ job\(s\), \d+ log file\(s\)",
                               d.stderr_text()), 10, "the janitor's log line")

    # Survives a restart: the store, not memory, holds the result.
    d.restart()
    assert finished_ids(d, "rp", "quick") == set(quick[-2:])
    assert d.api("daemonstatus.json")["finished"] == 5


def test_age_limit_and_live_jobs(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 1, "jobs_to_keep": 0, "finished_to_keep": 0},
                spiderd={"history_days": 1, "janitor_interval": 0.5})
    d.upload("rp", "1.0", egg("testproj"))
    done = [d.schedule("rp", "quick") for _ in range(3)]
    wait_for(lambda: idle(d, "rp") and finished_ids(d, "rp", "quick") == set(done), 90,
             "three finished jobs")
    # The slot is taken by a long crawl; one more job waits behind it.
    slow = d.schedule("rp", "slow", seconds=120)
    d.wait_running(slow)
    pending = d.schedule("rp", "quick")

    # Two jobs ended two days ago; events older than events_days (30) too.
    con = db(d)
    old_cut = int(time.time() * 1000) - 35 * DAY_MS
    with con:
        con.execute("UPDATE jobs SET end_ms = end_ms - ? WHERE jobid IN (?, ?)",
                    (2 * DAY_MS, done[0], done[1]))
        con.execute("UPDATE events SET ts_ms = ts_ms - ? WHERE job_id IN "
                    "(SELECT id FROM jobs WHERE jobid = ?)", (40 * DAY_MS, done[2]))
        old_events = con.execute("SELECT count(*) FROM events WHERE ts_ms < ?",
                                 (old_cut,)).fetchone()[0]
    assert old_events > 0

    wait_for(lambda: finished_ids(d, "rp", "quick") == {done[2]}, 30,
             "the jobs that ended two days ago to go")
    wait_for(lambda: not any(os.path.exists(d.log_path("rp", "quick", job))
                             for job in done[:2]), 30, "their logs to go")
    assert os.path.exists(d.log_path("rp", "quick", done[2]))

    def events_gone():
        with con:
            return con.execute("SELECT count(*) FROM events WHERE ts_ms < ?",
                               (old_cut,)).fetchone()[0] == 0
    wait_for(events_gone, 30, "events older than events_days to go")
    con.close()

    # Running and pending jobs are never history.
    lj = d.listjobs("rp")
    assert [e["id"] for e in lj["running"]] == [slow]
    assert [e["id"] for e in lj["pending"]] == [pending]
    assert rest_jobs(d, "slow") == {slow: "running"}
    d.cancel("rp", pending)
    d.cancel("rp", slow, "KILL")
    d.wait_finished(slow, 30)
