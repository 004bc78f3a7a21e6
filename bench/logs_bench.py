"""/logs/ listing of a directory of 100,000 files: its time, the daemon's
peak memory during it (VmHWM reset before), and how long daemonstatus.json
waits meanwhile (another connection, one request at a time).

usage: bench/logs_bench.py BINARY DIR   (DIR is filled once and reused)"""
import os, sys, time, threading, socket, subprocess, shutil, statistics
binary, base = sys.argv[1], sys.argv[2]
logs = os.path.join(base, "logs", "p", "s")
if not os.path.isdir(logs):
    os.makedirs(logs)
    for i in range(100000):
        with open(os.path.join(logs, f"{i:032x}.log"), "w") as f:
            f.write("x" * (i % 5000))
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
with open(os.path.join(base, "scrapyd.conf"), "w") as f:
    f.write(f"[scrapyd]\nbind_address = 127.0.0.1\nhttp_port = {port}\n")
p = subprocess.Popen([binary, "serve"], cwd=base, env=dict(os.environ, SPIDERD_CONFIG_FILES=os.path.join(base, "scrapyd.conf")),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
import requests
for _ in range(100):
    try:
        requests.get(f"http://127.0.0.1:{port}/daemonstatus.json", timeout=1); break
    except Exception:
        time.sleep(0.1)
def status_mem():
    with open(f"/proc/{p.pid}/status") as f:
        t = f.read()
    import re
    return [int(re.search(k + r":\s+(\d+)", t).group(1)) / 1024 for k in ("VmRSS", "VmHWM")]
res = []
for run in range(3):
    lat, stop = [], False
    def poll():
        sess = requests.Session()
        while not stop:
            t = time.perf_counter(); sess.get(f"http://127.0.0.1:{port}/daemonstatus.json"); lat.append((time.perf_counter() - t) * 1000)
    th = threading.Thread(target=poll); th.start()
    time.sleep(0.2)
    with open(f"/proc/{p.pid}/clear_refs", "w") as f: f.write("5")
    rss0 = status_mem()[0]
    t = time.perf_counter(); r = requests.get(f"http://127.0.0.1:{port}/logs/p/s/"); dt = time.perf_counter() - t
    peak = status_mem()[1]
    time.sleep(0.2); stop = True; th.join()
    assert r.status_code == 200 and r.text.count("<tr class=") == 100000, r.status_code
    res.append((dt, max(lat), statistics.median(lat), len(r.content) / 1e6, peak - rss0))
p.terminate(); p.wait()
for dt, mx, med, mb, above in res:
    print(f"listing {dt:.2f} s, {mb:.1f} MB; daemonstatus.json meanwhile max {mx:.1f} ms (median {med:.2f} ms); peak RSS +{above:.1f} MB")
print("load", os.getloadavg())
