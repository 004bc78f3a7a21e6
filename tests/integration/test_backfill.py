"""Backfills and exclusion calendars on a real daemon with real crawls.

A backfill runs a schedule again over a past window: one parent job whose
children are the slots' runs, at most max_running at once, each crawl told
its slot's time (SCHEDULED_TIME, and a spider argument when asked); only the
slots that never ran, unless asked otherwise; paused and cancelled as a
whole. A calendar names dates (and weekdays and hours) in a zone; a schedule
that refers to it leaves those times out of its plan and, when one comes,
records the run as skipped with the calendar's name."""

import datetime
import json

import pytest

from conftest import err, ok, req, unique, wait_for

UTC = datetime.timezone.utc
DAY = 86400000


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    # jobs_to_keep: the files of all seven runs of a backfill are read
    daemon = module_spiderd(name="backfill", scrapyd={"max_proc": 4, "items_dir": "items",
                                                      "jobs_to_keep": 100})
    daemon.upload("testproj", "1", egg("testproj"))
    return daemon


def create(d, **body):
    body.setdefault("name", unique("b"))
    body.setdefault("project", "testproj")
    return ok(req(d, "POST", "/schedules", json=body), 201)


def midnight(days_ago=0):
    today = datetime.datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - datetime.timedelta(days=days_ago)


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def children(d, parent, state=None):
    params = {"parent": parent, "limit": 1000}
    if state:
        params["state"] = state
    return ok(req(d, "GET", "/jobs", params=params))["jobs"]


def backfill(d, sid, status=201, **body):
    return ok(req(d, "POST", f"/schedules/{sid}/backfill", json=body), status)


def items(d, job_id):
    body = ok(req(d, "GET", f"/jobs/{job_id}/items"))
    text = body["text"]
    assert text, body
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_backfill_a_week_of_a_daily_schedule(d):
    s = create(d, spider="envdump", cron="0 6 * * *", tz="UTC")
    window = {"from": iso(midnight(7)), "to": iso(midnight(0) - datetime.timedelta(seconds=1))}
    want = [iso(midnight(k) + datetime.timedelta(hours=6)).replace("Z", "+00:00")
            for k in range(7, 0, -1)]

    dry = backfill(d, s["id"], 200, dry_run=True, **window)
    assert dry["dry_run"] is True and dry["backfill"] is None
    assert [x["due"] for x in dry["slots"]] == want and dry["count"] == 7
    assert ok(req(d, "GET", "/jobs", params={"schedule": s["id"]}))["jobs"] == []

    started = backfill(d, s["id"], max_running=2, slot_arg="day", slot_format="date", **window)
    bf = started["backfill"]
    assert bf["slots"] == 7 and bf["state"] == "running" and bf["max_running"] == 2
    parent = ok(req(d, "GET", f"/jobs/{bf['id']}"))
    assert parent["state"] == "running"

    most = 0

    def done():
        nonlocal most
        live = [j for j in children(d, bf["id"]) if j["state"] in ("pending", "running")]
        most = max(most, len(live))
        return ok(req(d, "GET", f"/backfills/{bf['id']}"))["state"] != "running"
    wait_for(done, 120, "the backfill to end", interval=0.1)

    got = ok(req(d, "GET", f"/backfills/{bf['id']}"))
    assert got["state"] == "finished" and got["released"] == 7
    assert got["children"]["finished"] == 7
    assert 1 <= most <= 2
    kids = children(d, bf["id"])
    assert len(kids) == 7 and all(k["schedule_id"] == s["id"] for k in kids)
    # Never more than two at once, by the jobs' own start and end times.
    edges = sorted([(k["started_ms"], 1) for k in kids] + [(k["ended_ms"], -1) for k in kids],
                   key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, step in edges:
        live += step
        peak = max(peak, live)
    assert peak <= 2
    seen = {}
    for k in kids:
        dump = items(d, k["id"])[0]
        seen[dump["env"]["SCHEDULED_TIME"]] = dump["kwargs"]["day"]
        assert "_scheduled_time" not in dump["kwargs"]
    assert sorted(seen) == want
    assert all(seen[t] == t[:10] for t in seen)
    assert ok(req(d, "GET", f"/jobs/{bf['id']}"))["state"] == "finished"

    # Only the slots that never ran: the two older days of a nine-day window.
    again = backfill(d, s["id"], 200, dry_run=True, order="newest",
                     **{**window, "from": iso(midnight(9))})
    assert again["count"] == 2 and again["left_out"]["ran"] == 7
    assert [x["due"][:10] for x in again["slots"]] == [iso(midnight(8))[:10],
                                                     iso(midnight(9))[:10]]
    # Every slot of the week ran: nothing is started.
    none = backfill(d, s["id"], 200, **window)
    assert none["backfill"] is None and none["count"] == 0 and none["left_out"]["ran"] == 7
    listed = ok(req(d, "GET", "/backfills"))["backfills"]
    assert bf["id"] in [b["id"] for b in listed]
    types = [e["type"] for e in ok(req(d, "GET", "/events", params={"job": bf["id"]}))["events"]]
    assert "backfill.started" in types and "backfill.finished" in types


def test_backfill_pause_resume_and_cancel(d):
    s = create(d, spider="slow", cron="0 * * * *", tz="UTC", args={"seconds": "60"})
    start = midnight(2)
    window = {"from": iso(start), "to": iso(start + datetime.timedelta(hours=9))}
    bf = backfill(d, s["id"], max_running=2, **window)["backfill"]
    assert bf["slots"] == 10
    wait_for(lambda: len(children(d, bf["id"], "running")) == 2, 30, "two running children")

    paused = ok(req(d, "POST", f"/backfills/{bf['id']}/pause"))
    assert paused["paused"] is True
    for k in children(d, bf["id"]):
        ok(req(d, "POST", f"/jobs/{k['id']}/cancel"))
    wait_for(lambda: not [k for k in children(d, bf["id"])
                          if k["state"] in ("pending", "running")], 30, "the children to end")
    import time
    time.sleep(2.5)  # ticks pass: a paused backfill releases nothing
    assert len(children(d, bf["id"])) == 2

    assert ok(req(d, "POST", f"/backfills/{bf['id']}/resume"))["paused"] is False
    wait_for(lambda: len(children(d, bf["id"])) == 4, 30, "two more children")
    wait_for(lambda: len(children(d, bf["id"], "running")) == 2, 30, "them running")

    cancelled = ok(req(d, "POST", f"/backfills/{bf['id']}/cancel"))
    assert cancelled["id"] == bf["id"]
    wait_for(lambda: not [k for k in children(d, bf["id"])
                          if k["state"] in ("pending", "running")], 30, "the runs to stop")
    time.sleep(2.5)
    assert len(children(d, bf["id"])) == 4
    got = ok(req(d, "GET", f"/backfills/{bf['id']}"))
    assert got["state"] == "cancelled" and got["released"] == 4
    assert ok(req(d, "GET", f"/jobs/{bf['id']}"))["state"] == "cancelled"
    err(req(d, "POST", f"/backfills/{bf['id']}/pause"), 409, "SPD_ECONFLICT")
    err(req(d, "POST", f"/backfills/{bf['id']}/cancel"), 409, "SPD_ECONFLICT")


def test_backfill_bad_input(d):
    s = create(d, spider="quick", cron="0 6 * * *", tz="UTC")
    path = f"/schedules/{s['id']}/backfill"
    w = {"from": iso(midnight(3)), "to": iso(midnight(1))}
    err(req(d, "POST", path, json={"to": w["to"]}), 400, "SPD_EMISSING")
    err(req(d, "POST", path, json={**w, "from": "yesterday"}), 400, "SPD_EBADPARAM", "from")
    err(req(d, "POST", path, json={"from": w["to"], "to": w["from"]}), 400, "SPD_EBADPARAM",
        "from")
    err(req(d, "POST", path, json={**w, "redo": "all"}), 400, "SPD_EBADPARAM", "redo")
    err(req(d, "POST", path, json={**w, "max_running": 0}), 400, "SPD_EBADPARAM")
    err(req(d, "POST", path, json={**w, "slot_arg": "_x"}), 400, "SPD_EBADPARAM", "slot_arg")
    err(req(d, "POST", "/schedules/nosuch/backfill", json=w), 404, "SPD_ENOSCHEDULE")
    e = create(d, spider="quick", cron="* * * * * *", tz="UTC")
    msg = err(req(d, "POST", f"/schedules/{e['id']}/backfill",
                  json={"from": iso(midnight(3)), "to": iso(midnight(1))}), 400, "SPD_EBADPARAM")
    assert "10000" in msg
    ok(req(d, "DELETE", f"/schedules/{e['id']}"), 204)
    err(req(d, "GET", "/backfills/999999"), 404, "SPD_ENOJOB")
    # A window in the future holds nothing to run yet: refused.
    err(req(d, "POST", path, json={"from": iso(midnight(-2)), "to": iso(midnight(-3))}), 400,
        "SPD_EBADPARAM", "from")


def test_calendars_crud_and_bad_input(d):
    name = unique("cal")
    body = {"name": name, "tz": "Europe/Paris", "dates": ["2026-12-25", "2027-01-01"],
            "weekdays": ["sat", "sun"], "hours": ["22:00-06:00"], "note": "closed"}
    c = ok(req(d, "POST", "/calendars", json=body), 201)
    assert c["name"] == name and c["dates"] == body["dates"] and c["schedules"] == []
    err(req(d, "POST", "/calendars", json=body), 409, "SPD_ECONFLICT")
    assert name in [x["name"] for x in ok(req(d, "GET", "/calendars"))["calendars"]]
    assert ok(req(d, "GET", f"/calendars/{name}"))["tz"] == "Europe/Paris"
    up = ok(req(d, "PUT", f"/calendars/{name}", json={"dates": ["2026-12-24"]}))
    assert up["dates"] == ["2026-12-24"] and "weekdays" not in up
    for bad in ({"dates": ["2026-02-30"]}, {"dates": ["tomorrow"]}, {"weekdays": ["funday"]},
                {"hours": ["25:00-26:00"]}, {"hours": ["10:00"]}, {},
                {"dates": ["2026-12-25"], "tz": "Mars/Olympus"}):
        err(req(d, "POST", "/calendars", json={"name": unique("bad"), **bad}), 400,
            "SPD_EBADPARAM")
    err(req(d, "POST", "/calendars", json={"name": "a/b", "dates": ["2026-12-25"]}), 400,
        "SPD_EBADPARAM")
    err(req(d, "GET", "/calendars/nosuch"), 404, "SPD_ENOCALENDAR")
    err(req(d, "PUT", "/calendars/nosuch", json={"dates": ["2026-12-25"]}), 404, "SPD_ENOCALENDAR")
    err(req(d, "POST", "/schedules", json={"name": unique("s"), "project": "testproj",
                                           "spider": "quick", "cron": "0 6 * * *",
                                           "calendars": ["nosuch"]}), 400, "SPD_EBADPARAM")
    ok(req(d, "DELETE", f"/calendars/{name}"), 204)
    err(req(d, "DELETE", f"/calendars/{name}"), 404, "SPD_ENOCALENDAR")


def test_holiday_calendar_leaves_days_out_of_the_plan(d):
    hol = unique("hol")
    days = [(midnight(-k)).strftime("%Y-%m-%d") for k in (1, 2)]  # tomorrow, the day after
    ok(req(d, "POST", "/calendars", json={"name": hol, "dates": days}), 201)
    s = create(d, spider="quick", cron="0 6 * * *", tz="UTC", calendars=[hol])
    assert s["calendars"] == [hol]
    assert not [t for t in s["next_runs"] if t[:10] in days] and len(s["next_runs"]) == 5
    nxt = ok(req(d, "GET", f"/schedules/{s['id']}/next", params={"limit": 10}))["runs"]
    assert nxt and not [r for r in nxt if r["due"][:10] in days]
    allnext = ok(req(d, "GET", "/schedules/next", params={"limit": 1000}))["runs"]
    assert not [r for r in allnext if r["schedule_id"] == s["id"] and r["due"][:10] in days]
    assert [r for r in allnext if r["schedule_id"] == s["id"]]

    def upcoming():
        return ok(req(d, "GET", f"/schedules/{s['id']}/runs",
                      params={"state": "upcoming", "limit": 1000}))["runs"]
    wait_for(lambda: upcoming(), 10, "upcoming runs")
    assert not [r for r in upcoming() if r["due"][:10] in days]
    assert ok(req(d, "GET", f"/calendars/{hol}"))["schedules"] == [s["id"]]
    err(req(d, "DELETE", f"/calendars/{hol}"), 409, "SPD_ECONFLICT")
    # Taken out of the schedule, the days are back in its plan.
    s2 = ok(req(d, "PATCH", f"/schedules/{s['id']}", json={"calendars": []}))
    assert s2["calendars"] == [] and [t for t in s2["next_runs"] if t[:10] in days]
    ok(req(d, "DELETE", f"/calendars/{hol}"), 204)


def test_a_run_due_in_a_calendar_is_skipped_with_its_name(d):
    cal = unique("now")
    days = [midnight(k).strftime("%Y-%m-%d") for k in (1, 0, -1)]
    ok(req(d, "POST", "/calendars", json={"name": cal, "dates": days}), 201)
    s = create(d, spider="quick", interval=1, calendars=[cal])

    def skipped():
        return ok(req(d, "GET", f"/schedules/{s['id']}/runs",
                      params={"state": "skipped", "limit": 1000}))["runs"]
    got = wait_for(lambda: len(skipped()) >= 2 and skipped(), 20, "two skipped runs")
    assert all(r["reason"] == f"in calendar '{cal}'" and r["job_id"] is None for r in got)
    fired = ok(req(d, "GET", f"/schedules/{s['id']}/runs", params={"state": "fired"}))["runs"]
    assert fired == []
    assert ok(req(d, "GET", "/jobs", params={"schedule": s["id"]}))["jobs"] == []
    ev = ok(req(d, "GET", "/events", params={"schedule": s["id"], "type": "run.skipped"}))
    assert ev["events"] and ev["events"][0]["data"]["calendar"] == cal
    # Backfills leave calendar days out as well.
    dry = backfill(d, s["id"], 200, dry_run=True, **{"from": iso(midnight(1)),
                                                       "to": iso(midnight(1) +
                                                                 datetime.timedelta(seconds=9))})
    # Every second of nine (an interval counts from its creation's millisecond).
    assert dry["count"] == 0 and dry["left_out"]["calendar"] in (9, 10)
    ok(req(d, "DELETE", f"/schedules/{s['id']}"), 204)
    ok(req(d, "DELETE", f"/calendars/{cal}"), 204)


def spiderd_cli(d, *args):
    """`spiderd ARGS` run by a user in the daemon's directory (its address from
    its scrapyd.conf)."""
    import os
    import subprocess
    from conftest import BIN, SANITIZER_MARKERS, timeout
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
    env["SPIDERD_CONFIG_FILES"] = d.conf_path
    p = subprocess.run([BIN, *args], cwd=d.workdir, env=env, capture_output=True, text=True,
                       timeout=timeout(30))
    assert not [x for x in p.stderr.splitlines() if any(m in x for m in SANITIZER_MARKERS)]
    return p


def test_cli_backfill_and_calendars(d):
    cal = unique("clical")
    p = spiderd_cli(d, "calendar", "add", cal, "--date", "2030-12-25", "-w", "sat",
                    "--hours", "01:00-02:00", "--tz", "Europe/Paris")
    assert p.returncode == 0, p.stderr
    assert "2030-12-25" in p.stdout
    p = spiderd_cli(d, "calendars", "--json")
    assert cal in [c["name"] for c in json.loads(p.stdout)["calendars"]]
    p = spiderd_cli(d, "calendar", "add", unique("x"))
    assert p.returncode == 2 and "--date" in p.stderr
    name = unique("clis")
    p = spiderd_cli(d, "schedule", "add", name, "-p", "testproj", "-s", "quick",
                    "--cron", "0 6 * * *", "--calendar", cal)
    assert p.returncode == 0, p.stderr
    assert ok(req(d, "GET", f"/schedules/{name}"))["calendars"] == [cal]

    p = spiderd_cli(d, "schedule", "backfill", name, "--from", iso(midnight(3)),
                    "--to", iso(midnight(1)), "--dry-run")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("2 slots to run"), p.stdout
    p = spiderd_cli(d, "schedule", "backfill", name, "--from", iso(midnight(3)),
                    "--to", iso(midnight(1)), "-m", "2", "--json")
    assert p.returncode == 0, p.stderr
    bid = json.loads(p.stdout)["backfill"]["id"]
    wait_for(lambda: ok(req(d, "GET", f"/backfills/{bid}"))["state"] == "finished", 60,
             "the backfill to finish")
    p = spiderd_cli(d, "backfill", "show", str(bid))
    assert p.returncode == 0 and "finished" in p.stdout, p.stdout
    p = spiderd_cli(d, "backfills")
    assert p.returncode == 0 and name in p.stdout
    p = spiderd_cli(d, "backfill", "pause", str(bid))
    assert p.returncode == 1 and "ended" in p.stderr
    p = spiderd_cli(d, "schedule", "backfill", name, "--to", iso(midnight(1)))
    assert p.returncode == 2 and "--from" in p.stderr
    assert spiderd_cli(d, "schedule", "edit", name, "--calendar", "").returncode == 0
    p = spiderd_cli(d, "calendar", "rm", cal)
    assert p.returncode == 0 and "deleted calendar" in p.stdout


def test_a_backfill_goes_on_after_a_restart(spiderd, egg):
    """The backfill lives in the store: a daemon started again releases the
    rest of its runs and ends it."""
    d = spiderd(scrapyd={"max_proc": 2})
    d.upload("testproj", "1", egg("testproj"))
    s = create(d, spider="quick", cron="0 6 * * *", tz="UTC")
    bf = backfill(d, s["id"], **{"from": iso(midnight(4)), "to": iso(midnight(0))})["backfill"]
    assert bf["slots"] == 4
    wait_for(lambda: ok(req(d, "GET", f"/backfills/{bf['id']}"))["children"]["finished"] >= 1,
             60, "a first run to finish")
    d.restart()
    wait_for(lambda: ok(req(d, "GET", f"/backfills/{bf['id']}"))["state"] != "running", 90,
             "the backfill to end after the restart")
    got = ok(req(d, "GET", f"/backfills/{bf['id']}"))
    assert got["released"] == 4 and sum(got["children"].values()) == 4
    assert got["state"] in ("finished", "failed")
    assert ok(req(d, "GET", f"/jobs/{bf['id']}"))["state"] == got["state"]
    # Scrapyd's listjobs shows the backfill's parent as it shows any job.
    r = d.request("GET", "/listjobs.json", params={"project": "testproj"})
    assert r.status_code == 200 and r.json()["status"] == "ok"
