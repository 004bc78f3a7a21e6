"""Users and scoped API tokens against a real daemon: every route refuses a
missing, wrong, expired or under-privileged credential with 401/403 and the
error shape of its face; a token limited to one project sees and touches
nothing of another (jobs, logs, items, eggs, schedules, queues, events);
writes are recorded with who did them and from where; failed logins are
throttled per address; and a daemon on a public address refuses to start
without authentication unless told --insecure."""

import base64
import json
import os
import subprocess
import time

import pytest
import requests

from conftest import BIN, bearer, make_token, timeout, unique, wait_for

API = "/api/v1"


def upload(d, headers, project, egg):
    r = d.request("POST", f"{API}/projects/{project}/versions", params={"version": "1"},
                  data=egg, headers=dict(headers, **{"Content-Type": "application/octet-stream"}))
    assert r.status_code == 201, r.text


def run_quick(d, headers, project):
    r = d.request("POST", API + "/jobs", json={"project": project, "spider": "quick",
                                               "args": {"count": "2"}}, headers=headers)
    assert r.status_code == 201, r.text
    job = r.json()
    wait_for(lambda: d.request("GET", f"{API}/jobs/{job['id']}", headers=headers).json()["state"]
             in ("finished", "failed"), timeout(60), "the quick job to end", interval=0.1)
    return d.request("GET", f"{API}/jobs/{job['id']}", headers=headers).json()


@pytest.fixture(scope="module")
def d(module_spiderd):
    # every route is tried with wrong credentials: no throttling here (its own test below)
    return module_spiderd(name="auth", scrapyd={"items_dir": "items"},
                          spiderd={"auth_fail_limit": 0})


@pytest.fixture(scope="module")
def world(d, egg_bytes):
    """An admin token, then two projects with a finished job each, a
    schedule each, a queue each; and tokens of every role, a project-limited
    one, an expired one."""
    egg = egg_bytes("testproj")
    # no principal yet: the first token is made anonymously on loopback
    admin = make_token(d, "admin", name="root")["token"]
    A = bearer(admin)
    w = {"admin": A}
    for p in ("alpha", "beta"):
        upload(d, A, p, egg)
        w["job_" + p] = run_quick(d, A, p)
        r = d.request("POST", API + "/schedules", headers=A, json={
            "name": "s-" + p, "project": p, "spider": "quick", "interval": 86400, "paused": True})
        assert r.status_code == 201, r.text
        r = d.request("POST", f"{API}/queues/{p}.urls/put", headers=A,
                      json={"elements": ["x", "y"]})
        assert r.status_code == 200, r.text
    for role in ("read", "run", "deploy"):
        w[role] = bearer(make_token(d, role, A, name=role)["token"])
    w["alpha"] = bearer(make_token(d, "deploy", A, name="alpha only", projects=["alpha"])["token"])
    expired = make_token(d, "admin", A, name="brief", expires_in=0.5)["token"]
    w["expired"] = bearer(expired)
    time.sleep(0.6)
    return w


# ---- every route refuses the wrong credentials -------------------------------

def check_refusal(r, status, where, api):
    assert r.status_code == status, f"{where}: {r.status_code} {r.text[:300]}"
    if status == 401:
        assert r.headers["WWW-Authenticate"].lower().startswith("basic realm=")
    if api:
        err = r.json()["error"]
        assert err["code"] == {401: "SPD_EUNAUTHORIZED", 403: "SPD_EFORBIDDEN"}[status]
        assert err["message"] and isinstance(err["details"], dict)


def test_every_native_route_refuses_missing_wrong_and_expired_credentials(d, world):
    index = d.request("GET", API + "/", headers=world["admin"]).json()
    wrong = {
        "none": {},
        "wrong token": bearer("sdt_0123456789abcdef_" + "0" * 64),
        "wrong password": {"Authorization": "Basic " + base64.b64encode(b"x:y").decode()},
        "expired": world["expired"],
        "garbage": {"Authorization": "Negotiate abc"},
    }
    routes = [(r["method"], r["path"]) for r in index["routes"]]
    assert len(routes) > 40
    for method, path in routes:
        concrete = path.replace("{project}", "alpha").replace("{version}", "1") \
            .replace("{id}", str(world["job_alpha"]["id"])).replace("{schedule}", "s-alpha") \
            .replace("{name}", "alpha.urls")
        for what, headers in wrong.items():
            r = d.request(method, concrete, headers=headers, json={})
            check_refusal(r, 401, f"{method} {concrete} with {what}", api=True)
    r = d.request("GET", API + "/auth/whoami", headers=world["expired"])
    assert "expired" in r.json()["error"]["message"]


def test_scrapyd_endpoints_logs_items_pages_and_streams_refuse_strangers(d, world):
    for method, path in [("GET", "/daemonstatus.json"), ("GET", "/listprojects.json"),
                         ("GET", "/listjobs.json?project=alpha"), ("POST", "/schedule.json"),
                         ("POST", "/addversion.json"), ("POST", "/delproject.json"),
                         ("GET", "/logs/"), ("GET", "/items/alpha/"), ("GET", "/jobs"),
                         ("GET", "/"), ("GET", "/ui/"), ("GET", API + "/events/stream"),
                         ("POST", API + "/jsonrpc")]:
        for headers in ({}, bearer("nope"), world["expired"]):
            r = d.request(method, path, headers=headers)
            check_refusal(r, 401, f"{method} {path}", api=path.startswith(API))
    # probes stay open (probes_public), for load balancers and Prometheus
    for path in ("/healthz", "/readyz", "/metrics"):
        assert d.request("GET", path).status_code == 200, path


WRITES = [  # (method, path, body, least role)
    ("POST", API + "/jobs", {"project": "alpha", "spider": "quick"}, "run"),
    ("POST", API + "/schedules/s-alpha/pause", {}, "run"),
    ("POST", API + "/queues/alpha.urls/put", {"elements": ["z"]}, "run"),
    ("DELETE", API + "/projects/alpha/versions/9", None, "deploy"),
    ("POST", API + "/queues/alpha.urls/purge", {"state": ["dead"]}, "deploy"),
    ("GET", API + "/users", None, "admin"),
    ("POST", API + "/users", {"name": "u", "password": "12345678", "role": "read"}, "admin"),
]
ROLES = ["read", "run", "deploy", "admin"]


def test_a_role_below_the_route_is_refused_with_403(d, world):
    for method, path, body, least in WRITES:
        for role in ROLES[:ROLES.index(least)]:
            r = d.request(method, path, headers=world[role], json=body)
            check_refusal(r, 403, f"{role} on {method} {path}", api=True)
            assert f"'{least}'" in r.json()["error"]["message"]
    # the same roles pass the gate (what follows the gate may still refuse)
    for method, path, body, least in WRITES[:3]:
        r = d.request(method, path, headers=world[least], json=body)
        assert r.status_code < 400, (least, path, r.text)
    # Scrapyd's endpoints: 403 with Scrapyd's error body
    r = d.request("POST", "/schedule.json", headers=world["read"],
                  data={"project": "alpha", "spider": "quick"})
    assert r.status_code == 403 and r.json()["status"] == "error", r.text
    r = d.request("POST", "/delversion.json", headers=world["run"],
                  data={"project": "alpha", "version": "1"})
    assert r.status_code == 403 and "'deploy'" in r.json()["message"], r.text
    # JSON-RPC: the same rule, as a JSON-RPC error
    r = d.request("POST", API + "/jsonrpc", headers=world["read"], json={
        "jsonrpc": "2.0", "id": 1, "method": "jobs.create",
        "params": {"project": "alpha", "spider": "quick"}})
    assert r.json()["error"]["data"]["code"] == "SPD_EFORBIDDEN", r.text


# ---- a token limited to a project ---------------------------------------------

def test_a_project_limited_token_sees_and_touches_only_its_project(d, world):
    T, A = world["alpha"], world["admin"]
    beta = world["job_beta"]
    # jobs: listed, counted, read, cancelled, their logs and items
    jobs = d.request("GET", API + "/jobs", headers=T).json()["jobs"]
    assert jobs and {j["project"] for j in jobs} == {"alpha"}
    assert d.request("GET", f"{API}/jobs/{beta['id']}", headers=T).status_code == 404
    assert d.request("GET", f"{API}/jobs/{beta['job']}", headers=T).status_code == 404
    assert d.request("GET", f"{API}/jobs/{beta['id']}/log", headers=T).status_code == 404
    assert d.request("POST", f"{API}/jobs/{beta['id']}/cancel", headers=T,
                     json={}).status_code == 404
    assert d.request("GET", f"{API}/jobs/{beta['id']}", headers=A).status_code == 200
    counts = d.request("GET", API + "/jobs/counts", headers=T).json()["counts"]
    total = d.request("GET", API + "/jobs/counts", headers=A).json()["counts"]
    assert sum(counts.values()) < sum(total.values())
    log = f"/logs/beta/quick/{beta['job']}.log"
    assert d.request("GET", log, headers=A).status_code == 200
    assert d.request("GET", log, headers=T).status_code == 404
    assert d.request("GET", f"/logs/alpha/quick/{world['job_alpha']['job']}.log",
                     headers=T).status_code == 200
    assert d.request("GET", "/logs/", headers=T).status_code == 403
    assert d.request("GET", f"/items/beta/quick/{beta['job']}.jl", headers=T).status_code == 404
    # Scrapyd's face
    assert d.request("GET", "/listprojects.json", headers=T).json()["projects"] == ["alpha"]
    lj = d.request("GET", "/listjobs.json", headers=T).json()
    assert {j["project"] for j in lj["finished"]} == {"alpha"}
    r = d.request("GET", "/listjobs.json?project=beta", headers=T)
    assert r.status_code == 403
    r = d.request("POST", "/schedule.json", headers=T, data={"project": "beta", "spider": "quick"})
    assert r.status_code == 403
    # eggs
    r = d.request("POST", f"{API}/projects/beta/versions", params={"version": "2"}, data=b"PK",
                  headers=dict(T, **{"Content-Type": "application/octet-stream"}))
    assert r.status_code == 403
    assert d.request("DELETE", f"{API}/projects/beta", headers=T).status_code == 403
    assert d.request("POST", "/delproject.json", headers=T,
                     data={"project": "beta"}).status_code == 403
    assert [p["name"] for p in d.request("GET", API + "/projects", headers=T).json()["projects"]] \
        == ["alpha"]
    # schedules
    names = [s["name"] for s in d.request("GET", API + "/schedules", headers=T).json()["schedules"]]
    assert names == ["s-alpha"]
    assert d.request("GET", f"{API}/schedules/s-beta", headers=T).status_code == 404
    assert d.request("DELETE", f"{API}/schedules/s-beta", headers=T).status_code == 404
    # queues: its project's only
    assert [q["name"] for q in d.request("GET", API + "/queues", headers=T).json()["queues"]] \
        == ["alpha.urls"]
    assert d.request("GET", f"{API}/queues/beta.urls", headers=T).status_code == 403
    assert d.request("POST", f"{API}/queues/beta.urls/take", headers=T,
                     json={}).status_code == 403
    assert d.request("POST", f"{API}/queues/alpha.urls/take", headers=T,
                     json={}).status_code == 200
    # events: none of the other project's
    events = d.request("GET", API + "/events", headers=T, params={"limit": 500}).json()["events"]
    assert events
    for e in events:
        assert e["data"].get("project", "alpha") == "alpha", e
        assert e["data"].get("queue", "alpha.x").startswith("alpha."), e
    everything = d.request("GET", API + "/events", headers=A, params={"limit": 500}).json()
    assert any(e["data"].get("project") == "beta" for e in everything["events"])
    # its own tokens: a deploy token may not make more
    r = d.request("POST", API + "/tokens", headers=T, json={"role": "read"})
    assert r.status_code == 403


def test_the_event_stream_of_a_limited_token_carries_its_project_only(d, world):
    T = world["alpha"]
    with d.session.get(d.url + API + "/events/stream", params={"after": 0}, headers=T,
                       stream=True, timeout=timeout(10)) as r:
        assert r.status_code == 200
        seen = []
        deadline = time.monotonic() + timeout(5)
        for line in r.iter_lines():
            if line.startswith(b"data: "):
                seen.append(json.loads(line[6:]))
            if len(seen) >= 3 or time.monotonic() > deadline:
                break
    assert seen
    for e in seen:
        assert e["data"].get("project", "alpha") == "alpha", e


# ---- users, basic auth, tokens as passwords ------------------------------------

def test_users_log_in_with_basic_auth_and_tokens_work_as_passwords(d, world):
    A = world["admin"]
    name = unique("u")
    r = d.request("POST", API + "/users", headers=A, json={
        "name": name, "password": "correct horse", "role": "run", "projects": ["alpha"]})
    assert r.status_code == 201, r.text
    assert "password" not in r.json()
    me = d.request("GET", API + "/auth/whoami", auth=(name, "correct horse"))
    assert me.status_code == 200, me.text
    assert me.json() == {"actor": name, "kind": "user", "role": "run", "projects": ["alpha"],
                         "addr": "127.0.0.1"}
    r = d.request("GET", API + "/auth/whoami", auth=(name, "wrong horse"))
    assert r.status_code == 401
    # a user makes its own tokens, never with more than it has
    r = d.request("POST", API + "/tokens", auth=(name, "correct horse"), json={"role": "admin"})
    assert r.status_code == 403
    r = d.request("POST", API + "/tokens", auth=(name, "correct horse"),
                  json={"role": "run", "projects": ["beta"]})
    assert r.status_code == 403
    mine = d.request("POST", API + "/tokens", auth=(name, "correct horse"),
                     json={"role": "read", "projects": ["alpha"], "name": "mine"}).json()
    listed = d.request("GET", API + "/tokens", auth=(name, "correct horse")).json()["tokens"]
    assert [t["id"] for t in listed] == [mine["id"]] and listed[0]["owner"] == name
    # a token as the password of basic auth (scrapyd-deploy speaks only basic)
    r = d.request("GET", "/listprojects.json", auth=("token", mine["token"]))
    assert r.status_code == 200 and r.json()["projects"] == ["alpha"]
    # the password changes: the old one stops working at once
    r = d.request("PATCH", f"{API}/users/{name}", headers=A, json={"password": "new password"})
    assert r.status_code == 200, r.text
    assert d.request("GET", API + "/auth/whoami", auth=(name, "correct horse")).status_code == 401
    assert d.request("GET", API + "/auth/whoami", auth=(name, "new password")).status_code == 200
    # a revoked token stops working
    assert d.request("DELETE", f"{API}/tokens/{mine['id']}", headers=A).status_code == 204
    assert d.request("GET", "/listprojects.json", auth=("token", mine["token"])).status_code == 401
    assert d.request("DELETE", f"{API}/users/{name}", headers=A).status_code == 204
    assert d.request("GET", API + "/auth/whoami", auth=(name, "new password")).status_code == 401


def test_tokens_are_kept_hashed_and_shown_once(d, world):
    made = make_token(d, "read", world["admin"], name="shown once")
    listed = d.request("GET", API + "/tokens", headers=world["admin"]).json()["tokens"]
    row = next(t for t in listed if t["id"] == made["id"])
    assert "token" not in row
    assert made["token"].startswith("sdt_" + made["id"] + "_")
    secret = made["token"].rsplit("_", 1)[1]
    if not (d.spiderd.get("store") or "").startswith("redis"):
        rows = d.sql("SELECT secret FROM principals WHERE name = ?", made["id"])
        assert rows and secret not in rows[0]["secret"] and made["token"] not in rows[0]["secret"]


# ---- the audit trail ------------------------------------------------------------

def test_writes_are_recorded_with_who_did_them_and_from_where(d, world, egg_bytes):
    tok = make_token(d, "deploy", world["admin"], name="auditor")
    T = bearer(tok["token"])
    actor = f"token {tok['id'][:8]} (auditor)"
    upload(d, T, "gamma", egg_bytes("testproj"))
    r = d.request("POST", "/schedule.json", headers=T, data={"project": "gamma", "spider": "quick"})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    jobid = r.json()["jobid"]
    r = d.request("POST", "/cancel.json", headers=T, data={"project": "gamma", "job": jobid})
    assert r.status_code == 200, r.text
    d.request("PUT", f"{API}/queues/gamma.q", headers=T, json={"visibility": 5})
    events = d.request("GET", API + "/events", headers=world["admin"],
                       params={"order": "desc", "limit": 50}).json()["events"]
    by_type = {}
    for e in events:
        if e["data"].get("actor") == actor:
            by_type.setdefault(e["type"], e)
    for t in ("version.added", "job.queued", "queue.updated"):
        assert t in by_type, (t, sorted(by_type))
        assert by_type[t]["data"]["addr"] == "127.0.0.1"
    assert by_type["job.queued"]["data"]["jobid"] == jobid
    made = [e for e in events if e["type"] == "token.created" and e["data"]["token"] == tok["id"]]
    assert made and made[0]["data"]["actor"] == "token " + \
        d.request("GET", API + "/auth/whoami", headers=world["admin"]).json()["actor"][6:]


# ---- failed logins ------------------------------------------------------------------

def test_failed_logins_are_throttled_per_address(spiderd):
    # loopback is exempt unless told otherwise (test_proxy.py has the rest)
    d = spiderd(scrapyd={"username": "op", "password": "right"},
                spiderd={"auth_throttle_loopback": "on"})
    d.auth = None
    for _ in range(10):
        assert d.request("GET", "/daemonstatus.json", auth=("op", "wrong")).status_code == 401
    r = d.request("GET", "/daemonstatus.json", auth=("op", "wrong"))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    # even the right password waits out the window from this address
    assert d.request("GET", "/daemonstatus.json", auth=("op", "right")).status_code == 429
    r = d.request("GET", API + "/status", auth=("op", "right"))
    assert r.status_code == 429 and r.json()["error"]["code"] == "SPD_ETHROTTLED"
    # no credentials at all is not a failed login: it is asked for them
    assert d.request("GET", API + "/status").status_code == 401


# ---- a public address without authentication ------------------------------------------

def test_a_public_address_without_auth_is_refused_unless_insecure(spiderd):
    d = spiderd(scrapyd={"bind_address": "0.0.0.0"}, start=False)
    p = subprocess.run([BIN, "serve"], cwd=d.workdir, env=d.environ(), capture_output=True,
                       text=True, timeout=timeout(30))
    assert p.returncode != 0
    assert "refusing to serve 0.0.0.0" in p.stderr and "--insecure" in p.stderr
    # with a password it serves
    d2 = spiderd(scrapyd={"bind_address": "0.0.0.0", "username": "a", "password": "b"})
    assert d2.call("daemonstatus.json")["status"] == "ok"
    # and when the operator says so
    d3 = spiderd(scrapyd={"bind_address": "0.0.0.0"}, spiderd={"insecure": "on"})
    assert d3.call("daemonstatus.json")["status"] == "ok"
    assert "without authentication (--insecure)" in d3.stderr_tail()


# ---- every node of a cluster ----------------------------------------------------------

from test_cluster import cluster, shared  # noqa: E402


@shared
def test_every_node_of_a_cluster_knows_users_and_tokens(spiderd, tmp_path):
    # the waits below poll with credentials not yet known: no throttling
    (a, b), _ = cluster(spiderd, 2, tmp_path, spiderd={"auth_fail_limit": 0})
    admin = bearer(make_token(a, "admin", name="cluster admin")["token"])
    reader = make_token(a, "read", admin, name="everywhere")
    R = bearer(reader["token"])
    # until it reads them the other node has none, and lets anyone in: as whom?
    wait_for(lambda: b.request("GET", API + "/auth/whoami", headers=R).json()["kind"] == "token",
             timeout(10), "the other node to know the token")
    assert b.request("GET", API + "/status").status_code == 401
    # a user made on one node logs in on the other
    r = b.request("POST", API + "/users", headers=admin,
                  json={"name": "roamer", "password": "far and wide", "role": "run"})
    assert r.status_code == 201, r.text
    wait_for(lambda: a.request("GET", API + "/auth/whoami",
                               auth=("roamer", "far and wide")).status_code == 200,
             timeout(10), "the first node to know the user")
    # a token revoked on one node stops on the other
    assert a.request("DELETE", f"{API}/tokens/{reader['id']}", headers=admin).status_code == 204
    wait_for(lambda: b.request("GET", API + "/auth/whoami", headers=R).status_code == 401,
             timeout(10), "the other node to forget the token")
