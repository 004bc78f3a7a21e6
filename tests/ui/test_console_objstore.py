"""The console's job page shows a job's log from the object store when the
node that ran it is gone: two nodes on one PostgreSQL store and one bucket
(tests/s3server.sh), the crawl's node killed with kill -9 and its disk
wiped, and the other node's console opened on the job."""

import os
import shutil

from selenium.webdriver.common.by import By

from conftest import browser_errors, console_url, wait_for, wait_text
import s3util
from s3util import s3_server  # noqa: F401  (a fixture)
from spiderd_integration import own_pg  # noqa: F401  (a fixture)

LOGCRAWL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration",
                        "logcrawl.py")


def test_a_dead_nodes_job_log_on_another_nodes_console(spiderd, egg, s3_server,  # noqa: F811
                                                      own_pg, browser):  # noqa: F811
    srv = s3_server
    sd = {"python": LOGCRAWL, "store": own_pg[0], "node_heartbeat": 0.3, "node_timeout": 3,
          "object_store": f"s3://{srv['S3_BUCKET']}/ui", "object_store_endpoint": srv["S3_ENDPOINT"],
          "object_store_flush": 1}
    env = {k: v for k, v in srv.items() if k.startswith("AWS_")}
    nodes = [spiderd(name=n, scrapyd={"node_name": n, "items_dir": "items"}, spiderd=sd, env=env)
             for n in ("a", "b")]
    nodes[0].upload("testproj", "1", egg("testproj"))
    job = nodes[0].schedule("testproj", "quick", lines=200, every=0.005)
    nodes[0].wait_finished(job)
    ran = [d for d in nodes if os.path.exists(d.log_path("testproj", "quick", job))][0]
    other = nodes[1] if ran is nodes[0] else nodes[0]
    log = open(ran.log_path("testproj", "quick", job), encoding="utf-8").read()
    key = f"ui/logs/testproj/quick/{job}.log"
    wait_for(lambda: s3util.head(srv, key) is not None, 30, "the whole log in the bucket")
    ran.kill9()
    shutil.rmtree(ran.abs_dir("logs_dir"))
    jid = [j for j in other.get("/api/v1/jobs", params={"project": "testproj"}).json()["jobs"]
           if j["job"] == job][0]["id"]

    servers = []
    try:
        other.console = console_url(other, servers)
        browser_errors(browser)
        browser.get(other.console + f"/ui/jobs/{jid}")
        shown = wait_text(browser, "#job-log", "line 000199", seconds=30)
        assert "line 000000" in shown.text
        assert shown.text.strip() == log.strip()
        assert not browser_errors(browser)
        assert browser.find_element(By.ID, "job-log").text.count("line ") == 200
    finally:
        for s in servers:
            s.shutdown()
