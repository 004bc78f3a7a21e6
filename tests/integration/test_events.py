"""The event log: listing with a cursor, and live Server-Sent Events."""

import threading

from conftest import timeout, unique

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
