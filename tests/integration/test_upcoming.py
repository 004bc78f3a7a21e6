"""Upcoming runs over the whole schedule horizon (schedules.next, computed
from the definition past the 50 runs the store keeps), every schedule's next
runs merged in time order (schedules.next_all), and missed runs across
schedules (runs.missed). A real daemon over real HTTP; expected times are
computed here independently, with zoneinfo."""

import datetime
import heapq
import time
import zoneinfo

import pytest

from conftest import err, ok, req, unique, wait_for

API = "/api/v1"
MIN = 60000
DAY = 86400000
UTC = datetime.timezone.utc


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    daemon = module_spiderd(name="upcoming")
    r = daemon.request("POST", f"{API}/projects/up/versions", params={"version": "1"},
                       data=egg_bytes("testproj"),
                       headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return daemon


def create(d, project="up", **body):
    body.setdefault("name", unique("u"))
    body.setdefault("spider", "quick")
    return ok(req(d, "POST", "/schedules", json={"project": project, **body}), 201)


def pages(d, path, limit, **params):
    """Every page of a listing: the runs, and how many pages it took."""
    out, cursor, n = [], None, 0
    while True:
        p = dict(params, limit=limit)
        if cursor:
            p["cursor"] = cursor
        body = ok(req(d, "GET", path, params=p))
        out += body["runs"]
        n += 1
        cursor = body["next_cursor"]
        if not cursor:
            return out, n
        assert n < 10000


def ms(dt):
    return int(dt.timestamp() * 1000)


def test_per_minute_lists_three_days_through_paging(d):
    s = create(d, cron="* * * * *", tz="UTC")
    # The scheduler materialises its working set (at most 50 rows) first.
    stored = wait_for(lambda: ok(req(d, "GET", f"/schedules/{s['id']}/runs",
                                     params={"state": "upcoming", "limit": 1000}))["runs"],
                      10, "materialised runs")
    frm = int(time.time() * 1000)
    runs, n = pages(d, f"/schedules/{s['id']}/next", 1000, **{"from": str(frm)})
    first = (frm // MIN + 1) * MIN
    assert [r["due_ms"] for r in runs] == [first + i * MIN for i in range(4320)]
    assert n == 5 and runs[-1]["due_ms"] <= frm + 3 * DAY
    assert all(r["schedule_id"] == s["id"] and r["fire_ms"] == r["due_ms"] for r in runs)
    # The rows the scheduler keeps (at most 50) are the same runs, shown once.
    assert len(stored) <= 50
    # A row that fired meanwhile is no longer upcoming: compare the ones due
    # after the listing was read.
    by_due = {r["due_ms"]: r for r in runs}
    later = [row for row in stored if row["due_ms"] > int(time.time() * 1000) + MIN]
    assert later
    for row in later:
        assert by_due[row["due_ms"]]["run_id"] == row["id"]
    assert 0 < sum(1 for r in runs if r["run_id"]) <= 50
    # Without `from`: the window starts now; a bad cursor is refused.
    body = ok(req(d, "GET", f"/schedules/{s['id']}/next", params={"limit": 3}))
    assert len(body["runs"]) == 3 and body["next_cursor"]
    err(req(d, "GET", f"/schedules/{s['id']}/next", params={"cursor": "nope"}), 400,
        "SPD_EBADPARAM", "cursor")
    err(req(d, "GET", f"/schedules/{s['id']}/next", params={"limit": 0}), 400, "SPD_EBADPARAM")
    r = req(d, "GET", "/schedules/nosuch-schedule/next")
    assert r.status_code == 404, r.text
    ok(req(d, "POST", f"/schedules/{s['id']}/pause"))


def test_dst_zone_and_bounds(d):
    ny = zoneinfo.ZoneInfo("America/New_York")
    s = create(d, cron="30 2 * * *", tz="America/New_York")
    frm = ms(datetime.datetime(2027, 3, 12, 12, 0, tzinfo=UTC))
    runs, _ = pages(d, f"/schedules/{s['id']}/next", 2, **{"from": str(frm)})
    want = [ms(datetime.datetime(2027, 3, 13, 2, 30, tzinfo=ny)),
            ms(datetime.datetime(2027, 3, 14, 3, 0, tzinfo=ny)),  # 02:30 does not exist
            ms(datetime.datetime(2027, 3, 15, 2, 30, tzinfo=ny))]
    assert [r["due_ms"] for r in runs] == want
    assert want[1] == ms(datetime.datetime(2027, 3, 14, 7, 0, tzinfo=UTC))
    assert runs[0]["due"] == "2027-03-13T02:30:00-05:00"
    assert runs[2]["due"] == "2027-03-15T02:30:00-04:00"
    # An end bound cuts the horizon short.
    b = create(d, cron="0 * * * *", tz="UTC", end="2027-03-13T05:30:00Z")
    got, _ = pages(d, f"/schedules/{b['id']}/next", 100, **{"from": str(frm)})
    assert [r["due_ms"] for r in got] == [frm + h * 3600000 for h in range(1, 18)]
    for x in (s, b):
        ok(req(d, "POST", f"/schedules/{x['id']}/pause"))


def test_paused_schedules_are_left_out(d):
    s = create(d, cron="*/5 * * * *", tz="UTC")
    ok(req(d, "POST", f"/schedules/{s['id']}/pause"))
    body = ok(req(d, "GET", f"/schedules/{s['id']}/next"))
    assert body["paused"] is True and body["runs"] == [] and body["next_cursor"] is None
    every, _ = pages(d, "/schedules/next", 1000, project="up")
    assert s["id"] not in {r["schedule_id"] for r in every}
    ok(req(d, "POST", f"/schedules/{s['id']}/resume"))
    body = ok(req(d, "GET", f"/schedules/{s['id']}/next", params={"limit": 5}))
    assert body["paused"] is False and len(body["runs"]) == 5
    ok(req(d, "POST", f"/schedules/{s['id']}/pause"))


def test_next_all_merges_schedules_in_order(d, egg_bytes):
    project = unique("nm")
    r = d.request("POST", f"{API}/projects/{project}/versions", params={"version": "1"},
                  data=egg_bytes("testproj"),
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    a = create(d, project, cron="*/7 * * * *", tz="UTC")
    b = create(d, project, cron="*/10 * * * *", tz="UTC")
    c = create(d, project, cron="0 9 * * *", tz="Asia/Kolkata")  # 03:30 UTC
    frm = (int(time.time() * 1000) // MIN) * MIN
    got, n = pages(d, "/schedules/next", 37, project=project, **{"from": str(frm)})
    end = frm + 3 * DAY

    def minutes(step):
        out, t = [], frm + MIN
        t = -(-t // MIN) * MIN
        while t <= end:
            if (t // MIN) % 60 % step == 0:
                out.append(t)
            t += MIN
        return out
    kol = []
    day0 = datetime.datetime.fromtimestamp(frm / 1000, UTC).date()
    for k in range(5):
        t = ms(datetime.datetime.combine(day0 + datetime.timedelta(days=k),
                                         datetime.time(3, 30), UTC))
        if frm < t <= end:
            kol.append(t)
    want = list(heapq.merge(((t, a["id"]) for t in minutes(7)),
                            ((t, b["id"]) for t in minutes(10)),
                            ((t, c["id"]) for t in kol)))
    assert [(r["due_ms"], r["schedule_id"]) for r in got] == want
    assert n == -(-len(want) // 37)
    assert any(x[0] == y[0] for x, y in zip(want, want[1:]))  # ties come by id
    for x in (a, b, c):
        ok(req(d, "POST", f"/schedules/{x['id']}/pause"))
    assert ok(req(d, "GET", "/schedules/next", params={"project": project}))["runs"] == []
    err(req(d, "GET", "/schedules/next", params={"cursor": "1.x"}), 400, "SPD_EBADPARAM",
        "cursor")


def test_missed_runs_across_schedules(d, egg_bytes, module_spiderd):
    m = module_spiderd(name="missed", spiderd={"misfire_grace": 1})
    for p in ("ma", "mb"):
        r = m.request("POST", f"{API}/projects/{p}/versions", params={"version": "1"},
                      data=egg_bytes("testproj"),
                      headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 201, r.text
    made = [create(m, p, cron="* * * * * *", tz="UTC", overlap="skip", missed="skip",
                   args={"count": "0"}) for p in ("ma", "mb")]
    for s in made:
        wait_for(lambda: ok(req(m, "GET", f"/schedules/{s['id']}/runs",
                                params={"state": "fired"}))["runs"], 10, "a first run")
    m.stop()
    time.sleep(4)
    m.start()

    def missed_of(s):
        return ok(req(m, "GET", f"/schedules/{s['id']}/runs",
                      params={"state": "missed", "limit": 1000}))["runs"]
    wait_for(lambda: all(len(missed_of(s)) >= 2 for s in made), 10, "missed runs")
    for s in made:
        ok(req(m, "POST", f"/schedules/{s['id']}/pause"))
    per = {s["id"]: missed_of(s) for s in made}
    want = sorted(((r["due_ms"], r["id"]) for rs in per.values() for r in rs))
    got, n = pages(m, "/runs/missed", 2)
    assert [(r["due_ms"], r["id"]) for r in got] == want
    assert n >= len(want) // 2 and all(r["state"] == "missed" for r in got)
    # One project; one schedule (by name); a time window.
    only, _ = pages(m, "/runs/missed", 3, project="mb")
    assert [r["id"] for r in only] == [r["id"] for r in per[made[1]["id"]]]
    one, _ = pages(m, "/runs/missed", 1000, schedule=made[0]["name"])
    assert [r["id"] for r in one] == [r["id"] for r in per[made[0]["id"]]]
    cut = want[len(want) // 2][0]
    late, _ = pages(m, "/runs/missed", 1000, **{"from": str(cut)})
    assert [(r["due_ms"], r["id"]) for r in late] == [w for w in want if w[0] >= cut]
    early, _ = pages(m, "/runs/missed", 1000, to=str(cut))
    assert [(r["due_ms"], r["id"]) for r in early] == [w for w in want if w[0] < cut]
    err(req(m, "GET", "/runs/missed", params={"from": "5", "to": "4"}), 400, "SPD_EBADPARAM",
        "from")
    err(req(m, "GET", "/runs/missed", params={"cursor": "x"}), 400, "SPD_EBADPARAM", "cursor")
    assert req(m, "GET", "/runs/missed", params={"schedule": "nosuch"}).status_code == 404
