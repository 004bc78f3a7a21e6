"""`spiderd whoami`, `token ...` and `user ...`, and the credentials every
client command sends (--token, --token-file, SPIDERD_TOKEN, --user), run as
the real binary against a real daemon without auth configured on loopback.

The first token is made without credentials (what a fresh install on
loopback allows) and every later call uses it, so these tests hold whether or
not the daemon asks for credentials once a token exists."""

import datetime
import json
import os
import re
import subprocess

import pytest

from conftest import BIN, SANITIZER_MARKERS, timeout, unique

TOKEN_RE = re.compile(r"^sdt_([0-9a-f]{16})_\S+$")
REFUSED_TOKEN = ("spiderd: 401 Unauthorized: the daemon refused the token "
                 "(unknown, revoked or expired)\n")
REFUSED_PASSWORD = "spiderd: 401 Unauthorized: the daemon refused the username and password\n"


def run(d, *args, env=None, stdin=None, seconds=30):
    """`spiderd ARGS` from the daemon's directory, finding it through its
    scrapyd.conf, with no SPIDERD_* variable but those in env; stdin (text)
    is piped in (else /dev/null, so nothing waits on a terminal)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("SCRAPYD_", "SPIDERD_", "SCRAPY_"))}
    e["SPIDERD_CONFIG_FILES"] = d.conf_path if d else ""
    e.update(env or {})
    p = subprocess.run([BIN, *args], cwd=d.workdir if d else None, env=e,
                       input=stdin if stdin is not None else "",
                       capture_output=True, text=True, timeout=timeout(seconds))
    bad = [line for line in p.stderr.splitlines() if any(m in line for m in SANITIZER_MARKERS)]
    assert not bad, "sanitizer report from the CLI:\n" + p.stderr[-8000:]
    return p


def ok(d, *args, **kw):
    p = run(d, *args, **kw)
    assert p.returncode == 0, f"spiderd {' '.join(args)} -> {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def fields(out):
    """`whoami`'s "key:  value" lines as a dict."""
    return {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())}


def iso(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def d(module_spiderd):
    return module_spiderd(name="authcli")


@pytest.fixture(scope="module")
def bootstrap(d):
    """The first token: made with no credentials at all."""
    return run(d, "token", "create", "--role", "admin", "--name", "bootstrap")


@pytest.fixture(scope="module")
def admin(bootstrap):
    assert bootstrap.returncode == 0, bootstrap.stderr
    return bootstrap.stdout.strip()


def token_id(token):
    m = TOKEN_RE.match(token)
    assert m, token
    return m.group(1)


# ---- tokens --------------------------------------------------------------

def test_token_create_without_auth_on_loopback_prints_the_token_alone(d, bootstrap, admin):
    assert bootstrap.returncode == 0, bootstrap.stderr
    # Alone on stdout, one line: TOKEN=$(spiderd token create ...) works.
    assert bootstrap.stdout == admin + "\n"
    tid = token_id(admin)
    assert "shown only this once" in bootstrap.stderr and tid in bootstrap.stderr

    who = fields(ok(d, "whoami", "--token", admin))
    assert (who["kind"], who["role"]) == ("token", "admin")
    assert who["projects"].startswith("*")
    obj = json.loads(ok(d, "whoami", "--token", admin, "--json"))
    assert (obj["kind"], obj["role"], obj["projects"]) == ("token", "admin", [])


def test_scoped_token_list_and_revoke(d, admin):
    label = unique("ci ")
    p = run(d, "token", "create", "--role", "run", "--project", "news", "--name", label,
            "--expires", "1d", "--token", admin)
    assert p.returncode == 0, p.stderr
    run_token = p.stdout.strip()
    tid = token_id(run_token)

    who = json.loads(ok(d, "whoami", "--token", run_token, "--json"))
    assert (who["kind"], who["role"], who["projects"]) == ("token", "run", ["news"])
    assert fields(ok(d, "whoami", "--token", run_token))["projects"] == "news"

    # The table: the brief's columns, one row for the token, no secret.
    out = ok(d, "token", "list", "--token", admin)
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "NAME", "ROLE", "PROJECTS", "OWNER", "CREATED", "EXPIRES"]
    row = next(r for r in rows if r.split()[0] == tid)
    assert label in row
    after_label = row.split(label, 1)[1].split()
    assert after_label[:2] == ["run", "news"]
    assert "never" not in row  # it expires
    assert run_token not in out and run_token.split("_", 2)[2] not in out
    boot = next(r for r in rows if r.split()[0] == token_id(admin))
    assert boot.split()[1:4] == ["bootstrap", "admin", "*"]
    assert boot.rstrip().endswith("never")

    listed = json.loads(ok(d, "token", "list", "--token", admin, "--json"))
    t = next(t for t in listed["tokens"] if t["id"] == tid)
    assert (t["name"], t["role"], t["projects"]) == (label, "run", ["news"])
    assert "token" not in t
    lifetime = (iso(t["expires"]) - iso(t["created"])).total_seconds()
    assert abs(lifetime - 86400) < 120, t

    # --json shows the whole answer, the secret included.
    made = json.loads(ok(d, "token", "create", "--role", "read", "--json", "--token", admin))
    assert made["role"] == "read" and made["expires"] is None
    assert token_id(made["token"]) == made["id"]

    assert ok(d, "token", "revoke", tid, "--token", admin) == f"revoked token {tid}\n"
    assert ok(d, "token", "revoke", made["id"], "--token", admin) == f"revoked token {made['id']}\n"
    listed = json.loads(ok(d, "token", "list", "--token", admin, "--json"))
    assert tid not in [t["id"] for t in listed["tokens"]]
    p = run(d, "whoami", "--token", run_token)
    assert p.returncode == 1 and p.stdout == "" and p.stderr == REFUSED_TOKEN
    p = run(d, "token", "revoke", tid, "--token", admin)
    assert p.returncode == 1 and p.stderr.startswith("spiderd: ") and p.stdout == ""


# ---- users ---------------------------------------------------------------

def test_user_add_from_stdin_then_basic_auth_set_passwd_remove(d, admin, tmp_path):
    name, pw = unique("u"), "correct horse " + unique("")
    out = ok(d, "user", "add", name, "--role", "read", "--project", "news", "--token", admin,
             stdin=pw + "\n")
    assert out == f"created user {name} (role read, projects news)\n"

    who = fields(ok(d, "whoami", "--user", f"{name}:{pw}"))
    assert (who["actor"], who["kind"], who["role"], who["projects"]) == \
        (name, "user", "read", "news")
    # The password's trailing newline was the line end, not part of it.
    p = run(d, "whoami", "--user", f"{name}:{pw}\n")
    assert p.returncode == 1

    out = ok(d, "user", "list", "--token", admin)
    header, *rows = out.splitlines()
    assert header.split() == ["NAME", "ROLE", "PROJECTS", "CREATED"]
    assert next(r for r in rows if r.split()[0] == name).split()[1:3] == ["read", "news"]
    users = json.loads(ok(d, "user", "list", "--token", admin, "--json"))["users"]
    u = next(u for u in users if u["name"] == name)
    assert (u["role"], u["projects"]) == ("read", ["news"]) and "password" not in u

    out = ok(d, "user", "set", name, "--role", "run", "--all-projects", "--token", admin)
    assert out == f"updated user {name} (role run, projects *)\n"
    out = ok(d, "user", "set", name, "-p", "news", "-p", "blog", "--token", admin)
    assert out == f"updated user {name} (role run, projects news,blog)\n"
    who = json.loads(ok(d, "whoami", "--json", env={"SPIDERD_USER": name,
                                                     "SPIDERD_PASSWORD": pw}))
    assert (who["role"], sorted(who["projects"])) == ("run", ["blog", "news"])

    new = unique("pw-")
    (tmp_path / "pw").write_text(new + "\n")
    out = ok(d, "user", "passwd", name, "--password-file", str(tmp_path / "pw"), "--token", admin)
    assert out == f"changed the password of user {name}\n"
    p = run(d, "whoami", "--user", f"{name}:{pw}")
    assert p.returncode == 1 and p.stderr == REFUSED_PASSWORD
    assert fields(ok(d, "whoami", "-u", f"{name}:{new}"))["actor"] == name

    assert ok(d, "user", "remove", name, "--token", admin) == f"removed user {name}\n"
    p = run(d, "whoami", "--user", f"{name}:{new}")
    assert p.returncode == 1 and p.stderr == REFUSED_PASSWORD
    p = run(d, "user", "remove", name, "--token", admin)
    assert p.returncode == 1 and p.stderr.startswith("spiderd: ") and p.stdout == ""


def test_user_add_needs_a_password(d, admin):
    name = unique("u")
    p = run(d, "user", "add", name, "--role", "read", "--token", admin, stdin="")
    assert p.returncode == 1 and "no password on stdin" in p.stderr and p.stdout == ""
    users = json.loads(ok(d, "user", "list", "--token", admin, "--json"))["users"]
    assert name not in [u["name"] for u in users]


# ---- where the token comes from ------------------------------------------

def test_token_from_environment_and_file(d, admin, tmp_path):
    who = json.loads(ok(d, "whoami", "--json", env={"SPIDERD_TOKEN": admin}))
    assert (who["kind"], who["role"]) == ("token", "admin")
    # The option wins over the variable.
    bogus = "sdt_0123456789abcdef_" + "0" * 64
    assert json.loads(ok(d, "whoami", "--json", "--token", admin,
                         env={"SPIDERD_TOKEN": bogus}))["kind"] == "token"
    p = run(d, "whoami", env={"SPIDERD_TOKEN": bogus})
    assert p.returncode == 1 and p.stderr == REFUSED_TOKEN
    # A file keeps it out of `ps`; its trailing blanks are not part of it.
    (tmp_path / "token").write_text(admin + "  \n")
    who = json.loads(ok(d, "whoami", "--json", "--token-file", str(tmp_path / "token")))
    assert (who["kind"], who["role"]) == ("token", "admin")
    # Other commands send it too.
    assert "pending" in ok(d, "status", env={"SPIDERD_TOKEN": admin})


def test_a_wrong_token_fails_readably(d, admin):
    for token in ("sdt_0123456789abcdef_" + "0" * 64, "not-a-token"):
        p = run(d, "whoami", "--token", token)
        assert p.returncode == 1, p.stderr
        assert p.stdout == "" and p.stderr == REFUSED_TOKEN
        p = run(d, "token", "list", "--token", token)
        assert p.returncode == 1 and p.stderr == REFUSED_TOKEN
    # A token without the role: the daemon's reason, not a crash or a table.
    reader = ok(d, "token", "create", "--role", "read", "--token", admin).strip()
    p = run(d, "token", "create", "--role", "admin", "--token", reader)
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.startswith("spiderd: ") and len(p.stderr.splitlines()) == 1
    ok(d, "token", "revoke", token_id(reader), "--token", admin)


# ---- usage (no daemon needed) --------------------------------------------

def test_usage_errors():
    for args, message in [
        (("token", "create"), "--role is required: read, run, deploy or admin"),
        (("token", "create", "--role", "root"), "--role 'root': expected read, run, deploy or admin"),
        (("token", "create", "--role", "run", "--expires", "soon"), "--expires 'soon'"),
        (("user", "add", "x", "--role", "superuser"), "expected read, run, deploy or admin"),
        (("user", "add", "x", "--role", "read", "--password", "pw"), "unknown option '--password'"),
        (("user", "set", "x"), "nothing to change"),
        (("user", "set", "x", "-p", "a", "--all-projects"), "exclude each other"),
        (("whoami", "--user", "a:b", "--token", "t"), "--user and --token exclude each other"),
        (("whoami", "--token", "a", "--token-file", "/x"), "exclude each other"),
        (("token", "revoke"), "missing argument"),
        (("token", "frobnicate"), "unknown command 'token frobnicate'"),
    ]:
        p = run(None, *args, env={"SPIDERD_URL": "http://127.0.0.1:9"})
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert message in p.stderr and "usage:" in p.stderr, (args, p.stderr)
        assert p.stdout == ""

    p = run(None, "help", env={"SPIDERD_URL": "http://127.0.0.1:9"})
    for cmd in ("spiderd whoami", "spiderd token create", "spiderd token list",
                "spiderd token revoke", "spiderd user add", "spiderd user list",
                "spiderd user passwd", "spiderd user set", "spiderd user remove"):
        assert cmd in p.stdout, cmd
    p = run(None, "token", "create", "--help")
    assert p.returncode == 0 and "--token-file FILE" in p.stdout and "SPIDERD_TOKEN" in p.stdout
