"""A job's meta (set at creation, merged by jobs.meta, written by the crawl
itself through its job token, filtered on in listings), history updates of
ended jobs (one, a batch, every job of a state in a filter; their events and
who made them), the states of many jobs in one call, and stopping a job's
children while the job runs on."""

import json

from conftest import get_job, wait_for

API = "/api/v1"
ENDED = {"finished", "failed", "cancelled", "lost"}
AUTH = {"username": "alice", "password": "s3cret"}


def create(d, spider="quick", status=201, **fields):
    args = {"count": "1"} if spider == "quick" else {"seconds": "60"}
    body = {"project": "testproj", "spider": spider, "args": args, **fields}
    r = d.request("POST", API + "/jobs", json=body)
    assert r.status_code == status, r.text
    return r.json()


def ended(d, job_id, seconds=60):
    return wait_for(lambda: (lambda j: j if j["state"] in ENDED else None)(get_job(d, job_id)),
                    seconds, f"job {job_id} to end", interval=0.1)


def listed(d, **params):
    r = d.request("GET", API + "/jobs", params=params)
    assert r.status_code == 200, r.text
    return sorted(j["id"] for j in r.json()["jobs"])


def patch(d, job_id, meta, status=200):
    r = d.request("PATCH", f"{API}/jobs/{job_id}/meta", json={"meta": meta})
    assert r.status_code == status, r.text
    return r.json()


def test_meta_is_set_merged_filtered_and_written_by_the_crawl(spiderd, egg, tmp_path):
    d = spiderd(scrapyd=AUTH)
    d.upload("testproj", "1", egg("testproj"))
    a = create(d, meta={"customer": "acme", "run": {"a": 1, "b": 2}})
    b = create(d, meta={"customer": "globex", "n": 5})
    plain = create(d)
    assert a["meta"] == {"customer": "acme", "run": {"a": 1, "b": 2}}
    assert plain["meta"] == {}
    assert create(d, status=400, meta=["not", "an", "object"])["error"]["code"] == "SPD_EBADPARAM"
    big = create(d, status=400, meta={"blob": "x" * 65536})
    assert "65536" in big["error"]["message"]

    # RFC 7396: null removes, objects merge, the rest replaces.
    m = patch(d, a["id"], {"run": {"b": None, "c": 3}, "tag": "x"})["meta"]
    assert m == {"customer": "acme", "run": {"a": 1, "c": 3}, "tag": "x"}
    assert get_job(d, a["id"])["meta"] == m
    assert patch(d, a["id"], {"big": "y" * 65500}, status=400)["error"]["code"] == "SPD_EBADPARAM"
    assert get_job(d, a["id"])["meta"] == m  # refused whole
    assert patch(d, a["id"], "text", status=400)["error"]["code"] == "SPD_EBADPARAM"
    assert patch(d, 987654, {"x": "y"}, status=404)["error"]["code"] == "SPD_ENOJOB"
    rpc = d.request("POST", API + "/jsonrpc", json={
        "jsonrpc": "2.0", "id": 1, "method": "jobs.meta",
        "params": {"id": b["id"], "meta": {"stage": "review"}}}).json()
    assert rpc["result"]["meta"] == {"customer": "globex", "n": 5, "stage": "review"}

    # Filters: string equality on top-level keys, several ANDed.
    assert listed(d, **{"meta.customer": "acme"}) == [a["id"]]
    assert listed(d, **{"meta.customer": "acme", "meta.tag": "x"}) == [a["id"]]
    assert listed(d, **{"meta.customer": "acme", "meta.tag": "z"}) == []
    assert listed(d, **{"meta.stage": "review", "project": "testproj"}) == [b["id"]]
    assert listed(d, **{"meta.n": "5"}) == []  # a number is not its digits
    assert listed(d, **{"meta.run": "x"}) == []
    r = d.request("GET", API + "/jobs", params={"meta.customer": "acme", "limit": 1})
    assert [j["id"] for j in r.json()["jobs"]] == [a["id"]] and r.json()["next_cursor"] is None
    r = d.request("GET", API + "/jobs", params={"meta.a\"b": "x"})
    assert r.status_code == 400, r.text

    # The crawl writes its own job's meta with its token, and nothing else's.
    out = tmp_path / "seen.json"
    c = create(d, spider="metaset", meta={"source": "test"},
               args={"patch": json.dumps({"progress": "done", "pages": "3"}),
                     "other": str(a["id"]), "out": str(out)})
    assert ended(d, c["id"])["state"] == "finished"
    seen = json.loads(out.read_text())
    assert seen["me"] == str(c["id"])
    assert seen["own"][0] == 200, seen
    assert seen["other"] in (401, 403) and seen["history"] in (401, 403), seen
    assert get_job(d, c["id"])["meta"] == {"source": "test", "progress": "done", "pages": "3"}
    assert get_job(d, a["id"])["meta"] == m
    assert listed(d, **{"meta.progress": "done"}) == [c["id"]]


def history(d, path, body, status=200):
    r = d.request("POST", API + path, json=body)
    assert r.status_code == status, r.text
    return r.json()


def test_history_updates_one_batch_and_by_status_with_events(spiderd, egg):
    d = spiderd(scrapyd=AUTH)
    d.upload("testproj", "1", egg("testproj"))
    j1, j2, j3 = (create(d)["id"] for _ in range(3))
    for j in (j1, j2, j3):
        assert ended(d, j)["state"] == "finished"
    live = create(d, spider="slow")["id"]

    # A running or pending job has no history to correct.
    refused = history(d, f"/jobs/{live}/history", {"note": "too soon"}, status=409)
    assert "only an ended job" in refused["error"]["message"]
    assert history(d, f"/jobs/{j1}/history", {"state": "running"}, 400)
    assert history(d, f"/jobs/{j1}/history", {}, 400)

    one = history(d, f"/jobs/{j1}/history", {"note": "checked"})
    assert one["note"] == "checked" and one["state"] == "finished"
    assert "original_state" not in one
    one = history(d, f"/jobs/{j1}/history", {"state": "failed", "note": "bad data"})
    assert (one["state"], one["original_state"], one["note"]) == ("failed", "finished", "bad data")
    again = history(d, f"/jobs/{j1}/history", {"state": "finished"})
    assert (again["state"], again["original_state"]) == ("finished", "finished")
    history(d, f"/jobs/{j1}/history", {"state": "failed"})

    # A batch is all or nothing.
    bad = history(d, "/jobs/history", {"ids": [j2, live], "note": "batch"}, status=409)
    assert bad["error"]["details"]["id"] == live
    assert get_job(d, j2)["note"] is None
    assert history(d, "/jobs/history", {"ids": [j2, 987654], "note": "b"}, 404)
    assert history(d, "/jobs/history", {"ids": [], "note": "b"}, 400)
    batch = history(d, "/jobs/history", {"ids": [j2, j3], "note": "batch"})
    assert (batch["matched"], batch["updated"], sorted(batch["ids"])) == (2, 2, sorted([j2, j3]))

    # Every finished job of the project: j2 and j3 (j1 is failed now).
    assert history(d, "/jobs/history/by-status", {"status": "running", "note": "x"}, 409)
    none = history(d, "/jobs/history/by-status",
                   {"status": "finished", "ended_from": "2999-01-01T00:00:00Z", "note": "x"})
    assert none["matched"] == 0
    by = history(d, "/jobs/history/by-status",
                 {"status": "finished", "project": "testproj", "spider": "quick",
                  "state": "cancelled", "note": "reviewed"})
    assert sorted(by["ids"]) == sorted([j2, j3])
    for j in (j2, j3):
        job = get_job(d, j)
        assert (job["state"], job["original_state"], job["note"]) == \
            ("cancelled", "finished", "reviewed")
    assert get_job(d, j1)["state"] == "failed"

    r = d.request("GET", API + "/events", params={"type": "job.history_updated", "limit": 100})
    events = r.json()["events"]
    assert len(events) == 8, events
    mine = sorted((e for e in events if e["job_id"] == j1), key=lambda e: e["id"])
    assert [e["data"]["after"]["state"] for e in mine] == ["finished", "failed", "finished",
                                                          "failed"]
    assert mine[1]["data"]["before"] == {"state": "finished", "note": "checked"}
    assert mine[1]["data"]["after"] == {"state": "failed", "note": "bad data"}
    assert mine[1]["data"]["original_state"] == "finished"
    assert all(e["data"]["actor"] == "alice" for e in events)
    d.request("POST", f"{API}/jobs/{live}/cancel", json={"signal": "KILL"})


def test_states_of_many_jobs_and_cancel_children(spiderd, egg):
    d = spiderd(scrapyd={"max_proc": 2})
    d.upload("testproj", "1", egg("testproj"))
    quick = [create(d) for _ in range(3)]
    for j in quick:
        ended(d, j["id"])
    parent = create(d, spider="slow")
    kids = [create(d, spider="slow", parent=parent["id"]) for _ in range(2)]
    grandchild = create(d, spider="slow", parent=kids[1]["id"])
    wait_for(lambda: get_job(d, kids[0]["id"])["state"] == "running", 30, "a child running")

    ids = [j["id"] for j in quick] + [parent["id"], kids[1]["id"], quick[0]["job"], 987654]
    r = d.request("POST", API + "/jobs/states", json={"ids": ids})
    assert r.status_code == 200, r.text
    states = r.json()["states"]
    assert states == {**{str(j["id"]): "finished" for j in quick}, str(parent["id"]): "running",
                      str(kids[1]["id"]): "pending", quick[0]["job"]: "finished",
                      "987654": None}
    assert d.request("POST", API + "/jobs/states",
                     json={"ids": list(range(1, 1002))}).status_code == 400
    assert d.request("POST", API + "/jobs/states", json={"ids": []}).status_code == 400
    many = d.request("POST", API + "/jobs/states", json={"ids": list(range(1, 1001))})
    assert many.status_code == 200 and len(many.json()["states"]) == 1000

    r = d.request("POST", f"{API}/jobs/{parent['id']}/cancel-children", json={"signal": "KILL"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["cancelled"], body["stopping"]) == (2, 1), body
    assert body["job"]["id"] == parent["id"]
    wait_for(lambda: get_job(d, kids[0]["id"])["state"] == "cancelled", 30, "the child cancelled")
    for j in (kids[1], grandchild):
        assert get_job(d, j["id"])["state"] == "cancelled"
    assert get_job(d, parent["id"])["state"] == "running"
    # Nothing left to stop: the parent runs on.
    r = d.request("POST", f"{API}/jobs/{parent['id']}/cancel-children")
    assert r.status_code == 200 and r.json()["cancelled"] == 0 and r.json()["stopping"] == 0
    assert get_job(d, parent["id"])["state"] == "running"
    d.request("POST", f"{API}/jobs/{parent['id']}/cancel", json={"signal": "KILL"})
    ended(d, parent["id"])
