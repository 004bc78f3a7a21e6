"""Content-Encoding: gzip on the answers the daemon renders: Scrapyd's JSON
and HTML pages, the REST API and JSON-RPC, for clients whose Accept-Encoding
takes gzip, from 1 KiB up; the gzip bytes decode to exactly the identity
bytes. Never for small answers, event streams, files (their ranges and
304s), or a client that refuses it with q=0."""

import gzip
import json
import os
import socket
import zlib

import pytest

from conftest import timeout

GZ = {"Accept-Encoding": "gzip"}
ID = {"Accept-Encoding": "identity"}


@pytest.fixture(scope="module")
def d(module_spiderd, egg):
    """One slot held by a slow crawl, 20 jobs pending behind it, and a logs
    tree with enough files that its listing is over 256 KiB."""
    d = module_spiderd(scrapyd={"max_proc": 1})
    d.upload("gz", "1.0", egg("testproj"))
    d.slow = d.schedule("gz", "slow", seconds=300)
    d.wait_running(d.slow)
    for i in range(20):
        d.schedule("gz", "quick", jobid=f"pending-{i:02d}-" + "x" * 40)
    many = os.path.join(d.abs_dir("logs_dir"), "gz", "many")
    os.makedirs(many, exist_ok=True)
    for i in range(1500):
        with open(os.path.join(many, f"job-{i:05d}-{'y' * 60}.log"), "w") as f:
            f.write("line\n")
    yield d
    d.cancel("gz", d.slow, "KILL")


def fetch(d, method, path, headers, **kw):
    """(response, raw body bytes as sent) without requests decoding them."""
    r = d.request(method, path, headers=headers, stream=True, **kw)
    raw = r.raw.read(decode_content=False)
    r.close()
    return r, raw


def check_pair(d, method, path, **kw):
    """The gzip answer decodes to the identity answer, byte for byte; both
    say Vary: Accept-Encoding. Returns (gzip response, its raw bytes, the
    identity bytes)."""
    plain, body = fetch(d, method, path, ID, **kw)
    assert plain.status_code == 200, body[:300]
    assert "Content-Encoding" not in plain.headers
    assert plain.headers["Vary"] == "Accept-Encoding"
    assert len(body) >= 1024
    r, raw = fetch(d, method, path, GZ, **kw)
    assert r.status_code == 200
    assert r.headers["Content-Encoding"] == "gzip"
    assert r.headers["Vary"] == "Accept-Encoding"
    assert r.headers["Content-Type"] == plain.headers["Content-Type"]
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw) == body
    assert len(raw) < len(body) / 2
    if "Content-Length" in r.headers:
        assert int(r.headers["Content-Length"]) == len(raw)
    return r, raw, body


def test_scrapyd_listjobs_is_gzipped_and_decodes_to_the_identity_bytes(d):
    r, raw, body = check_pair(d, "GET", "/listjobs.json", params={"project": "gz"})
    pending = json.loads(body)["pending"]
    assert len(pending) == 20
    # what scrapyd-client, python-scrapyd-api and ScrapydWeb do: requests asks
    # for gzip by default and decodes it
    plain = d.session.get(d.url + "/listjobs.json", params={"project": "gz"},
                          headers={"Accept-Encoding": "gzip, deflate"}, timeout=timeout(30))
    assert plain.headers["Content-Encoding"] == "gzip"
    assert plain.json()["pending"] == pending


def test_rest_list_and_jsonrpc_are_gzipped(d):
    check_pair(d, "GET", "/api/v1/jobs", params={"project": "gz", "limit": 100})
    rpc = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "jobs.list",
                      "params": {"project": "gz", "limit": 100}})
    plain, body = fetch(d, "POST", "/api/v1/jsonrpc", dict(ID, **{"Content-Type": "application/json"}),
                        data=rpc)
    r, raw = fetch(d, "POST", "/api/v1/jsonrpc", dict(GZ, **{"Content-Type": "application/json"}),
                   data=rpc)
    assert r.headers["Content-Encoding"] == "gzip" and r.headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(raw) == body
    assert len(json.loads(body)["result"]["jobs"]) == 21


def test_html_pages_are_gzipped(d):
    check_pair(d, "GET", "/jobs")


def test_a_large_answer_is_gzipped_as_it_is_sent(d):
    # over 256 KiB: deflated block by block, so no Content-Length (chunked)
    r, raw, body = check_pair(d, "GET", "/logs/gz/many/")
    assert len(body) > 256 * 1024
    assert "Content-Length" not in r.headers
    assert r.headers["Transfer-Encoding"] == "chunked"
    # an answer up to 256 KiB is deflated whole and keeps its length
    r, raw, body = check_pair(d, "GET", "/listjobs.json?project=gz")
    assert 1024 < len(body) <= 256 * 1024
    assert int(r.headers["Content-Length"]) == len(raw)


def test_a_small_answer_is_not_compressed(d):
    r, raw = fetch(d, "GET", "/daemonstatus.json", GZ)
    assert r.status_code == 200 and len(raw) < 1024
    assert "Content-Encoding" not in r.headers
    assert "Vary" not in r.headers
    assert json.loads(raw)["status"] == "ok"


@pytest.mark.parametrize("ae,gz", [
    ("gzip;q=0", False),
    ("gzip; q=0.000, identity", False),
    ("gzip;q=0, *", False),
    ("*;q=0", False),
    ("identity", False),
    ("br", False),
    ("", False),
    ("*", True),
    ("br;q=1.0, gzip;q=0.5", True),
    ("x-gzip", True),
    ("GZIP;Q=0.001", True),
])
def test_accept_encoding_q_values_are_respected(d, ae, gz):
    r, raw = fetch(d, "GET", "/listjobs.json", {"Accept-Encoding": ae})
    assert r.status_code == 200
    assert r.headers["Vary"] == "Accept-Encoding"
    if gz:
        assert r.headers["Content-Encoding"] == "gzip"
        raw = gzip.decompress(raw)
    else:
        assert "Content-Encoding" not in r.headers
        assert int(r.headers["Content-Length"]) == len(raw)
    assert json.loads(raw)["status"] == "ok"


def test_head_says_what_get_would_send(d):
    g, raw = fetch(d, "GET", "/listjobs.json", GZ)
    h, hbody = fetch(d, "HEAD", "/listjobs.json", GZ)
    assert h.status_code == 200 and hbody == b""
    assert h.headers["Content-Encoding"] == "gzip"
    assert h.headers["Vary"] == "Accept-Encoding"
    assert h.headers["Content-Length"] == g.headers["Content-Length"] == str(len(raw))
    h, hbody = fetch(d, "HEAD", "/jobs", ID)
    assert "Content-Encoding" not in h.headers and hbody == b""
    # a large answer, deflated as it is sent: the headers, and no body at all
    req = b"HEAD /logs/gz/many/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n"
    with socket.create_connection(("127.0.0.1", d.port), timeout=timeout(20)) as s:
        s.sendall(req)
        data = b""
        while (chunk := s.recv(65536)):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"\r\nContent-Encoding: gzip" in head
    assert body == b"" and b"\r\nContent-Length: " in head


def test_files_keep_their_ranges_and_304s_in_identity(d):
    path = os.path.join(d.abs_dir("logs_dir"), "gz", "big.log")
    data = b"".join(b"line %06d of a log that compresses well\n" % i for i in range(2000))
    with open(path, "wb") as f:
        f.write(data)
    r, raw = fetch(d, "GET", "/logs/gz/big.log", GZ)
    assert r.status_code == 200 and raw == data  # a file is sent as it is on disk
    assert "Content-Encoding" not in r.headers
    r, raw = fetch(d, "GET", "/logs/gz/big.log", dict(GZ, Range="bytes=100-199"))
    assert r.status_code == 206 and raw == data[100:200]
    assert "Content-Encoding" not in r.headers
    r, raw = fetch(d, "GET", "/logs/gz/big.log",
                   dict(GZ, **{"If-Modified-Since": r.headers["Last-Modified"]}))
    assert r.status_code == 304 and raw == b""
    assert "Content-Encoding" not in r.headers


def test_an_event_stream_is_never_compressed(d):
    r = d.session.get(d.url + "/api/v1/events/stream", headers=GZ, stream=True, timeout=10)
    try:
        assert r.status_code == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        assert "Content-Encoding" not in r.headers
    finally:
        r.close()


def raw_http(port, request: bytes):
    """(status line and headers as a dict, body bytes) read off the socket
    until the server closes it; a chunked body is unchunked."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout(20)) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        assert k.lower() not in headers, f"{k} twice"
        headers[k.lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        out = b""
        while True:
            size, _, body = body.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, body = out + body[:n], body[n + 2:]
        body = out
    return lines[0], headers, body


def test_headers_on_the_wire(d):
    req = ("GET /listjobs.json?project=gz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
           "Accept-Encoding: gzip\r\n\r\n").encode()
    status, h, body = raw_http(d.port, req)
    assert status == "HTTP/1.1 200 OK"
    assert h["content-encoding"] == "gzip"
    assert h["vary"] == "Accept-Encoding"
    assert h["content-type"] == "application/json"
    assert int(h["content-length"]) == len(body)
    text = zlib.decompress(body, 16 + zlib.MAX_WBITS)
    # curl without --compressed sends no Accept-Encoding: identity, as before
    req = b"GET /listjobs.json?project=gz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    status, h, body = raw_http(d.port, req)
    assert "content-encoding" not in h and h["vary"] == "Accept-Encoding"
    assert int(h["content-length"]) == len(body) and body == text
    # HTTP/1.0 cannot take chunks: the large listing ends with the connection
    req = b"GET /logs/gz/many/ HTTP/1.0\r\nAccept-Encoding: gzip\r\n\r\n"
    status, h, body = raw_http(d.port, req)
    assert status.startswith("HTTP/1.") and " 200 " in status
    assert h["content-encoding"] == "gzip" and "transfer-encoding" not in h
    assert b"job-01499-" in gzip.decompress(body)
