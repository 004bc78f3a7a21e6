"""What authentication costs a request, against a fresh real daemon.

  GET /daemonstatus.json with wrk (50 keep-alive connections, 5 s each):
    without authentication (the daemon has no user or token),
    with an API token (Authorization: Bearer),
    with a user's password (basic auth; checked once, then remembered),
  and the latency of a user's first request (the PBKDF2 check, off the
  loop) against the next one (remembered).

Usage: python3 bench/auth_bench.py BUILD/spiderd
"""
import base64
import json
import subprocess
import sys
import time
import urllib.request

from bench import Daemon


def call(url, method="GET", body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    h = dict(headers or {})
    if data is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data, h, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read()) if r.status != 204 else None


def rate(url, header=None):
    cmd_header = ["-H", header] if header else []
    subprocess.run(["wrk", "-t1", "-c50", "-d2s"] + cmd_header + [url], capture_output=True,
                   check=True)  # warm-up
    out = subprocess.run(["wrk", "-t1", "-c50", "-d5s"] + cmd_header + [url],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("Requests/sec:"):
            return float(line.split()[1])
    raise RuntimeError(out)


def main():
    binary = sys.argv[1]
    d = Daemon(binary, extra="auth_fail_limit = 0\n")
    try:
        url = d.url + "/daemonstatus.json"
        open_rate = rate(url)
        tok = call(d.url + "/api/v1/tokens", "POST", {"role": "admin", "name": "bench"})["token"]
        bearer = {"Authorization": "Bearer " + tok}
        call(d.url + "/api/v1/users", "POST",
             {"name": "bench", "password": "bench password", "role": "read"}, bearer)
        basic = "Basic " + base64.b64encode(b"bench:bench password").decode()
        t0 = time.perf_counter()
        call(d.url + "/api/v1/auth/whoami", headers={"Authorization": basic})
        first_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        call(d.url + "/api/v1/auth/whoami", headers={"Authorization": basic})
        next_ms = (time.perf_counter() - t0) * 1000
        token_rate = rate(url, "Authorization: Bearer " + tok)
        user_rate = rate(url, "Authorization: " + basic)
    finally:
        d.stop()
    print(f"daemonstatus.json, no authentication: {open_rate:,.0f} req/s")
    print(f"daemonstatus.json, API token:         {token_rate:,.0f} req/s "
          f"({token_rate / open_rate:.2f}x)")
    print(f"daemonstatus.json, user password:     {user_rate:,.0f} req/s "
          f"({user_rate / open_rate:.2f}x)")
    print(f"a user's first request (PBKDF2, 100,000 rounds, off the loop): {first_ms:.1f} ms; "
          f"the next: {next_ms:.1f} ms")


if __name__ == "__main__":
    main()
