"""Parent and child jobs through the native API: fan-out, listing children,
the parent's summary, and cancel reaching the whole family."""

from conftest import get_job, wait_for

API = "/api/v1"


def create(d, spider="slow", **fields):
    body = {"project": "testproj", "spider": spider, "args": {"seconds": "30"}, **fields}
    r = d.request("POST", API + "/jobs", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_children_summary_and_cascading_cancel(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 2})
    d.upload("testproj", "1", egg("testproj"))
    parent = create(d)
    kids = [create(d, parent=parent["id"]) for _ in range(2)]
    grandchild = create(d, parent=kids[1]["id"])
    assert all(k["parent_id"] == parent["id"] for k in kids)

    listed = d.request("GET", API + "/jobs", params={"parent": parent["id"]}).json()["jobs"]
    assert sorted(j["id"] for j in listed) == sorted(k["id"] for k in kids)

    # Two slots: the parent and the first child run, the rest wait.
    wait_for(lambda: get_job(d, kids[0]["id"])["state"] == "running", 30, "the first child running")
    p = get_job(d, parent["id"])
    assert p["children"]["total"] == 2
    assert p["children"]["running"] == 1 and p["children"]["pending"] == 1
    assert p["family_state"] == "running"
    assert "children" not in get_job(d, grandchild["id"])

    r = d.request("POST", f"{API}/jobs/{parent['id']}/cancel", json={"signal": "KILL"})
    assert r.status_code == 200, r.text
    # The running ones end cancelled; the pending ones are cancelled before
    # they start (and, as in Scrapyd, such jobs leave the history with the
    # next trim), each with its event.
    for j in [parent, kids[0]]:
        wait_for(lambda j=j: get_job(d, j["id"])["state"] == "cancelled", 30,
                 f"job {j['id']} cancelled")
    cancelled = d.request("GET", API + "/events", params={"type": "job.cancelled"}).json()
    assert {e["job_id"] for e in cancelled["events"]} >= {
        parent["id"], kids[0]["id"], kids[1]["id"], grandchild["id"]}
    pending = d.request("GET", API + "/jobs", params={"state": "pending"}).json()["jobs"]
    assert pending == []
    assert get_job(d, parent["id"])["family_state"] == "cancelled"


def test_parent_must_exist(spiderd, egg):
    d = spiderd()
    d.upload("testproj", "1", egg("testproj"))
    r = d.request("POST", API + "/jobs", json={"project": "testproj", "spider": "quick",
                                               "parent": 987654})
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "SPD_ENOJOB"
    assert d.request("GET", API + "/jobs").json()["jobs"] == []
