"""Accounts against a real daemon: two accounts, each with a user and a
token, see and touch only their own account's projects (and so versions,
spiders, jobs, logs, items, schedules, queues, events and statistics), on
every face; an admin sees all; a project of no account is an admin's only;
each account's cap on running jobs holds with real crawls while another
account's jobs run beside them; an account's upcoming runs are its own
schedules'; and the account ops refuse bad input with the right status."""

import json
import subprocess
import time

import pytest

from conftest import BIN, bearer, make_token, timeout, unique, wait_for

API = "/api/v1"
PW = "correct horse battery"


def req(d, method, path, headers=None, **kw):
    return d.request(method, API + path, headers=headers or {}, **kw)


def ok(r, status=200):
    assert r.status_code == status, f"{r.status_code} {r.text[:400]}"
    return r.json() if status != 204 else None


def upload(d, headers, project, egg):
    ok(d.request("POST", f"{API}/projects/{project}/versions", params={"version": "1"},
                 data=egg, headers=dict(headers, **{"Content-Type": "application/octet-stream"})),
       201)


def run(d, headers, project, spider="quick", **args):
    return ok(req(d, "POST", "/jobs", headers, json={"project": project, "spider": spider,
                                                     "args": args}), 201)


def wait_ended(d, headers, job):
    def ended():
        return ok(req(d, "GET", f"/jobs/{job['id']}", headers))["state"] in (
            "finished", "failed", "cancelled")
    wait_for(ended, timeout(90), f"job {job['id']} to end", interval=0.1)
    return ok(req(d, "GET", f"/jobs/{job['id']}", headers))


@pytest.fixture(scope="module")
def d(module_spiderd):
    return module_spiderd(name="accounts", scrapyd={"items_dir": "items", "max_proc": 6},
                          spiderd={"auth_fail_limit": 0})


@pytest.fixture(scope="module")
def w(d, egg_bytes):
    """Accounts acme (projects pa, pa2; user ua; ua's own token) and
    globex (project pb; user ub; an admin-made token put in it), a project
    "free" of no account; a finished job, a daily schedule and a queue in
    each of pa, pb and free."""
    egg = egg_bytes("testproj")
    admin = bearer(make_token(d, "admin", name="root")["token"])
    w = {"admin": admin}
    for name, cap in (("acme", 1), ("globex", 0)):
        ok(req(d, "POST", "/accounts", admin, json={"name": name, "description": name + " ltd",
                                                    "max_running": cap}), 201)
    for acct, project in (("acme", "pa"), ("acme", "pa2"), ("globex", "pb")):
        ok(req(d, "POST", f"/accounts/{acct}/assign", admin, json={"project": project}))
    for project in ("pa", "pa2", "pb", "free"):
        upload(d, admin, project, egg)
    for project in ("pa", "pb", "free"):
        w["job_" + project] = wait_ended(d, admin, run(d, admin, project))
        ok(req(d, "POST", "/schedules", admin, json={
            "name": "s-" + project, "project": project, "spider": "quick",
            "cron": "0 3 * * *"}), 201)
        ok(req(d, "POST", f"/queues/{project}.urls/put", admin, json={"elements": ["x"]}))
    for user, acct in (("ua", "acme"), ("ub", "globex")):
        ok(req(d, "POST", "/users", admin, json={"name": user, "password": PW, "role": "deploy"}),
           201)
        ok(req(d, "POST", f"/accounts/{acct}/assign", admin, json={"user": user}))
        w[user] = {"auth": (user, PW)}
    # ua makes its own token: of ua's account without being named in it
    w["ta"] = bearer(make_token(d, "deploy", auth=("ua", PW), name="ua's")["token"])
    tb = make_token(d, "run", admin, name="globex ci")
    ok(req(d, "POST", "/accounts/globex/assign", admin, json={"token": tb["id"]}))
    w["tb"] = bearer(tb["token"])
    return w


SCRAPYD = ("/listjobs", "/listprojects", "/schedule.json", "/logs/", "/items/", "/cancel.json",
           "/delproject.json")


def as_(d, w, who, method, path, **kw):
    """A request as `who` (ua, ub: basic auth; ta, tb, admin: bearer), to
    the native API unless path is one of Scrapyd's, a log or items."""
    cred = w[who]
    url = path if path.startswith(SCRAPYD) else API + path
    headers = dict(kw.pop("headers", {}), **({} if "auth" in cred else cred))
    return d.request(method, url, headers=headers, auth=cred.get("auth"), **kw)


MEMBERS = [("ua", "acme", {"pa", "pa2"}, "pb"), ("ta", "acme", {"pa", "pa2"}, "pb"),
           ("ub", "globex", {"pb"}, "pa"), ("tb", "globex", {"pb"}, "pa")]


@pytest.mark.parametrize("who,acct,mine,theirs", MEMBERS)
def test_a_member_lists_only_its_accounts_things(d, w, who, acct, mine, theirs):
    me = ok(as_(d, w, who, "GET", "/auth/whoami"))
    assert me["account"] == acct and set(me["projects"]) == mine
    projects = {p["name"] for p in ok(as_(d, w, who, "GET", "/projects"))["projects"]}
    assert projects == mine
    assert set(ok(as_(d, w, who, "GET", "/listprojects.json"))["projects"]) == projects
    jobs = ok(as_(d, w, who, "GET", "/jobs"))["jobs"]
    assert jobs and {j["project"] for j in jobs} <= mine
    first = sorted(mine)[0]
    lj = ok(as_(d, w, who, "GET", f"/listjobs.json?project={first}"))
    assert {j["project"] for j in lj["finished"]} <= {first}
    scheds = {s["project"] for s in ok(as_(d, w, who, "GET", "/schedules"))["schedules"]}
    assert scheds and scheds <= mine
    queues = {q["name"] for q in ok(as_(d, w, who, "GET", "/queues"))["queues"]}
    assert queues and all(q.split(".")[0] in mine for q in queues)
    events = ok(as_(d, w, who, "GET", "/events", params={"limit": 1000}))["events"]
    assert events
    for e in events:
        assert e["data"].get("project", next(iter(mine))) in mine, e
    stats = ok(as_(d, w, who, "GET", "/stats"))["groups"]
    assert {g["project"] for g in stats} <= mine
    counts = ok(as_(d, w, who, "GET", "/jobs/counts"))["counts"]
    total = ok(req(d, "GET", "/jobs/counts", w["admin"]))["counts"]
    assert sum(counts.values()) < sum(total.values())
    accounts = ok(as_(d, w, who, "GET", "/accounts"))["accounts"]
    assert [a["name"] for a in accounts] == [acct]
    other = "globex" if acct == "acme" else "acme"
    assert as_(d, w, who, "GET", f"/accounts/{other}").status_code == 404
    assert ok(as_(d, w, who, "GET", f"/accounts/{acct}"))["projects"]


@pytest.mark.parametrize("who,acct,mine,theirs", MEMBERS)
def test_a_member_cannot_touch_another_accounts_or_no_accounts_things(d, w, who, acct, mine,
                                                                     theirs):
    for project in (theirs, "free"):
        job = w["job_" + project]
        # jobs: read, cancel, rerun, log, items, meta: not there at all
        for method, path in (("GET", f"/jobs/{job['id']}"), ("GET", f"/jobs/{job['job']}"),
                             ("GET", f"/jobs/{job['id']}/log"),
                             ("GET", f"/jobs/{job['id']}/items"),
                             ("POST", f"/jobs/{job['id']}/cancel"),
                             ("POST", f"/jobs/{job['id']}/rerun"),
                             ("PATCH", f"/jobs/{job['id']}/meta")):
            body = {"json": {"meta": {"x": 1}} if method == "PATCH" else {}} \
                if method != "GET" else {}
            r = as_(d, w, who, method, path, **body)
            assert r.status_code == 404, (method, path, r.status_code, r.text)
        log = f"/logs/{project}/quick/{job['job']}.log"
        assert as_(d, w, who, "GET", log).status_code == 404
        assert as_(d, w, who, "GET", f"/items/{project}/quick/{job['job']}.jl").status_code == 404
        # scheduling, deploying, deleting: refused
        assert as_(d, w, who, "POST", "/jobs", json={"project": project,
                                                     "spider": "quick"}).status_code == 403
        r = as_(d, w, who, "POST", "/schedule.json", data={"project": project, "spider": "quick"})
        assert r.status_code == 403
        r = as_(d, w, who, "POST", "/cancel.json", data={"project": project, "job": job["job"]})
        assert r.status_code == 403
        assert as_(d, w, who, "GET", f"/listjobs.json?project={project}").status_code == 403
        r = as_(d, w, who, "POST", f"/projects/{project}/versions", params={"version": "9"},
                data=b"PK", headers={"Content-Type": "application/octet-stream"})
        assert r.status_code == 403
        assert as_(d, w, who, "DELETE", f"/projects/{project}").status_code == 403
        assert as_(d, w, who, "GET", f"/projects/{project}/spiders").status_code == 403
        assert as_(d, w, who, "POST", "/delproject.json",
                   data={"project": project}).status_code == 403
        # schedules and queues
        assert as_(d, w, who, "GET", f"/schedules/s-{project}").status_code == 404
        assert as_(d, w, who, "DELETE", f"/schedules/s-{project}").status_code == 404
        assert as_(d, w, who, "POST", f"/schedules/s-{project}/run", json={}).status_code == 404
        assert as_(d, w, who, "POST", "/schedules", json={
            "name": unique("s"), "project": project, "spider": "quick",
            "cron": "0 3 * * *"}).status_code == 403
        assert as_(d, w, who, "GET", f"/queues/{project}.urls").status_code == 403
        assert as_(d, w, who, "POST", f"/queues/{project}.urls/take", json={}).status_code == 403
    # account management is an admin's
    assert as_(d, w, who, "POST", "/accounts", json={"name": unique("a")}).status_code == 403
    assert as_(d, w, who, "POST", f"/accounts/{acct}/assign",
               json={"project": theirs}).status_code == 403
    assert as_(d, w, who, "PATCH", f"/accounts/{acct}",
               json={"max_running": 0}).status_code == 403
    # the things of the other account are all still there
    A = w["admin"]
    assert ok(req(d, "GET", f"/jobs/{w['job_' + theirs]['id']}", A))["state"] == "finished"
    assert ok(req(d, "GET", f"/schedules/s-{theirs}", A))["project"] == theirs


def test_a_member_works_in_its_own_account(d, w):
    job = wait_ended(d, w["admin"], run(d, w["ta"], "pa"))
    assert job["state"] == "finished"
    assert as_(d, w, "ua", "GET", f"/jobs/{job['id']}/log").status_code == 200
    assert as_(d, w, "ta", "GET", f"/logs/pa/quick/{job['job']}.log").status_code == 200
    r = as_(d, w, "ua", "POST", "/schedule.json", data={"project": "pa2", "spider": "quick"})
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    wait_for(lambda: ok(req(d, "GET", "/jobs", w["admin"], params={"project": "pa2"}))["jobs"][0]
             ["state"] == "finished", timeout(60), "pa2's job to end", interval=0.1)
    assert ok(as_(d, w, "ua", "POST", "/queues/pa.urls/take", json={}))
    # the token of globex runs its project's schedule
    assert as_(d, w, "tb", "POST", "/schedules/s-pb/run", json={}).status_code == 201
    # a member's token never reaches beyond the member's account
    t = make_token(d, "read", auth=("ub", PW), name="ub's")
    me = ok(d.request("GET", API + "/auth/whoami", headers=bearer(t["token"])))
    assert me["account"] == "globex" and me["projects"] == ["pb"]
    tokens = ok(req(d, "GET", "/tokens", w["admin"]))["tokens"]
    assert {x["id"]: x.get("account") for x in tokens}[t["id"]] == "globex"


def test_an_admin_sees_every_account_and_project(d, w):
    A = w["admin"]
    assert "account" not in ok(req(d, "GET", "/auth/whoami", A))
    projects = {p["name"] for p in ok(req(d, "GET", "/projects", A))["projects"]}
    assert {"pa", "pa2", "pb", "free"} <= projects
    assert {"pa", "pb", "free"} <= {j["project"] for j in ok(req(d, "GET", "/jobs", A))["jobs"]}
    accounts = {a["name"]: a for a in ok(req(d, "GET", "/accounts", A))["accounts"]}
    assert set(accounts) == {"acme", "globex"}
    assert accounts["acme"]["projects"] == ["pa", "pa2"] and accounts["acme"]["users"] == ["ua"]
    assert accounts["acme"]["max_running"] == 1 and accounts["acme"]["description"] == "acme ltd"
    users = {u["name"]: u.get("account") for u in ok(req(d, "GET", "/users", A))["users"]}
    assert users["ua"] == "acme" and users["ub"] == "globex"
    # statistics by account: one group each, and the projects of none
    groups = ok(req(d, "GET", "/stats", A, params={"by": "account"}))["groups"]
    by = {g["account"]: g for g in groups}
    assert set(by) == {"acme", "globex", None}
    assert by["globex"]["runs"]["finished"] >= 1 and by[None]["runs"]["finished"] >= 1
    only = ok(req(d, "GET", "/stats", A, params={"account": "globex"}))["groups"]
    assert {g["project"] for g in only} == {"pb"}
    assert req(d, "GET", "/stats", A, params={"account": "nope"}).status_code == 404
    # an admin user in an account still sees everything
    name = unique("adm")
    ok(req(d, "POST", "/users", A, json={"name": name, "password": PW, "role": "admin"}), 201)
    ok(req(d, "POST", "/accounts/acme/assign", A, json={"user": name}))
    seen = {p["name"] for p in ok(d.request("GET", API + "/projects",
                                            auth=(name, PW)))["projects"]}
    assert {"pa", "pb", "free"} <= seen
    ok(req(d, "POST", "/accounts/acme/unassign", A, json={"user": name}))


def test_upcoming_runs_of_an_account_are_its_schedules(d, w):
    A = w["admin"]
    for who, acct, theirs in (("ua", "acme", "globex"), ("tb", "globex", "acme")):
        page = ok(as_(d, w, who, "GET", f"/accounts/{acct}/upcoming"))
        names = {r["schedule"] for r in page["runs"]}
        assert names == {"s-pa" if acct == "acme" else "s-pb"}, page
        assert as_(d, w, who, "GET", f"/accounts/{theirs}/upcoming").status_code == 404
    # three days of a daily schedule: three runs
    page = ok(req(d, "GET", "/accounts/globex/upcoming", A))
    assert {r["schedule"] for r in page["runs"]} == {"s-pb"} and len(page["runs"]) == 3
    assert req(d, "GET", "/accounts/nope/upcoming", A).status_code == 404
    # Grepsr's name, over JSON-RPC
    r = ok(req(d, "POST", "/jsonrpc", A, json={
        "jsonrpc": "2.0", "id": 1, "method": "GetUpcomingAccountSchedules",
        "params": {"account": "acme"}}))
    assert {x["schedule"] for x in r["result"]["runs"]} == {"s-pa"}, r
    r = ok(d.request("POST", API + "/jsonrpc", auth=("ub", PW), json={
        "jsonrpc": "2.0", "id": 1, "method": "GetUpcomingAccountSchedules",
        "params": {"account": "acme"}}))
    assert r["error"]["code"] and "acme" in r["error"]["message"]


def test_an_accounts_cap_on_running_jobs_holds_with_real_crawls(d, w):
    """acme runs one job at a time; globex, uncapped, runs two at once
    beside it."""
    A = w["admin"]
    ok(req(d, "PATCH", "/accounts/acme", A, json={"max_running": 1}))
    mine = [run(d, w["ta"], p, "slow", seconds="2") for p in ("pa", "pa2", "pa")]
    theirs = [run(d, w["tb"], "pb", "slow", seconds="4") for _ in range(2)]
    ids, their_ids = {j["id"] for j in mine}, {j["id"] for j in theirs}
    most_mine = most_theirs = 0
    deadline = time.monotonic() + timeout(120)
    while time.monotonic() < deadline:
        running = ok(req(d, "GET", "/jobs", A, params={"state": "running", "limit": 100}))["jobs"]
        most_mine = max(most_mine, sum(j["id"] in ids for j in running))
        most_theirs = max(most_theirs, sum(j["id"] in their_ids for j in running))
        got = ok(req(d, "GET", "/accounts/acme", A))
        assert got["running"] <= 1, got
        states = {ok(req(d, "GET", f"/jobs/{j['id']}", A))["state"] for j in mine + theirs}
        if not states & {"pending", "running"}:
            break
        time.sleep(0.1)
    assert most_mine == 1, "acme's cap of one"
    assert most_theirs == 2, "globex is not held back by acme's cap"
    for j in mine + theirs:
        assert ok(req(d, "GET", f"/jobs/{j['id']}", A))["state"] == "finished"
    ok(req(d, "PATCH", "/accounts/acme", A, json={"max_running": 0}))


def test_account_ops_refuse_bad_input_with_the_right_status(d, w):
    A = w["admin"]
    assert req(d, "POST", "/accounts", A, json={"name": "acme"}).status_code == 409
    assert req(d, "POST", "/accounts", A, json={"name": "bad name!"}).status_code == 400
    assert req(d, "POST", "/accounts", A, json={"name": "x", "max_running": -1}).status_code == 400
    assert req(d, "POST", "/accounts", A, json={}).status_code == 400
    assert req(d, "GET", "/accounts/nope", A).status_code == 404
    assert req(d, "PATCH", "/accounts/nope", A, json={"max_running": 1}).status_code == 404
    assert req(d, "POST", "/accounts/acme/assign", A, json={}).status_code == 400
    assert req(d, "POST", "/accounts/acme/assign", A,
               json={"project": "pa", "user": "ua"}).status_code == 400
    assert req(d, "POST", "/accounts/acme/assign", A, json={"user": "ghost"}).status_code == 404
    assert req(d, "POST", "/accounts/acme/assign", A,
               json={"token": "0123456789abcdef"}).status_code == 404
    assert req(d, "POST", "/accounts/acme/assign", A, json={"project": "a/b"}).status_code == 400
    assert req(d, "POST", "/accounts/acme/unassign", A, json={"project": "pb"}).status_code == 404
    # an account with members is not deleted (they would see every project)
    assert req(d, "DELETE", "/accounts/acme", A).status_code == 409
    # a deleted user leaves its account: made again, it is of none
    name = unique("u")
    ok(req(d, "POST", "/users", A, json={"name": name, "password": PW, "role": "read"}), 201)
    ok(req(d, "POST", "/accounts/acme/assign", A, json={"user": name}))
    assert ok(d.request("GET", API + "/auth/whoami", auth=(name, PW)))["account"] == "acme"
    ok(req(d, "DELETE", f"/users/{name}", A), 204)
    assert name not in ok(req(d, "GET", "/accounts/acme", A))["users"]
    ok(req(d, "POST", "/users", A, json={"name": name, "password": PW, "role": "read"}), 201)
    assert "account" not in ok(d.request("GET", API + "/auth/whoami", auth=(name, PW)))
    # an empty account: its member sees no project at all
    empty = unique("a")
    ok(req(d, "POST", "/accounts", A, json={"name": empty}), 201)
    ok(req(d, "POST", f"/accounts/{empty}/assign", A, json={"user": name}))
    who = ok(d.request("GET", API + "/auth/whoami", auth=(name, PW)))
    assert who["account"] == empty and who["projects"] == []
    assert ok(d.request("GET", API + "/jobs", auth=(name, PW)))["jobs"] == []
    assert ok(d.request("GET", API + "/projects", auth=(name, PW)))["projects"] == []
    ok(req(d, "POST", f"/accounts/{empty}/unassign", A, json={"user": name}))
    ok(req(d, "DELETE", f"/accounts/{empty}", A), 204)
    assert req(d, "GET", f"/accounts/{empty}", A).status_code == 404
    # every change is an event naming who made it
    events = ok(req(d, "GET", "/events", A, params={"type": "account.deleted"}))["events"]
    assert any(e["data"]["account"] == empty and e["data"]["by"] for e in events)


def test_the_cli_manages_accounts(d, w):
    token = w["admin"]["Authorization"].split(" ", 1)[1]

    def cli(*args, code=0):
        p = subprocess.run([BIN, *args, "--url", d.url, "--token", token], capture_output=True,
                           text=True, timeout=timeout(30), stdin=subprocess.DEVNULL)
        assert p.returncode == code, (args, p.returncode, p.stdout, p.stderr)
        return p.stdout + p.stderr

    name = unique("cli")
    assert name in cli("account", "add", name, "--description", "from the cli",
                       "--max-running", "3")
    assert "put project pz in account " + name in cli("account", "assign", name, "project", "pz")
    out = cli("account", "list")
    assert name in out and "pz" in out and "MAX RUNNING" in out
    shown = cli("account", "show", name)
    assert "from the cli" in shown and "3" in shown
    assert json.loads(cli("account", "show", name, "--json"))["projects"] == ["pz"]
    assert "none" in cli("account", "set", name, "--max-running", "0")
    cli("account", "upcoming", name)
    assert "expected project, user or token" in cli("account", "assign", name, "queue", "x",
                                                    code=2)
    assert "nothing to change" in cli("account", "set", name, code=2)
    cli("account", "unassign", name, "project", "pz")
    assert "removed account " + name in cli("account", "remove", name)
    assert f"no account '{name}'" in cli("account", "show", name, code=1)
