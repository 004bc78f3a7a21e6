"""A call to the daemon that runs the crawl, with its job's token: shared
by the spiders that use spiderd's API from inside a crawl."""
import json
import os
import urllib.error
import urllib.request


def call(method, path, body=None):
    """(status, parsed JSON or text) of a call to the daemon that runs us,
    with the job's token."""
    url = os.environ["SPIDERD_URL"].rstrip("/") + path
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    token = os.environ.get("SPIDERD_TOKEN")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text
