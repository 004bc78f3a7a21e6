"""The last admin credential of a daemon that serves beyond loopback cannot
be removed through the API: a daemon refuses to start on a public address
without authentication, and deleting, revoking or demoting the last usable
admin user or token would turn authentication off while it runs, making
every anonymous caller an admin. Such a write is refused with 409 in each
face's error shape (REST, JSON-RPC, the CLI), audited, and logged; with
--insecure, on loopback, with another admin, or with a configured [scrapyd]
login it goes through.

Each test does what an operator does: the first admin is made anonymously
on loopback, then the daemon is restarted on 0.0.0.0."""

import subprocess
import threading
import time

from conftest import BIN, bearer, make_token, timeout, unique, wait_for
from test_cluster import cluster, shared

API = "/api/v1"


def make_user(d, name, password, role, headers=None):
    r = d.request("POST", API + "/users", headers=headers or {},
                  json={"name": name, "password": password, "role": role})
    assert r.status_code == 201, r.text
    return r.json()


def go_public(d, **spiderd):
    """Restarts d bound to every address (what a loopback-first install does
    next), with spiderd's settings changed as given."""
    d.stop()
    d.scrapyd["bind_address"] = "0.0.0.0"
    d.spiderd.update(spiderd)
    d.write_conf()
    return d.start()


def assert_last_admin_refused(r, what):
    assert r.status_code == 409, f"{what}: {r.status_code} {r.text}"
    err = r.json()["error"]
    assert err["code"] == "SPD_ECONFLICT", (what, err)
    msg = err["message"]
    assert "last admin credential" in msg and "0.0.0.0:" in msg and "--insecure" in msg, msg
    assert err["details"]["reason"] == "last_admin", (what, err)


def assert_still_closed(d):
    """Authentication is still on: an anonymous caller is asked who it is
    and cannot make itself a token."""
    assert d.request("GET", API + "/status").status_code == 401
    assert d.request("POST", API + "/tokens", json={"role": "admin"}).status_code == 401
    assert d.request("GET", "/daemonstatus.json").status_code == 401


def events(d, headers, kind):
    r = d.request("GET", API + "/events", headers=headers, params={"order": "desc", "limit": 200})
    assert r.status_code == 200, r.text
    return [e for e in r.json()["events"] if e["type"] == kind]


def cli(d, *args):
    return subprocess.run([BIN, *args], cwd=d.workdir, env=d.environ(), capture_output=True,
                          text=True, timeout=timeout(30))


def test_the_last_token_stays_on_a_public_address(spiderd):
    d = spiderd()
    tok = make_token(d, "admin", name="root")
    T = bearer(tok["token"])
    go_public(d)
    assert_still_closed(d)
    r = d.request("DELETE", f"{API}/tokens/{tok['id']}", headers=T)
    assert_last_admin_refused(r, "REST revoke")
    # JSON-RPC: the same refusal in its error shape
    r = d.request("POST", API + "/jsonrpc", headers=T, json={
        "jsonrpc": "2.0", "id": 7, "method": "tokens.delete", "params": {"id": tok["id"]}})
    assert r.status_code == 200, r.text
    err = r.json()["error"]
    assert err["data"]["code"] == "SPD_ECONFLICT" and "last admin credential" in err["message"], err
    # the CLI says why, and fails
    p = cli(d, "token", "revoke", tok["id"], "--token", tok["token"])
    assert p.returncode != 0, p.stdout + p.stderr
    assert "last admin credential" in p.stderr and "--insecure" in p.stderr, p.stderr
    # nothing changed: the token still works, anonymous callers are still refused
    assert_still_closed(d)
    who = d.request("GET", API + "/auth/whoami", headers=T)
    assert who.status_code == 200 and who.json()["role"] == "admin", who.text
    # each refusal is on the audit trail, with who asked, and in the log
    refused = events(d, T, "token.revoke_refused")
    assert len(refused) == 3, refused
    assert refused[0]["data"]["token"] == tok["id"]
    assert refused[0]["data"]["actor"] == f"token {tok['id'][:8]} (root)"
    assert "last admin credential" in refused[0]["data"]["reason"]
    assert "refused to revoke token " + tok["id"] in d.stderr_tail()


def test_an_expired_admin_or_a_lesser_token_is_no_admin_credential(spiderd):
    d = spiderd()
    tok = make_token(d, "admin", name="root")
    T = bearer(tok["token"])
    brief = make_token(d, "admin", T, name="brief", expires_in=0.5)
    reader = make_token(d, "read", T, name="reader")
    deployer = make_token(d, "deploy", T, name="deployer")
    go_public(d)
    time.sleep(0.6)  # "brief" has expired by now, if the restart was quicker
    # two more tokens exist, and none of them is a usable admin
    assert_last_admin_refused(d.request("DELETE", f"{API}/tokens/{tok['id']}", headers=T),
                              "revoke with only an expired admin and lesser tokens left")
    # the others go, one by one
    for other in (brief, reader, deployer):
        r = d.request("DELETE", f"{API}/tokens/{other['id']}", headers=T)
        assert r.status_code == 204, r.text
    assert_last_admin_refused(d.request("DELETE", f"{API}/tokens/{tok['id']}", headers=T),
                              "revoke the one left")
    assert_still_closed(d)
    revoked = {e["data"]["token"] for e in events(d, T, "token.revoked")}
    assert revoked == {brief["id"], reader["id"], deployer["id"]}


def test_the_last_admin_user_stays_and_keeps_its_role(spiderd):
    d = spiderd()
    make_user(d, "root", "correct horse", "admin")
    U = ("root", "correct horse")
    go_public(d)
    assert_still_closed(d)
    assert_last_admin_refused(d.request("DELETE", API + "/users/root", auth=U), "delete user")
    for role in ("read", "run", "deploy"):
        r = d.request("PATCH", API + "/users/root", auth=U, json={"role": role})
        assert_last_admin_refused(r, "demote to " + role)
    r = d.request("POST", API + "/jsonrpc", auth=U, json={
        "jsonrpc": "2.0", "id": 1, "method": "users.delete", "params": {"name": "root"}})
    assert r.json()["error"]["data"]["code"] == "SPD_ECONFLICT", r.text
    p = cli(d, "user", "set", "root", "--role", "read", "--user", "root:correct horse")
    assert p.returncode != 0 and "last admin credential" in p.stderr, p.stderr
    p = cli(d, "user", "remove", "root", "--user", "root:correct horse")
    assert p.returncode != 0 and "last admin credential" in p.stderr, p.stderr
    # still an admin, still the only way in
    who = d.request("GET", API + "/auth/whoami", auth=U).json()
    assert who["role"] == "admin" and who["kind"] == "user", who
    assert_still_closed(d)
    # what leaves it an admin goes through: a new password, its projects
    r = d.request("PATCH", API + "/users/root", auth=U, json={"password": "battery staple"})
    assert r.status_code == 200, r.text
    U = ("root", "battery staple")
    r = d.request("PATCH", API + "/users/root", auth=U, json={"role": "admin", "projects": []})
    assert r.status_code == 200, r.text
    kinds = {e["type"] for e in d.request("GET", API + "/events", auth=U,
                                          params={"limit": 200}).json()["events"]}
    assert {"user.delete_refused", "user.update_refused", "user.updated"} <= kinds, kinds
    # a token of its own is another admin credential: then the user may go
    tok = make_token(d, "admin", auth=U, name="successor")
    T = bearer(tok["token"])
    assert d.request("DELETE", API + "/users/root", auth=U).status_code == 204
    assert_still_closed(d)
    assert_last_admin_refused(d.request("DELETE", f"{API}/tokens/{tok['id']}", headers=T),
                              "revoke the successor")


def test_a_second_admin_lets_the_first_go(spiderd):
    d = spiderd()
    first = make_token(d, "admin", name="first")
    second = make_token(d, "admin", bearer(first["token"]), name="second")
    go_public(d)
    # a token revoking itself, with another admin left
    S = bearer(second["token"])
    assert d.request("DELETE", f"{API}/tokens/{first['id']}", headers=S).status_code == 204
    assert_still_closed(d)
    assert_last_admin_refused(d.request("DELETE", f"{API}/tokens/{second['id']}", headers=S),
                              "revoke the second, now the last")
    # a user admin counts as much as a token: demoted once it exists
    make_user(d, "ops", "a long password", "admin", headers=S)
    assert d.request("PATCH", API + "/users/ops", headers=S, json={"role": "run"}).status_code == 200
    assert_last_admin_refused(d.request("DELETE", f"{API}/tokens/{second['id']}", headers=S),
                              "revoke with a run user left")
    assert [e["data"]["token"] for e in events(d, S, "token.revoked")] == [first["id"]]


def test_insecure_lets_the_last_admin_go(spiderd):
    d = spiderd()
    tok = make_token(d, "admin", name="root")
    go_public(d, insecure="on")
    r = d.request("DELETE", f"{API}/tokens/{tok['id']}", headers=bearer(tok["token"]))
    assert r.status_code == 204, r.text
    # which is what --insecure accepts: anyone is an admin again
    assert d.request("GET", API + "/auth/whoami").json()["kind"] == "anonymous"


def test_loopback_or_a_configured_login_lets_the_last_admin_go(spiderd):
    d = spiderd()
    tok = make_token(d, "admin", name="root")
    r = d.request("DELETE", f"{API}/tokens/{tok['id']}", headers=bearer(tok["token"]))
    assert r.status_code == 204, r.text
    # a [scrapyd] login is an admin credential the API cannot delete
    d2 = spiderd(scrapyd={"username": "op", "password": "pw"})
    tok = make_token(d2, "admin", name="root")
    d2.auth = None
    go_public(d2)
    r = d2.request("DELETE", f"{API}/tokens/{tok['id']}", headers=bearer(tok["token"]))
    assert r.status_code == 204, r.text
    assert_still_closed(d2)
    assert d2.request("GET", API + "/status", auth=("op", "pw")).status_code == 200


@shared
def test_two_nodes_removing_the_two_last_admins_at_once_leave_one(spiderd, tmp_path):
    """Each node revokes the other's admin token at the same moment, round
    after round: the store decides, so never both."""
    (a, b), _ = cluster(spiderd, 2, tmp_path, spiderd={"auth_fail_limit": 0})
    root = make_token(a, "admin", name="root")
    for d in (a, b):
        go_public(d)
    for rnd in range(6):
        R = bearer(root["token"])
        x = make_token(a, "admin", R, name=unique("x"))
        y = make_token(a, "admin", R, name=unique("y"))
        assert a.request("DELETE", f"{API}/tokens/{root['id']}", headers=R).status_code == 204
        # both nodes know both tokens before they race
        for d in (a, b):
            wait_for(lambda d=d: all(d.request("GET", API + "/auth/whoami",
                                               headers=bearer(t["token"])).status_code == 200
                                     for t in (x, y)), timeout(10), "both tokens known")
        go = threading.Barrier(2)
        out = {}

        def revoke(d, victim, by, key):
            go.wait()
            out[key] = d.request("DELETE", f"{API}/tokens/{victim['id']}",
                                 headers=bearer(by["token"]))

        ts = [threading.Thread(target=revoke, args=(a, y, x, "a")),
              threading.Thread(target=revoke, args=(b, x, y, "b"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        codes = sorted(r.status_code for r in out.values())
        assert codes in ([204, 401], [204, 409]), (rnd, [r.text for r in out.values()])
        root = x if out["a"].status_code == 204 else y
        # one admin is left, it works on both nodes, anonymous callers are still refused
        for d in (a, b):
            assert_still_closed(d)
            wait_for(lambda d=d: d.request("GET", API + "/auth/whoami",
                                           headers=bearer(root["token"])).status_code == 200,
                     timeout(10), "the survivor to work")


def test_a_credential_gone_behind_the_nodes_back_opens_only_its_own_machine(spiderd):
    """The last credential can still vanish while a public node runs (removed
    through another node, or from the store by hand): anonymous callers from
    elsewhere are then refused, not made admins; the node's own machine may
    still come in, to make a new admin token."""
    d = spiderd()
    tok = make_token(d, "admin", name="root")
    go_public(d, trusted_proxies="127.0.0.1")
    con = d.db()
    try:
        con.execute("DELETE FROM principals")
        con.execute("UPDATE meta SET value = 'gone-1' WHERE key = 'auth.gen'")
        con.commit()
    finally:
        con.close()
    wait_for(lambda: d.request("GET", API + "/status").status_code == 200, timeout(15),
             "the node to read that no credential is left")
    far = {"X-Forwarded-For": "203.0.113.9"}  # a client beyond the trusted proxy on loopback
    r = d.request("GET", API + "/status", headers=far)
    assert r.status_code == 401, r.text
    assert "serves beyond loopback" in r.json()["error"]["message"], r.text
    assert d.request("POST", API + "/tokens", headers=far, json={"role": "admin"}).status_code == 401
    assert d.request("GET", "/daemonstatus.json", headers=far).status_code == 401
    # from the machine itself, a new admin token closes the node again
    again = make_token(d, "admin", name="again")
    assert d.request("GET", API + "/status", headers=far).status_code == 401
    r = d.request("GET", API + "/status", headers=dict(far, **bearer(again["token"])))
    assert r.status_code == 200, r.text
    assert tok["id"] != again["id"]
