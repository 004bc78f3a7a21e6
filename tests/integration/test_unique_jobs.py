"""Unique jobs: a unique_key names at most one pending or running job per
project. Scheduling again while it is held (schedule.json's
_unique_key/unique_key, the native POST /api/v1/jobs's unique_key) answers
the holder instead of queueing a second job; any end frees the key; a retry
takes it over from the attempt it replaces."""

import json
import os
import subprocess
import threading

import pytest

from conftest import BIN, SLOW, rest, timeout, unique, wait_for

API = "/api/v1"


@pytest.fixture(scope="module")
def ud(module_spiderd, egg):
    """One slot, so a job can be held pending behind a blocker."""
    d = module_spiderd(name="unique", scrapyd={"max_proc": 1},
                       spiderd={"cancel_grace": 2})
    d.upload("p", "1.0", egg("testproj"))
    d.upload("q", "1.0", egg("testproj"))
    return d


def create(d, status, **fields):
    return rest(d, "POST", "/jobs", status, json={"project": "p", **fields})


def schedule_raw(d, **form):
    """schedule.json's whole answer (status ok), keys in order."""
    obj = d.call("schedule.json", data=list(form.items()))
    assert obj["status"] == "ok", obj
    return obj


def live_with_key(d, project, key):
    """Pending and running jobs of project holding key, from the store."""
    r = d.request("GET", "/api/v1/jobs",
                  params={"project": project, "state": "pending,running", "limit": 1000})
    assert r.status_code == 200, r.text
    return [j["job"] for j in sorted(r.json()["jobs"], key=lambda j: j["id"])
            if j["unique_key"] == key]


def state_of(d, jobid):
    section, _ = d.find(jobid)
    return section


@pytest.fixture
def blocker(ud):
    """Holds the one slot with a hanging crawl for the test's duration."""
    job = ud.schedule("p", "hang", seconds=300)
    ud.wait_running(job)
    yield job
    ud.cancel("p", job, "KILL")
    ud.wait_finished(job)


def test_schedule_json_returns_the_holder_while_pending_then_running(ud, blocker):
    key = unique("k")
    first = schedule_raw(ud, project="p", spider="slow", seconds="300", _unique_key=key)
    assert list(first) == ["jobid", "status", "node_name"]  # Scrapyd's shape for a new job
    job = first["jobid"]
    assert state_of(ud, job) == "pending"
    # Pending: either spelling of the key finds it; nothing else is queued.
    again = schedule_raw(ud, project="p", spider="slow", _unique_key=key)
    assert list(again) == ["jobid", "existing", "status", "node_name"]
    assert again["jobid"] == job and again["existing"] is True
    assert schedule_raw(ud, project="p", spider="quick", unique_key=key)["jobid"] == job
    assert len(ud.listjobs("p")["pending"]) == 1
    # Running: still the holder.
    ud.cancel("p", blocker, "KILL")
    ud.wait_running(job)
    again = schedule_raw(ud, project="p", spider="slow", jobid="other", _unique_key=key)
    assert (again["jobid"], again["existing"]) == (job, True)
    assert live_with_key(ud, "p", key) == [job]
    # Cancelled: the key is free again.
    ud.cancel("p", job, "KILL")
    assert ud.wait_finished(job)["state"] == "cancelled"
    fresh = schedule_raw(ud, project="p", spider="quick", _unique_key=key)
    assert fresh["jobid"] != job and "existing" not in fresh
    # Finished: free again.
    assert ud.wait_finished(fresh["jobid"])["state"] == "finished"
    third = schedule_raw(ud, project="p", spider="quick", _unique_key=key)
    assert third["jobid"] not in (job, fresh["jobid"]) and "existing" not in third
    ud.wait_finished(third["jobid"])


def test_key_is_per_project_and_not_a_spider_argument(ud, blocker, tmp_path):
    key = unique("k")
    a = ud.schedule("p", "envdump", out=str(tmp_path / "a.json"), _unique_key=key)
    b = ud.schedule("q", "envdump", out=str(tmp_path / "b.json"), unique_key=key)
    assert a != b
    assert live_with_key(ud, "p", key) == [a] and live_with_key(ud, "q", key) == [b]
    ud.cancel("p", blocker, "KILL")
    for job, name in ((a, "a.json"), (b, "b.json")):
        assert ud.wait_finished(job)["state"] == "finished"
        with open(tmp_path / name, encoding="utf-8") as f:
            assert json.load(f)["kwargs"] == {"_job": job, "out": str(tmp_path / name)}


def test_rest_returns_the_holder_with_200_and_existing(ud, blocker):
    key = unique("k")
    new = create(ud, 201, spider="slow", args={"seconds": "300"}, unique_key=key)
    assert (new["existing"], new["unique_key"], new["state"]) == (False, key, "pending")
    held = create(ud, 200, spider="quick", unique_key=key)
    assert held["existing"] is True and held["id"] == new["id"] and held["spider"] == "slow"
    # Repeating a request with its own job id gets the job back, not a 409.
    mine = create(ud, 201, spider="slow", args={"seconds": "300"}, jobid=unique("mine"),
                  unique_key=key + "-2")
    again = create(ud, 200, spider="slow", args={"seconds": "300"}, jobid=mine["job"],
                   unique_key=key + "-2")
    assert again["id"] == mine["id"] and again["existing"] is True
    # The job id alone still conflicts.
    r = ud.request("POST", API + "/jobs", json={"project": "p", "spider": "quick",
                                                 "jobid": mine["job"]})
    assert r.status_code == 409, r.text
    # The key shows on every read of the job; a job without one shows null.
    assert rest(ud, "GET", f"/jobs/{new['id']}", 200)["unique_key"] == key
    listed = rest(ud, "GET", "/jobs", 200, params={"project": "p", "state": "pending"})["jobs"]
    assert {j["id"]: j["unique_key"] for j in listed} == {new["id"]: key, mine["id"]: key + "-2"}
    assert rest(ud, "GET", f"/jobs/{blocker}", 200)["unique_key"] is None
    # JSON-RPC answers the same job (no status to carry the difference).
    rpc = rest(ud, "POST", "/jsonrpc", 200, json={
        "jsonrpc": "2.0", "id": 1, "method": "jobs.create",
        "params": {"project": "p", "spider": "quick", "unique_key": key}})
    assert rpc["result"]["id"] == new["id"] and rpc["result"]["existing"] is True
    # Cancelling frees the key.
    rest(ud, "POST", f"/jobs/{new['id']}/cancel", 200)
    rest(ud, "POST", f"/jobs/{mine['id']}/cancel", 200)
    fresh = create(ud, 201, spider="quick", unique_key=key)
    assert fresh["id"] != new["id"] and fresh["existing"] is False
    ud.cancel("p", blocker, "KILL")
    assert ud.wait_finished(fresh["job"])["state"] == "finished"
    assert create(ud, 201, spider="quick", unique_key=key)["id"] != fresh["id"]


def test_concurrent_schedules_with_one_key_make_one_job(ud, blocker):
    key = unique("k")
    n = 16
    barrier = threading.Barrier(n)
    answers, errors = [None] * n, []

    def go(i):
        try:
            barrier.wait()
            if i % 2:
                r = ud.request("POST", API + "/jobs",
                               json={"project": "p", "spider": "quick", "unique_key": key})
                assert r.status_code in (200, 201), r.text
                answers[i] = (r.json()["job"], r.status_code == 201)
            else:
                r = ud.request("POST", "/schedule.json",
                               data={"project": "p", "spider": "quick", "_unique_key": key})
                obj = r.json()
                assert obj["status"] == "ok", obj
                answers[i] = (obj["jobid"], not obj.get("existing", False))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({jobid for jobid, _ in answers}) == 1, answers
    assert sum(created for _, created in answers) == 1, answers
    job = answers[0][0]
    assert live_with_key(ud, "p", key) == [job]
    assert [e["id"] for e in ud.listjobs("p")["pending"]] == [job]
    ud.cancel("p", job)


def test_a_retry_takes_the_key_over(ud, tmp_path):
    key = unique("k")
    jobid = unique("fl")
    backoff = 3 * SLOW
    # Fails twice, then succeeds: attempts jobid, .r2, .r3.
    ud.schedule("p", "flaky", dir=str(tmp_path), key="f", fails=2, _retries=3,
                _retry_backoff=backoff, jobid=jobid, _unique_key=key)
    assert ud.wait_finished(jobid)["state"] == "failed"
    # The retry is queued in the transaction that ended the attempt: the key
    # has been held throughout, now by the retry.
    retry = wait_for(lambda: live_with_key(ud, "p", key), 10, "the retry to hold the key")
    assert retry == [jobid + ".r2"]
    held = schedule_raw(ud, project="p", spider="quick", _unique_key=key)
    assert (held["jobid"], held["existing"]) == (jobid + ".r2", True)
    assert rest(ud, "GET", f"/jobs/{jobid}.r2", 200)["unique_key"] == key
    assert ud.wait_finished(jobid + ".r2", 60)["state"] == "failed"
    assert wait_for(lambda: live_with_key(ud, "p", key), 10, "the next retry") == [jobid + ".r3"]
    assert create(ud, 200, spider="quick", unique_key=key)["job"] == jobid + ".r3"
    assert ud.wait_finished(jobid + ".r3", 60)["state"] == "finished"
    # Only the attempts exist: no job was queued beside them.
    assert live_with_key(ud, "p", key) == []
    fresh = schedule_raw(ud, project="p", spider="quick", _unique_key=key)
    assert "existing" not in fresh and not fresh["jobid"].startswith(jobid)
    ud.wait_finished(fresh["jobid"])


@pytest.mark.parametrize("form,message", [
    ({"_unique_key": ""}, "_unique_key is invalid: it must not be empty"),
    ({"unique_key": ""}, "unique_key is invalid: it must not be empty"),
    ({"_unique_key": "k" * 201},
     "_unique_key is invalid: it is 201 bytes long; at most 200 are allowed"),
    ({"_unique_key": "a\tb"},
     "_unique_key is invalid: it must not contain control characters (byte 1)"),
    ({"_unique_key": "a\x85"},
     "_unique_key is invalid: it must not contain control characters (byte 1)"),
    ({"_unique_key": "a", "unique_key": "b"},
     "unique_key and _unique_key differ: give one of them"),
])
def test_schedule_json_refuses_a_bad_key(ud, form, message):
    assert ud.api_error("schedule.json", project="p", spider="quick", **form) == message


def test_schedule_json_takes_one_key_in_both_spellings(ud):
    key = unique("k")
    obj = schedule_raw(ud, project="p", spider="quick", _unique_key=key, unique_key=key)
    assert "existing" not in obj
    ud.wait_finished(obj["jobid"])


@pytest.mark.parametrize("value,fragment", [
    ("", "must not be empty"),
    ("k" * 201, "at most 200"),
    ("a\nb", "control characters"),
    ("\x7f", "control characters"),
    (12, "unique_key"),
])
def test_rest_refuses_a_bad_key_with_400(ud, value, fragment):
    r = ud.request("POST", API + "/jobs",
                   json={"project": "p", "spider": "quick", "unique_key": value})
    assert r.status_code == 400, r.text
    e = r.json()["error"]
    assert e["code"] == "SPD_EBADPARAM" and fragment in e["message"], e
    assert e["details"]["field"] == "unique_key"


def test_rest_takes_a_key_of_200_bytes(ud):
    job = create(ud, 201, spider="quick", unique_key="k" * 200)
    assert job["unique_key"] == "k" * 200
    ud.wait_finished(job["job"])


def test_cli_run_with_a_unique_key(ud, blocker):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
    env["SPIDERD_CONFIG_FILES"] = ud.conf_path

    def cli(*args):
        p = subprocess.run([BIN, *args], cwd=ud.workdir, env=env, capture_output=True,
                           text=True, timeout=timeout(30))
        assert p.returncode == 0, p.stderr
        return p.stdout

    key = unique("k")
    first = cli("run", "p", "slow", "-a", "seconds=300", "--unique-key", key).strip()
    assert cli("run", "p", "quick", "--unique-key", key).strip() == first
    assert f"unique key:   {key}" in cli("job", "show", first)
    cli("cancel", first, "--signal", "KILL")
