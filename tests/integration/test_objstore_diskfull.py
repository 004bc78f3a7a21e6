"""A full local disk while the object store is down ([spiderd]
object_store, its S3 server cut): the crawl that writes through it fails as
it does without an object store (test_diskfull.py), the daemon stays up,
and once the store answers again and space is freed the spool drains: the
crawl's log is whole in the bucket. Needs root (a tmpfs) and radosgw; SQLite
only, as test_diskfull.py."""

import os
import shutil

import pytest

from conftest import SHARED_STORE, need, pid_alive, timeout, wait_for
import s3util
from s3util import s3_server  # noqa: F401  (a fixture)
from test_diskfull import FAULTCRAWL, fill, small_disk  # noqa: F401  (a fixture)
from test_objstore import conf, creds, key


@pytest.mark.skipif(SHARED_STORE, reason="the jobs live in the shared store, not on the full disk")
def test_a_full_disk_while_the_store_is_down_fails_the_crawl_cleanly(spiderd, egg, s3_server,  # noqa: F811
                                                                     small_disk, tmp_path):
    need(os.path.exists(s3util.AWS) and shutil.which("radosgw") is not None,
         "needs radosgw and awscli (make deps)")
    srv = s3_server
    env = creds(srv)
    env.update({"FAULT_RECORD": str(tmp_path / "record"), "FAULT_LOG_BYTES": "200000"})
    d = spiderd(scrapyd={"max_proc": 1, "dbs_dir": str(small_disk / "dbs"),
                         "eggs_dir": str(small_disk / "eggs"),
                         "logs_dir": str(small_disk / "logs"),
                         "items_dir": str(small_disk / "items")},
                spiderd=conf(srv, python=FAULTCRAWL), env=env)
    d.upload("p", "1", egg("testproj"))
    logkey = key("logs", "long").replace("/testproj/", "/p/")
    s3util.cut_server(srv)
    try:
        d.schedule("p", "quick", jobid="long", seconds=4)
        pid = d.wait_running("long")["pid"]
        log = d.log_path("p", "quick", "long")
        wait_for(lambda: os.path.exists(log) and os.path.getsize(log) > 200000, 20,
                 "the long crawl's first log lines")
        filler = small_disk / "filler"
        fill(filler)
        try:
            wait_for(lambda: not pid_alive(pid), 30, "the long crawl to exit")
            assert d.running()
            assert d.api("daemonstatus.json")["status"] == "ok"
        finally:
            os.unlink(filler)
        # As without an object store: its stats could not be written.
        e = d.wait_finished("long", 30)
        assert (e["state"], e["exit_code"]) == ("failed", 1), e
    finally:
        s3util.resume_server(srv)
    # The spool drains: the whole log lands in the bucket as it is on disk.
    wait_for(lambda: logkey in s3util.keys(srv, ""), timeout(90), "the log to go up")
    assert s3util.get(srv, logkey) == open(log, "rb").read()
    assert d.running()
