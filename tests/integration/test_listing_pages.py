"""Scrapyd's listings longer than one page: listjobs.json and /jobs read the
store a page at a time ([spiderd] list_page, lowered here to 3) and stream
the answer; what they answer must be what one read of every job gave: the
same entries, in the same order, in the same JSON. And a client that leaves
in the middle of a streamed listing costs nothing afterwards."""

import json
import os
import re
import socket
import time

import pytest

from conftest import assert_python_json, parse_time, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "fakecrawl.py")
PAGE = 3


@pytest.fixture(scope="module")
def paged(module_spiderd, egg, tmp_path_factory):
    """Project "pages": 11 finished jobs, 5 running, 10 pending (5 slots)."""
    markers = str(tmp_path_factory.mktemp("markers"))
    d = module_spiderd(
        name="pages", scrapyd={"max_proc": 5, "finished_to_keep": 0},
        spiderd={"python": FAKE, "list_page": PAGE, "warm_templates": 0},
        env={"MARKER_DIR": markers, "FAKE_SECONDS": "0"})
    d.upload("pages", "1.0", egg("testproj"))
    finished = [d.schedule("pages", "quick") for _ in range(11)]

    def all_done():
        return len(listjobs(d)["finished"]) == 11
    wait_for(all_done, 60, "11 finished jobs")
    d.stop()
    d.env_extra["FAKE_SECONDS"] = "300"  # the next crawls hold their slots
    d.start()
    running = [d.schedule("pages", "quick") for _ in range(5)]
    wait_for(lambda: len(listjobs(d)["running"]) == 5, 30, "5 running jobs")
    prios = [0, 1, 0, 2.5, -1, 0, 1, 0, -1, 0]
    pending = [d.schedule("pages", "quick", priority=str(p)) for p in prios]
    d.paged = {"finished": finished, "running": running, "pending": pending, "prios": prios}
    return d


def listjobs(d, project="pages"):
    """conftest's listjobs checks a Content-Length, which a streamed
    listing has not."""
    return json.loads(raw_get(d, f"/listjobs.json?project={project}").content)


def raw_get(d, path):
    r = d.session.get(d.url + path, timeout=30)
    assert r.status_code == 200, r.text[:300]
    return r


def ms(text):
    return parse_time(text).timestamp() * 1000


def test_listjobs_longer_than_a_page_is_complete_and_in_order(paged):
    r = raw_get(paged, "/listjobs.json?project=pages")
    # Longer than a round: streamed, so no Content-Length.
    assert r.headers.get("Transfer-Encoding") == "chunked"
    assert "Content-Length" not in r.headers
    assert r.headers["Content-Type"] == "application/json"
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    body = r.content
    assert body.endswith(b"}\n")
    assert_python_json(body)
    lj = json.loads(body)
    assert list(lj) == ["pending", "running", "finished", "status", "node_name"]
    assert lj["status"] == "ok"
    want = paged.paged

    # Pending: priority first (higher first), then the order they came in.
    order = sorted(range(len(want["pending"])), key=lambda i: (-want["prios"][i], i))
    assert [e["id"] for e in lj["pending"]] == [want["pending"][i] for i in order]
    assert [e["priority"] for e in lj["pending"]] == [float(want["prios"][i]) for i in order]

    # Running: by start time, then id (the order they came in).
    seq = {j: i for i, j in enumerate(want["running"])}
    assert sorted(e["id"] for e in lj["running"]) == sorted(want["running"])
    keys = [(ms(e["start_time"]), seq[e["id"]]) for e in lj["running"]]
    assert keys == sorted(keys)

    # Finished: the latest end first, then the newest id.
    seq = {j: i for i, j in enumerate(want["finished"])}
    assert sorted(e["id"] for e in lj["finished"]) == sorted(want["finished"])
    keys = [(-ms(e["end_time"]), -seq[e["id"]]) for e in lj["finished"]]
    assert keys == sorted(keys)
    assert all(e["state"] == "finished" for e in lj["finished"])

    # Every project's listing holds the same jobs in the same order.
    lj_all = json.loads(raw_get(paged, "/listjobs.json").content)
    for k in ("pending", "running", "finished"):
        assert lj_all[k] == lj[k]

    # HEAD is answered whole, with the length GET sends, and the connection
    # stays usable: a streamed HEAD ends with a stray chunk that the next
    # answer on the connection would be read from.
    h = paged.session.head(paged.url + "/listjobs.json?project=pages", timeout=30)
    assert h.status_code == 200 and h.content == b""
    assert h.headers["Content-Length"] == str(len(body))
    assert json.loads(raw_get(paged, "/listjobs.json?project=pages").content) == lj


def test_a_listing_within_one_round_keeps_its_content_length(paged, egg):
    """The other project has no job: the whole answer is one round."""
    paged.upload("empty", "1.0", egg("testproj"))
    r = raw_get(paged, "/listjobs.json?project=empty")
    assert r.headers["Content-Length"] == str(len(r.content))
    assert r.content == (b'{"pending": [], "running": [], "finished": [], "status": "ok", '
                         b'"node_name": ' + json.dumps(paged.node).encode() + b'}\n')


def test_jobs_page_longer_than_a_page_lists_every_job_in_order(paged):
    r = raw_get(paged, "/jobs")
    html = r.text
    assert r.headers.get("Transfer-Encoding") == "chunked"
    assert html.startswith("<!DOCTYPE html>") and html.endswith("</html>\n")
    lj = json.loads(raw_get(paged, "/listjobs.json").content)
    # The job column of each row, section by section, as listjobs orders them.
    sections = re.split(r'<th colspan="\d+">(Pending|Running|Finished)</th>', html)
    got = {}
    for title, part in zip(sections[1::2], sections[2::2]):
        rows = re.findall(r"<tr>\n(?:\s*<td>[^<]*</td>\n){2}\s*<td>([0-9a-f]+)</td>", part)
        got[title.lower()] = rows
    assert got["pending"] == [e["id"] for e in lj["pending"]]
    assert got["running"] == [e["id"] for e in lj["running"]]
    assert got["finished"] == [e["id"] for e in lj["finished"]]


def test_a_client_that_leaves_mid_listing_costs_nothing(paged):
    """Clients that read a few bytes of a streamed listing and leave: the
    daemon goes on answering, and under ASan nothing leaks (checked when
    the daemon stops at the module's end)."""
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", paged.port))
        s.sendall(b"GET /listjobs.json HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 200")
        s.close()
    # One that never reads at all, with a long listing still to come.
    s = socket.create_connection(("127.0.0.1", paged.port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    s.close()
    assert len(listjobs(paged)["pending"]) == 10


def test_a_log_directory_of_many_files_is_listed_whole_and_sorted(paged):
    """More files than one chunk of the page (512 rows): read off the loop,
    sent as the client takes it; every file once, in name order, as
    Twisted's listing (odd and even rows alternate)."""
    where = os.path.join(paged.abs_dir("logs_dir"), "pages", "many")
    os.makedirs(where)
    names = [f"{i:05d}-{'x' * (i % 7)}.log" for i in range(1300)]
    for n in reversed(names):
        with open(os.path.join(where, n), "w") as f:
            f.write("y" * (len(n) * 13))
    os.makedirs(os.path.join(where, "zdir"))
    r = raw_get(paged, "/logs/pages/many/")
    assert r.headers.get("Transfer-Encoding") == "chunked"
    html = r.text
    assert html.startswith("<html>\n<head>\n<title>Directory listing for /logs/pages/many/</title>")
    assert html.endswith("\n    </tbody>\n</table>\n\n</body>\n</html>\n")
    rows = re.findall(r'<tr class="(odd|even)">\n    <td><a href="([^"]+)">', html)
    assert [h for _, h in rows] == ["zdir/"] + names  # directories first
    assert [c for c, _ in rows] == ["odd" if i % 2 == 0 else "even" for i in range(len(rows))]
    size = re.search(r'<a href="00006-xxxxxx.log">[^<]*</a></td>\n    <td>([^<]*)</td>', html)
    assert size.group(1) == f"{len(names[6]) * 13}B"
    # Clients leaving in the middle (ASan checks nothing stays behind).
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", paged.port))
        s.sendall(b"GET /logs/pages/many/ HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 200")
        s.close()
    # A small directory is still one reply with its length.
    r = raw_get(paged, "/logs/pages/")
    assert r.headers["Content-Length"] == str(len(r.content))
    assert '<a href="many/">many/</a>' in r.text
