"""A bucket seen through an independent client: Debian's awscli.

The tests check what spiderd wrote to object storage with `aws` rather than
with anything of spiderd's own. The server is tests/s3server.sh:

    srv = start_server(str(tmp_path / "s3"))   # dict: S3_ENDPOINT, S3_BUCKET, AWS_*
    put(srv, "a/b.log", b"...")
    assert keys(srv, "a/") == ["a/b.log"]
    stop_server(srv)

or the fixture `s3_server` (import it into a test module:
`from s3util import s3_server`), which starts a server of the test's own
and stops it afterwards, or `s3_server_module`, one for the whole module. Every function takes such a dict (at least
S3_ENDPOINT, S3_BUCKET and the AWS_* credentials) and passes it to `aws` as
environment and --endpoint-url, never through the caller's ~/.aws.
"""
import json
import os
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "s3server.sh")
# Debian's awscli, not whatever `aws` comes first on PATH.
AWS = os.environ.get("SPIDERD_TEST_AWS", "/usr/bin/aws")


def start_server(d, bucket="spiderd"):
    """Starts tests/s3server.sh in directory d (created); returns its settings
    as a dict, with "dir" added for stop_server."""
    out = subprocess.run([SERVER, "start", d, bucket], check=True,
                         capture_output=True, text=True).stdout
    srv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    srv["dir"] = d
    return srv


def stop_server(srv):
    subprocess.run([SERVER, "stop", srv["dir"]], check=False)


def cut_server(srv):
    """The endpoint goes away: connections are refused until resume_server.
    The objects are kept."""
    subprocess.run([SERVER, "cut", srv["dir"]], check=True)


def resume_server(srv):
    """The endpoint answers again, on the same port, over the same objects."""
    subprocess.run([SERVER, "resume", srv["dir"]], check=True)


def _own_server():
    top = tempfile.mkdtemp(prefix="spiderd-s3-")
    srv = start_server(os.path.join(top, "srv"))
    try:
        yield srv
    finally:
        stop_server(srv)
        os.rmdir(top)


@pytest.fixture
def s3_server():
    """A server of the test's own: its settings dict (see start_server)."""
    yield from _own_server()


@pytest.fixture(scope="module")
def s3_server_module():
    """One server for every test of a module (starting takes a few seconds)."""
    yield from _own_server()


def _env(srv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    for k, v in srv.items():
        if k.startswith("AWS_"):
            env[k] = v
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    # Nothing from the caller's own configuration, no pager, no prompts.
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_PAGER"] = ""
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


def aws(srv, *args, input=None, check=True):
    """Runs `aws ARGS --endpoint-url ...` against srv; returns the
    CompletedProcess (stdout as bytes). check=True raises with aws's
    stderr in the message."""
    cmd = [AWS, "--endpoint-url", srv["S3_ENDPOINT"], "--no-cli-pager", *args]
    p = subprocess.run(cmd, input=input, capture_output=True, env=_env(srv),
                       timeout=120)
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d: %s" % (" ".join(args), p.returncode,
                                                  p.stderr.decode(errors="replace")))
    return p


def objects(srv, prefix="", bucket=None):
    """Every object under prefix: a list of dicts with Key, Size, ETag,
    LastModified, sorted by key (all pages)."""
    args = ["s3api", "list-objects-v2", "--bucket", bucket or srv["S3_BUCKET"],
            "--output", "json"]
    if prefix:
        args += ["--prefix", prefix]
    out = aws(srv, *args).stdout
    found = json.loads(out).get("Contents", []) if out.strip() else []
    return sorted(found, key=lambda o: o["Key"])


def keys(srv, prefix="", bucket=None):
    """The keys under prefix, sorted."""
    return [o["Key"] for o in objects(srv, prefix, bucket)]


def get(srv, key, bucket=None):
    """The object's bytes; None where there is no such object."""
    # Asked first with HEAD: radosgw's error bodies have an empty Message,
    # which Debian's awscli reports as "argument of type 'NoneType' is not
    # iterable" instead of NoSuchKey; a HEAD's 404 has no body to parse.
    if head(srv, key, bucket) is None:
        return None
    with tempfile.NamedTemporaryFile() as f:
        aws(srv, "s3api", "get-object", "--bucket", bucket or srv["S3_BUCKET"],
            "--key", key, f.name, "--output", "json")
        return f.read()


def head(srv, key, bucket=None):
    """The object's metadata (ContentLength, ETag, Metadata...), or None."""
    p = aws(srv, "s3api", "head-object", "--bucket", bucket or srv["S3_BUCKET"],
            "--key", key, "--output", "json", check=False)
    if p.returncode != 0:
        if b"(404)" in p.stderr or b"Not Found" in p.stderr:
            return None
        raise AssertionError("head-object %s: %s" % (key, p.stderr.decode(errors="replace")))
    return json.loads(p.stdout)


def put(srv, key, data, bucket=None):
    """Writes data (bytes) as one object (a single PUT)."""
    with tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        aws(srv, "s3api", "put-object", "--bucket", bucket or srv["S3_BUCKET"],
            "--key", key, "--body", f.name, "--output", "json")


def upload(srv, path, key, bucket=None):
    """Copies a local file with `aws s3 cp`, which uses multipart upload
    for files over 8 MB."""
    aws(srv, "s3", "cp", "--only-show-errors", path,
        "s3://%s/%s" % (bucket or srv["S3_BUCKET"], key))


def delete(srv, key, bucket=None):
    aws(srv, "s3api", "delete-object", "--bucket", bucket or srv["S3_BUCKET"],
        "--key", key)


def make_bucket(srv, bucket):
    aws(srv, "s3api", "create-bucket", "--bucket", bucket)
