"""Switching from Scrapyd: spiderd started in a Scrapyd directory takes over
the pending queues (dbs_dir/<project>.db) and the finished jobs of
SqliteJobStorage (dbs_dir/jobs.db), runs the pending ones in Scrapyd's order,
and never imports them twice."""

import json
import os
import sqlite3

from conftest import wait_for


def make_scrapyd_dbs(dbs):
    os.makedirs(dbs, exist_ok=True)
    # Scrapyd 1.6's SqliteSpiderQueue and SqliteJobStorage tables.
    q = sqlite3.connect(os.path.join(dbs, "p.db"))
    q.execute("CREATE TABLE spider_queue (id integer primary key, priority real key, message blob)")
    rows = [
        (0.0, {"name": "quick", "_job": "low", "settings": {"DOWNLOAD_DELAY": "0"}, "count": "1"}),
        (5.0, {"name": "quick", "_job": "high", "_version": "1.0", "count": "2"}),
        (0.0, {"name": "quick", "_job": "low2"}),
    ]
    for prio, msg in rows:
        q.execute("INSERT INTO spider_queue (priority, message) VALUES (?, ?)", (prio, json.dumps(msg)))
    q.commit()
    q.close()
    j = sqlite3.connect(os.path.join(dbs, "jobs.db"))
    j.execute("CREATE TABLE finished_jobs (id integer primary key, project text, spider text, "
              "job text, start_time datetime, end_time datetime)")
    j.execute("INSERT INTO finished_jobs (project, spider, job, start_time, end_time) VALUES "
              "('p', 'quick', 'ancient', '2026-01-02 03:04:05.250000', '2026-01-02 03:04:09')")
    j.commit()
    j.close()


def test_scrapyd_queues_and_history_are_taken_over(spiderd, egg):
    d = spiderd(start=False, scrapyd={"max_proc": 1})
    os.makedirs(d.path("eggs", "p"))
    with open(egg("testproj"), "rb") as src, open(d.path("eggs", "p", "1_0.egg"), "wb") as dst:
        dst.write(src.read())
    make_scrapyd_dbs(d.path("dbs"))
    d.start()

    # daemonstatus.json counts an end when the crawl exits, listjobs.json
    # shows it once the store has it: on a shared store, a moment later.
    def all_done():
        st = d.api("daemonstatus.json")
        return st["pending"] == 0 and st["running"] == 0 and st["finished"] == 4 and \
            len(d.listjobs()["finished"]) == 4
    wait_for(all_done, 90, "the imported jobs to run")
    finished = d.listjobs()["finished"]
    by_id = {e["id"]: e for e in finished}
    assert set(by_id) == {"low", "high", "low2", "ancient"}
    for job, items in (("low", 1), ("high", 2), ("low2", 3)):
        assert by_id[job]["state"] == "finished", by_id[job]
        assert by_id[job]["stats"]["items"] == items, by_id[job]
    # Scrapyd's order: priority first, then first come, first served.
    starts = sorted(("high", "low", "low2"), key=lambda j: by_id[j]["start_time"])
    assert starts == ["high", "low", "low2"]
    assert by_id["ancient"]["start_time"] == "2026-01-02 03:04:05.250000"
    assert by_id["ancient"]["end_time"] == "2026-01-02 03:04:09"
    # Renamed once imported: a restart (or Scrapyd again) does not run them twice.
    left = set(os.listdir(d.path("dbs")))
    assert {"jobs.db.imported-by-spiderd", "p.db.imported-by-spiderd"} <= left, left
    assert not {"jobs.db", "p.db"} & left, left
    d.restart()
    assert d.api("daemonstatus.json")["finished"] == 4
    assert d.api("daemonstatus.json")["pending"] == 0
