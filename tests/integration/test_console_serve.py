"""The built web console, docs and API explorer served from ui_dir: /ui/
(a single-page app with its fallback), /docs/, /api/ beside /api/v1,
content types, ETags and 304s, gzip siblings, cache headers, HEAD, methods,
paths that try to leave the tree, the page shown when nothing is built,
and basic auth."""

import gzip
import http.client
import os
import subprocess
import urllib.parse

import pytest

from conftest import timeout

INDEX = b"<!DOCTYPE html>\n<html><head><title>spiderd console</title></head><body>app</body></html>\n"
APP_JS = b"console.log('spiderd console');\n" * 40
DOCS_INDEX = b"<!DOCTYPE html>\n<h1>spiderd docs</h1>\n"
DOCS_QUEUES = b"<!DOCTYPE html>\n<h1>Queues</h1>\n"
API_INDEX = b"<!DOCTYPE html>\n<title>Swagger UI</title>\n"
SECRET = b"TOPSECRET outside the tree\n"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A ui_dir as `make ui` lays it out, small fake files, plus files and
    symlinks that lead out of it."""
    base = str(tmp_path_factory.mktemp("uitree"))
    ui = os.path.join(base, "dist")
    write(os.path.join(ui, "console", "index.html"), INDEX)
    write(os.path.join(ui, "console", "assets", "app-abc.js"), APP_JS)
    subprocess.run(["gzip", "-k", "-9", os.path.join(ui, "console", "assets", "app-abc.js")], check=True)
    write(os.path.join(ui, "console", "assets", "app-abc.css"), b"body { color: red }\n")
    write(os.path.join(ui, "console", "favicon.svg"), b"<svg xmlns='http://www.w3.org/2000/svg'/>\n")
    write(os.path.join(ui, "docs", "index.html"), DOCS_INDEX)
    write(os.path.join(ui, "docs", "queues.html"), DOCS_QUEUES)
    write(os.path.join(ui, "docs", "notes.md"), b"# notes\n")
    write(os.path.join(ui, "api", "index.html"), API_INDEX)
    write(os.path.join(ui, "api", "swagger-ui.css"), b".swagger { }\n")
    # Outside the served trees: next to them in ui_dir, and beside ui_dir.
    write(os.path.join(ui, "config"), SECRET)
    write(os.path.join(base, "x"), SECRET)
    write(os.path.join(base, "secret", "s.txt"), SECRET)
    os.symlink(os.path.join(base, "x"), os.path.join(ui, "console", "leak.txt"))
    os.symlink("../../x", os.path.join(ui, "console", "assets", "leak2.js"))
    os.symlink(os.path.join(base, "secret"), os.path.join(ui, "console", "outdir"))
    os.symlink(os.path.join(base, "x"), os.path.join(ui, "docs", "leak.html"))
    return ui


@pytest.fixture(scope="module")
def d(module_spiderd, tree):
    return module_spiderd(name="console", spiderd={"ui_dir": tree})


def raw_get(d, path, method="GET", headers=None):
    """The path goes out exactly as written (requests would normalise it)."""
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout(10))
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


# ---- serving -------------------------------------------------------------

def test_console_index_and_assets(d):
    r = d.get("/ui/")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.content == INDEX
    assert r.headers["Content-Length"] == str(len(INDEX))
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Cache-Control"] == "no-cache"

    r = d.get("/ui/assets/app-abc.js", headers={"Accept-Encoding": "identity"})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert r.content == APP_JS
    assert "Content-Encoding" not in r.headers
    assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert r.headers["X-Content-Type-Options"] == "nosniff"

    r = d.get("/ui/assets/app-abc.css")
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/css; charset=utf-8"
    assert r.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    r = d.get("/ui/favicon.svg")
    assert r.status_code == 200 and r.headers["Content-Type"] == "image/svg+xml"
    assert r.headers["Cache-Control"] == "no-cache"


def test_spa_fallback_serves_the_index(d):
    for path in ("/ui/jobs/5?x=1", "/ui/jobs/123?state=failed", "/ui/queues", "/ui/a/b/c/"):
        r = d.get(path)
        assert r.status_code == 200, path
        assert r.content == INDEX, path
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert r.headers["Cache-Control"] == "no-cache"


def test_missing_files_with_a_dot_are_404(d):
    for path in ("/ui/assets/nope.js", "/ui/nope.css", "/ui/jobs/5/log.txt"):
        r = d.get(path)
        assert r.status_code == 404, path
        assert INDEX not in r.content
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"


def test_docs(d):
    r = d.get("/docs")
    assert r.status_code == 301
    assert urllib.parse.urljoin(d.url + "/docs", r.headers["Location"]) == d.url + "/docs/"
    r = d.get("/docs/")
    assert r.status_code == 200 and r.content == DOCS_INDEX
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    for path in ("/docs/queues", "/docs/queues.html"):
        r = d.get(path)
        assert r.status_code == 200 and r.content == DOCS_QUEUES, path
    r = d.get("/docs/notes.md")
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/markdown; charset=utf-8"
    # no single-page fallback outside the console
    assert d.get("/docs/nosuch").status_code == 404
    assert d.get("/docs/nosuch/deeper").status_code == 404


def test_api_explorer_beside_the_rest_api(d):
    r = d.get("/api")
    assert r.status_code == 301
    assert urllib.parse.urljoin(d.url + "/api", r.headers["Location"]) == d.url + "/api/"
    r = d.get("/api/")
    assert r.status_code == 200 and r.content == API_INDEX
    r = d.get("/api/swagger-ui.css")
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/css; charset=utf-8"
    assert d.get("/api/nosuch.js").status_code == 404

    r = d.get("/api/v1/status")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    assert r.json()["node_name"] == d.node
    assert d.get("/api/v1/openapi.json").json()["openapi"]
    # the REST API answers its own 404s under /api/v1, as JSON
    r = d.get("/api/v1/nosuch")
    assert r.status_code == 404 and r.headers["Content-Type"].startswith("application/json")


def test_redirect_to_the_slash(d):
    r = d.get("/ui")
    assert r.status_code == 301
    assert urllib.parse.urljoin(d.url + "/ui", r.headers["Location"]) == d.url + "/ui/"
    # relative, so a reverse proxy's prefix is kept
    assert urllib.parse.urljoin("https://proxy/pre/fix/ui", r.headers["Location"]) == \
        "https://proxy/pre/fix/ui/"
    # other names are not the console's
    assert d.get("/uix").status_code == 404
    assert d.get("/docsx").status_code == 404


def test_existing_pages_are_untouched(d):
    assert d.get("/jobs").status_code == 200
    assert d.api("daemonstatus.json")["status"] == "ok"
    assert d.get("/logs/").status_code == 200


def test_home_page_links_to_the_console(d):
    text = d.get("/").text
    assert '<li><a href="/ui/">Console</a></li>' in text
    text = d.get("/", headers={"X-Forwarded-Prefix": "/pre/fix"}).text
    assert '<li><a href="/pre/fix/ui/">Console</a></li>' in text


# ---- caching -------------------------------------------------------------

def test_etag_304_and_a_new_etag_after_a_change(d, tree):
    path = os.path.join(tree, "console", "index.html")
    try:
        r = d.get("/ui/")
        etag = r.headers["ETag"]
        assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")
        assert d.get("/ui/jobs/7").headers["ETag"] == etag  # the same file

        r = d.get("/ui/", headers={"If-None-Match": etag})
        assert r.status_code == 304
        assert r.content == b""
        assert r.headers["ETag"] == etag
        assert r.headers["Cache-Control"] == "no-cache"
        assert "Content-Type" not in r.headers
        # no length, or the 200's: never 0, which a cache would take as the new length
        assert r.headers.get("Content-Length", str(len(INDEX))) == str(len(INDEX))
        for inm in (f"W/{etag}", f'"nope", {etag}', "*"):
            assert d.get("/ui/", headers={"If-None-Match": inm}).status_code == 304, inm
        assert d.get("/ui/", headers={"If-None-Match": '"nope"'}).status_code == 200

        write(path, INDEX.replace(b"app", b"app v2"))
        r = d.get("/ui/", headers={"If-None-Match": etag})
        assert r.status_code == 200
        assert b"app v2" in r.content
        assert r.headers["ETag"] != etag
    finally:
        write(path, INDEX)


def test_gzip_sibling(d):
    plain = d.get("/ui/assets/app-abc.js", headers={"Accept-Encoding": "identity"})
    assert plain.headers["Vary"] == "Accept-Encoding"

    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=timeout(10))
    try:
        conn.request("GET", "/ui/assets/app-abc.js", headers={"Accept-Encoding": "gzip, deflate"})
        r = conn.getresponse()
        body = r.read()
        headers = dict(r.getheaders())
    finally:
        conn.close()
    assert r.status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert headers["Vary"] == "Accept-Encoding"
    assert headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert int(headers["Content-Length"]) == len(body) < len(APP_JS)
    assert gzip.decompress(body) == plain.content == APP_JS
    assert headers["ETag"] != plain.headers["ETag"]

    # requests decodes it the same way
    r = d.get("/ui/assets/app-abc.js", headers={"Accept-Encoding": "gzip"})
    assert r.headers["Content-Encoding"] == "gzip" and r.content == APP_JS
    # its own ETag revalidates
    r2 = d.get("/ui/assets/app-abc.js", headers={"Accept-Encoding": "gzip",
                                                 "If-None-Match": headers["ETag"]})
    assert r2.status_code == 304
    # refused gzip, or nothing to send compressed: the plain file
    for ae in ("gzip;q=0", "br", "gzip;q=0, *"):
        r = d.get("/ui/assets/app-abc.js", headers={"Accept-Encoding": ae})
        assert "Content-Encoding" not in r.headers and r.content == APP_JS, ae
    r = d.get("/ui/assets/app-abc.css", headers={"Accept-Encoding": "gzip"})
    assert "Content-Encoding" not in r.headers and r.headers["Vary"] == "Accept-Encoding"


def test_head_has_headers_and_no_body(d):
    status, headers, body = raw_get(d, "/ui/assets/app-abc.js", method="HEAD",
                                    headers={"Accept-Encoding": "identity"})
    assert status == 200 and body == b""
    assert headers["Content-Length"] == str(len(APP_JS))
    assert headers["Content-Type"] == "text/javascript; charset=utf-8"
    assert headers["ETag"]
    r = d.request("HEAD", "/ui/jobs/5")
    assert r.status_code == 200 and r.content == b""
    assert r.headers["Content-Length"] == str(len(INDEX))


def test_other_methods_are_405(d):
    for method, path in (("POST", "/ui/"), ("PUT", "/ui/assets/app-abc.js"),
                         ("DELETE", "/docs/"), ("POST", "/api/"), ("POST", "/ui")):
        r = d.request(method, path, data={"a": "b"})
        assert r.status_code == 405, (method, path)
        assert r.headers["Allow"] == "HEAD, GET"


# ---- the tree's edge -----------------------------------------------------

@pytest.mark.parametrize("path", [
    "/ui/../config", "/ui/%2e%2e/config", "/ui/%2e%2e/%2e%2e/x", "/ui/..%2f..%2fx",
    "/docs/..%2fx", "/docs/..%2fconfig", "/docs/%2e%2e%2fconfig", "/api/..%2fconfig",
    "/ui/assets/../../config", "/ui/..\\config", "/ui/%5c..%5cconfig",
    "/ui/leak.txt", "/ui/assets/leak2.js", "/ui/outdir/s.txt", "/docs/leak", "/docs/leak.html",
    "/ui/x%00.js", "/ui/%00../config", "/docs/%00", "/api/x%00/../../config",
])
def test_paths_never_leave_the_tree(d, path):
    status, _, body = raw_get(d, path)
    assert b"TOPSECRET" not in body and b"root:" not in body
    assert status in (400, 403, 404), (path, status)


@pytest.mark.parametrize("path", ["/ui/%2fetc%2fpasswd", "/ui//etc/passwd", "/ui/./../x"])
def test_absolute_looking_paths_stay_in_the_tree(d, path):
    # an empty segment is skipped: "/ui//etc/passwd" is console/etc/passwd,
    # which does not exist, so the single-page app answers
    status, _, body = raw_get(d, path)
    assert b"TOPSECRET" not in body and b"root:" not in body
    assert (status, body) == (200, INDEX) or status in (400, 404), (path, status)


def test_symlinks_inside_the_tree_are_followed(d, tree):
    link = os.path.join(tree, "docs", "alias.html")
    os.symlink("queues.html", link)
    try:
        r = d.get("/docs/alias")
        assert r.status_code == 200 and r.content == DOCS_QUEUES
    finally:
        os.unlink(link)


# ---- nothing built; auth -------------------------------------------------

def test_not_built(spiderd, tmp_path):
    d = spiderd(spiderd={"ui_dir": str(tmp_path / "missing")})
    for path, what in (("/ui/", "web console"), ("/ui/jobs/5", "web console"),
                       ("/docs/", "documentation"), ("/api/", "API explorer")):
        r = d.get(path)
        assert r.status_code == 404, path
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert f"The {what} is not built" in r.text, path
        assert "make ui" in r.text
    assert d.get("/ui").status_code == 301
    assert d.get("/api/v1/status").status_code == 200
    assert "not built" in d.stderr_text() or "no index.html" in d.stderr_text()


def test_ui_dir_from_the_environment(spiderd, tree):
    d = spiderd(env={"SPIDERD_UI_DIR": tree})
    r = d.get("/ui/")
    assert r.status_code == 200 and r.content == INDEX


def test_no_ui_dir_serves_nothing(spiderd):
    d = spiderd(spiderd={"ui_dir": ""})
    assert d.get("/ui/").status_code == 404
    assert b"No Such Resource" in d.get("/docs/").content
    assert "Console" not in d.get("/").text
    assert d.get("/api/v1/status").status_code == 200


def test_basic_auth_covers_the_console(spiderd, tree):
    d = spiderd(scrapyd={"username": "alice", "password": "s3cret"}, spiderd={"ui_dir": tree})
    for path in ("/ui/", "/ui", "/ui/assets/app-abc.js", "/ui/jobs/5", "/docs/", "/api/"):
        r = d.get(path, auth=None)
        assert r.status_code == 401, path
        assert INDEX not in r.content and APP_JS not in r.content
        assert r.headers["WWW-Authenticate"].lower().startswith("basic")
    r = d.get("/ui/", auth=("alice", "wrong"))
    assert r.status_code == 401
    r = d.get("/ui/")  # the daemon's credentials
    assert r.status_code == 200 and r.content == INDEX
