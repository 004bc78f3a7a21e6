"""Logs and items in S3-compatible object storage ([spiderd] object_store).

Against a real S3 server of each test's own (tests/s3server.sh), and checked
with an independent client (Debian's awscli, s3util.py), not only through
spiderd: a running crawl's log goes up in parts every object_store_flush
seconds, finished logs and items are whole objects at Scrapyd's layout, a
node serves a job's files from the store when its disk has not got them
(Scrapyd's /logs/ and /items/ with Range, the REST log and items, the CLI),
a node killed with kill -9 loses at most about one flush interval of log,
the store going away for 30 s loses nothing and slows no crawl, a restarted
node uploads what its spool kept, retention deletes the objects, and a bad
bucket or refused credentials stop the start with words an operator can act
on. The crawls are logcrawl.py, which writes numbered, timestamped lines."""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import BIN, need, timeout, unique, wait_for
import s3util
from s3util import s3_server  # noqa: F401  (a fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
LOGCRAWL = os.path.join(HERE, "logcrawl.py")
API = "/api/v1"
FLUSH = 1.0
PREFIX = "pre"



@pytest.fixture(autouse=True)
def _tools():
    """Before the server starts: its programs and awscli are here (else a
    skip, or a failure under CI=true)."""
    need(os.path.exists(s3util.AWS) and shutil.which("radosgw") is not None,
         "needs radosgw and awscli (make deps)")


def creds(srv):
    return {k: v for k, v in srv.items() if k.startswith("AWS_")}


def conf(srv, **extra):
    sd = {"python": LOGCRAWL, "object_store": f"s3://{srv['S3_BUCKET']}/{PREFIX}",
          "object_store_endpoint": srv["S3_ENDPOINT"], "object_store_flush": FLUSH}
    sd.update(extra)
    return sd


def node(factory, srv, name=None, scrapyd=None, start=True, **spiderd):
    sc = {"items_dir": "items"}
    sc.update(scrapyd or {})
    return factory(name=name, start=start, scrapyd=sc, spiderd=conf(srv, **spiderd),
                   env=creds(srv))


def key(kind, job, spider="quick"):
    ext = "log" if kind == "logs" else "jl"
    return f"{PREFIX}/{kind}/testproj/{spider}/{job}.{ext}"


def read(path):
    with open(path, "rb") as f:
        return f.read()


def job_id(d, job):
    r = d.request("GET", API + "/jobs", params={"project": "testproj", "limit": 1000})
    assert r.status_code == 200, r.text
    for j in r.json()["jobs"]:
        if j["job"] == job:
            return j["id"]
    raise AssertionError(f"job {job} not listed")


def rest_text(d, job, what="log", offset=0, limit=1 << 20):
    r = d.request("GET", f"{API}/jobs/{job_id(d, job)}/{what}",
                  params={"offset": offset, "limit": limit})
    assert r.status_code == 200, r.text
    return r.json()


def whole_uploaded(srv, job):
    """Both whole objects are there and no part is left."""
    ks = s3util.keys(srv, f"{PREFIX}/")
    mine = [k for k in ks if job in k]
    return key("logs", job) in mine and key("items", job) in mine and \
        not any(".part-" in k for k in mine)


@pytest.fixture
def deployed(spiderd, egg, s3_server):  # noqa: F811
    def make(**kw):
        d = node(spiderd, s3_server, **kw)
        d.upload("testproj", "1", egg("testproj"))
        return d
    return make


def test_finished_job_lands_whole_and_is_served_from_the_store(deployed, s3_server):  # noqa: F811
    srv = s3_server
    d = deployed()
    job = d.schedule("testproj", "quick", lines=300, every=0.01)
    d.wait_finished(job)
    wait_for(lambda: whole_uploaded(srv, job), timeout(20), "the whole objects")
    log, items = read(d.log_path("testproj", "quick", job)), read(d.items_path("testproj", "quick", job))
    assert log.count(b"\n") == 300 and items.count(b"\n") == 300
    # What another client reads from the bucket is the files' bytes.
    assert s3util.get(srv, key("logs", job)) == log
    assert s3util.get(srv, key("items", job)) == items
    # No object of the marker's or of another layout.
    assert sorted(s3util.keys(srv, f"{PREFIX}/")) == sorted([key("logs", job), key("items", job)])

    # The node's own disk loses them: it serves them from the store.
    shutil.rmtree(d.abs_dir("logs_dir"))
    shutil.rmtree(d.abs_dir("items_dir"))
    r = d.get(f"/logs/testproj/quick/{job}.log")
    assert r.status_code == 200 and r.content == log
    r = d.get(f"/items/testproj/quick/{job}.jl")
    assert r.status_code == 200 and r.content == items
    r = d.get(f"/logs/testproj/quick/{job}.log", headers={"Range": "bytes=100-199"})
    assert r.status_code == 206 and r.content == log[100:200]
    assert r.headers["Content-Range"] == f"bytes 100-199/{len(log)}"
    r = d.get(f"/logs/testproj/quick/{job}.log", headers={"Range": "bytes=-50"})
    assert r.status_code == 206 and r.content == log[-50:]
    r = d.get(f"/logs/testproj/quick/{job}.log", headers={"Range": f"bytes={len(log)}-"})
    assert r.status_code == 416
    assert d.get(f"/logs/testproj/quick/{unique()}.log").status_code == 404
    piece = rest_text(d, job, offset=29, limit=58)
    assert piece["text"].encode() == log[29:87] and piece["size"] == len(log)
    assert piece["eof"] is False and piece["next_offset"] == 87
    tail = rest_text(d, job, offset=-29)
    assert tail["text"].encode() == log[-29:] and tail["eof"] is True
    assert rest_text(d, job, "items")["text"].encode() == items


def test_store_metrics_and_readyz_while_healthy(deployed):
    d = deployed()
    m = d.get("/metrics").text
    for name in ("backlog_bytes", "backlog_objects", "oldest_seconds"):
        assert re.search(rf"^spiderd_object_store_{name} 0$", m, re.M), m
    assert re.search(r"^spiderd_object_store_failures_total 0$", m, re.M)
    r = wait_for(lambda: (lambda r: r if r.status_code == 200 else None)(d.get("/readyz")),
                 timeout(10), "/readyz 200")  # a shared store: after the first heartbeat
    assert r.text == "ready\n"


def cluster_pair(spiderd, srv, pg_url, egg):
    """Two nodes on one PostgreSQL store and one bucket."""
    fast = {"node_heartbeat": 0.3, "node_timeout": 3, "store": pg_url}
    a = node(spiderd, srv, name="a", scrapyd={"node_name": "a"}, **fast)
    a.upload("testproj", "1", egg("testproj"))
    b = node(spiderd, srv, name="b", scrapyd={"node_name": "b"}, **fast)
    return a, b


def runner_of(nodes, job):
    """(the node whose disk has the job's log, the other one)."""
    def which():
        for i, d in enumerate(nodes):
            if os.path.exists(d.log_path("testproj", "quick", job)):
                return i + 1
        return 0
    i = wait_for(which, timeout(30), f"job {job} to start on a node") - 1
    return nodes[i], nodes[1 - i]


def lines_of(data):
    return [ln for ln in data.decode().splitlines() if ln.startswith("line ")]


def stamp(line):
    return float(line.split("t=")[1])


def test_node_killed_mid_crawl_its_log_and_items_served_by_another(spiderd, egg, s3_server,  # noqa: F811
                                                                    own_pg):
    srv = s3_server
    job = cluster_pair(spiderd, srv, own_pg[0], egg)[0].schedule(
        "testproj", "quick", lines=2000, every=0.01)
    a, b = runner_of(spiderd.daemons, job)
    a.wait_running(job)
    a.wait_log("testproj", "quick", job, "line 000400", timeout(30))
    # Parts while it runs, readable from the other node (here: through a).
    wait_for(lambda: any(".part-" in k for k in s3util.keys(srv, f"{PREFIX}/logs/")),
             timeout(10), "a first part")
    running = rest_text(b, job)
    assert running["running"] is True and running["text"].startswith("line 000000")

    # kill -9 the node (its crawl dies with it) and lose its disk.
    a.kill9()
    time.sleep(0.3)
    killed_log = read(a.log_path("testproj", "quick", job))
    killed_items = read(a.items_path("testproj", "quick", job))
    shutil.rmtree(a.abs_dir("logs_dir"))
    shutil.rmtree(a.abs_dir("items_dir"))

    # The other node serves what the store got: a prefix of what was written.
    r = b.get(f"/logs/testproj/quick/{job}.log")
    assert r.status_code == 200, r.text
    served = r.content
    assert served and killed_log.startswith(served)
    lost = lines_of(killed_log)[len(lines_of(served)):]
    lost_s = stamp(lines_of(killed_log)[-1]) - stamp(lines_of(served)[-1]) if lost else 0.0
    print(f"kill -9 lost {len(lost)} log lines = {lost_s:.2f} s of log (flush {FLUSH} s)")
    assert lost_s <= FLUSH + 1.5 * (timeout(1)), (len(lost), lost_s)
    r = b.get(f"/logs/testproj/quick/{job}.log", headers={"Range": "bytes=29-57"})
    assert r.status_code == 206 and r.content == served[29:58]
    items = b.get(f"/items/testproj/quick/{job}.jl")
    assert items.status_code == 200 and killed_items.startswith(items.content)
    assert len(items.content) > 0
    # The REST log (a range of it) and the CLI, on the surviving node.
    piece = rest_text(b, job, offset=58, limit=87)
    assert piece["text"].encode() == served[58:145]
    e = {k: v for k, v in os.environ.items() if not k.startswith(("SPIDERD_", "SCRAPYD_"))}
    e["SPIDERD_CONFIG_FILES"] = b.conf_path
    p = subprocess.run([BIN, "logs", job], cwd=b.workdir, env=e, capture_output=True,
                       timeout=timeout(60))
    assert p.returncode == 0, p.stderr
    assert p.stdout == served
    # An independent client sees the same bytes in the parts.
    parts = [k for k in s3util.keys(srv, f"{PREFIX}/logs/") if ".part-" in k]
    assert b"".join(s3util.get(srv, k) for k in sorted(parts)) == served


def test_store_down_30s_during_a_crawl_loses_nothing(deployed, s3_server):  # noqa: F811
    srv = s3_server
    d = deployed()
    every, lines = 0.02, 2500  # 50 s of crawl
    job = d.schedule("testproj", "quick", lines=lines, every=every)
    d.wait_running(job)
    d.wait_log("testproj", "quick", job, "line 000050", timeout(30))
    t0 = time.monotonic()
    s3_cut(srv)
    try:
        def backlog():
            m = d.get("/metrics").text
            got = re.search(r"^spiderd_object_store_backlog_bytes (\S+)$", m, re.M)
            fails = re.search(r"^spiderd_object_store_failures_total (\S+)$", m, re.M)
            return float(got.group(1)) > 0 and float(fails.group(1)) > 0
        wait_for(backlog, timeout(15), "a backlog and failures in /metrics")
        r = d.get("/readyz")
        assert r.status_code == 200, r.text
        assert "object store" in r.text and srv["S3_ENDPOINT"].split("//")[1] in r.text
        m = d.get("/metrics").text
        assert float(re.search(r"^spiderd_object_store_oldest_seconds (\S+)$", m, re.M)
                     .group(1)) > 0
        time.sleep(max(0, 30 - (time.monotonic() - t0)))
    finally:
        s3_resume(srv)
    fin = d.wait_finished(job, timeout(120))
    # The crawl was not slowed: it took what its lines take, near enough.
    took = (fin_time(fin["end_time"]) - fin_time(fin["start_time"])).total_seconds()
    assert took < lines * every * 1.5 + 5, took
    wait_for(lambda: whole_uploaded(srv, job), timeout(90), "the whole objects after the outage")
    assert s3util.get(srv, key("logs", job)) == read(d.log_path("testproj", "quick", job))
    assert s3util.get(srv, key("items", job)) == read(d.items_path("testproj", "quick", job))
    assert lines_of(s3util.get(srv, key("logs", job)))[-1].startswith("line %06d" % (lines - 1))
    assert "retrying; logs and items wait on local disk" in d.stderr_text()
    assert "the object store answers again" in d.stderr_text()


def fin_time(text):
    from conftest import parse_time
    return parse_time(text)


def s3_cut(srv):
    """Stops the S3 front (radosgw: connections are refused from then on);
    the objects stay in the cluster behind it (tests/s3server.sh)."""
    pid = int(open(os.path.join(srv["dir"], "run", "client.rgw.pid")).read())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10, "radosgw to stop")


def s3_resume(srv):
    """Starts it again on the same port, over the same objects."""
    subprocess.run(["radosgw", "-c", os.path.join(srv["dir"], "ceph.conf"), "-n", "client.rgw"],
                   check=True, stdin=subprocess.DEVNULL, capture_output=True)
    wait_for(lambda: s3util.aws(srv, "s3api", "list-buckets", check=False).returncode == 0,
             timeout(30), "radosgw to answer again")


def test_a_restarted_node_uploads_what_its_spool_kept(deployed, s3_server):  # noqa: F811
    srv = s3_server
    d = deployed()
    s3_cut(srv)
    try:
        job = d.schedule("testproj", "quick", lines=100, every=0.005)
        d.wait_finished(job)
        time.sleep(FLUSH)
        d.kill9()
    finally:
        s3_resume(srv)
    assert s3util.keys(srv, f"{PREFIX}/") == []
    d.start()
    wait_for(lambda: whole_uploaded(srv, job), timeout(30), "the spool's upload after a restart")
    assert s3util.get(srv, key("logs", job)) == read(d.log_path("testproj", "quick", job))
    assert s3util.get(srv, key("items", job)) == read(d.items_path("testproj", "quick", job))
    assert "uploading what the last run left" in d.stderr_text()


def test_retention_deletes_the_objects_of_forgotten_jobs(deployed, s3_server):  # noqa: F811
    srv = s3_server
    d = deployed()
    jobs = []
    for _ in range(3):
        jobs.append(d.schedule("testproj", "quick", lines=5, every=0))
        d.wait_finished(jobs[-1])
        wait_for(lambda: whole_uploaded(srv, jobs[-1]), timeout(20), "the whole objects")
        time.sleep(1.1)  # LastModified has whole seconds
    ks = s3util.keys(srv, f"{PREFIX}/logs/")
    assert len(ks) == 3, ks  # within jobs_to_keep (5)

    # history_per_spider: the janitor forgets the oldest job, and its objects.
    d.stop()
    d.spiderd.update({"history_per_spider": 1, "janitor_interval": 0.5})
    d.write_conf()
    d.start()
    wait_for(lambda: s3util.keys(srv, f"{PREFIX}/logs/") == [key("logs", jobs[-1])],
             timeout(30), "the forgotten jobs' logs to go")
    assert s3util.keys(srv, f"{PREFIX}/items/") == [key("items", jobs[-1])]


def test_jobs_to_keep_applies_in_the_store(deployed, s3_server):  # noqa: F811
    srv = s3_server
    d = deployed(scrapyd={"jobs_to_keep": 2})
    jobs = []
    for _ in range(3):
        jobs.append(d.schedule("testproj", "quick", lines=5, every=0))
        d.wait_finished(jobs[-1])
        wait_for(lambda: whole_uploaded(srv, jobs[-1]), timeout(20), "the whole objects")
        time.sleep(1.1)  # LastModified has whole seconds
    wait_for(lambda: sorted(s3util.keys(srv, f"{PREFIX}/logs/")) ==
             sorted(key("logs", j) for j in jobs[1:]), timeout(20), "the oldest log to go")


@pytest.mark.parametrize("what", ["bucket", "key", "secret"])
def test_a_bad_bucket_or_refused_credentials_stop_the_start(spiderd, s3_server, what):  # noqa: F811
    srv = dict(s3_server)
    extra = {}
    if what == "bucket":
        extra["object_store"] = "s3://no-such-bucket-here/x"
    elif what == "key":
        srv["AWS_ACCESS_KEY_ID"] = "NOT-A-KEY"
    else:  # the server checks signatures: a wrong secret signs wrong
        srv["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    d = node(spiderd, srv, start=False, **extra)
    d.spawn()
    rc = d.proc.wait(timeout(20))
    d.proc = None
    assert rc != 0
    text = d.stderr_text()
    if what == "bucket":
        assert "NoSuchBucket" in text and "the bucket does not exist" in text, text
    else:
        assert "refused the credentials" in text and "AWS_ACCESS_KEY_ID" in text, text
    assert srv["AWS_SECRET_ACCESS_KEY"] not in text.replace("object_store", "")


def test_an_unreachable_store_is_said_and_the_node_serves(spiderd, s3_server, egg):  # noqa: F811
    from conftest import free_port
    d = node(spiderd, s3_server, object_store_endpoint=f"http://127.0.0.1:{free_port()}")
    # Ready (on a shared store once the first heartbeat is written), with
    # the object store's trouble said.
    r = wait_for(lambda: (lambda r: r if r.status_code == 200 else None)(d.get("/readyz")),
                 timeout(10), "/readyz 200")
    assert "object store" in r.text and "Couldn't connect" in r.text, r.text
    assert "logs and items wait on local disk until it answers" in d.stderr_text()


def test_no_credentials_say_where_to_put_them(spiderd, s3_server):  # noqa: F811
    d = spiderd(name="nocred", start=False, spiderd=conf(s3_server))
    d.spawn()
    assert d.proc.wait(timeout(20)) != 0
    d.proc = None
    assert "object_store has no credentials" in d.stderr_text()


def test_credentials_file(spiderd, s3_server, egg, tmp_path):  # noqa: F811
    srv = s3_server
    cred = tmp_path / "credentials"
    cred.write_text("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n" %
                    (srv["AWS_ACCESS_KEY_ID"], srv["AWS_SECRET_ACCESS_KEY"]))
    d = spiderd(name="credfile", scrapyd={"items_dir": "items"},
                spiderd=conf(srv, object_store_credentials=str(cred)))
    d.upload("testproj", "1", egg("testproj"))
    job = d.schedule("testproj", "quick", lines=3, every=0)
    d.wait_finished(job)
    wait_for(lambda: whole_uploaded(srv, job), timeout(20), "the whole objects")
