"""The real daemon speaks sd_notify: READY=1 only once its HTTP port answers,
STOPPING=1 on SIGTERM, WATCHDOG=1 beats at half of WATCHDOG_USEC."""
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

BIN = os.environ.get("SPIDERD_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build", "spiderd")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def answers(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/daemonstatus.json", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture
def notify(tmp_path):
    path = str(tmp_path / "notify")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    yield s, path
    s.close()


def start(tmp_path, sock_name, **env):
    port = free_port()
    e = dict(os.environ, NOTIFY_SOCKET=sock_name, SPIDERD_CONFIG_FILES="/dev/null", **env)
    proc = subprocess.Popen([BIN, "serve", "--port", str(port)], cwd=tmp_path, env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return proc, port


def recv(s, timeout):
    s.settimeout(timeout)
    data, _ = s.recvfrom(4096)
    return dict(line.split("=", 1) for line in data.decode().splitlines())


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def test_ready_after_port_answers_and_stopping_on_sigterm(tmp_path, notify):
    s, path = notify
    proc, port = start(tmp_path, path)
    try:
        msg = recv(s, 20)
        # the message arrives only once the daemon serves: the port answers now
        assert answers(port), "READY=1 came before the HTTP port answered"
        assert msg["READY"] == "1"
        assert msg["MAINPID"] == str(proc.pid)
        assert str(port) in msg["STATUS"]
        proc.send_signal(signal.SIGTERM)
        msg = recv(s, 20)
        assert msg["STOPPING"] == "1"
        assert msg["STATUS"].startswith("draining"), msg  # drain_grace first
        assert proc.wait(30) == 0
    finally:
        stop(proc)


def test_nothing_is_sent_before_ready(tmp_path, notify):
    """Polls the port while waiting: no message at all before it answers."""
    s, path = notify
    proc, port = start(tmp_path, path)
    try:
        s.setblocking(False)
        deadline = time.time() + 20
        got = None
        while time.time() < deadline and got is None:
            try:
                got = s.recv(4096).decode()
            except BlockingIOError:
                time.sleep(0.005)
                continue
        assert got and got.startswith("READY=1")
        assert answers(port)
    finally:
        stop(proc)


def test_abstract_socket_and_watchdog(tmp_path):
    name = f"@spiderd-notify-{os.getpid()}"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + name[1:])
    proc, port = start(tmp_path, name, WATCHDOG_USEC="400000")
    try:
        assert recv(s, 20)["READY"] == "1"
        t0 = time.monotonic()
        beats = [recv(s, 5) for _ in range(3)]
        took = time.monotonic() - t0
        assert all(b == {"WATCHDOG": "1"} for b in beats)
        assert 0.3 < took < 2.0, took  # every 200 ms
        proc.send_signal(signal.SIGTERM)
        msgs = [recv(s, 10)]
        while "STOPPING" not in msgs[-1]:
            msgs.append(recv(s, 10))
        assert proc.wait(30) == 0
    finally:
        stop(proc)
        s.close()


def test_no_notify_socket_runs_as_before(tmp_path):
    port = free_port()
    e = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    e["SPIDERD_CONFIG_FILES"] = "/dev/null"
    proc = subprocess.Popen([BIN, "serve", "--port", str(port)], cwd=tmp_path, env=e,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while not answers(port) and time.time() < deadline:
            time.sleep(0.05)
        assert answers(port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        stop(proc)
