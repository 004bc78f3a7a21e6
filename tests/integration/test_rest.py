"""spiderd's native API: REST under /api/v1/, JSON-RPC 2.0 at /api/v1/jsonrpc
and the OpenAPI document, against a real daemon with real eggs."""

import json
import os
import re
import signal
import time

import pytest

from conftest import (
    TESTPROJ_SPIDERS, cursor_pages, err, get_job, ok, req, timeout, unique, wait_for)

API = "/api/v1"
SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    """One daemon for the module, items stored, project "rp" = testproj 1.0."""
    daemon = module_spiderd(name="rest", scrapyd={"items_dir": "items"},
                            spiderd={"max_upload": 4 * 1024 * 1024})
    r = daemon.request("POST", f"{API}/projects/rp/versions", params={"version": "1.0"},
                       data=egg_bytes("testproj"),
                       headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    return daemon


def create(d, spider="quick", project="rp", **fields):
    r = req(d, "POST", "/jobs", json={"project": project, "spider": spider, **fields})
    return ok(r, 201)


def wait_state(d, ident, states, seconds=60):
    def check():
        j = get_job(d, ident)
        return j if j["state"] in states else None
    return wait_for(check, seconds, f"job {ident} in {states}", interval=0.1)


ENDED = ("finished", "failed", "cancelled", "lost")


def rpc(d, payload, status=200):
    r = req(d, "POST", "/jsonrpc", data=json.dumps(payload),
            headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    return r.json() if status == 200 else None


# ---- the route table, the index and the OpenAPI document ----------------

def test_openapi_documents_exactly_the_routes_the_daemon_has(d):
    doc = ok(req(d, "GET", "/openapi.json"))
    assert doc["openapi"].startswith("3.0")
    documented = {(m.upper(), path) for path, item in doc["paths"].items() for m in item}
    index = ok(req(d, "GET", "/"))
    served = {(r["method"], r["path"]) for r in index["routes"]}
    assert documented - served == set(), "documented but not served"
    assert served - documented == set(), "served but not documented"
    # The index is what the daemon routes: every route answers something other
    # than "no such route", and OPTIONS lists the documented methods.
    for path, item in doc["paths"].items():
        concrete = path.replace("{project}", "rp").replace("{version}", "nov").replace("{id}", "999999").replace("{schedule}", "999999")
        r = d.request("OPTIONS", concrete)
        assert r.status_code == 204, (path, r.text)
        allowed = set(r.headers["Allow"].split(", "))
        want = {m.upper() for m in item} | {"OPTIONS"} | ({"HEAD"} if "get" in item else set())
        assert allowed == want, path
        for method in item:
            if method == "get":
                # An event stream never ends: read its status line only.
                r = d.session.get(d.url + concrete, stream=True, timeout=10)
                if r.headers.get("Content-Type", "").startswith("text/event-stream"):
                    r.close()
                    assert r.status_code == 200, path
                    continue
                assert not (r.status_code == 404 and "SPD_ENOROUTE" in r.text), path
                assert r.status_code != 405, path


def test_openapi_documents_every_parameter_and_jsonrpc_method(d):
    doc = ok(req(d, "GET", "/openapi.json"))
    index = ok(req(d, "GET", "/"))
    rpc_documented = set()
    for route in index["routes"]:
        if route["op"] is None:
            continue
        item = doc["paths"][route["path"]][route["method"].lower()]
        assert item["operationId"] == route["op"]
        rpc_documented |= set(item["x-jsonrpc-methods"])
        names = {p["name"] for p in item.get("parameters", [])}
        body = item.get("requestBody", {}).get("content", {})
        for schema in body.values():
            s = schema["schema"]
            if "$ref" in s:
                s = doc["components"]["schemas"][s["$ref"].rsplit("/", 1)[1]]
            names |= set(s.get("properties", {}))
        if route["op"] == "versions.add":
            names.add("egg")  # the body itself
        for p in route["params"]:
            assert p["name"] in names, (route["path"], p["name"])
    assert rpc_documented == set(index["jsonrpc"]["methods"])


def test_openapi_json_in_the_source_tree_is_what_is_served(d):
    with open(os.path.join(SRC, "api", "openapi.json"), "rb") as f:
        assert req(d, "GET", "/openapi.json").content == f.read()


def test_every_op_row_is_in_the_index(d):
    """The op table in src/api/ops.c, read as text: a row the daemon would
    not list (or list under another path) fails here."""
    with open(os.path.join(SRC, "api", "ops.c"), encoding="utf-8") as f:
        text = f.read()
    rows = re.findall(r'\{"([a-z]+\.[a-z]+)",\s*(?:NULL|"\w+"),\s*op_\w+,\s*\w+,\s*\w+,\s*'
                      r'"(\w+)",\s*"([^"]+)"', text)
    assert len(rows) >= 15
    index = ok(req(d, "GET", "/"))
    served = {(r["op"], r["method"], r["path"]) for r in index["routes"]}
    for name, method, path in rows:
        assert (name, method, API + path) in served


# ---- HTTP behaviour -------------------------------------------------------

def test_unknown_route_wrong_method_options_and_head(d):
    err(req(d, "GET", "/nosuch"), 404, "SPD_ENOROUTE")
    err(req(d, "GET", "/projects/rp/nosuch"), 404, "SPD_ENOROUTE")
    r = req(d, "PUT", "/jobs")
    assert "POST" in err(r, 405, "SPD_EMETHOD")
    assert r.headers["Allow"] == "OPTIONS, HEAD, GET, POST"
    r = req(d, "DELETE", "/jobs/1")
    err(r, 405, "SPD_EMETHOD")
    assert r.headers["Allow"] == "OPTIONS, HEAD, GET"
    err(req(d, "GET", "/jsonrpc"), 405, "SPD_EMETHOD")
    r = d.request("OPTIONS", API + "/jobs")
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Methods"] == "OPTIONS, HEAD, GET, POST"
    assert "Content-Type" in r.headers["Access-Control-Allow-Headers"]
    get = req(d, "GET", "/status")
    head = req(d, "HEAD", "/projects")
    assert head.status_code == 200 and head.content == b""
    assert get.json()["node_name"] == "testnode"
    # A trailing slash names the same resource.
    assert ok(req(d, "GET", "/projects/"))["projects"]


def test_status(d):
    s = ok(req(d, "GET", "/status"))
    assert s["node_name"] == "testnode"
    assert s["version"]
    assert s["uptime"] >= 0 and s["started_at"].endswith("Z")
    for k in ("pending", "running", "finished"):
        assert isinstance(s[k], int)
    assert s["stopping"] is False


def test_bad_input_is_400_with_a_readable_message(d):
    m = err(req(d, "GET", "/jobs", params={"limit": "ten"}), 400, "SPD_EBADPARAM")
    assert "'limit' must be an integer" in m
    err(req(d, "GET", "/jobs", params={"limit": "0"}), 400, "SPD_EBADPARAM")
    m = err(req(d, "GET", "/jobs", params={"bogus": "1"}), 400, "SPD_EBADPARAM")
    assert "unknown field 'bogus'" in m
    r = req(d, "GET", "/jobs", params={"state": "done"})
    assert "unknown state 'done'" in err(r, 400, "SPD_EBADPARAM")
    r = req(d, "POST", "/jobs", data="{nope", headers={"Content-Type": "application/json"})
    assert "not valid JSON" in err(r, 400, "SPD_EBADJSON")
    r = req(d, "POST", "/jobs", data="[1]", headers={"Content-Type": "application/json"})
    assert "must be an object" in err(r, 400, "SPD_EBADJSON")
    r = req(d, "POST", "/jobs", data='{"project": "rp", "project": "x", "spider": "quick"}',
            headers={"Content-Type": "application/json"})
    assert "duplicate" in err(r, 400, "SPD_EBADJSON")
    r = req(d, "POST", "/jobs", data='{"project": "rp", "spider": "quick"}')  # no Content-Type
    assert ok(r, 201)["spider"] == "quick"
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "quick", "priority": "high"})
    assert "'priority' must be a number" in err(r, 400, "SPD_EBADPARAM")
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "quick", "args": {"n": 3}})
    assert "'args.n' must be a string" in err(r, 400, "SPD_EBADPARAM")
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "quick", "args": {"_job": "x"}})
    err(r, 400, "SPD_EBADPARAM")
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "quick", "colour": "red"})
    assert json.loads(r.text)["error"]["details"] == {"field": "colour"}
    err(r, 400, "SPD_EBADPARAM")
    r = req(d, "POST", "/jobs", json={"spider": "quick"})
    assert err(r, 400, "SPD_EMISSING") == "'project' is required"
    r = req(d, "POST", "/jobs", json={"project": "../etc", "spider": "quick"})
    err(r, 400, "SPD_EBADPARAM")
    r = req(d, "POST", "/jobs", data='{"project": "rp"}',  # curl -d without a JSON type
            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert "Content-Type: application/json" in err(r, 400, "SPD_EBADJSON")
    r = req(d, "GET", "/projects", data="{}", headers={"Content-Type": "application/json"})
    assert "takes no request body" in err(r, 400, "SPD_EBADPARAM")


def test_json_size_and_depth_are_bounded(d):
    deep = "[" * 100 + "]" * 100
    r = req(d, "POST", "/jobs", data=deep, headers={"Content-Type": "application/json"})
    assert "deeper than 32" in err(r, 400, "SPD_EBADJSON")
    big = json.dumps({"project": "rp", "spider": "quick", "args": {"x": "y" * (1024 * 1024)}})
    r = req(d, "POST", "/jobs", data=big, headers={"Content-Type": "application/json"})
    err(r, 413, "SPD_ETOOBIG")


# ---- projects, versions, spiders ------------------------------------------

def test_projects(d):
    projects = ok(req(d, "GET", "/projects"))["projects"]
    rp = [p for p in projects if p["name"] == "rp"][0]
    assert rp["versions"] == ["1_0"] and rp["latest_version"] == "1_0"
    p = ok(req(d, "GET", "/projects/rp"))
    assert p["name"] == "rp" and set(p["jobs"]) == set(ENDED) | {"pending", "running", "paused"}
    assert "'nosuch'" in err(req(d, "GET", "/projects/nosuch"), 404, "SPD_ENOPROJECT")
    err(req(d, "GET", "/projects/a..b"), 400, "SPD_EBADPARAM")
    err(req(d, "DELETE", "/projects/nosuch"), 404, "SPD_ENOPROJECT")


def test_versions_upload_list_delete(d, egg_bytes):
    project = unique("v")
    path = f"/projects/{project}/versions"
    egg = egg_bytes("testproj")
    # raw body
    r = req(d, "POST", path, params={"version": "1.0"}, data=egg,
            headers={"Content-Type": "application/zip"})
    body = ok(r, 201)
    assert body == {"project": project, "version": "1.0", "spiders": TESTPROJ_SPIDERS}
    # multipart, version as a form field
    r = req(d, "POST", path, data={"version": "2.0"}, files={"egg": ("x.egg", egg_bytes("testproj_v2"))})
    assert ok(r, 201)["version"] == "2.0"
    v = ok(req(d, "GET", path))
    assert v == {"project": project, "versions": ["1_0", "2_0"], "latest_version": "2_0"}
    sp = ok(req(d, "GET", f"/projects/{project}/spiders", params={"version": "1.0"}))
    assert sp["spiders"] == TESTPROJ_SPIDERS and sp["version"] == "1.0"
    assert len(ok(req(d, "GET", f"/projects/{project}/spiders"))["spiders"]) == len(TESTPROJ_SPIDERS) + 1
    err(req(d, "GET", f"/projects/{project}/spiders", params={"version": "9"}), 404, "SPD_ENOVERSION")
    ok(req(d, "DELETE", f"{path}/2.0"), 204)
    err(req(d, "DELETE", f"{path}/2.0"), 404, "SPD_ENOVERSION")
    assert ok(req(d, "GET", path))["versions"] == ["1_0"]
    ok(req(d, "DELETE", f"/projects/{project}"), 204)
    err(req(d, "GET", path), 404, "SPD_ENOPROJECT")


def test_version_upload_errors(d, egg_bytes):
    path = f"/projects/{unique('e')}/versions"
    r = req(d, "POST", path, params={"version": "1"}, data=b"not a zip",
            headers={"Content-Type": "application/octet-stream"})
    assert "ZIP" in err(r, 400, "SPD_EBADEGG")
    r = req(d, "POST", path, data=egg_bytes("testproj"),
            headers={"Content-Type": "application/octet-stream"})
    assert err(r, 400, "SPD_EMISSING") == "'version' is required"
    err(req(d, "POST", path, params={"version": "1"}), 400, "SPD_EMISSING")
    r = req(d, "POST", path, params={"version": "1"}, data=egg_bytes("brokenproj"),
            headers={"Content-Type": "application/octet-stream"})
    err(r, 422, "SPD_ERUNNER")
    assert "fail to import on purpose" in r.json()["error"]["details"]["stderr"]
    err(req(d, "GET", path), 404, "SPD_ENOPROJECT")  # the broken egg was not kept
    r = req(d, "POST", path, params={"version": "../x"}, data=egg_bytes("testproj"),
            headers={"Content-Type": "application/octet-stream"})
    err(r, 400, "SPD_EBADPARAM")


def test_spiders_across_projects(d):
    body = ok(req(d, "GET", "/spiders"))
    mine = sorted(s["spider"] for s in body["scrapers"] if s["project"] == "rp")
    assert mine == TESTPROJ_SPIDERS
    assert {"id": "rp/quick", "project": "rp", "spider": "quick"} in body["scrapers"]
    err(req(d, "GET", "/projects/nosuch/spiders"), 404, "SPD_ENOPROJECT")


# ---- jobs ------------------------------------------------------------------

def test_create_get_and_finish(d):
    j = create(d, "quick", args={"count": "2"}, settings={"LOG_LEVEL": "INFO"}, priority=1.5)
    assert j["state"] == "pending" and j["project"] == "rp" and j["spider"] == "quick"
    assert j["args"] == {"count": "2"} and j["settings"] == {"LOG_LEVEL": "INFO"}
    assert j["priority"] == 1.5 and isinstance(j["id"], int) and len(j["job"]) == 32
    done = wait_state(d, j["id"], ENDED)
    assert done["state"] == "finished" and done["exit_code"] == 0
    assert done["started_at"] and done["ended_at"] and done["stats"]["items"] == 2
    # The Scrapyd job id finds it too.
    assert get_job(d, j["job"])["id"] == j["id"]
    err(req(d, "GET", "/jobs/987654321"), 404, "SPD_ENOJOB")
    err(req(d, "GET", "/jobs/nosuchjob"), 404, "SPD_ENOJOB")


def test_create_errors(d):
    r = req(d, "POST", "/jobs", json={"project": "nosuch", "spider": "quick"})
    err(r, 404, "SPD_ENOPROJECT")
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "nosuch"})
    assert "spider 'nosuch' not found" in err(r, 404, "SPD_ENOSPIDER")
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "quick", "version": "9"})
    err(r, 404, "SPD_ENOVERSION")


def test_job_id_conflicts(d):
    jid = unique("dup")
    first = create(d, "slow", jobid=jid, args={"seconds": "30"})
    r = req(d, "POST", "/jobs", json={"project": "rp", "spider": "quick", "jobid": jid})
    err(r, 409, "SPD_ECONFLICT")
    ok(req(d, "POST", f"/jobs/{first['id']}/cancel", json={"signal": "KILL"}))
    wait_state(d, first["id"], ENDED)
    second = create(d, "quick", jobid=jid)
    wait_state(d, second["id"], ENDED)
    r = req(d, "GET", f"/jobs/{jid}")
    err(r, 409, "SPD_ECONFLICT")
    assert sorted(r.json()["error"]["details"]["ids"]) == sorted([first["id"], second["id"]])


def test_pagination_has_no_duplicates_or_gaps(spiderd, egg_bytes):
    d = spiderd(scrapyd={"max_proc": 1})
    ok(req(d, "POST", "/projects/pg/versions", params={"version": "1"}, data=egg_bytes("testproj"),
           headers={"Content-Type": "application/octet-stream"}), 201)
    blocker = create(d, "slow", project="pg", args={"seconds": "60"})
    made = [create(d, "quick", project="pg")["id"] for _ in range(11)]
    made.append(blocker["id"])
    pages = list(cursor_pages(d, "/jobs", limit=4, project="pg"))
    seen = [j["id"] for page in pages for j in page["jobs"]]
    assert len(pages) == 3
    assert seen == sorted(made, reverse=True)
    # Filters: state (comma list or repeated), spider.
    pend = ok(req(d, "GET", "/jobs", params={"state": "pending", "limit": 1000}))["jobs"]
    assert {j["state"] for j in pend} <= {"pending"}
    both = ok(req(d, "GET", "/jobs", params=[("state", "pending"), ("state", "running")]))["jobs"]
    assert len(both) == len(ok(req(d, "GET", "/jobs", params={"state": "pending,running"}))["jobs"])
    slow = ok(req(d, "GET", "/jobs", params={"spider": "slow"}))["jobs"]
    assert [j["id"] for j in slow] == [blocker["id"]]
    # A cursor belongs to its filters, and must be one the API made.
    first = ok(req(d, "GET", "/jobs", params={"limit": 2}))
    r = req(d, "GET", "/jobs", params={"limit": 2, "cursor": first["next_cursor"], "spider": "quick"})
    assert "other filters" in err(r, 400, "SPD_EBADPARAM")
    err(req(d, "GET", "/jobs", params={"cursor": "garbage"}), 400, "SPD_EBADPARAM")
    ok(req(d, "POST", f"/jobs/{blocker['id']}/cancel", params={"signal": "KILL"}))


def test_follow_the_log_of_a_running_job(d):
    j = create(d, "slow", args={"seconds": "3"})
    text, offset, polls = "", 0, 0
    deadline = time.monotonic() + timeout(60)
    while True:
        piece = ok(req(d, "GET", f"/jobs/{j['id']}/log", params={"offset": offset, "limit": 512}))
        assert piece["offset"] == offset
        assert piece["next_offset"] >= offset and piece["size"] >= piece["next_offset"]
        text += piece["text"]
        offset = piece["next_offset"]
        polls += 1
        if not piece["running"] and piece["eof"]:
            break
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert polls > 3
    with open(d.log_path("rp", "slow", j["job"]), encoding="utf-8") as f:
        assert text == f.read()
    assert "Spider closed (finished)" in text
    tail = ok(req(d, "GET", f"/jobs/{j['id']}/log", params={"offset": -100}))
    assert tail["next_offset"] == tail["size"] and len(tail["text"]) <= 100
    r = req(d, "GET", f"/jobs/{j['id']}/log", params={"offset": offset + 10})
    err(r, 400, "SPD_EBADPARAM")


def test_items(d):
    j = create(d, "quick", args={"count": "3"})
    wait_state(d, j["id"], ENDED)
    items = ok(req(d, "GET", f"/jobs/{j['id']}/items"))
    lines = [json.loads(x) for x in items["text"].splitlines()]
    assert [x["n"] for x in lines] == [0, 1, 2]
    assert items["running"] is False and items["eof"] is True


def test_items_without_items_dir_is_404(spiderd, egg_bytes):
    d = spiderd()
    ok(req(d, "POST", "/projects/ni/versions", params={"version": "1"}, data=egg_bytes("testproj"),
           headers={"Content-Type": "application/octet-stream"}), 201)
    j = create(d, "quick", project="ni")
    err(req(d, "GET", f"/jobs/{j['id']}/items"), 404, "SPD_ENOFILE")


def test_cancel_running_pending_and_ended(spiderd, egg_bytes):
    d = spiderd(scrapyd={"max_proc": 1})
    ok(req(d, "POST", "/projects/cx/versions", params={"version": "1"}, data=egg_bytes("testproj"),
           headers={"Content-Type": "application/octet-stream"}), 201)
    running = create(d, "slow", project="cx", args={"seconds": "60"})
    wait_state(d, running["id"], ("running",))
    pending = create(d, "quick", project="cx")
    c = ok(req(d, "POST", f"/jobs/{pending['id']}/cancel"))
    assert c["prevstate"] == "pending" and c["job"]["state"] == "cancelled"
    r = req(d, "POST", f"/jobs/{running['id']}/cancel", params={"signal": "NOPE"})
    err(r, 400, "SPD_EBADPARAM")
    c = ok(req(d, "POST", f"/jobs/{running['id']}/cancel", json={"signal": "KILL"}))
    assert c["prevstate"] == "running"
    ended = wait_state(d, running["id"], ENDED)
    assert ended["state"] == "cancelled"
    r = req(d, "POST", f"/jobs/{running['id']}/cancel")
    assert "already ended" in err(r, 409, "SPD_ECONFLICT")
    err(req(d, "POST", "/jobs/424242/cancel"), 404, "SPD_ENOJOB")


def test_writes_are_refused_while_stopping(spiderd, egg_bytes):
    d = spiderd(spiderd={"shutdown_grace": 20})
    ok(req(d, "POST", "/projects/st/versions", params={"version": "1"}, data=egg_bytes("testproj"),
           headers={"Content-Type": "application/octet-stream"}), 201)
    j = create(d, "slow", project="st", args={"seconds": "60", "drain": "4"},
               settings={"LOG_LEVEL": "DEBUG"})
    wait_state(d, j["id"], ("running",))
    d.wait_crawling("st", "slow", j["job"])
    d.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: ok(req(d, "GET", "/status"))["stopping"], 10, "stopping")
    r = req(d, "POST", "/jobs", json={"project": "st", "spider": "quick"})
    err(r, 503, "SPD_ESHUTDOWN")
    assert rpc(d, {"jsonrpc": "2.0", "method": "jobs.create", "id": 1,
                   "params": {"project": "st", "spider": "quick"}})["error"]["data"]["code"] == "SPD_ESHUTDOWN"
    assert d.proc.wait(timeout(40)) == 0
    d.proc = None


# ---- JSON-RPC ----------------------------------------------------------------

def test_jsonrpc_single_and_aliases(d):
    r = rpc(d, {"jsonrpc": "2.0", "method": "status.get", "id": 1})
    assert r["jsonrpc"] == "2.0" and r["id"] == 1 and r["result"]["node_name"] == "testnode"
    r = rpc(d, {"jsonrpc": "2.0", "method": "projects.list", "params": {}, "id": "a"})
    assert "rp" in [p["name"] for p in r["result"]["projects"]]
    r = rpc(d, {"jsonrpc": "2.0", "method": "jobs.create", "id": 2,
                "params": {"project": "rp", "spider": "quick"}})
    job = r["result"]
    r = rpc(d, {"jsonrpc": "2.0", "method": "jobs.get", "id": 3, "params": {"id": job["id"]}})
    assert r["result"]["job"] == job["job"]
    wait_state(d, job["id"], ENDED)
    r = rpc(d, {"jsonrpc": "2.0", "method": "jobs.log", "id": 4, "params": {"id": job["job"]}})
    assert "Spider closed" in r["result"]["text"]
    r = rpc(d, {"jsonrpc": "2.0", "method": "jobs.list", "id": 5,
                "params": {"project": "rp", "state": ["finished"], "limit": 1}})
    assert len(r["result"]["jobs"]) == 1
    r = rpc(d, {"jsonrpc": "2.0", "method": "scrapers.list", "id": 6})
    assert {"id": "rp/quick", "project": "rp", "spider": "quick"} in r["result"]["scrapers"]
    r = rpc(d, {"jsonrpc": "2.0", "method": "schedules.create", "id": 8,
                "params": {"name": "nightly", "project": "rp", "spider": "quick",
                           "cron": "0 3 * * *", "tz": "Europe/Paris"}})
    assert r["result"]["tz"] == "Europe/Paris"
    r = rpc(d, {"jsonrpc": "2.0", "method": "schedules.run", "id": 9,
                "params": {"schedule": "nightly"}})
    assert r["result"]["schedule_id"] == rpc(d, {"jsonrpc": "2.0", "method": "schedules.list",
                                                 "id": 10})["result"]["schedules"][0]["id"]
    r = rpc(d, {"jsonrpc": "2.0", "method": "kill_task", "id": 7, "params": {"id": job["id"]}})
    assert r["error"]["code"] == -32012 and r["error"]["data"]["code"] == "SPD_ECONFLICT"


def test_jsonrpc_upload_with_base64(d, egg_bytes):
    import base64
    project = unique("b")
    egg = base64.b64encode(egg_bytes("testproj")).decode()
    r = rpc(d, {"jsonrpc": "2.0", "method": "versions.add", "id": 1,
                "params": {"project": project, "version": "1", "egg": egg}})
    assert r["result"]["spiders"] == TESTPROJ_SPIDERS
    r = rpc(d, {"jsonrpc": "2.0", "method": "versions.add", "id": 2,
                "params": {"project": project, "version": "2", "egg": "!!!"}})
    assert r["error"]["code"] == -32602
    r = rpc(d, {"jsonrpc": "2.0", "method": "projects.delete", "id": 3, "params": {"project": project}})
    assert r["result"] == {"project": project, "deleted": True}


def test_jsonrpc_batch_and_notifications(d):
    batch = [
        {"jsonrpc": "2.0", "method": "status.get", "id": 1},
        {"jsonrpc": "2.0", "method": "status.get"},  # notification: no answer
        {"jsonrpc": "2.0", "method": "nosuch", "id": 2},
        {"jsonrpc": "2.0", "method": "projects.get", "params": {"project": "nosuch"}, "id": 3},
        5,
        {"jsonrpc": "2.0", "method": "jobs.list", "params": {"limit": "x"}, "id": 4},
    ]
    out = rpc(d, batch)
    assert [r["id"] for r in out] == [1, 2, 3, None, 4]
    assert "result" in out[0]
    assert out[1]["error"]["code"] == -32601
    assert out[2]["error"]["code"] == -32004
    assert out[2]["error"]["data"] == {"code": "SPD_ENOPROJECT", "details": {"project": "nosuch"}}
    assert out[3]["error"]["code"] == -32600 and out[3]["error"]["data"]["code"] == "SPD_EBADREQUEST"
    assert out[4]["error"]["code"] == -32602 and out[4]["error"]["data"]["details"] == {"field": "limit"}
    # Only notifications (even failing ones): 204, no body.
    rpc(d, [{"jsonrpc": "2.0", "method": "status.get"}, {"jsonrpc": "2.0", "method": "nosuch"}], status=204)
    rpc(d, {"jsonrpc": "2.0", "method": "status.get"}, status=204)


def test_jsonrpc_envelope_errors(d):
    r = req(d, "POST", "/jsonrpc", data="{", headers={"Content-Type": "application/json"})
    body = r.json()
    assert r.status_code == 200 and body["error"]["code"] == -32700 and body["id"] is None
    assert rpc(d, [])["error"]["code"] == -32600
    assert rpc(d, {"jsonrpc": "1.0", "method": "status.get", "id": 1})["error"]["code"] == -32600
    assert rpc(d, {"jsonrpc": "2.0", "method": 5, "id": 1})["error"]["code"] == -32600
    assert rpc(d, {"jsonrpc": "2.0", "method": "status.get", "id": {}})["error"]["code"] == -32600
    assert rpc(d, {"jsonrpc": "2.0", "method": "status.get", "extra": 1, "id": 1})["error"]["code"] == -32600
    r = rpc(d, {"jsonrpc": "2.0", "method": "jobs.get", "params": [1], "id": 9})
    assert r["error"]["code"] == -32602 and r["id"] == 9
    r = rpc(d, {"jsonrpc": "2.0", "method": "jobs.get", "params": {}, "id": 9})
    assert r["error"]["code"] == -32602 and r["error"]["data"]["code"] == "SPD_EMISSING"
    r = rpc(d, [{"jsonrpc": "2.0", "method": "status.get", "id": i} for i in range(101)])
    assert r["error"]["code"] == -32600
    r = req(d, "POST", "/jsonrpc", data='{"jsonrpc": "2.0"}',  # a form, not JSON
            headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert "Content-Type: application/json" in r.json()["error"]["message"]
