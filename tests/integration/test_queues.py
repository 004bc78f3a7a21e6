"""Task queues over the native API (docs/queues.md): every route, REST and
JSON-RPC, against a real daemon: uniqueness and policies, due times and
priorities, leases (ack, nack, extend, expiry), dead letters, politeness
limits, counters, bad input, long-poll take, concurrent takers, a crash,
and the job-scoped token a crawl gets."""

import datetime
import json
import os
import socket
import statistics
import threading
import time

import pytest
import requests

from conftest import timeout, unique, wait_for

API = "/api/v1"


@pytest.fixture(scope="module")
def d(module_spiderd):
    return module_spiderd(name="queues")


def req(d, method, path, **kw):
    return d.request(method, API + path, **kw)


def ok(r, status=200):
    assert r.status_code == status, f"{r.status_code}: {r.text[:500]}"
    assert r.headers.get("Content-Type") == "application/json"
    return r.json()


def err(r, status, code):
    """Checks the API's one error shape; returns the message."""
    assert r.status_code == status, f"{r.status_code}: {r.text[:500]}"
    e = r.json()["error"]
    assert list(e) == ["code", "message", "details"], e
    assert e["code"] == code, e
    assert e["message"]
    return e["message"]


def put(d, q, *elements, **body):
    if elements:
        body["elements"] = list(elements)
    return ok(req(d, "POST", f"/queues/{q}/put", json=body))


def take(d, q, **body):
    return ok(req(d, "POST", f"/queues/{q}/take", json=body))["items"]


def ack(d, q, *leases):
    return ok(req(d, "POST", f"/queues/{q}/ack", json={"leases": list(leases)}))


def get(d, q):
    return ok(req(d, "GET", f"/queues/{q}"))


def items(d, q, **params):
    return ok(req(d, "GET", f"/queues/{q}/items", params=params))["items"]


def rpc(d, method, **params):
    r = req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 7, "method": method,
                                          "params": params})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == 7
    return body


def iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat().replace(
        "+00:00", "Z")


def parse_iso(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


# ---- queues and settings ---------------------------------------------------

def test_set_get_list_delete(d):
    q = unique("qs")
    err(req(d, "GET", f"/queues/{q}"), 404, "SPD_ENOQUEUE")
    got = ok(req(d, "PUT", f"/queues/{q}", json={"visibility": 12.5, "max_deliveries": 3,
                                                  "key_mode": "host", "key_rate": 2}))
    assert got["name"] == q
    assert got["visibility"] == 12.5 and got["max_deliveries"] == 3
    assert got["key_mode"] == "host" and got["key_rate"] == 2
    assert got["backoff"] == 1 and got["backoff_max"] == 3600 and got["paused"] is False
    assert got["stats"]["size"] == 0 and got["stats"]["oldest_due"] is None
    # A subset changes only what it names.
    got = ok(req(d, "PUT", f"/queues/{q}", json={"keep_done": True}))
    assert got["keep_done"] is True and got["visibility"] == 12.5 and got["key_mode"] == "host"
    assert get(d, q) == got
    names = [x["name"] for x in ok(req(d, "GET", "/queues"))["queues"]]
    assert q in names
    assert ok(req(d, "DELETE", f"/queues/{q}")) == {"deleted": True}
    err(req(d, "DELETE", f"/queues/{q}"), 404, "SPD_ENOQUEUE")
    err(req(d, "GET", f"/queues/{q}"), 404, "SPD_ENOQUEUE")
    assert q not in [x["name"] for x in ok(req(d, "GET", "/queues"))["queues"]]


def test_unknown_queue_is_404_except_put_and_take(d):
    q = unique("qu")
    assert take(d, q) == []
    for path, body in (("ack", {"leases": ["1.1"]}), ("nack", {"leases": ["1.1"]}),
                       ("extend", {"leases": ["1.1"]}), ("pause", None), ("resume", None),
                       ("requeue", {}), ("purge", {})):
        err(req(d, "POST", f"/queues/{q}/{path}", json=body), 404, "SPD_ENOQUEUE")
    err(req(d, "GET", f"/queues/{q}/items"), 404, "SPD_ENOQUEUE")
    assert put(d, q, "x")["added"] == 1  # put creates it
    assert get(d, q)["stats"]["size"] == 1


# ---- put, take, ack --------------------------------------------------------

def test_put_take_ack(d):
    q = unique("qp")
    r = put(d, q, "a", {"element": "b", "priority": 5})
    assert (r["added"], r["moved"], r["kept"], r["deferred"]) == (2, 0, 0, 0)
    assert len(r["ids"]) == 2 and all(isinstance(i, int) for i in r["ids"])
    got = take(d, q, max=10, visibility=60)
    assert [i["element"] for i in got] == ["b", "a"]  # higher priority first
    b = got[0]
    assert b["id"] == r["ids"][1] and b["state"] == "inflight" and b["deliveries"] == 1
    assert b["lease"].startswith(f"{b['id']}.")
    assert abs(parse_iso(b["lease_expires"]) - (time.time() + 60)) < 5
    assert set(b) == {"id", "element", "lease", "lease_expires", "priority", "due", "deliveries",
                      "key", "state", "error"}
    assert take(d, q) == []  # both in flight
    assert ack(d, q, b["lease"], got[1]["lease"]) == {"acked": 2, "stale": []}
    # A second ack of the same lease is stale.
    assert ack(d, q, b["lease"]) == {"acked": 0, "stale": [b["lease"]]}
    st = get(d, q)["stats"]
    assert st["size"] == 0 and st["inflight"] == 0 and st["acked"] == 2 and st["put"] == 2


def test_take_acks_what_it_names_first(d):
    """A worker's loop in one request per element: ack the last, take the next."""
    q = unique("qta")
    put(d, q, "a", "b", "c")
    [a] = take(d, q)
    r = ok(req(d, "POST", f"/queues/{q}/take", json={"ack": [a["lease"]], "max": 1}))
    assert r["acked"] == 1 and r["stale"] == []
    [b] = r["items"]
    assert b["element"] == "b"
    # A stale lease is reported, and the take still happens.
    r = ok(req(d, "POST", f"/queues/{q}/take", json={"ack": [a["lease"], b["lease"]]}))
    assert r["acked"] == 1 and r["stale"] == [a["lease"]]
    assert [i["element"] for i in r["items"]] == ["c"]
    # The last ack with nothing left to take; without "ack" the reply is as before.
    r = ok(req(d, "POST", f"/queues/{q}/take", json={"ack": [r["items"][0]["lease"]]}))
    assert r == {"items": [], "acked": 1, "stale": []}
    assert set(ok(req(d, "POST", f"/queues/{q}/take", json={}))) == {"items"}
    st = get(d, q)["stats"]
    assert st["size"] == 0 and st["acked"] == 3
    # Over JSON-RPC too, and bad leases are refused before anything is taken.
    put(d, q, "d")
    [x] = take(d, q)
    res = rpc(d, "queues.take", name=q, ack=[x["lease"]])["result"]
    assert res["acked"] == 1 and res["items"] == []
    put(d, q, "e")
    err(req(d, "POST", f"/queues/{q}/take", json={"ack": ["nope"]}), 400, "SPD_EBADPARAM")
    err(req(d, "POST", f"/queues/{q}/take", json={"ack": "1.1"}), 400, "SPD_EBADPARAM")
    assert get(d, q)["stats"]["waiting"] == 1


def test_single_element_body_and_top_level_defaults(d):
    q = unique("qe")
    r = put(d, q, element="one", priority=3, delay=60)
    assert r["added"] == 1
    it = items(d, q)[0]
    assert it["element"] == "one" and it["priority"] == 3 and it["state"] == "waiting"
    assert abs(parse_iso(it["due"]) - (time.time() + 60)) < 5
    # Top-level fields are the defaults of every entry.
    put(d, q, "x", {"element": "y", "priority": 1}, priority=9)
    got = {i["element"]: i["priority"] for i in items(d, q)}
    assert got == {"one": 3, "x": 9, "y": 1}


def test_second_put_moves_never_duplicates(d):
    q = unique("qd")
    first = put(d, q, {"element": "u", "delay": 100})
    again = put(d, q, {"element": "u", "delay": 0, "priority": 2})  # overwrite (default)
    assert (again["added"], again["moved"]) == (0, 1)
    assert again["ids"] == first["ids"]
    listed = items(d, q)
    assert len(listed) == 1 and listed[0]["priority"] == 2
    assert parse_iso(listed[0]["due"]) <= time.time() + 1
    assert get(d, q)["stats"]["size"] == 1
    # Same due and priority again: kept (nothing to move).
    r = put(d, q, {"element": "u", "priority": 2})
    assert r["added"] == 0 and r["moved"] + r["kept"] == 1
    assert get(d, q)["stats"]["size"] == 1


def test_policies(d):
    q = unique("qpol")
    now = time.time()
    put(d, q, {"element": "e", "delay": 100, "priority": 1})
    # keep-earliest: an earlier due time and a higher priority win ...
    r = put(d, q, {"element": "e", "delay": 50, "priority": 0}, policy="keep-earliest")
    assert r["moved"] == 1
    it = items(d, q)[0]
    assert abs(parse_iso(it["due"]) - (now + 50)) < 5 and it["priority"] == 1
    # ... a later one does not.
    r = put(d, q, {"element": "e", "delay": 500, "policy": "keep-earliest"})
    assert r["kept"] == 1
    assert abs(parse_iso(items(d, q)[0]["due"]) - (now + 50)) < 5
    # keep-existing: it stays as it is.
    r = put(d, q, {"element": "e", "delay": 0, "priority": 7, "policy": "keep-existing"})
    assert r["kept"] == 1
    it = items(d, q)[0]
    assert it["priority"] == 1 and abs(parse_iso(it["due"]) - (now + 50)) < 5
    # overwrite: the new due time and priority win, even when later.
    r = put(d, q, {"element": "e", "delay": 900, "priority": -3, "policy": "overwrite"})
    assert r["moved"] == 1
    it = items(d, q)[0]
    assert it["priority"] == -3 and abs(parse_iso(it["due"]) - (now + 900)) < 5
    assert get(d, q)["stats"]["size"] == 1


def test_put_while_in_flight_is_deferred_until_ack(d):
    q = unique("qdef")
    put(d, q, "p")
    lease = take(d, q, visibility=60)[0]["lease"]
    r = put(d, q, {"element": "p", "delay": 0.3})
    assert r["deferred"] == 1
    assert get(d, q)["stats"]["inflight"] == 1
    ack(d, q, lease)
    # Waiting again at the deferred due time: a spider that schedules its
    # own next visit before acking loses nothing.
    assert get(d, q)["stats"]["waiting"] == 1
    got = wait_for(lambda: take(d, q), timeout(10), "the deferred element")
    assert got[0]["element"] == "p"


def test_delay_due_and_priority_order(d):
    q = unique("qo")
    put(d, q, {"element": "later", "delay": 0.5}, {"element": "low", "priority": -1},
        {"element": "high", "priority": 10}, {"element": "mid"},
        {"element": "past", "due": iso(time.time() - 3600)},
        {"element": "future", "due": iso(time.time() + 3600), "priority": 99})
    got = [i["element"] for i in take(d, q, max=10)]
    # Highest priority first, then earliest due; not-yet-due ones wait.
    assert got == ["high", "past", "mid", "low"]
    st = get(d, q)["stats"]
    assert st["waiting"] == 2 and st["past_due"] == 0 and st["inflight"] == 4
    assert abs(parse_iso(st["oldest_due"]) - time.time()) < 5  # "later"
    time.sleep(0.6)
    assert get(d, q)["stats"]["past_due"] == 1
    assert [i["element"] for i in take(d, q, max=10)] == ["later"]


def test_nack_extend_and_stale_leases(d):
    q = unique("qn")
    ok(req(d, "PUT", f"/queues/{q}", json={"max_deliveries": 0}))
    put(d, q, "n1", "n2", "n3")
    a, b, c = take(d, q, max=3, visibility=30)
    r = ok(req(d, "POST", f"/queues/{q}/nack", json={
        "leases": [a["lease"], {"lease": b["lease"], "delay": 60, "error": "HTTP 503"}],
        "delay": 0}))
    assert r == {"nacked": 2, "dead": 0, "stale": []}
    again = take(d, q, max=3)
    assert [i["element"] for i in again] == [a["element"]]
    assert again[0]["deliveries"] == 2
    listed = {i["element"]: i for i in items(d, q)}
    assert listed[b["element"]]["error"] == "HTTP 503"
    assert listed[b["element"]]["state"] == "waiting"
    assert abs(parse_iso(listed[b["element"]]["due"]) - (time.time() + 60)) < 5
    # extend: the lease lasts longer; a lease no longer held is stale.
    r = ok(req(d, "POST", f"/queues/{q}/extend", json={"leases": [c["lease"], a["lease"]],
                                                        "visibility": 120}))
    assert r == {"extended": 1, "stale": [a["lease"]]}
    exp = [i for i in items(d, q, state="inflight") if i["element"] == c["element"]][0]
    assert abs(parse_iso(exp["lease_expires"]) - (time.time() + 120)) < 5
    # An ack with the old lease of a redelivered element is refused.
    r = ack(d, q, a["lease"], again[0]["lease"])
    assert r == {"acked": 1, "stale": [a["lease"]]}


def test_lease_expiry_redelivers(d):
    q = unique("qx")
    put(d, q, "slowwork")
    first = take(d, q, visibility=0.3)[0]
    assert take(d, q) == []
    time.sleep(0.5)
    second = take(d, q, visibility=30)[0]
    assert second["element"] == "slowwork" and second["deliveries"] == 2
    assert second["lease"] != first["lease"]
    # The slow worker's ack comes too late: refused, the new holder's stands.
    assert ack(d, q, first["lease"])["stale"] == [first["lease"]]
    assert ack(d, q, second["lease"])["acked"] == 1


def test_max_deliveries_dead_requeue_purge(d):
    q = unique("qdl")
    ok(req(d, "PUT", f"/queues/{q}", json={"max_deliveries": 2}))
    put(d, q, "d1", "d2", "d3")
    for round_ in range(2):
        got = take(d, q, max=3)
        assert len(got) == 3
        r = ok(req(d, "POST", f"/queues/{q}/nack", json={
            "leases": [g["lease"] for g in got], "delay": 0, "error": f"round {round_}"}))
        assert r["dead"] == (3 if round_ == 1 else 0)
    assert take(d, q) == []
    st = get(d, q)["stats"]
    assert st["dead"] == 3 and st["size"] == 0
    dead = items(d, q, state="dead")
    assert sorted(i["element"] for i in dead) == ["d1", "d2", "d3"]
    assert all(i["error"] == "round 1" and i["deliveries"] == 2 for i in dead)
    # requeue (default: the dead ones), one of them by id.
    r = ok(req(d, "POST", f"/queues/{q}/requeue", json={"ids": [dead[0]["id"]]}))
    assert r == {"requeued": 1}
    got = take(d, q)
    assert got[0]["id"] == dead[0]["id"] and got[0]["deliveries"] == 1
    ack(d, q, got[0]["lease"])
    # purge the rest of the dead.
    assert ok(req(d, "POST", f"/queues/{q}/purge", json={"state": "dead"})) == {"purged": 2}
    st = get(d, q)["stats"]
    assert st["dead"] == 0 and st["size"] == 0
    # requeue by prefix and state list, purge everything.
    put(d, q, "pa", "pb", "zz")
    ok(req(d, "POST", f"/queues/{q}/requeue", json={"state": ["waiting"], "prefix": "p",
                                                     "delay": 100}))
    assert [i["element"] for i in take(d, q, max=5)] == ["zz"]
    assert ok(req(d, "POST", f"/queues/{q}/purge", json={}))["purged"] == 3
    assert get(d, q)["stats"]["size"] == 0


def test_expired_lease_counts_toward_max_deliveries(d):
    q = unique("qxd")
    ok(req(d, "PUT", f"/queues/{q}", json={"max_deliveries": 1}))
    put(d, q, "once")
    take(d, q, visibility=0.2)
    time.sleep(0.4)
    assert take(d, q) == []
    assert get(d, q)["stats"]["dead"] == 1


def test_keep_done_remembers_acked_elements(d):
    q = unique("qk")
    ok(req(d, "PUT", f"/queues/{q}", json={"keep_done": True}))
    put(d, q, "seen")
    ack(d, q, take(d, q)[0]["lease"])
    assert get(d, q)["stats"]["done"] == 1
    assert items(d, q, state="done")[0]["element"] == "seen"
    r = put(d, q, {"element": "seen", "policy": "keep-existing"})
    assert r["kept"] == 1 and take(d, q) == []
    r = put(d, q, "seen")  # overwrite: it comes back as new
    assert r["added"] + r["moved"] == 1
    assert take(d, q)[0]["element"] == "seen"


def test_pause_resume(d):
    q = unique("qpr")
    put(d, q, "w")
    assert ok(req(d, "POST", f"/queues/{q}/pause"))["paused"] is True
    assert take(d, q) == []
    assert put(d, q, "w2")["added"] == 1  # puts still land
    assert get(d, q)["paused"] is True and get(d, q)["stats"]["size"] == 2
    assert ok(req(d, "POST", f"/queues/{q}/resume"))["paused"] is False
    assert len(take(d, q, max=5)) == 2


def test_per_key_inflight_limit_and_rate(d):
    q = unique("qh")
    ok(req(d, "PUT", f"/queues/{q}", json={"key_mode": "host", "key_inflight": 1}))
    put(d, q, "https://a.example/1", "https://a.example/2", "https://B.example:8080/1",
        "https://b.example/2", "not a url")
    got = take(d, q, max=10)
    keys = sorted(i["key"] for i in got)
    assert keys == ["", "a.example", "b.example"]  # one per host
    assert take(d, q, max=10) == []
    ack(d, q, *[g["lease"] for g in got if g["key"] == "a.example"])
    again = take(d, q, max=10)
    assert [i["element"] for i in again] == [
        e for e in ("https://a.example/1", "https://a.example/2")
        if e not in [g["element"] for g in got]]
    # An explicit key wins over the derived one.
    put(d, q, {"element": "https://c.example/x", "key": "custom"})
    assert take(d, q)[0]["key"] == "custom"
    # The rate: 2 per second per key, bucket of 1.
    q2 = unique("qr")
    ok(req(d, "PUT", f"/queues/{q2}", json={"key_mode": "host", "key_rate": 2, "key_burst": 1}))
    put(d, q2, *[f"https://r.example/{i}" for i in range(4)])
    t0 = time.monotonic()
    n = 0
    while n < 3:
        n += len(take(d, q2, max=10))
        time.sleep(0.02)
    assert time.monotonic() - t0 >= 0.8  # three takes at 2/s: two waits of ~0.5 s


def test_nack_retry_after_blocks_the_key(d):
    q = unique("qra")
    ok(req(d, "PUT", f"/queues/{q}", json={"key_mode": "host"}))
    put(d, q, "https://slow.example/1", "https://slow.example/2", "https://fast.example/1")
    got = take(d, q, max=1)
    assert got[0]["key"] in ("slow.example", "fast.example")
    if got[0]["key"] == "fast.example":
        ack(d, q, got[0]["lease"])
        got = take(d, q, max=1)
    ok(req(d, "POST", f"/queues/{q}/nack", json={"leases": [got[0]["lease"]],
                                                 "retry_after": 60, "error": "429"}))
    rest = take(d, q, max=10)
    assert all(i["key"] != "slow.example" for i in rest)


def test_max_inflight(d):
    q = unique("qmi")
    ok(req(d, "PUT", f"/queues/{q}", json={"max_inflight": 2}))
    put(d, q, *"abcde")
    assert len(take(d, q, max=10)) == 2
    assert take(d, q, max=10) == []


def test_stats_counters(d):
    q = unique("qst")
    put(d, q, "s1", "s2", {"element": "s3", "delay": 100})
    st = get(d, q)["stats"]
    assert (st["size"], st["waiting"], st["past_due"], st["inflight"], st["dead"]) == (3, 3, 2, 0, 0)
    assert parse_iso(st["oldest_due"]) <= time.time() + 1
    t = take(d, q)
    st = get(d, q)["stats"]
    assert (st["size"], st["waiting"], st["past_due"], st["inflight"]) == (3, 2, 1, 1)
    ack(d, q, t[0]["lease"])
    st = get(d, q)["stats"]
    assert (st["size"], st["inflight"], st["acked"], st["put"]) == (2, 0, 1, 3)
    listed = [x for x in ok(req(d, "GET", "/queues"))["queues"] if x["name"] == q][0]
    assert listed["stats"] == get(d, q)["stats"] or listed["stats"]["size"] == 2


def test_items_paging_and_filters(d):
    q = unique("qi")
    put(d, q, *[f"item{i:02d}" for i in range(25)], {"element": "keyed", "key": "k1"})
    seen, cursor = [], None
    while True:
        params = {"limit": 10}
        if cursor:
            params["cursor"] = cursor
        page = ok(req(d, "GET", f"/queues/{q}/items", params=params))
        seen += [i["element"] for i in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == 26 and len(set(seen)) == 26
    assert [i["element"] for i in items(d, q, key="k1")] == ["keyed"]
    assert len(items(d, q, prefix="item1")) == 10
    assert items(d, q, state="dead") == []
    page = ok(req(d, "GET", f"/queues/{q}/items", params={"limit": 5}))
    # A cursor of another listing is refused.
    err(req(d, "GET", f"/queues/{q}/items", params={"limit": 5, "prefix": "x",
                                                     "cursor": page["next_cursor"]}),
        400, "SPD_EBADPARAM")


# ---- bad input -------------------------------------------------------------

def test_bad_input_is_refused_and_nothing_is_lost(d):
    q = unique("qb")
    put(d, q, "keep1", "keep2")

    def bad(method, path, body, status=400, code="SPD_EBADPARAM", words=()):
        msg = err(req(d, method, path, json=body), status, code)
        for w in words:
            assert w in msg, msg
        return msg

    P = f"/queues/{q}"
    bad("POST", "/queues/bad..name/put", {"elements": ["x"]}, words=("queue name",))
    bad("POST", "/queues/" + "n" * 300 + "/take", {}, words=("queue name",))
    bad("GET", "/queues/tab%09name", None, words=("queue name",))
    bad("POST", P + "/put", {"elements": [1]}, words=("elements[0]", "string"))
    bad("POST", P + "/put", {"elements": "x"}, words=("array",))
    bad("POST", P + "/put", {"elements": [{"priority": 1}]}, code="SPD_EMISSING",
        words=("element",))
    bad("POST", P + "/put", {"elements": ["ok", {"element": "x", "priority": 1.5}]},
        words=("elements[1]", "priority", "integer"))
    bad("POST", P + "/put", {"elements": [{"element": "x", "priority": "high"}]},
        words=("priority",))
    bad("POST", P + "/put", {"elements": [{"element": "x", "delay": -1}]}, words=("delay",))
    bad("POST", P + "/put", {"elements": [{"element": "x", "due": "tomorrow"}]}, words=("due",))
    bad("POST", P + "/put", {"elements": [{"element": "x", "policy": "newest"}]},
        words=("policy",))
    bad("POST", P + "/put", {"elements": ["x"], "policy": "newest"}, words=("policy",))
    bad("POST", P + "/put", {"elements": [{"element": "x", "color": "red"}]},
        words=("unknown field 'color'",))
    bad("POST", P + "/put", {"elements": ["x" * (64 * 1024 + 1)]}, words=("65536",))
    bad("POST", P + "/put", {"elements": [{"element": "x", "key": "k" * 300}]}, words=("key",))
    bad("POST", P + "/put", {}, code="SPD_EMISSING")
    bad("POST", P + "/put", {"elements": ["a"], "element": "b"}, words=("not both",))
    bad("POST", P + "/put", {"elements": [str(i) for i in range(1001)]}, status=413,
        code="SPD_ETOOBIG", words=("1000",))
    bad("POST", P + "/take", {"max": 1001}, status=413, code="SPD_ETOOBIG")
    bad("POST", P + "/take", {"max": 0}, words=("max",))
    bad("POST", P + "/take", {"wait": -1}, words=("wait",))
    bad("POST", P + "/take", {"visibility": 0}, words=("visibility",))
    bad("POST", P + "/take", {"bogus": 1}, words=("unknown field",))
    for path in ("ack", "nack", "extend"):
        bad("POST", f"{P}/{path}", {"leases": ["nolease"]}, words=("'nolease' is not a lease",))
        bad("POST", f"{P}/{path}", {"leases": ["12"]}, words=("not a lease",))
        bad("POST", f"{P}/{path}", {"leases": ["1.x"]}, words=("not a lease",))
        bad("POST", f"{P}/{path}", {"leases": "1.2"}, words=("array",))
        bad("POST", f"{P}/{path}", {"leases": [5]}, words=("leases[0]",))
        bad("POST", f"{P}/{path}", {}, code="SPD_EMISSING")
        bad("POST", f"{P}/{path}", {"leases": ["1.1"] * 1001}, status=413, code="SPD_ETOOBIG")
    bad("POST", P + "/nack", {"leases": ["1.1"], "delay": -5}, words=("delay",))
    bad("POST", P + "/nack", {"leases": [{"lease": "1.1", "retry_after": "soon"}]},
        words=("retry_after",))
    bad("POST", P + "/ack", {"leases": [{"lease": "1.1", "delay": 1}]}, words=("unknown field",))
    bad("PUT", P, {"key_mode": "domain"}, words=("key_mode",))
    bad("PUT", P, {"visibility": -1}, words=("visibility",))
    bad("PUT", P, {"max_deliveries": -1}, words=("max_deliveries",))
    bad("PUT", P, {"max_deliveries": "3"}, words=("max_deliveries",))
    bad("PUT", P, {"unknown": 1}, words=("unknown field",))
    bad("POST", P + "/requeue", {"state": "gone"}, words=("state",))
    bad("POST", P + "/requeue", {"ids": [0]}, words=("ids[0]",))
    bad("POST", P + "/purge", {"ids": "1"}, words=("ids",))
    bad("POST", P + "/purge", {"ids": list(range(1, 1003))}, status=413, code="SPD_ETOOBIG")
    err(req(d, "GET", P + "/items", params={"state": "nope"}), 400, "SPD_EBADPARAM")
    err(req(d, "GET", P + "/items", params={"limit": 0}), 400, "SPD_EBADPARAM")
    err(req(d, "POST", P + "/put", data="{not json", headers={"Content-Type": "application/json"}),
        400, "SPD_EBADJSON")
    # Nothing of the refused puts landed; what was there is still there.
    assert sorted(i["element"] for i in items(d, q)) == ["keep1", "keep2"]
    st = get(d, q)["stats"]
    assert st["size"] == 2 and st["inflight"] == 0 and get(d, q)["max_deliveries"] == 5


def test_elements_are_opaque_strings(d):
    q = unique("qo")
    odd = ["ünïcødé ✓", "with\nnewline", " ", "x" * 65536, ""]
    r = put(d, q, *odd)
    assert r["added"] == len(odd)
    got = take(d, q, max=10)
    assert sorted(i["element"] for i in got) == sorted(odd)


# ---- JSON-RPC --------------------------------------------------------------

def test_jsonrpc_every_method(d):
    q = unique("qj")
    res = lambda body: body["result"] if "result" in body else pytest.fail(str(body))
    assert res(rpc(d, "queues.set", name=q, visibility=5))["visibility"] == 5
    assert res(rpc(d, "queues.put", name=q, elements=["j1", {"element": "j2", "priority": 1}]))[
        "added"] == 2
    assert res(rpc(d, "queues.get", name=q))["stats"]["size"] == 2
    assert q in [x["name"] for x in res(rpc(d, "queues.list"))["queues"]]
    got = res(rpc(d, "queues.take", name=q, max=2))["items"]
    assert [i["element"] for i in got] == ["j2", "j1"]
    assert res(rpc(d, "queues.extend", name=q, leases=[got[0]["lease"]]))["extended"] == 1
    assert res(rpc(d, "queues.ack", name=q, leases=[got[0]["lease"]]))["acked"] == 1
    assert res(rpc(d, "queues.nack", name=q, leases=[got[1]["lease"]], delay=0))["nacked"] == 1
    assert res(rpc(d, "queues.pause", name=q))["paused"] is True
    assert res(rpc(d, "queues.take", name=q))["items"] == []
    assert res(rpc(d, "queues.resume", name=q))["paused"] is False
    page = res(rpc(d, "queues.items", name=q, state=["waiting"]))
    assert [i["element"] for i in page["items"]] == ["j1"] and page["next_cursor"] is None
    assert res(rpc(d, "queues.requeue", name=q, state="waiting", delay=30))["requeued"] == 1
    assert res(rpc(d, "queues.purge", name=q))["purged"] == 1
    assert res(rpc(d, "queues.delete", name=q))["deleted"] is True
    e = rpc(d, "queues.get", name=q)["error"]
    assert e["data"]["code"] == "SPD_ENOQUEUE" and e["code"] == -32017
    e = rpc(d, "queues.put", name=q, elements=[{"element": "x", "priority": "p"}])["error"]
    assert e["code"] == -32602 and "priority" in e["message"]
    e = rpc(d, "queues.put", name=q, elements=["x"] * 1001)["error"]
    assert e["data"]["code"] == "SPD_ETOOBIG"


# ---- long-poll take --------------------------------------------------------

def test_long_poll_take_is_woken_by_a_put(d):
    q = unique("qlp")
    ok(req(d, "PUT", f"/queues/{q}", json={}))
    lat = []
    for i in range(5):
        box = {}

        def taker():
            r = req(d, "POST", f"/queues/{q}/take", json={"wait": 10})
            box["t"] = time.monotonic()
            box["r"] = r
        th = threading.Thread(target=taker)
        th.start()
        time.sleep(0.2)  # the taker is parked
        t0 = time.monotonic()
        put(d, q, f"wake{i}")
        th.join(timeout(15))
        got = ok(box["r"])["items"]
        assert [g["element"] for g in got] == [f"wake{i}"]
        lat.append(box["t"] - t0)
        ack(d, q, got[0]["lease"])
    # Woken at once, not by a poll: the put's reply and the take's come together.
    assert statistics.median(lat) < timeout(0.2), lat


def test_long_poll_take_ends_empty_when_the_wait_ends(d):
    q = unique("qle")
    t0 = time.monotonic()
    assert take(d, q, wait=0.5) == []
    assert 0.45 <= time.monotonic() - t0 < timeout(3)


def test_long_poll_take_wakes_when_an_element_comes_due(d):
    q = unique("qld")
    put(d, q, {"element": "soon", "delay": 0.4})
    t0 = time.monotonic()
    got = take(d, q, wait=5)
    assert [g["element"] for g in got] == ["soon"]
    assert 0.3 <= time.monotonic() - t0 < timeout(2)


def test_long_poll_over_jsonrpc(d):
    q = unique("qlr")
    box = {}
    th = threading.Thread(target=lambda: box.setdefault("r", rpc(d, "queues.take", name=q,
                                                                  wait=10)))
    th.start()
    time.sleep(0.2)
    put(d, q, "rpcwake")
    th.join(timeout(15))
    assert [i["element"] for i in box["r"]["result"]["items"]] == ["rpcwake"]


def test_a_taker_that_leaves_takes_nothing(d):
    q = unique("qgone")
    # A raw client asks for a long take and leaves.
    s = socket.create_connection(("127.0.0.1", d.port))
    body = json.dumps({"wait": 20}).encode()
    s.sendall(f"POST {API}/queues/{q}/take HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
              f"\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    time.sleep(0.3)
    s.close()
    time.sleep(0.3)
    put(d, q, "for-someone-else")
    # The element is not taken by the gone client: the next taker gets it.
    got = take(d, q, wait=2)
    assert [g["element"] for g in got] == ["for-someone-else"]
    assert got[0]["deliveries"] == 1


def test_many_waiting_takers_share_the_puts(d):
    q = unique("qmany")
    results, lock = [], threading.Lock()

    def taker():
        got = take(d, q, wait=10, max=1)
        with lock:
            results.extend(g["element"] for g in got)
    threads = [threading.Thread(target=taker) for _ in range(6)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    put(d, q, *[f"m{i}" for i in range(6)])
    for t in threads:
        t.join(timeout(20))
    assert sorted(results) == sorted(f"m{i}" for i in range(6))


# ---- concurrency -----------------------------------------------------------

def test_concurrent_takers_never_share_a_lease(d):
    q = unique("qc")
    n = 300
    elements = [f"c{i}" for i in range(n)]
    for i in range(0, n, 100):
        put(d, q, *elements[i:i + 100])
    taken, lock, errors = [], threading.Lock(), []

    def worker():
        s = d.new_session()
        try:
            while True:
                r = s.post(d.url + f"{API}/queues/{q}/take", json={"max": 7, "visibility": 60},
                           timeout=timeout(30))
                got = r.json()["items"]
                if not got:
                    return
                with lock:
                    taken.extend(g["element"] for g in got)
                if len(got) % 2:
                    s.post(d.url + f"{API}/queues/{q}/ack",
                           json={"leases": [g["lease"] for g in got]}, timeout=timeout(30))
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            s.close()
    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout(60))
    assert not errors, errors
    # Leases last 60 s: nothing was delivered twice, and everything once.
    assert len(taken) == len(set(taken)), "an element was handed to two takers"
    assert sorted(taken) == sorted(elements)


def test_concurrent_putters_and_takers_deliver_everything(d):
    q = unique("qpt")
    n_put = 4 * 60
    delivered, lock = set(), threading.Lock()
    stop = threading.Event()

    def putter(k):
        s = d.new_session()
        for i in range(0, 60, 10):
            s.post(d.url + f"{API}/queues/{q}/put",
                   json={"elements": [f"p{k}-{j}" for j in range(i, i + 10)]},
                   timeout=timeout(30)).raise_for_status()
        s.close()

    def taker():
        s = d.new_session()
        while not stop.is_set():
            r = s.post(d.url + f"{API}/queues/{q}/take", json={"max": 5, "wait": 1},
                       timeout=timeout(30))
            got = r.json()["items"]
            with lock:
                delivered.update(g["element"] for g in got)
            if got:
                s.post(d.url + f"{API}/queues/{q}/ack",
                       json={"leases": [g["lease"] for g in got]}, timeout=timeout(30))
        s.close()
    takers = [threading.Thread(target=taker) for _ in range(3)]
    putters = [threading.Thread(target=putter, args=(k,)) for k in range(4)]
    for t in takers + putters:
        t.start()
    for t in putters:
        t.join(timeout(60))
    wait_for(lambda: len(delivered) >= n_put, timeout(20), "every element delivered")
    stop.set()
    for t in takers:
        t.join(timeout(30))
    assert delivered == {f"p{k}-{j}" for k in range(4) for j in range(60)}
    assert get(d, q)["stats"]["size"] == 0


# ---- crash and stop --------------------------------------------------------

def test_unacked_element_comes_back_after_a_crash(spiderd):
    d = spiderd()
    q = "crashq"
    put(d, q, "acked", "unacked")
    got = {g["element"]: g for g in take(d, q, max=2, visibility=1.5)}
    ack(d, q, got["acked"]["lease"])
    d.kill9()
    d.start()
    # Still in flight under its lease after the restart, then due again.
    assert take(d, q) == []
    again = wait_for(lambda: take(d, q), timeout(10), "the un-acked element")
    assert [g["element"] for g in again] == ["unacked"]
    assert again[0]["deliveries"] == 2
    ack(d, q, again[0]["lease"])
    assert take(d, q) == [] and get(d, q)["stats"]["size"] == 0


def test_stop_releases_waiting_takers(spiderd):
    d = spiderd()
    q = "stopq"
    box = {}
    th = threading.Thread(target=lambda: box.setdefault(
        "r", d.request("POST", f"{API}/queues/{q}/take", json={"wait": 30})))
    th.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    d.stop()
    th.join(timeout(10))
    assert time.monotonic() - t0 < timeout(8)
    r = box.get("r")
    # Answered with nothing (or cut off by the stop), never left hanging.
    if r is not None:
        assert r.status_code in (200, 503), r.text
        if r.status_code == 200:
            assert r.json()["items"] == []


# ---- the job's token -------------------------------------------------------

def test_job_token_opens_the_queue_api_only_while_the_job_runs(spiderd, egg_bytes, tmp_path):
    d = spiderd(scrapyd={"username": "admin", "password": "s3cret"})
    r = d.request("POST", f"{API}/projects/tp/versions", params={"version": "1.0"},
                  data=egg_bytes("testproj"),
                  headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    out, hold = str(tmp_path / "seen.json"), str(tmp_path / "hold")
    job = ok(d.request("POST", f"{API}/jobs", json={
        "project": "tp", "spider": "queueput",
        "args": {"queue": "frontier", "elements": "u1,u2,u3", "out": out, "hold": hold}}), 201)
    wait_for(lambda: os.path.exists(out), timeout(60), "the spider's report")
    with open(out, encoding="utf-8") as f:
        seen = json.load(f)
    assert seen["url"] == d.url
    token = seen["token"]
    assert token.startswith(f"{job['id']}.") and len(token.split(".")[1]) == 64
    status, body = seen["put"]
    assert status == 200 and body["added"] == 3, seen
    assert seen["rpc"][0] == 200 and seen["rpc"][1]["result"]["stats"]["size"] == 3
    # Outside the queue API the token is refused: by the server for other
    # paths, by the JSON-RPC face for other methods.
    assert seen["jobs"] == 401 and seen["status"] == 401
    assert seen["rpc_jobs"][0] == 200
    assert seen["rpc_jobs"][1]["error"]["data"]["code"] == "SPD_EFORBIDDEN"
    # Basic auth still works, and sees what the spider put.
    assert sorted(i["element"] for i in items(d, "frontier")) == ["u1", "u2", "u3"]
    # While it runs, the token works from here too.
    bearer = {"Authorization": "Bearer " + token}
    s = d.new_session()
    r = s.get(d.url + f"{API}/queues/frontier", headers=bearer, timeout=10)
    assert r.status_code == 200, r.text
    # A forged or other job's token is refused.
    forged = token[:-1] + ("0" if token[-1] != "0" else "1")
    assert s.get(d.url + f"{API}/queues/frontier", headers={"Authorization": "Bearer " + forged},
                 timeout=10).status_code == 401
    other = f"{job['id'] + 1}.{token.split('.')[1]}"
    assert s.get(d.url + f"{API}/queues/frontier", headers={"Authorization": "Bearer " + other},
                 timeout=10).status_code == 401
    # The job ends: its token is refused.
    open(hold, "w").close()
    wait_for(lambda: ok(d.request("GET", f"{API}/jobs/{job['id']}"))["state"] in
             ("finished", "failed", "cancelled", "lost"), timeout(60), "the job's end")
    assert ok(d.request("GET", f"{API}/jobs/{job['id']}"))["state"] == "finished"
    assert s.get(d.url + f"{API}/queues/frontier", headers=bearer, timeout=10).status_code == 401
    r = s.post(d.url + f"{API}/queues/frontier/put", headers=bearer, json={"elements": ["late"]},
               timeout=10)
    assert r.status_code == 401
    s.close()
    assert get(d, "frontier")["stats"]["size"] == 3


def test_without_auth_the_token_changes_nothing(spiderd):
    d = spiderd()
    r = d.request("GET", f"{API}/status", headers={"Authorization": "Bearer 1.abc"})
    assert r.status_code == 200
    r = d.request("POST", f"{API}/queues/free/put", json={"elements": ["x"]},
                  headers={"Authorization": "Bearer 1.abc"})
    assert r.status_code == 200
