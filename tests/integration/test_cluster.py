"""Many nodes on one shared store (PostgreSQL): work split across nodes, eggs,
logs and cancels that reach every node, dead nodes whose jobs are retried
elsewhere, one scheduler, and a restarted database.

Every test but the first needs SPIDERD_TEST_STORE_URL to name a shared store
(make test-pg runs this suite so); the crawls of the busy tests are
fakecrawl.py, so hundreds of jobs fit on two cores."""

import glob
import os
import re
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import SHARED_STORE, SLOW, STORE_TMPL, all_pages, store_url, timeout, unique, wait_for

API = "/api/v1"
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fakecrawl.py")

shared = pytest.mark.skipif(not SHARED_STORE, reason="needs a shared store (make test-pg)")

# Fast failure detection for tests: beats every 0.3 s, dead after 3 s.
FAST = {"node_heartbeat": 0.3, "node_timeout": 3 * SLOW, "scheduler_lease": 2 * SLOW}


def nodes(d):
    r = d.request("GET", API + "/nodes")
    assert r.status_code == 200, r.text
    return {n["name"]: n for n in r.json()["nodes"]}


def all_jobs(d, **params):
    return all_pages(d, "/jobs", "jobs", **dict(params, limit=1000))


def cluster(factory, n, tmp_path, fake=False, scrapyd=None, spiderd=None, env=None,
            extra_conf=""):
    """n daemons on one store, node names n0..n{n-1}."""
    key = unique("cluster")
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    out = []
    for i in range(n):
        sd = dict(FAST, store=store_url(key))
        if fake:
            sd["python"] = FAKE
        sd.update(spiderd or {})
        sc = {"node_name": f"n{i}", "max_proc": 2, "finished_to_keep": 0}
        sc.update(scrapyd or {})
        e = {"MARKER_DIR": str(markers), "NODE_TAG": f"n{i}"}
        e.update(env or {})
        out.append(factory(name=f"n{i}", scrapyd=sc, spiderd=sd, env=e, extra_conf=extra_conf))
    return out, markers


def test_nodes_lists_this_node(spiderd):
    d = spiderd(scrapyd={"max_proc": 3}, spiderd={"node_heartbeat": 0.2})
    wait_for(lambda: d.node in nodes(d), timeout(5), "the node's first heartbeat")
    n = nodes(d)[d.node]
    assert n["self"] and n["state"] == "alive" and n["slots"] == 3 and n["running"] == 0
    assert n["url"] == d.url
    assert n["heartbeat_age_ms"] < timeout(5) * 1000
    # Each node says which spiderd it runs: the version /status gives.
    status = d.request("GET", API + "/status").json()
    assert n["version"] == status["version"] and n["version"]
    r = d.request("POST", API + "/jsonrpc", json={"jsonrpc": "2.0", "id": 1, "method": "nodes.list"})
    assert r.json()["result"]["nodes"][0]["name"] == d.node


def test_a_store_from_before_node_versions_is_upgraded(spiderd):
    """A store whose schema predates the nodes' versions (SQLite 5,
    PostgreSQL 1) is migrated at start-up: the nodes it knew show null until
    they beat again, and this node shows its own version at once."""
    d = spiderd(spiderd={"node_heartbeat": 0.2})
    wait_for(lambda: d.node in nodes(d), timeout(5), "the node's first heartbeat")
    d.stop()
    con = d.db()
    con.execute("ALTER TABLE nodes DROP COLUMN version")
    con.execute("ALTER TABLE nodes DROP COLUMN draining")  # newer than the versions
    con.execute("DROP TABLE principals")  # so are users and tokens
    con.execute("ALTER TABLE schedules DROP COLUMN state")  # and scrapers' state
    for column in ("meta", "original_state", "note"):  # and jobs' meta and history
        con.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    con.execute("ALTER TABLE jobs DROP COLUMN test")  # and test runs
    con.execute("ALTER TABLE schedules DROP COLUMN meta")  # and schedules' meta
    for column in ("health", "health_reasons"):  # and jobs' health
        con.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    for column in ("mem_free", "mem_reserved"):  # and nodes' memory
        con.execute(f"ALTER TABLE nodes DROP COLUMN {column}")
    con.execute("ALTER TABLE jobs DROP COLUMN segments")  # and paused jobs' segments
    con.execute("DROP TABLE IF EXISTS job_states")  # and their states (PostgreSQL)
    con.execute("DROP INDEX IF EXISTS jobs_waiting")  # and jobs waiting for others
    con.execute('ALTER TABLE jobs DROP COLUMN "after"')
    if isinstance(con, sqlite3.Connection):
        con.execute("PRAGMA user_version = 5")
    else:
        con.execute("DELETE FROM spiderd_schema")
        con.execute("INSERT INTO spiderd_schema VALUES (1)")
    con.execute("INSERT INTO nodes (name, url, slots, running, started_ms, heartbeat_ms, dead) "
                "VALUES ('ghost', NULL, 1, 0, 1, 1, 1)")
    con.commit()
    con.close()
    d.start()
    version = d.request("GET", API + "/status").json()["version"]
    ns = wait_for(lambda: (lambda n: n if n[d.node]["version"] else None)(nodes(d)),
                  timeout(5), "a beat after the upgrade")
    assert ns[d.node]["version"] == version
    assert ns["ghost"]["version"] is None and ns["ghost"]["slots"] == 1
    assert ns["ghost"]["state"] == "dead"


def overlaps(runs):
    """Pairs of (start, end) intervals that overlap."""
    runs = sorted(runs)
    return [(a, b) for a, b in zip(runs, runs[1:]) if b[0] < a[1]]


def check_limits(nodes_, markers, jobs):
    """jobs: {jobid: spider}. quick runs one at a time; the project runs at
    most 3 at once."""
    d = nodes_[0]
    wait_for(lambda: all(j["state"] == "finished" for j in all_jobs(d, project="testproj")
                         if j["job"] in jobs) and
             len([j for j in all_jobs(d, project="testproj") if j["job"] in jobs]) == len(jobs),
             timeout(60), "every limited job finished", interval=0.2)
    runs = markers_of(markers)
    spans = {job: (r[2], r[3]) for job, rs in runs.items() if job in jobs for r in rs}
    assert len(spans) == len(jobs)
    quick = [v for k, v in spans.items() if jobs[k] == "quick"]
    assert not overlaps(quick), quick
    events = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()],
                    key=lambda e: (e[0], e[1]))
    most, now = 0, 0
    for _, step in events:
        now += step
        most = max(most, now)
    assert most <= 3, spans
    assert most >= 2, "the limits must leave room for other spiders"


LIMITS = "[concurrency]\ntestproj/quick = 1\ntestproj = 3\n"


def test_concurrency_limits_on_one_node(spiderd, tmp_path, egg):
    (d,), markers = cluster(spiderd, 1, tmp_path, fake=True, scrapyd={"max_proc": 6},
                            env={"FAKE_SECONDS": "0.3"}, extra_conf=LIMITS)
    d.upload("testproj", "1", egg("testproj"))
    jobs = {}
    for i in range(12):
        spider = "quick" if i % 2 else "marker"
        jobs[d.schedule("testproj", spider, jobid=f"l{i}")] = spider
    check_limits([d], markers, jobs)


@shared
def test_concurrency_limits_hold_across_nodes(spiderd, tmp_path, egg):
    nodes_, markers = cluster(spiderd, 3, tmp_path, fake=True, scrapyd={"max_proc": 3},
                              env={"FAKE_SECONDS": "0.3"}, extra_conf=LIMITS)
    nodes_[0].upload("testproj", "1", egg("testproj"))
    wait_for(lambda: all("testproj" in d.api("listprojects.json")["projects"] for d in nodes_),
             timeout(10), "the egg on every node")
    jobs = {}
    for i in range(18):
        spider = "quick" if i % 2 else "marker"
        jobs[nodes_[i % 3].schedule("testproj", spider, jobid=f"l{i}")] = spider
    check_limits(nodes_, markers, jobs)
    assert len({j["node"] for j in all_jobs(nodes_[0], project="testproj")}) >= 2


@shared
def test_a_job_queued_on_a_busy_node_starts_on_a_free_one(spiderd, tmp_path, egg):
    (a, b), _ = cluster(spiderd, 2, tmp_path, scrapyd={"max_proc": 1})
    a.upload("testproj", "1", egg("testproj"))
    # The egg reaches b through the store.
    wait_for(lambda: "testproj" in b.api("listprojects.json")["projects"], timeout(10),
             "the egg on the other node")
    first = a.schedule("testproj", "slow", seconds="30")
    wait_for(lambda: any(j["job"] == first and j["state"] == "running" for j in all_jobs(a)),
             timeout(20), "the first job running")
    busy = next(j for j in all_jobs(a) if j["job"] == first)["node"]
    queued_on = a if busy == "n0" else b
    second = queued_on.schedule("testproj", "quick")
    wait_for(lambda: any(j["job"] == second and j["state"] == "finished" for j in all_jobs(a)),
             timeout(30), "the second job, on the free node")
    j2 = next(j for j in all_jobs(b) if j["job"] == second)
    assert j2["node"] != busy
    # Every node lists the whole cluster's jobs, and serves every job's log.
    listed = a.listjobs("testproj")
    assert first in [j["id"] for j in listed["running"]]
    done = [j for j in b.listjobs("testproj")["finished"] if j["id"] == second]
    assert done and done[0]["log_url"]
    for d in (a, b):
        r = d.get(done[0]["log_url"])
        assert r.status_code == 200, r.text
        assert "Spider closed (finished)" in r.text
        # The REST tail too (Sneakpeek's get_task_logs), with its offset.
        r = d.request("GET", f"{API}/jobs/{j2['id']}/log", params={"offset": 0, "limit": 100000})
        assert r.status_code == 200, r.text
        assert r.json()["eof"] and "Spider closed (finished)" in r.json()["text"]
        r = d.request("GET", f"{API}/jobs/{j2['id']}/log", params={"offset": 10 ** 9})
        assert r.status_code == 400 and "past the end" in r.json()["error"]["message"], r.text
    # Cancel from the node that does not run it.
    other = a if busy == "n1" else b
    assert other.cancel("testproj", first) == "running"
    wait_for(lambda: any(j["job"] == first and j["state"] == "cancelled" for j in all_jobs(a)),
             timeout(30), "the cancelled job's end")


@shared
def test_eggs_are_shared_and_deleted_everywhere(spiderd, tmp_path, egg):
    (a, b), _ = cluster(spiderd, 2, tmp_path)
    a.upload("testproj", "1", egg("testproj"))
    a.upload("testproj", "2", egg("testproj"))
    wait_for(lambda: b.api("listversions.json", project="testproj")["versions"] == ["1", "2"],
             timeout(10), "both versions on the other node")
    assert sorted(b.api("listspiders.json", project="testproj")["spiders"])
    b.api("delversion.json", project="testproj", version="1")
    wait_for(lambda: a.api("listversions.json", project="testproj")["versions"] == ["2"],
             timeout(10), "the deletion on the first node")
    a.api("delproject.json", project="testproj")
    wait_for(lambda: "testproj" not in b.api("listprojects.json")["projects"], timeout(10),
             "the project's deletion on the other node")
    # A node started later copies what the cluster has.
    a.upload("testproj", "3", egg("testproj"))
    c = spiderd(name="late", scrapyd={"node_name": "late"},
                spiderd=dict(FAST, store=a.spiderd["store"]))
    wait_for(lambda: c.api("listversions.json", project="testproj")["versions"] == ["3"],
             timeout(10), "the egg on a node started later")


@shared
def test_a_nodes_own_upload_is_not_copied_back(spiderd, tmp_path, egg):
    """An upload writes the store, then eggs_dir. The copy that the store's
    notice starts on the uploading node meanwhile leaves that version to the
    upload: it used to fetch the same bytes back and replace the file, which
    made the node's spider lists stale. The other node copies each once."""
    (a, b), _ = cluster(spiderd, 2, tmp_path)
    versions = [f"{i}" for i in range(1, 9)]
    for v in versions:
        a.upload("testproj", v, egg("testproj"))
    wait_for(lambda: b.api("listversions.json", project="testproj")["versions"] == versions,
             timeout(20), "every version on the other node")

    def copied(d):
        return re.findall(r"copied egg testproj/(\S+) from the store", d.stderr_text())
    assert copied(a) == []
    assert sorted(copied(b)) == sorted(versions)


@shared
def test_account_changes_on_two_nodes_at_once_are_all_kept(spiderd, tmp_path):
    """The accounts are one document that each change reads and writes back
    in one store transaction: changes made at the same instant on two nodes
    take turns, and none is lost."""
    (a, b), _ = cluster(spiderd, 2, tmp_path)
    r = a.request("POST", API + "/accounts", json={"name": "acme"})
    assert r.status_code == 201, r.text
    failed = []

    def assign(d, names):
        for name in names:
            r = d.request("POST", API + "/accounts/acme/assign", json={"project": name})
            if r.status_code != 200:
                failed.append((name, r.status_code, r.text))
    names = [f"p{i:02d}" for i in range(60)]
    threads = [threading.Thread(target=assign, args=(d, names[k::4]))
               for k, d in enumerate((a, b, a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    for d in (a, b):
        r = d.request("GET", API + "/accounts/acme")
        assert r.status_code == 200, r.text
        assert sorted(r.json()["projects"]) == names, r.json()


def markers_of(markers):
    """{jobid: [(node, pid, start, end or None)]} from fakecrawl's files."""
    runs = {}
    for path in glob.glob(str(markers / "*.start")):
        name = os.path.basename(path)[:-len(".start")]
        job, node, pid = name.rsplit(".", 2)
        with open(path) as f:
            start = float(f.read())
        end = None
        if os.path.exists(os.path.join(str(markers), name + ".end")):
            with open(os.path.join(str(markers), name + ".end")) as f:
                end = float(f.read())
        runs.setdefault(job, []).append((node, int(pid), start, end))
    return runs


@shared
def test_three_nodes_kill9_one_every_job_finishes_once(spiderd, tmp_path, egg):
    """300 jobs over 3 nodes; one node is killed with SIGKILL mid-run. Every
    job ends finished exactly once (its lost attempt retried on another
    node), no two runs of a job ever overlap, and a schedule keeps firing
    once per due time across the kill."""
    nodes_, markers = cluster(spiderd, 3, tmp_path, fake=True,
                              scrapyd={"max_proc": 3},
                              spiderd={"job_retries": 2, "retry_backoff": 0.1},
                              env={"FAKE_SECONDS": "0.4"})
    a, b, c = nodes_
    a.upload("testproj", "1", egg("testproj"))
    wait_for(lambda: all("testproj" in d.api("listprojects.json")["projects"] for d in nodes_),
             timeout(10), "the egg on every node")
    r = a.request("POST", API + "/schedules",
                  json={"name": unique("tick"), "project": "testproj", "spider": "quick",
                        "interval": 1, "overlap": "allow"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    jobids = []
    for i in range(300):
        d = nodes_[i % 3]
        jobids.append(d.schedule("testproj", "quick", jobid=f"k{i:03d}"))
    # Kill the node that holds the scheduler lease (the first started),
    # once it has crawls running.
    victim = a
    wait_for(lambda: len(markers_of(markers)) >= 60, timeout(60), "a fifth of the jobs started")
    wait_for(lambda: any(node == "n0" and end is None
                         for runs in markers_of(markers).values() for node, _, _, end in runs),
             timeout(30), "a crawl running on the victim")
    killed_at = time.time()
    victim.kill9()

    def all_done():
        js = all_jobs(b, project="testproj")
        mine = [j for j in js if j["job"].split(".r")[0] in set(jobids)]
        return len([j for j in mine if j["state"] == "finished"]) >= 300 and \
            not any(j["state"] in ("pending", "running") for j in mine)
    wait_for(all_done, timeout(180), "every job finished", interval=0.5)

    js = [j for j in all_jobs(b, project="testproj") if not j["schedule_id"]]
    by_logical = {}
    for j in js:
        by_logical.setdefault(j["job"].split(".r")[0], []).append(j)
    assert sorted(by_logical) == sorted(jobids)
    lost = 0
    for jobid, attempts in by_logical.items():
        states = sorted(j["state"] for j in attempts)
        assert states.count("finished") == 1, (jobid, attempts)
        assert set(states) <= {"finished", "lost"}, (jobid, attempts)
        for j in attempts:
            if j["state"] == "lost":
                lost += 1
                assert j["node"] == "n0", j
                retry = [r for r in attempts if r["retry_of"] == j["id"]]
                assert len(retry) == 1 and retry[0]["node"] in ("n1", "n2"), attempts
    assert lost >= 1, "the killed node had crawls running: some jobs must have been lost"

    # The marker files: every job ran to its end at least once, and no two
    # runs of a job ever overlapped (a run cut by the kill ended when its
    # node died). A run on the killed node may have ended just before the
    # kill without its end being recorded: the store has it lost, and it ran
    # again (at-least-once), but never at the same time.
    runs = markers_of(markers)
    for jobid in jobids:
        rs = sorted(runs.get(jobid, []) + [r for k, v in runs.items()
                                           if k.startswith(jobid + ".r") for r in v],
                    key=lambda r: r[2])
        assert [r for r in rs if r[3] is not None], (jobid, rs)
        # (a lost attempt may have been claimed and never have started)
        assert len(rs) <= len(by_logical[jobid]), (jobid, rs, by_logical[jobid])
        for prev, nxt in zip(rs, rs[1:]):
            prev_end = prev[3] if prev[3] is not None else killed_at
            assert nxt[2] >= prev_end, (jobid, rs)
            if prev[3] is None:
                assert prev[0] == "n0" and nxt[0] != "n0", rs

    # The dead node is declared dead; the survivors are alive.
    ns = nodes(b)
    assert ns["n0"]["state"] == "dead" and ns["n1"]["state"] == "alive"

    # The schedule fired once per due time, before and after the kill (the
    # lease passed to a survivor). Paused first, so no run fires between
    # reading the runs and reading the jobs.
    r = b.request("POST", f"{API}/schedules/{sid}/pause", json={})
    assert r.status_code == 200, r.text
    time.sleep(1)
    r = b.request("GET", f"{API}/schedules/{sid}/runs", params={"limit": 1000})
    rs = r.json()["runs"]
    fired = [x for x in rs if x["state"] == "fired"]
    dues = [x["due_ms"] for x in rs if x["state"] != "upcoming"]
    assert len(dues) == len(set(dues))
    sched_jobs = [j for j in all_jobs(b, schedule=sid) if j["attempt"] == 1]
    assert len(sched_jobs) == len(fired)
    assert any(x["due_ms"] / 1000 > killed_at + FAST["node_timeout"] for x in fired), rs


@pytest.mark.skipif(not STORE_TMPL.startswith("postgres"), reason="PostgreSQL's own restart (make test-pg)")
def test_a_restarted_postgresql_is_survived(spiderd, tmp_path, egg, own_pg):
    url, pgdir = own_pg  # restarted below: not the server other modules share
    (a, b), _ = cluster(spiderd, 2, tmp_path, fake=True, spiderd={"store": url})
    a.upload("testproj", "1", egg("testproj"))
    j1 = a.schedule("testproj", "quick")
    wait_for(lambda: any(j["job"] == j1 and j["state"] == "finished" for j in all_jobs(a)),
             timeout(20), "a job before the restart")
    subprocess.run([os.path.join(HERE, "..", "pgserver.sh"), "restart", pgdir], check=True)
    # Every node reconnects: scheduling through either works again, and the
    # job is claimed (woken by a notice or the next heartbeat).
    def schedule_again():
        try:
            return b.schedule("testproj", "quick")
        except AssertionError:
            return None
    j2 = wait_for(schedule_again, timeout(20), "scheduling after the restart", interval=0.5)
    wait_for(lambda: any(j["job"] == j2 and j["state"] == "finished" for j in all_jobs(a)),
             timeout(30), "a job after the restart")
    assert any(j["job"] == j1 for j in all_jobs(b))  # nothing was lost
    assert a.api("daemonstatus.json")["status"] == "ok"


@shared
def test_a_manifest_project_runs_on_another_node(spiderd, tmp_path):
    """A tar.gz of command spiders travels through the store like an egg and
    is extracted by the node that runs its job."""
    from test_manifest import FILES, make_targz

    (a, b), _ = cluster(spiderd, 2, tmp_path)
    r = a.request("POST", f"{API}/projects/mfc/versions", params={"version": "1"},
                  data=make_targz(FILES), headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 201, r.text
    wait_for(lambda: "mfc" in b.api("listprojects.json")["projects"], timeout(10),
             "the archive on the other node")
    assert "count" in b.api("listspiders.json", project="mfc")["spiders"]
    assert a.request("POST", f"{API}/nodes/self/drain").status_code == 200
    job = a.schedule("mfc", "count")
    done = wait_for(lambda: next((j for j in all_jobs(b) if j["job"] == job
                                  and j["state"] in ("finished", "failed")), None),
                    timeout(30), "the job on the other node")
    assert done["state"] == "finished" and done["node"] == "n1", done
    assert done["stats"]["items"] == 3
    assert glob.glob(b.path("dbs", "spiders", "mfc", "1-*", "count.sh"))
