"""Grepsr's scheduler calls at /api/v1/jsonrpc (docs/api.md, "Grepsr's
calls"), against a real daemon with token authentication running the test
project: every call that is a native op of this node is made and its effect
checked through the native API; a call whose op this node does not have yet
answers -32601 naming the op (its test then skips, saying which); the calls
spiderd cannot do answer -32601 naming what is missing. Roles and project
limits are the native op's. And a real crawl fans out: its job's token
creates two children of its own job, and nothing else."""

import json

import pytest

from conftest import bearer, make_token, req, unique, wait_for

API = "/api/v1"
PROJECT = "gp"
OTHER = "gq"
ENDED = ("finished", "failed", "cancelled", "lost")
NOT_YET = "not available on this node yet"

_ids = iter(range(1, 1 << 30))


@pytest.fixture(scope="module")
def d(module_spiderd, egg_bytes):
    daemon = module_spiderd(name="grepsr")
    admin = make_token(daemon, "admin", name="root")["token"]  # anonymous on loopback: the first
    daemon.admin = bearer(admin)
    for project in (PROJECT, OTHER):
        r = daemon.request("POST", f"{API}/projects/{project}/versions",
                           params={"version": "1.0"}, data=egg_bytes("fanproj"),
                           headers={"Content-Type": "application/octet-stream", **daemon.admin})
        assert r.status_code == 201, r.text
    return daemon


def call(d, method, headers=None, **params):
    """("result", value) or ("error", {code, message, data}) of one call."""
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    r = req(d, "POST", "/jsonrpc", json=body, headers=headers or d.admin)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["id"] == body["id"], doc
    return ("error", doc["error"]) if "error" in doc else ("result", doc["result"])


def result(d, method, **params):
    kind, value = call(d, method, **params)
    if kind == "error" and value["code"] == -32601 and NOT_YET in value["message"]:
        pytest.skip(value["message"])  # its op is not on this node yet
    assert kind == "result", (method, value)
    return value


def error(d, method, headers=None, **params):
    kind, value = call(d, method, headers=headers, **params)
    assert kind == "error", (method, value)
    assert isinstance(value["code"], int) and value["message"], value
    return value


def native(d, method, path, **kw):
    r = req(d, method, path, headers=d.admin, **kw)
    assert r.status_code < 300, r.text
    return r.json() if r.content else None


def job(d, job_id):
    return native(d, "GET", f"/jobs/{job_id}")


def wait_state(d, job_id, states=ENDED, seconds=90):
    return wait_for(lambda: (lambda j: j if j["state"] in states else None)(job(d, job_id)),
                    seconds, f"job {job_id} in {states}", interval=0.2)


def run(d, spider="quick", **kw):
    return result(d, "OneTimeRun", project=PROJECT, spider=spider, **kw)


# ---- runs and tasks ---------------------------------------------------------

def test_one_time_run_then_status_info_and_completed(d):
    j = run(d, args={"count": "2"})
    assert j["project"] == PROJECT and j["spider"] == "quick" and j["state"] == "pending"
    done = wait_state(d, j["id"])
    assert done["state"] == "finished", done
    for method in ("GetTaskStatus", "GetTaskInfo"):
        got = result(d, method, id=j["id"])
        assert got["id"] == j["id"] and got["state"] == "finished", got
    completed = result(d, "GetCompletedTasks", project=PROJECT, limit=1000)["jobs"]
    assert j["id"] in [x["id"] for x in completed]
    assert all(x["state"] in ENDED for x in completed)
    history = result(d, "GetTaskHistoryInfo", project=PROJECT, spider="quick")["jobs"]
    assert j["id"] in [x["id"] for x in history]
    assert not [x for x in history if x["spider"] != "quick"]


@pytest.mark.parametrize("method", ["StopRun", "StopTask"])
def test_stop_run_and_stop_task_cancel_a_running_job(d, method):
    j = run(d, spider="slow", args={"seconds": "60"})
    wait_state(d, j["id"], ("running",))
    active = result(d, "GetActiveTasksV2", project=PROJECT)["jobs"]
    assert j["id"] in [x["id"] for x in active]
    assert all(x["state"] in ("pending", "running") for x in active)
    assert result(d, method, id=j["id"])["prevstate"] == "running"
    assert wait_state(d, j["id"])["state"] == "cancelled"
    assert j["id"] not in [x["id"] for x in result(d, "GetActiveTasksV2")["jobs"]]


def test_one_time_test_run_is_flagged_limited_and_out_of_stats(d):
    def slow_ended():
        groups = result(d, "GetStats", project=PROJECT, by="spider")["groups"]
        return sum(g["ended"] for g in groups if g["spider"] == "slow")

    before = slow_ended()
    t = result(d, "OneTimeTestRun", project=PROJECT, spider="slow", args={"seconds": "60"},
               items=2, meta={"purpose": "check"})
    assert t["test"] is True and t["settings"]["CLOSESPIDER_ITEMCOUNT"] == "2", t
    assert t["meta"] == {"purpose": "check"}, t
    done = wait_state(d, t["id"])
    assert done["state"] == "finished" and done["test"] is True, done
    assert done["stats"]["finish_reason"] == "closespider_itemcount", done["stats"]
    assert result(d, "GetTaskStatus", id=t["id"])["test"] is True
    assert slow_ended() == before
    tests = result(d, "GetCompletedTasks", project=PROJECT, test=True, limit=1000)["jobs"]
    assert t["id"] in [x["id"] for x in tests] and all(x["test"] for x in tests)
    e = error(d, "OneTimeTestRun", project=PROJECT, spider="slow", seconds=-1)
    assert e["code"] == -32602 and "seconds" in e["message"], e


def test_scheduled_tasks_are_the_pending_ones(d):
    tasks = result(d, "GetScheduledTasks", limit=1000)["jobs"]
    assert all(x["state"] == "pending" for x in tasks), tasks


def test_child_tasks_listed_and_stopped(d):
    parent = run(d, spider="slow", args={"seconds": "60"})
    kids = [run(d, spider="slow", args={"seconds": "60"}, parent=parent["id"])
            for _ in range(2)]
    assert all(k["parent_id"] == parent["id"] for k in kids), kids
    listed = result(d, "GetChildTasks", id=parent["id"])["jobs"]
    assert sorted(x["id"] for x in listed) == sorted(k["id"] for k in kids)
    try:
        result(d, "StopChildTasks", id=parent["id"])
        for k in kids:
            assert wait_state(d, k["id"])["state"] == "cancelled"
    finally:
        for x in [parent] + kids:
            call(d, "StopTask", id=x["id"])


def test_tasks_status_of_several_jobs(d):
    a, b = run(d), run(d)
    for x in (a, b):
        wait_state(d, x["id"])
    got = result(d, "GetTasksStatus", ids=[a["id"], b["id"]])
    assert json.dumps(got).count("finished") >= 2, got


def test_meta_and_history_of_a_task(d):
    j = run(d)
    wait_state(d, j["id"])
    result(d, "UpdateMetaByJob", id=j["id"], meta={"report": "r1"})
    assert "r1" in json.dumps(result(d, "GetTaskInfo", id=j["id"]))
    result(d, "UpdateTaskHistory", id=j["id"], note="checked")
    assert "checked" in json.dumps(result(d, "GetTaskInfo", id=j["id"]))
    result(d, "UpdateTaskHistoryByBatch", ids=[j["id"]], note="batch")
    assert "batch" in json.dumps(result(d, "GetTaskInfo", id=j["id"]))
    result(d, "UpdateAllTaskHistoryByStatus", status="finished", project=PROJECT,
           spider="quick", note="all")
    assert '"all"' in json.dumps(result(d, "GetTaskInfo", id=j["id"]))


def test_stats(d):
    stats = result(d, "GetStats")
    assert isinstance(stats, dict) and stats, stats


# ---- schedules --------------------------------------------------------------

def test_schedule_stop_unpause_update_list(d):
    name = unique("gs")
    sc = result(d, "Schedule", name=name, project=PROJECT, spider="quick", interval=86400)
    assert sc["name"] == name and sc["paused"] is False, sc
    assert result(d, "StopSchedule", schedule=name)["paused"] is True
    assert native(d, "GET", f"/schedules/{name}")["paused"] is True
    assert result(d, "UnpauseSchedule", schedule=name)["paused"] is False
    up = result(d, "UpdateSchedule", schedule=name, interval=3600, priority=2)
    assert up["priority"] == 2 and native(d, "GET", f"/schedules/{name}")["priority"] == 2
    page = result(d, "GetSchedules", limit=1000)
    assert name in [s["name"] for s in page["schedules"]]
    assert name in [s["name"] for s in result(d, "GetAllSchedules")["schedules"]]
    native(d, "DELETE", f"/schedules/{name}")


def test_task_history_by_scheduler_id(d):
    name = unique("gh")
    sc = result(d, "Schedule", name=name, project=PROJECT, spider="quick", interval=1)
    try:
        runs = wait_for(lambda: result(d, "GetTaskHistoryBySchedulerId",
                                       schedule=str(sc["id"]))["runs"],
                        60, "a run of the schedule", interval=0.2)
        assert runs[0]["schedule_id"] == sc["id"], runs
    finally:
        result(d, "StopSchedule", schedule=name)
    runs = result(d, "GetTaskHistoryBySchedulerId", schedule=name)["runs"]
    for r in runs:
        if r["job_id"]:
            wait_state(d, r["job_id"])
    native(d, "DELETE", f"/schedules/{name}")


def test_next_schedules(d):
    name = unique("gn")
    result(d, "Schedule", name=name, project=PROJECT, spider="quick", interval=86400)
    try:
        assert name in json.dumps(result(d, "GetNextSchedules"))
    finally:
        native(d, "DELETE", f"/schedules/{name}")


def test_missed_runs(d):
    name = unique("gm")
    result(d, "Schedule", name=name, project=PROJECT, spider="quick", interval=86400,
           paused=True)
    try:
        assert isinstance(result(d, "GetMissedScheduleRuns", schedule=name), (dict, list))
        assert isinstance(result(d, "GetAllMissedRuns"), (dict, list))
    finally:
        native(d, "DELETE", f"/schedules/{name}")


def test_upcoming_account_schedules(d):
    account, name = unique("acct"), unique("gu")
    native(d, "POST", "/accounts", json={"name": account})
    native(d, "POST", f"/accounts/{account}/assign", json={"project": PROJECT})
    result(d, "Schedule", name=name, project=PROJECT, spider="quick", cron="0 3 * * *")
    try:
        runs = result(d, "GetUpcomingAccountSchedules", account=account)["runs"]
        assert runs and {r["schedule"] for r in runs} >= {name}
        e = error(d, "GetUpcomingAccountSchedules")
        assert e["code"] == -32602 and "account" in e["message"], e
        e = error(d, "GetUpcomingAccountSchedules", account=unique("none"))
        assert e["data"]["code"] == "SPD_ENOACCOUNT", e
    finally:
        native(d, "DELETE", f"/schedules/{name}")
        native(d, "POST", f"/accounts/{account}/unassign", json={"project": PROJECT})
        native(d, "DELETE", f"/accounts/{account}")


# ---- bad calls -----------------------------------------------------------------

def test_bad_calls_get_the_native_ops_errors(d):
    e = error(d, "OneTimeRun", project=PROJECT)  # no spider
    assert e["code"] == -32602 and "spider" in e["message"], e
    e = error(d, "OneTimeRun", project=PROJECT, spider="quick", bogus=1)
    assert e["code"] == -32602 and "bogus" in e["message"], e
    e = error(d, "OneTimeRun", project="nope", spider="quick")
    assert e["data"]["code"] == "SPD_ENOPROJECT", e
    e = error(d, "GetChildTasks")
    assert e["code"] == -32602 and "'id'" in e["message"], e
    e = error(d, "GetChildTasks", id=1, parent=2)
    assert e["code"] == -32602 and e["data"]["details"]["field"] == "parent", e
    e = error(d, "GetActiveTasksV2", state=["finished"])
    assert "sets 'state' itself" in e["message"], e
    e = error(d, "GetTaskStatus", id=10 ** 12)
    assert e["data"]["code"] == "SPD_ENOJOB", e
    e = error(d, "StopSchedule", schedule="no-such-schedule")
    assert e["data"]["code"] == "SPD_ENOSCHEDULE", e
    body = {"jsonrpc": "2.0", "id": 7, "method": "GetTaskStatus", "params": [1]}
    e = req(d, "POST", "/jsonrpc", json=body, headers=d.admin).json()["error"]
    assert e["code"] == -32602 and "not an array" in e["message"], e
    # A batch of Grepsr's calls and native ones, answered in order.
    j = run(d)
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "GetTaskInfo", "params": {"id": j["id"]}},
             {"jsonrpc": "2.0", "id": 2, "method": "jobs.get", "params": {"id": j["id"]}},
             {"jsonrpc": "2.0", "id": 3, "method": "NoSuchGrepsrCall", "params": {}}]
    got = req(d, "POST", "/jsonrpc", json=batch, headers=d.admin).json()
    assert [x["id"] for x in got] == [1, 2, 3], got
    assert got[0]["result"]["id"] == got[1]["result"]["id"] == j["id"], got
    assert got[2]["error"]["code"] == -32601, got
    wait_state(d, j["id"])


def test_roles_and_projects_are_the_native_ops(d):
    reader = bearer(make_token(d, "read", d.admin, name=unique("r"))["token"])
    other = bearer(make_token(d, "run", d.admin, name=unique("o"), projects=[OTHER])["token"])
    j = run(d, spider="slow", args={"seconds": "60"})
    try:
        e = error(d, "OneTimeRun", headers=reader, project=PROJECT, spider="quick")
        assert e["data"]["code"] == "SPD_EFORBIDDEN", e
        assert call(d, "GetTaskStatus", headers=reader, id=j["id"])[0] == "result"
        e = error(d, "StopRun", headers=other, id=j["id"])
        assert e["data"]["code"] in ("SPD_EFORBIDDEN", "SPD_ENOJOB"), e
        e = error(d, "Schedule", headers=other, name=unique("x"), project=PROJECT,
                  spider="quick", interval=60)
        assert e["data"]["code"] == "SPD_EFORBIDDEN", e
        assert job(d, j["id"])["state"] in ("pending", "running")
    finally:
        call(d, "StopRun", id=j["id"])
    r = req(d, "POST", "/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "GetStats"},
            headers=bearer("sdt_wrong"))
    assert r.status_code == 401


# ---- a crawl fans out with its job's token -----------------------------------

def test_crawl_creates_two_children_with_its_job_token_and_nothing_else(d):
    j = run(d, spider="fanout", args={"other_project": OTHER})
    done = wait_state(d, j["id"])
    assert done["state"] == "finished", done
    text = native(d, "GET", f"/jobs/{j['id']}/log")["text"]
    line = next(x for x in text.splitlines() if "FANOUT " in x)
    out = json.loads(line.split("FANOUT ", 1)[1])
    assert out["me"] == j["id"], out
    status, child_rest = out["rest"]
    assert status == 201 and child_rest["parent_id"] == j["id"], out["rest"]
    status, rpc = out["rpc"]
    assert status == 200 and rpc["result"]["parent_id"] == j["id"], out["rpc"]
    for case in ("no_parent", "other_parent", "other_project"):
        status, body = out[case]
        assert status == 403, (case, out[case])
        assert "own job" in json.dumps(body), (case, body)
    assert out["rpc_no_parent"][1]["error"]["data"]["code"] == "SPD_EFORBIDDEN", out
    assert out["schedule"][1]["error"]["data"]["code"] == "SPD_EFORBIDDEN", out
    kids = result(d, "GetChildTasks", id=j["id"])["jobs"]
    assert sorted(k["id"] for k in kids) == sorted([child_rest["id"], rpc["result"]["id"]])
    for k in kids:
        assert k["project"] == PROJECT and wait_state(d, k["id"])["state"] == "finished"
    assert not [x for x in native(d, "GET", "/jobs", params={"project": OTHER})["jobs"]
                if x["spider"] == "quick"]
    assert "fan" not in [s["name"] for s in native(d, "GET", "/schedules")["schedules"]]
