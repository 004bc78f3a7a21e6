"""Job dependencies through the native API: a job created with `after`
waits, pending and never claimed, until the jobs it names have ended; it
runs once they all finished, and is cancelled (with its own dependents)
when one failed."""

import time

from conftest import get_job, wait_for

API = "/api/v1"
FINAL = {"finished", "failed", "cancelled", "lost"}


def create(d, spider="quick", **fields):
    body = {"project": "testproj", "spider": spider, **fields}
    r = d.request("POST", API + "/jobs", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def ended(d, job, seconds=60):
    wait_for(lambda: get_job(d, job["id"])["state"] in FINAL, seconds, f"job {job['id']} ended")
    return get_job(d, job["id"])


def cancel_events(d):
    r = d.request("GET", API + "/events", params={"type": "job.cancelled"})
    return {e["job_id"]: e["data"] for e in r.json()["events"]}


def test_chain_runs_in_order(spiderd, egg):
    # Slots enough for all three at once: only the dependencies order them.
    d = spiderd(scrapyd={"max_proc": 3})
    d.upload("testproj", "1", egg("testproj"))
    a = create(d, spider="slow", args={"seconds": "2"})
    b = create(d, after=[a["id"]])
    c = create(d, after=[b["job"]])  # a Scrapyd job id names a job too
    assert b["after"] == [a["id"]] and c["after"] == [b["id"]]
    assert b["state"] == "pending" and c["state"] == "pending"

    ra = ended(d, a)
    rb, rc = ended(d, b), ended(d, c)
    assert [ra["state"], rb["state"], rc["state"]] == ["finished"] * 3
    assert rb["started_ms"] >= ra["ended_ms"], (ra, rb)
    assert rc["started_ms"] >= rb["ended_ms"], (rb, rc)
    assert get_job(d, c["id"])["after"] == [b["id"]]
    assert get_job(d, a["id"])["after"] == []
    # A dependency on a job that finished already: due at once.
    late = create(d, after=[a["id"], b["id"]])
    assert ended(d, late)["state"] == "finished"


def test_failed_upstream_cancels_the_chain(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 2})
    d.upload("testproj", "1", egg("testproj"))
    bad = create(d, spider="crash")  # exits 1 ("fail" only counts an error)
    c = create(d, after=[bad["id"]])
    e = create(d, after=[c["id"]])
    assert ended(d, bad)["state"] == "failed"
    for j in (c, e):
        wait_for(lambda j=j: get_job(d, j["id"])["state"] == "cancelled", 30,
                 f"job {j['id']} cancelled")
        assert get_job(d, j["id"])["started_ms"] is None
    events = cancel_events(d)
    assert events[c["id"]]["reason"] == f"upstream {bad['job']} failed"
    assert events[e["id"]]["reason"] == f"upstream {c['job']} cancelled"
    # Created after its upstream failed: cancelled at creation.
    r = d.request("POST", API + "/jobs", json={"project": "testproj", "spider": "quick",
                                               "after": [bad["id"]]})
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "cancelled"
    assert get_job(d, r.json()["id"])["state"] == "cancelled"


def test_a_dependent_waits_for_its_upstreams_retries(spiderd, egg, tmp_path):
    """An attempt that fails and is retried is not its job's outcome: what
    waits for the job waits for the retry, runs once it finishes, and is
    cancelled only when the last attempt fails, naming that attempt."""
    d = spiderd(scrapyd={"max_proc": 2}, spiderd={"job_retries": 2, "retry_backoff": 0.2})
    d.upload("testproj", "1", egg("testproj"))
    a = create(d, spider="flaky", args={"dir": str(tmp_path), "key": "a"})
    b = create(d, after=[a["id"]])
    c = create(d, after=[b["id"]])
    assert ended(d, a)["state"] == "failed"
    rb, rc = ended(d, b), ended(d, c)
    assert (rb["state"], rc["state"]) == ("finished", "finished"), (rb, rc)

    def attempts(first):
        jobs = d.request("GET", API + "/jobs", params={"limit": 100}).json()["jobs"]
        return sorted((j for j in jobs if j["job"].startswith(first["job"])),
                      key=lambda j: j["attempt"])
    retry = attempts(a)[-1]
    assert (retry["state"], retry["attempt"], retry["retry_of"]) == ("finished", 2, a["id"])
    assert rb["started_ms"] >= retry["ended_ms"], (retry, rb)
    # Every attempt fails: cancelled once the last has, naming the last.
    x = create(d, spider="flaky", args={"dir": str(tmp_path), "key": "x", "fails": "9"})
    y = create(d, after=[x["id"]])
    wait_for(lambda: get_job(d, y["id"])["state"] == "cancelled", 60, "y cancelled")
    last = attempts(x)[-1]
    assert (last["state"], last["attempt"]) == ("failed", 3), last
    assert last["ended_ms"] <= get_job(d, y["id"])["ended_ms"]
    assert cancel_events(d)[y["id"]]["reason"] == f"upstream {last['job']} failed"


def test_cancelled_upstream_cancels_its_dependent(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 1})
    d.upload("testproj", "1", egg("testproj"))
    a = create(d, spider="slow", args={"seconds": "30"})
    b = create(d, after=[a["id"]])
    wait_for(lambda: get_job(d, a["id"])["state"] == "running", 30, "a running")
    # Its slot is taken, yet b was never claimed ahead of its upstream.
    assert get_job(d, b["id"])["state"] == "pending"
    r = d.request("POST", f"{API}/jobs/{a['id']}/cancel", json={"signal": "KILL"})
    assert r.status_code == 200, r.text
    wait_for(lambda: get_job(d, b["id"])["state"] == "cancelled", 30, "b cancelled")
    assert cancel_events(d)[b["id"]]["reason"] == f"upstream {a['job']} cancelled"


def test_bad_after_refused(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 2})
    d.upload("testproj", "1", egg("testproj"))
    a = create(d, spider="slow", args={"seconds": "30"})
    for after, words in [
        ([987654], "does not exist"),
        (["no-such-job"], "does not exist"),
        ([a["id"], 987654], "987654"),
        ([], "array of 1 to 100"),
        ("x", "array of 1 to 100"),
        ([0], "not a job id"),
        ([1.5], "not a job id"),
        (list(range(1, 102)), "array of 1 to 100"),
    ]:
        r = d.request("POST", API + "/jobs", json={"project": "testproj", "spider": "quick",
                                                   "after": after})
        assert r.status_code == 400, (after, r.text)
        assert words in r.json()["error"]["message"], (after, r.text)
    # JSON-RPC's jobs.create takes it too, and refuses the same way.
    r = d.request("POST", API + "/jsonrpc", json={
        "jsonrpc": "2.0", "id": 1, "method": "jobs.create",
        "params": {"project": "testproj", "spider": "quick", "after": ["no-such-job"]}})
    assert r.json()["error"]["data"]["code"] == "SPD_EBADPARAM", r.text
    jobs = d.request("GET", API + "/jobs").json()["jobs"]
    assert [j["id"] for j in jobs] == [a["id"]]
    r = d.request("POST", API + "/jsonrpc", json={
        "jsonrpc": "2.0", "id": 2, "method": "jobs.create",
        "params": {"project": "testproj", "spider": "quick", "after": [a["job"]]}})
    waiting = r.json()["result"]
    assert waiting["after"] == [a["id"]] and waiting["state"] == "pending", r.text
    time.sleep(1)  # a free slot, yet it waits for a
    assert get_job(d, waiting["id"])["state"] == "pending"
    d.request("POST", f"{API}/jobs/{a['id']}/cancel", json={"signal": "KILL"})
    wait_for(lambda: get_job(d, waiting["id"])["state"] == "cancelled", 30, "the waiting job cancelled")
