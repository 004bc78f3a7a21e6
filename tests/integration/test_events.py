"""The event log: listing with a cursor, and live Server-Sent Events."""

import threading
import time

from conftest import rest, timeout, unique, wait_for

API = "/api/v1"


def read_events(resp, n, until=None):
    """Reads n SSE events (dicts with id, event, data) from a streaming response."""
    import json
    out, cur = [], {}
    for raw in resp.iter_lines(decode_unicode=True):
        if raw == "":
            if "data" in cur:
                cur["data"] = json.loads(cur["data"])
                out.append(cur)
                if len(out) >= n or (until and until(cur)):
                    return out
            cur = {}
            continue
        if raw.startswith(":"):
            continue
        key, _, value = raw.partition(": ")
        cur[key] = value
    return out


def make(d, name):
    r = d.request("POST", API + "/schedules", json={
        "name": name, "project": "testproj", "spider": "quick", "cron": "0 0 1 1 *"})
    assert r.status_code == 201, r.text
    return r.json()


def test_events_list_cursor_and_stream(spiderd, egg):
    d = spiderd()
    d.upload("testproj", "1", egg("testproj"))
    before = d.request("GET", API + "/events").json()["next_after"]

    stream = d.session.get(d.url + API + "/events/stream", params={"type": "schedule."},
                           stream=True, timeout=timeout(10))
    assert stream.status_code == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    got = []
    reader = threading.Thread(target=lambda: got.extend(read_events(stream, 3)))
    reader.start()
    names = [unique("e") for _ in range(2)]
    # The stream delivers what happens after its 200, nothing before.
    s0 = make(d, names[0])
    make(d, names[1])
    assert d.request("POST", f"{API}/schedules/{s0['id']}/pause").status_code == 200
    reader.join(timeout(10))
    assert [e["event"] for e in got] == ["schedule.created", "schedule.created", "schedule.paused"]
    assert [e["data"]["data"]["name"] for e in got] == [names[0], names[1], names[0]]
    ids = [int(e["id"]) for e in got]
    assert ids == sorted(ids) and ids[0] > before
    stream.close()

    # The list API pages through the same events.
    page = d.request("GET", API + "/events", params={"after": before, "type": "schedule.",
                                                    "limit": 2}).json()
    assert [e["id"] for e in page["events"]] == ids[:2]
    page = d.request("GET", API + "/events", params={"after": page["next_after"],
                                                    "type": "schedule."}).json()
    assert [e["id"] for e in page["events"]] == ids[2:]

    # Reconnecting with Last-Event-ID replays what came after it, filters hold.
    again = d.session.get(d.url + API + "/events/stream", params={"schedule": s0["id"]},
                          headers={"Last-Event-ID": str(ids[0])}, stream=True,
                          timeout=timeout(10))
    replay = read_events(again, 1)
    again.close()
    assert [int(e["id"]) for e in replay] == [ids[2]]

    bad = d.request("GET", API + "/events/stream", params={"after": "x"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "SPD_EBADPARAM"


def test_stream_open_while_daemon_stops(spiderd):
    d = spiderd()
    stream = d.session.get(d.url + API + "/events/stream", stream=True, timeout=timeout(10))
    assert stream.status_code == 200
    d.stop()  # must exit 0 promptly with the stream open
    # The stream was opened (its retry hint) and then ended by the stop,
    # rather than left hanging until the client's timeout.
    lines = list(stream.iter_lines(decode_unicode=True))
    assert lines[0] == "retry: 2000", lines


def events(d, **params):
    return rest(d, "GET", "/events", params=params)


def test_events_newest_first_paged_back_with_before(spiderd, egg):
    d = spiderd()
    d.upload("testproj", "1", egg("testproj"))
    start = events(d)["next_after"]
    s = [make(d, unique("nf")) for _ in range(3)]
    for x in s[:2]:
        assert d.request("POST", f"{API}/schedules/{x['id']}/pause").status_code == 200
    r = d.request("POST", f"{API}/schedules/{s[2]['id']}/run")
    assert r.status_code == 201, r.text
    job = r.json()
    d.wait_finished(job["job"])

    # Once the job has ended nothing else happens: the log holds still.
    def settled():
        a = events(d, after=start, limit=1000)["events"]
        time.sleep(0.3)
        return a if a == events(d, after=start, limit=1000)["events"] else None
    log = wait_for(settled, 10, "a quiet event log")
    ids = [e["id"] for e in log]
    assert len(ids) >= 8 and ids == sorted(ids)
    newest = ids[::-1]

    # The newest page in one call, then older pages through next_before.
    page = events(d, order="desc", limit=3)
    assert [e["id"] for e in page["events"]] == newest[:3]
    assert page["next_after"] == ids[-1] and page["next_before"] == newest[2]
    got, before = [], None
    while True:
        params = {"order": "desc", "limit": 3, "after": start}
        if before is not None:
            params["before"] = before
        page = events(d, **params)
        got += [e["id"] for e in page["events"]]
        before = page["next_before"]
        if before is None:
            break
        assert len(page["events"]) == 3 and before == got[-1]
    assert got == newest
    empty = events(d, order="desc", after=start, before=ids[0])
    assert empty == {"events": [], "next_after": start, "next_before": None}

    # Filters combine with the order and the bounds.
    def want(pred):
        return [e["id"] for e in log if pred(e)][::-1]
    sched = [e["id"] for e in events(d, order="desc", type="schedule.", after=start)["events"]]
    assert sched == want(lambda e: e["type"].startswith("schedule.")) and len(sched) == 5
    assert [e["type"] for e in events(d, order="desc", type="schedule.", limit=2)["events"]] == \
        ["schedule.paused", "schedule.paused"]
    one = events(d, order="desc", schedule=s[0]["id"])["events"]
    assert [e["type"] for e in one] == ["schedule.paused", "schedule.created"]
    of_job = events(d, order="desc", job=job["id"])["events"]
    assert [e["id"] for e in of_job] == want(lambda e: e["job_id"] == job["id"])
    assert of_job[0]["type"] in ("job.finished", "job.failed") and of_job[-1]["type"] == "job.queued"
    both = events(d, order="desc", type="job.", schedule=s[2]["id"], job=job["id"],
                  before=of_job[0]["id"], limit=2)
    assert [e["id"] for e in both["events"]] == [e["id"] for e in of_job[1:3]]
    assert both["next_before"] == of_job[2]["id"]

    # after and before together are a window; oldest first when no order is given.
    window = events(d, after=ids[0], before=ids[4])
    assert [e["id"] for e in window["events"]] == ids[1:4] and window["next_after"] == ids[3]
    assert "next_before" not in window
    # Without the new parameters the reply is what it always was.
    plain = d.request("GET", API + "/events", params={"after": start, "limit": 4})
    asc = d.request("GET", API + "/events", params={"after": start, "limit": 4, "order": "asc"})
    assert plain.content == asc.content
    assert set(plain.json()) == {"events", "next_after"}

    # JSON-RPC takes the same parameters.
    r = d.request("POST", API + "/jsonrpc", json={
        "jsonrpc": "2.0", "id": 1, "method": "events.list",
        "params": {"order": "desc", "limit": 2, "before": ids[-1]}})
    assert r.status_code == 200, r.text
    assert [e["id"] for e in r.json()["result"]["events"]] == newest[1:3]

    for bad in ({"order": "newest"}, {"order": ""}, {"before": "0"}, {"before": "x"}):
        r = d.request("GET", API + "/events", params=bad)
        assert r.status_code == 400, (bad, r.text)
        e = r.json()["error"]
        field = next(iter(bad))
        assert e["code"] == "SPD_EBADPARAM" and e["details"]["field"] == field, (bad, e)
    r = d.request("POST", API + "/jsonrpc", json={
        "jsonrpc": "2.0", "id": 2, "method": "events.list", "params": {"order": "up"}})
    assert r.json()["error"]["code"] == -32602 and r.json()["error"]["data"]["code"] == "SPD_EBADPARAM"
