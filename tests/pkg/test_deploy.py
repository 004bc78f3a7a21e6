#!/usr/bin/python3
"""Static checks of the container and cluster files, which cannot be built
or run without a Docker daemon or a Kubernetes cluster:

- Dockerfile: the build stage runs the Makefile's build (same CMake build
  type, `make build`), with the install paths debian/rules compiles in; the
  runtime stage has every library the built binary links (and the ones it
  dlopens), Scrapy, a non-root user, EXPOSE and HEALTHCHECK on routes spiderd
  serves; .dockerignore keeps out builds but nothing the build reads.
- deploy/compose.yaml: parses; every secret, volume and depends_on a service
  names exists; PostgreSQL has a healthcheck; node names differ; the store
  drop-in lands where SPIDERD_CONFIG_FILES reads; the nodes' object store is
  the S3 service's port and the bucket its init makes, their credentials a
  mounted secret file (not the environment), logs and items on the node's
  volume; every SPIDERD_* variable is a config key; compose-secrets.sh's
  keys agree between the store's list and the nodes' credentials.
- deploy/k8s/*.yaml: parse; each object has its required fields; selectors
  match the pod labels; probes and the Service point at the named port whose
  number is the ConfigMap's http_port; mounted ConfigMap/Secret keys exist;
  logs and items go to the object store, whose credentials file is the
  mounted Secret's key; the preStop hook is the ConfigMap's script and the
  grace period covers it, the drain, the stop and the last uploads; the
  built daemon starts with the ConfigMap's file and the Secret's drop-in
  (and, where the tree has object_store, a throwaway S3 server with the
  ConfigMap's bucket and the Secret's credentials format), and the preStop
  script drains it.
- deploy/k8s-autoscale/: the KEDA ScaledObject and the HorizontalPodAutoscaler
  (with its prometheus-adapter rule) scale the Deployment spiderd on
  spiderd_store_jobs, pending and running, a metric the tree exports; the
  overlays build on deploy/k8s and leave the replica count to the
  autoscaler.

  tests/pkg/test_deploy.py [SPIDERD_BIN]     (prints 'N passed, N failed')
"""
import base64
import configparser
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "spiderd")
passed, failed, skipped = 0, 0, 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {what}")
    else:
        failed += 1
        print(f"FAIL: {what}")
    return cond


def skip(what):
    global skipped
    skipped += 1
    print(f"skip: {what}")


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def served_routes():
    """The paths the tree registers (string literals of the route tables)."""
    text = ""
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True):
        with open(path) as f:
            text += f.read()
    return text


SRC = served_routes()
CONFIG_KEYS = set(re.findall(r"KEY\(SEC_\w+, (\w+),", read("src/config.c")))
# The object store keys come with the daemon's object storage: a tree
# without them skips what needs them (as a probe's route, above).
HAS_OBJECT_STORE = "object_store" in CONFIG_KEYS


def route_exists(path):
    name = path.lstrip("/")
    return f'"{path}"' in SRC or f'"{name}"' in SRC


# ---------------------------------------------------------------- Dockerfile
def dockerfile_instructions(text):
    """(stage index, INSTRUCTION, argument) with continuations joined."""
    text = re.sub(r"\\\n", " ", text)
    out, stage = [], -1
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, arg = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            stage += 1
        out.append((stage, instr, arg.strip()))
    return out


def test_dockerfile():
    text = read("Dockerfile")
    ins = dockerfile_instructions(text)
    froms = [a for _, i, a in ins if i == "FROM"]
    check(len(froms) == 2, f"Dockerfile: two stages ({froms})")
    check(froms[0].startswith("debian:12 ") and froms[0].endswith(" AS build"),
          "build stage: FROM debian:12 AS build")
    check(froms[1].startswith("debian:12-slim"), "runtime stage: FROM debian:12-slim")
    runs = {0: " ".join(a for s, i, a in ins if i == "RUN" and s == 0),
            1: " ".join(a for s, i, a in ins if i == "RUN" and s == 1)}

    makefile = read("Makefile")
    m = re.search(r"^\$\(BUILD\)/build\.ninja:\n\t(.*)$", makefile, re.M)
    make_cmake = m.group(1) if check(m, "Makefile: the configure rule found") else ""
    bt = re.search(r"-DCMAKE_BUILD_TYPE=(\S+)", make_cmake)
    bt = bt.group(1) if bt else None
    check(f"-DCMAKE_BUILD_TYPE={bt}" in runs[0],
          f"build stage configures with the Makefile's build type ({bt})")
    check("-G Ninja" in runs[0] and "-G Ninja" in make_cmake, "both generate for Ninja")
    check(re.search(r"\bmake build\b", runs[0]) is not None, "build stage runs `make build`")
    bdir = re.search(r"\bmake build\b.*?\bBUILD=(\S+)", runs[0])
    conf_dir = re.search(r"cmake -S \. -B (\S+)", runs[0])
    check(bdir and conf_dir and bdir.group(1) == conf_dir.group(1),
          "`make build` builds the directory configured before it (so it keeps its paths)")
    check("DEB_PKGS=" in runs[0], "`make build DEB_PKGS=`: packages come from the apt-get line")
    check("cmake --install" in runs[0], "build stage installs with cmake --install")

    # The install paths compiled in agree with debian/rules and CMake's install rules.
    rules = read("debian/rules")
    for var in ("SPIDERD_UI_DIR", "SPIDERD_PYTHONDIR", "SPIDERD_DEFAULT_PYTHON"):
        d = re.search(rf"-D{var}=(\S+)", runs[0])
        r = re.search(rf"-D{var}=(\S+)", rules)
        check(d and r and d.group(1) == r.group(1), f"{var} as in debian/rules ({d and d.group(1)})")
    cm = read("CMakeLists.txt")
    check("DESTINATION lib/spiderd/python" in cm and "/usr/lib/spiderd/python" in runs[0],
          "runner installed where SPIDERD_PYTHONDIR points")
    check("${CMAKE_INSTALL_DATADIR}/spiderd/ui" in cm and "/usr/share/spiderd/ui" in runs[0],
          "console installed where SPIDERD_UI_DIR points")
    check("-DCMAKE_INSTALL_PREFIX=/usr" in runs[0], "installs under /usr (config in /etc/spiderd)")

    # Every library -dev package the Makefile lists is in the build stage.
    pkgs = re.search(r"^DEB_PKGS := (.*?)(?:\n\n|\n#)", makefile, re.M | re.S)
    pkgs = pkgs.group(1).replace("\\\n", " ").split() if pkgs else []
    devs = [p for p in pkgs if p.startswith("lib") and p.endswith("-dev")] + ["cmake", "ninja-build", "pkg-config"]
    missing = [p for p in devs if not re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", runs[0])]
    check(devs and not missing, f"build stage has the Makefile's build packages (missing: {missing})")
    check(" nodejs" in runs[0] and " npm" in runs[0], "build stage has node and npm for the console")

    # The runtime stage has what the binary links and dlopens.
    if os.path.exists(BIN) and subprocess.run(["which", "objdump"], capture_output=True).returncode == 0:
        needed = re.findall(r"NEEDED\s+(\S+)", subprocess.run(
            ["objdump", "-p", BIN], capture_output=True, text=True).stdout)
        want = set()
        for lib in needed:
            r = subprocess.run(["dpkg", "-S", f"*/{lib}"], capture_output=True, text=True)
            for line in r.stdout.splitlines():
                pkg = line.split(":")[0]
                if not pkg.startswith("libc6"):
                    want.add(pkg)
                break
        missing = sorted(p for p in want if not re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w.-])", runs[1]))
        check(want and not missing, f"runtime stage has the linked libraries {sorted(want)} (missing: {missing})")
    else:
        skip(f"linked libraries: no {BIN} or objdump")
    for p in ("libicu72", "libcurl4", "libssl3", "libpq5", "libarchive13", "python3", "python3-scrapy"):
        check(re.search(rf"(?<![\w-]){p}(?![\w-])", runs[1]), f"runtime stage installs {p}")
    check(not re.search(r"-dev\b", runs[1]), "runtime stage installs no -dev package")

    user = [a for s, i, a in ins if i == "USER" and s == 1]
    check(user and not user[-1].startswith(("root", "0")), f"runs as a non-root user ({user})")
    check("useradd --system --uid 10001" in runs[1], "user spiderd has uid 10001 (k8s runAsUser)")
    expose = [a for s, i, a in ins if i == "EXPOSE" and s == 1]
    check(expose == ["6800"], "EXPOSE 6800")
    env = " ".join(a for s, i, a in ins if i == "ENV" and s == 1)
    check("SPIDERD_BIND_ADDRESS=0.0.0.0" in env, "binds all addresses inside the container")
    check("SPIDERD_CONFIG_FILES=/etc/spiderd/scrapyd.conf:/etc/spiderd/conf.d" in env,
          "reads /etc/spiderd/scrapyd.conf and conf.d")
    check("SPIDERD_HTTP_PORT=6800" in env, "SPIDERD_HTTP_PORT=6800")
    hc = [a for s, i, a in ins if i == "HEALTHCHECK"]
    hpath = re.search(r"127\.0\.0\.1:[^/]*(/[\w./]+)", hc[0]) if hc else None
    want_path = "/healthz" if route_exists("/healthz") else "/daemonstatus.json"
    check(hpath and hpath.group(1) == want_path,
          f"HEALTHCHECK on {want_path} (found {hpath and hpath.group(1)})")
    check(route_exists(hpath.group(1)) if hpath else False, "the HEALTHCHECK's route is served by src/")
    check(any(i == "ENTRYPOINT" and "/usr/bin/spiderd" in a for _, i, a in ins), "ENTRYPOINT /usr/bin/spiderd")
    check(("STOPSIGNAL", "SIGTERM") in [(i, a) for _, i, a in ins], "STOPSIGNAL SIGTERM (graceful stop)")

    ignore = [l.strip() for l in read(".dockerignore").splitlines() if l.strip() and not l.startswith("#")]
    for p in (".git", "build", "ui/node_modules", "ui/dist"):
        check(p in ignore, f".dockerignore excludes {p}")
    for needed_path in ("src", "python", "ui/src", "ui/package.json", "ui/package-lock.json", "docs",
                        "cmake", "CMakeLists.txt", "Makefile", "deploy/scrapyd.conf"):
        hit = [p for p in ignore if needed_path == p or needed_path.startswith(p.rstrip("/") + "/")]
        check(not hit, f".dockerignore keeps {needed_path} (the build reads it)")


# ------------------------------------------------------------------- compose
def test_compose():
    path = os.path.join(ROOT, "deploy", "compose.yaml")
    with open(path) as f:
        doc = yaml.safe_load(f)
    check(isinstance(doc, dict) and "services" in doc, "compose.yaml parses, has services")
    services, secrets, volumes = doc["services"], doc.get("secrets", {}), doc.get("volumes", {})
    for name, svc in services.items():
        for s in svc.get("secrets", []):
            src = s if isinstance(s, str) else s["source"]
            check(src in secrets, f"{name}: secret {src} is defined")
        for v in svc.get("volumes", []):
            src = v.split(":")[0] if isinstance(v, str) else v.get("source")
            if not src.startswith((".", "/")):
                check(src in volumes, f"{name}: volume {src} is defined")
        for dep in (svc.get("depends_on") or {}):
            check(dep in services, f"{name}: depends on existing service {dep}")
    for sname, s in secrets.items():
        f = s.get("file")
        check(f and f.startswith("./secrets/"), f"secret {sname} from deploy/secrets/")
    gen = read("deploy/compose-secrets.sh")
    check("[scrapyd]" in gen and "password = " in gen,
          "compose-secrets.sh gives the nodes a login (a public bind needs authentication)")
    for sname, s in secrets.items():
        base = os.path.basename(s.get("file", ""))
        check(f'$dir/{base}"' in gen, f"compose-secrets.sh makes {base}")
    pg = services.get("postgres", {})
    check("healthcheck" in pg and "pg_isready" in str(pg["healthcheck"]["test"]),
          "postgres has a pg_isready healthcheck")
    nodes = {n: s for n, s in services.items() if n.startswith("spiderd")}
    check(len(nodes) == 3, f"three spiderd nodes ({sorted(nodes)})")
    names, hostports = set(), set()
    dockerfile_env = read("Dockerfile")
    for n, s in nodes.items():
        env = s.get("environment", {})
        names.add(env.get("SPIDERD_NODE_NAME"))
        check(env.get("SPIDERD_NODE_URL") == f"http://{n}:6800", f"{n}: node_url reaches it by service name")
        check(s.get("depends_on", {}).get("postgres", {}).get("condition") == "service_healthy",
              f"{n}: waits for a healthy postgres")
        ctx = os.path.normpath(os.path.join(ROOT, "deploy", s["build"]["context"]))
        check(os.path.exists(os.path.join(ctx, s["build"]["dockerfile"])), f"{n}: build context has the Dockerfile")
        tgt = [x["target"] for x in s.get("secrets", []) if isinstance(x, dict)]
        check(tgt and all(t.startswith("/etc/spiderd/conf.d/") for t in tgt) and
              "/etc/spiderd/conf.d" in dockerfile_env, f"{n}: the store drop-in is in a directory spiderd reads")
        for p in s.get("ports", []):
            hostports.add(p.rsplit(":", 1)[0])
            check(p.endswith(":6800"), f"{n}: publishes container port 6800 ({p})")
        check(s.get("volumes") and s["volumes"][0].endswith(":/var/lib/spiderd"), f"{n}: state volume on /var/lib/spiderd")
    check(len(names) == 3 and None not in names, f"node names differ ({sorted(map(str, names))})")
    check(len(hostports) == 3, "host ports differ")
    compose_object_store(services, secrets, nodes)


def compose_object_store(services, secrets, nodes):
    """The nodes' logs and items go to the compose file's S3 service."""
    init = services.get("s3-bucket", {})
    s3 = services.get("s3", {})
    check(s3.get("image") and init.get("image"), "an S3 service and a bucket-making init")
    script = " ".join(init.get("command") or [])
    made = set(re.findall(r"create-bucket --bucket (\S+)", script))
    check("s3" in (init.get("depends_on") or []), "the bucket init waits for the S3 service")
    port = re.search(r"-s3\.port=(\d+)", " ".join(s3.get("command") or []))
    for n, svc in nodes.items():
        env = svc.get("environment", {})
        dep = (svc.get("depends_on") or {}).get("s3-bucket", {})
        check(dep.get("condition") == "service_completed_successfully",
              f"{n}: starts once the bucket exists")
        url = env.get("SPIDERD_OBJECT_STORE", "")
        m = re.match(r"s3://([^/]+)/(\S+)$", url)
        check(m and m.group(1) in made, f"{n}: object_store {url} is the bucket the init makes {sorted(made)}")
        ep = re.match(r"http://([\w-]+):(\d+)$", env.get("SPIDERD_OBJECT_STORE_ENDPOINT", ""))
        check(ep and ep.group(1) in services and port and ep.group(2) == port.group(1),
              f"{n}: object_store_endpoint is the S3 service's port")
        check(ep and f"--endpoint-url http://{ep.group(1)}:{ep.group(2)}" in script,
              f"{n}: the init makes the bucket at the same endpoint")
        cred = env.get("SPIDERD_OBJECT_STORE_CREDENTIALS", "")
        mounted = {(f"/run/secrets/{x}" if isinstance(x, str) else x.get("target") or
                    f"/run/secrets/{x['source']}") for x in svc.get("secrets", [])}
        check(cred in mounted, f"{n}: object_store_credentials {cred} is a mounted secret")
        check(not any(k.startswith("AWS_") for k in env),
              f"{n}: no AWS_* variables (crawls inherit the environment)")
        for k in ("SPIDERD_LOGS_DIR", "SPIDERD_ITEMS_DIR"):
            check(env.get(k, "").startswith("/var/lib/spiderd/"), f"{n}: {k} on the node's volume (the spool)")
        for k in env:
            key = k[len("SPIDERD_"):].lower()
            if not k.startswith("SPIDERD_") or key in ("config_files",):
                continue
            if key.startswith("object_store") and not HAS_OBJECT_STORE:
                skip(f"{n}: {k}: this tree's spiderd has no object_store yet")
            else:
                check(key in CONFIG_KEYS, f"{n}: {k} is a config key ({key})")

    # compose-secrets.sh, run on a copy: the store's key list and the
    # credentials files agree, and spiderd's key may touch its bucket only.
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="spiderd-compose-")
    try:
        shutil.copy(os.path.join(ROOT, "deploy", "compose-secrets.sh"), tmp)
        r = subprocess.run(["sh", os.path.join(tmp, "compose-secrets.sh")], capture_output=True, text=True)
        check(r.returncode == 0, "compose-secrets.sh runs " + r.stderr.strip())
        sec = os.path.join(tmp, "secrets")
        for sname, s in secrets.items():
            check(os.path.exists(os.path.join(sec, os.path.basename(s["file"]))),
                  f"compose-secrets.sh made {s['file']}")

        def creds(name):
            c = configparser.ConfigParser()
            c.read(os.path.join(sec, name))
            return (c.get("default", "aws_access_key_id", fallback=None),
                    c.get("default", "aws_secret_access_key", fallback=None))
        with open(os.path.join(sec, "seaweedfs_s3.json")) as f:
            ids = {i["name"]: i for i in json.load(f)["identities"]}
        bucket = re.match(r"s3://([^/]+)/", next(iter(nodes.values()))["environment"]["SPIDERD_OBJECT_STORE"])
        for who, file in (("spiderd", "object_store_credentials"), ("admin", "s3_admin_credentials")):
            c = ids.get(who, {}).get("credentials", [{}])[0]
            check(all(creds(file)) and creds(file) == (c.get("accessKey"), c.get("secretKey")),
                  f"{file} holds the S3 store's {who} key")
        acts = ids.get("spiderd", {}).get("actions", [])
        check(acts and bucket and all(a.endswith(":" + bucket.group(1)) for a in acts),
              f"spiderd's key acts on bucket {bucket and bucket.group(1)} only ({acts})")
        before = creds("object_store_credentials")
        r2 = subprocess.run(["sh", os.path.join(tmp, "compose-secrets.sh")], capture_output=True, text=True)
        check(r2.returncode == 0 and creds("object_store_credentials") == before,
              "compose-secrets.sh runs again and keeps the keys it made")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------- k8s
REQUIRED = {
    "Deployment": ["spec.selector.matchLabels", "spec.template.metadata.labels", "spec.template.spec.containers"],
    "Service": ["spec.selector", "spec.ports"],
    "ConfigMap": ["data"],
    "Secret": [],
    "PodDisruptionBudget": ["spec.selector.matchLabels"],
    "Kustomization": ["resources"],
}


def dig(obj, dotted):
    for k in dotted.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return None
        obj = obj[k]
    return obj


def test_k8s():
    objs, files = {}, sorted(glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml")))
    for path in files:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                kind = doc.get("kind")
                rel = os.path.relpath(path, ROOT)
                check(doc.get("apiVersion") and kind in REQUIRED, f"{rel}: apiVersion and a known kind ({kind})")
                if kind != "Kustomization":
                    check(dig(doc, "metadata.name"), f"{rel}: metadata.name")
                for field in REQUIRED.get(kind, []):
                    check(dig(doc, field) is not None, f"{rel}: {kind} has {field}")
                objs.setdefault(kind, []).append(doc)
    kust = objs["Kustomization"][0]
    listed = set(kust["resources"])
    present = {os.path.basename(p) for p in files} - {"kustomization.yaml"}
    check(listed == present, f"kustomization lists every manifest ({sorted(present)})")
    if secret := objs.get("Secret"):
        check(secret[0].get("data") or secret[0].get("stringData"), "Secret has data")

    dep = objs["Deployment"][0]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    sel = dep["spec"]["selector"]["matchLabels"]
    check(all(labels.get(k) == v for k, v in sel.items()), "Deployment selector matches its pods")
    svc = objs["Service"][0]
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "Service selects the pods")
    pdb = objs["PodDisruptionBudget"][0]
    check(all(labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items()), "PDB selects the pods")
    check(("maxUnavailable" in pdb["spec"]) != ("minAvailable" in pdb["spec"]), "PDB sets one of max/minAvailable")
    check(dep["spec"]["replicas"] > 1, "more than one replica (the PDB then allows a drain)")

    cm = {c["metadata"]["name"]: c for c in objs["ConfigMap"]}
    secrets = {s["metadata"]["name"]: s for s in objs["Secret"]}
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    check(c.get("image") and c.get("name"), "container has name and image")
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
    conf_text = cm["spiderd-config"]["data"]["scrapyd.conf"]
    conf = configparser.ConfigParser()
    conf.read_string(conf_text)
    http_port = conf.getint("scrapyd", "http_port", fallback=6800)
    check(conf.get("scrapyd", "bind_address") == "0.0.0.0", "ConfigMap binds 0.0.0.0 (probes come from the kubelet)")
    # a node on 0.0.0.0 refuses to serve without authentication (or --insecure)
    login = configparser.ConfigParser()
    for sec in secrets.values():
        for text in (sec.get("stringData") or {}).values():
            login.read_string(text)
    check(login.get("scrapyd", "username", fallback="") and
          login.get("scrapyd", "password", fallback=""),
          "the Secret gives the nodes a login (a public bind needs authentication)")
    check("--insecure" not in json.dumps(c), "the pods do not run --insecure")
    for probe_name, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe = c.get(probe_name, {}).get("httpGet", {})
        check(probe.get("path") == path, f"{probe_name} on {path}")
        port = probe.get("port")
        num = ports.get(port, port)
        check(num == http_port, f"{probe_name} port {port} is http_port {http_port}")
        if route_exists(path):
            check(True, f"{path} is served by src/")
        else:
            skip(f"{path} is not served by this tree's src/ yet: the {probe_name} fails until it is")
    tp = svc["spec"]["ports"][0]["targetPort"]
    check(ports.get(tp, tp) == http_port, f"Service targetPort {tp} is http_port {http_port}")
    env = {e["name"]: e for e in c.get("env", [])}
    check(env.get("SPIDERD_CONFIG_FILES", {}).get("value") == "/etc/spiderd/scrapyd.conf:/etc/spiderd/conf.d",
          "SPIDERD_CONFIG_FILES names the mounted config")
    check(dig(env.get("SPIDERD_NODE_NAME", {}), "valueFrom.fieldRef.fieldPath") == "metadata.name",
          "node_name is the pod's name")
    check("$(POD_IP)" in env.get("SPIDERD_NODE_URL", {}).get("value", "") and
          list(env).index("POD_IP") < list(env).index("SPIDERD_NODE_URL"),
          f"node_url from the pod IP on port {http_port}")
    check(f":{http_port}" in env.get("SPIDERD_NODE_URL", {}).get("value", ""), "node_url's port is http_port")

    vols = {v["name"]: v for v in pod["volumes"]}
    for m in c["volumeMounts"]:
        check(m["name"] in vols, f"mount {m['mountPath']}: volume {m['name']} exists")
        v = vols.get(m["name"], {})
        if "configMap" in v:
            ref = v["configMap"]["name"]
            check(ref in cm, f"ConfigMap {ref} exists")
            if "subPath" in m:
                check(m["subPath"] in cm.get(ref, {}).get("data", {}), f"ConfigMap {ref} has key {m['subPath']}")
        if "secret" in v:
            ref = v["secret"]["secretName"]
            check(ref in secrets, f"Secret {ref} exists")
            keys = set((secrets.get(ref, {}).get("stringData") or {}) | (secrets.get(ref, {}).get("data") or {}))
            for item in v["secret"].get("items", []):
                check(item["key"] in keys, f"Secret {ref} has key {item['key']}")
            if m["mountPath"] != "/etc/spiderd/conf.d":
                continue  # the object store's credentials: checked below
            for item in v["secret"].get("items", []):
                check(item["path"].endswith(".conf"), f"{item['path']}: a drop-in name")
            store = configparser.ConfigParser()
            for k in keys:
                store.read_string((secrets[ref].get("stringData") or {}).get(k, ""))
            check(store.get("spiderd", "store", fallback="").startswith(("postgresql://", "redis://")),
                  "the Secret holds a shared store URL")
    check(any(m["mountPath"] == "/etc/spiderd/conf.d" and "secret" in vols.get(m["name"], {})
              for m in c["volumeMounts"]), "the store drop-in mounts on /etc/spiderd/conf.d")
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    for d in ("/var/lib/spiderd", "/var/log/spiderd", "/tmp"):
        check(d in mounts, f"{d} writable (readOnlyRootFilesystem)")
    dirs = {conf.get("scrapyd", k) for k in ("eggs_dir", "dbs_dir", "logs_dir", "items_dir")}
    check(all(any(d.startswith(m + "/") or d == m for m in mounts) for d in dirs),
          f"eggs/dbs/logs/items dirs on writable mounts ({sorted(dirs)})")
    sc = pod.get("securityContext", {})
    check(sc.get("runAsNonRoot") and sc.get("runAsUser") == 10001, "runs as uid 10001, non-root")
    check(c["securityContext"].get("allowPrivilegeEscalation") is False, "no privilege escalation")
    k8s_object_store(conf, c, vols, secrets)
    grace = conf.getfloat("spiderd", "shutdown_grace", fallback=10) + \
        conf.getfloat("spiderd", "drain_grace", fallback=30)
    check(pod.get("terminationGracePeriodSeconds", 30) > grace,
          f"terminationGracePeriodSeconds > drain_grace + shutdown_grace ({grace})")
    k8s_prestop(pod, c, cm, vols, grace)


# The daemon's last uploads at a stop take at most this long (the rest
# waits for the next start, which an ended pod does not get).
STOP_UPLOAD_S = 5


def k8s_object_store(conf, c, vols, secrets):
    """Logs and items go to the bucket: object_store is set, items are
    written, and the credentials file is the mounted Secret's key."""
    url = conf.get("spiderd", "object_store", fallback="")
    check(re.match(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?$", url),
          f"ConfigMap sets object_store to s3://BUCKET/PREFIX ({url})")
    check(conf.get("scrapyd", "items_dir", fallback="").startswith("/"),
          "ConfigMap sets items_dir (items are written, then uploaded)")
    if HAS_OBJECT_STORE:
        for k in conf["spiderd"]:
            if k.startswith("object_store"):
                check(k in CONFIG_KEYS, f"ConfigMap key {k} is one spiderd knows")
    else:
        skip("ConfigMap's object_store keys: this tree's spiderd has no object_store yet")
    endpoint = conf.get("spiderd", "object_store_endpoint", fallback="")
    check(not endpoint or re.match(r"https?://[^/]+$", endpoint), f"object_store_endpoint has no path ({endpoint})")
    path = conf.get("spiderd", "object_store_credentials", fallback="")
    found = None
    for m in c["volumeMounts"]:
        v = vols.get(m["name"], {})
        if "secret" not in v or not path.startswith(m["mountPath"].rstrip("/") + "/"):
            continue
        rel = path[len(m["mountPath"].rstrip("/")) + 1:]
        for item in v["secret"].get("items", []):
            if item["path"] == rel:
                found = (v["secret"]["secretName"], item["key"])
    check(found, f"object_store_credentials {path} is a key of a mounted Secret")
    if found:
        text = (secrets.get(found[0], {}).get("stringData") or {}).get(found[1], "")
        cred = configparser.ConfigParser()
        cred.read_string(text)
        check(cred.get("default", "aws_access_key_id", fallback="") and
              cred.get("default", "aws_secret_access_key", fallback=""),
              f"Secret {found[0]} holds an AWS credentials file ([default] key id and secret)")
    names = {e["name"] for e in c.get("env", [])}
    check(not any(n.startswith("AWS_") for n in names) and "envFrom" not in c,
          "no AWS_* variables in the pods (crawls inherit the environment)")


def k8s_prestop(pod, c, cm, vols, grace):
    """The preStop hook runs the ConfigMap's script, which drains and waits
    for the uploads; the grace period covers its wait, the drain, the stop
    and the last uploads."""
    cmd = dig(c, "lifecycle.preStop.exec.command") or []
    check(cmd[:1] == ["python3"] and len(cmd) == 3, f"preStop runs a python3 script ({cmd})")
    script = cmd[1] if len(cmd) > 1 else ""
    mount = [m for m in c["volumeMounts"] if m["mountPath"] == script]
    src = mount and vols.get(mount[0]["name"], {}).get("configMap", {}).get("name")
    key = mount and mount[0].get("subPath")
    text = cm.get(src, {}).get("data", {}).get(key) if src else None
    check(text, f"the preStop script {script} is ConfigMap key {key}")
    try:
        compile(text or "", "prestop.py", "exec")
        check(True, "the preStop script compiles")
    except SyntaxError as e:
        check(False, f"the preStop script compiles: {e}")
    check('"spiderd", "drain"' in (text or ""), "the preStop script runs `spiderd drain`")
    metric = "spiderd_object_store_backlog_objects"
    check(metric in (text or ""), f"the preStop script waits on {metric}")
    if f'"{metric}"' in SRC:
        check(True, f"{metric} is exported by src/")
    else:
        skip(f"{metric} is not exported by this tree's src/ yet")
    wait = float(cmd[2]) if len(cmd) > 2 and re.match(r"^\d+(\.\d+)?$", cmd[2]) else 0
    check(wait > 0, f"the preStop hook's wait is bounded ({wait} s)")
    total = pod.get("terminationGracePeriodSeconds", 30)
    check(total > wait + grace + STOP_UPLOAD_S,
          f"terminationGracePeriodSeconds {total} > preStop {wait} + drain and stop {grace} + uploads {STOP_UPLOAD_S}")


def test_k8s_autoscale():
    """deploy/k8s-autoscale/: KEDA and HPA overlays scale the Deployment on
    the pending (and running) jobs metric the daemon exports."""
    base = {}
    for path in glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml")):
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d and d.get("kind") == "Deployment":
                    base = d
    dep_name = base["metadata"]["name"]
    ann = dig(base, "spec.template.metadata.annotations") or {}
    http = [p["containerPort"] for p in base["spec"]["template"]["spec"]["containers"][0].get("ports", [])
            if p.get("name") == "http"]
    check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/path") == "/metrics" and
          [int(ann.get("prometheus.io/port", 0))] == http,
          f"the pods are annotated for Prometheus (/metrics on port {http})")
    check(route_exists("/metrics"), "/metrics is served by src/")
    metrics_src = read("src/api/metrics.c")
    check('"spiderd_store_jobs"' in metrics_src and '"pending"' in metrics_src and '"running"' in metrics_src,
          "src/api/metrics.c exports spiderd_store_jobs{state=pending|running}")

    def objects(d):
        out = {}
        for path in sorted(glob.glob(os.path.join(d, "*.yaml"))):
            with open(path) as f:
                for doc in yaml.safe_load_all(f):
                    if doc and doc.get("kind"):
                        out.setdefault(doc["kind"], []).append(doc)
        return out

    def target_ok(ref, what):
        check(ref.get("name") == dep_name and ref.get("kind", "Deployment") == "Deployment" and
              ref.get("apiVersion", "apps/v1") == "apps/v1", f"{what} scales Deployment {dep_name}")

    def query_ok(q, what):
        check(re.search(r"\bspiderd_store_jobs\{[^}]*state=~\"pending\|running\"", q),
              f"{what}: spiderd_store_jobs, pending and running ({q})")
        check(re.search(r"max by \((?:namespace, )?state\)", q),
              f"{what}: max() per state (every pod reports the store's count)")
        check(q.count("(") == q.count(")") and q.count("{") == q.count("}"), f"{what}: brackets balance")

    def overlay_ok(d, own):
        k = objects(d).get("Kustomization", [{}])[0]
        res = k.get("resources", [])
        rel = os.path.relpath(d, ROOT)
        check("../../k8s" in res and all(os.path.exists(os.path.join(d, r)) for r in res),
              f"{rel}: builds on deploy/k8s, every resource exists")
        check(own in res, f"{rel}: lists {own}")
        patches = k.get("patches", [])
        drop = [p for p in patches if dig(p, "target.kind") == "Deployment" and
                dig(p, "target.name") == dep_name and "path: /spec/replicas" in p.get("patch", "") and
                "op: remove" in p.get("patch", "")]
        check(drop, f"{rel}: leaves the replica count to the autoscaler")

    keda_dir = os.path.join(ROOT, "deploy", "k8s-autoscale", "keda")
    so = objects(keda_dir).get("ScaledObject", [])
    if check(len(so) == 1, "one KEDA ScaledObject"):
        so = so[0]
        check(so.get("apiVersion") == "keda.sh/v1alpha1", "ScaledObject apiVersion keda.sh/v1alpha1")
        target_ok(so["spec"]["scaleTargetRef"], "the ScaledObject")
        lo, hi = so["spec"].get("minReplicaCount", 0), so["spec"].get("maxReplicaCount", 100)
        check(1 <= lo <= hi, f"ScaledObject keeps at least one pod (the schedules' scheduler): {lo}..{hi}")
        trig = so["spec"]["triggers"]
        check(len(trig) == 1 and trig[0]["type"] == "prometheus", "one prometheus trigger")
        md = trig[0].get("metadata", {})
        check(re.match(r"https?://", md.get("serverAddress", "")), "the trigger names a Prometheus server")
        query_ok(md.get("query", ""), "the trigger's query")
        check(re.match(r"^\d+(\.\d+)?$", str(md.get("threshold", ""))) and float(md["threshold"]) > 0,
              f"threshold is a positive number ({md.get('threshold')})")
        overlay_ok(keda_dir, "scaledobject.yaml")

    hpa_dir = os.path.join(ROOT, "deploy", "k8s-autoscale", "hpa")
    hpa = objects(hpa_dir).get("HorizontalPodAutoscaler", [])
    with open(os.path.join(hpa_dir, "prometheus-adapter-values.yaml")) as f:
        adapter = yaml.safe_load(f)
    if check(len(hpa) == 1, "one HorizontalPodAutoscaler"):
        hpa = hpa[0]
        check(hpa.get("apiVersion") == "autoscaling/v2", "HPA apiVersion autoscaling/v2")
        target_ok(hpa["spec"]["scaleTargetRef"], "the HPA")
        lo, hi = hpa["spec"].get("minReplicas", 1), hpa["spec"].get("maxReplicas", 0)
        check(1 <= lo <= hi, f"HPA keeps at least one pod: {lo}..{hi}")
        ms = hpa["spec"].get("metrics", [])
        ext = [m["external"] for m in ms if m.get("type") == "External"]
        check(len(ms) == 1 and ext, "the HPA has one External metric (prometheus-adapter's)")
        name = dig(ext[0], "metric.name") if ext else None
        rules = dig(adapter, "rules.external") or []
        rule = [r for r in rules if dig(r, "name.as") == name]
        check(rule, f"prometheus-adapter-values.yaml serves external metric {name}")
        if rule:
            r = rule[0]
            check(re.match(r"^'?spiderd_store_jobs\{", r.get("seriesQuery", "")) and
                  re.search(r"spiderd_store_jobs", dig(r, "name.matches") or ""),
                  "the adapter rule reads spiderd_store_jobs")
            q = r.get("metricsQuery", "").replace("<<.Series>>", "spiderd_store_jobs").replace("<<.LabelMatchers>>,", "")
            query_ok(q, "the adapter rule's metricsQuery")
            check(dig(r, "resources.overrides.namespace.resource") == "namespace",
                  "the adapter rule is per namespace (the HPA's)")
        tgt = dig(ext[0], "target") if ext else {}
        check(tgt.get("type") == "AverageValue" and float(tgt.get("averageValue", 0)) > 0,
              "target: an average value per pod (a pod's slots)")
        overlay_ok(hpa_dir, "hpa.yaml")


def test_k8s_config_runs():
    """The ConfigMap's scrapyd.conf and the Secret's drop-in, read the way a
    pod reads them (SPIDERD_CONFIG_FILES), start the built daemon. What a pod
    gets from its volumes and the cluster (paths, the store, its address) is
    pointed at this machine with SPIDERD_* variables, which come after files.
    Where the tree has object_store, the bucket is the ConfigMap's on a
    throwaway S3 server (tests/s3server.sh, which checks signatures) and the
    credentials file has the Secret's format with that server's keys. Then
    the ConfigMap's preStop script drains the node and returns (no crawl
    runs, nothing waits for upload), and SIGTERM stops it."""
    import shutil
    import signal
    import socket
    import tempfile
    import time
    import urllib.request
    if not os.path.exists(BIN):
        skip(f"ConfigMap run: no {BIN}")
        return
    docs = {}
    for path in glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml")):
        with open(path) as f:
            for d in yaml.safe_load_all(f):
                if d and d.get("kind") in ("ConfigMap", "Secret"):
                    docs[(d["kind"], d["metadata"]["name"])] = d
    cm = docs[("ConfigMap", "spiderd-config")]["data"]
    store_conf = docs[("Secret", "spiderd-store")]["stringData"]["store.conf"]
    tmp = tempfile.mkdtemp(prefix="spiderd-k8s-")
    s3dir = os.path.join(tmp, "s3")
    s3server = os.path.join(ROOT, "tests", "s3server.sh")
    s3_started = False
    try:
        os.makedirs(os.path.join(tmp, "conf.d"))
        conf_text = cm["scrapyd.conf"]
        extra = {}
        if HAS_OBJECT_STORE:
            conf = configparser.ConfigParser()
            conf.read_string(conf_text)
            bucket = re.match(r"s3://([^/]+)", conf.get("spiderd", "object_store")).group(1)
            r = subprocess.run([s3server, "start", s3dir, bucket], capture_output=True, text=True)
            s3_started = r.returncode == 0
            if not check(s3_started, f"tests/s3server.sh starts with bucket {bucket} " + r.stderr[-500:]):
                return
            srv = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
            cred = configparser.ConfigParser()
            cred.read_string(docs[("Secret", "spiderd-object-store")]["stringData"]["credentials"])
            cred.set("default", "aws_access_key_id", srv["AWS_ACCESS_KEY_ID"])
            cred.set("default", "aws_secret_access_key", srv["AWS_SECRET_ACCESS_KEY"])
            with open(os.path.join(tmp, "credentials"), "w") as f:
                cred.write(f)
            extra = {"SPIDERD_OBJECT_STORE_ENDPOINT": srv["S3_ENDPOINT"],
                     "SPIDERD_OBJECT_STORE_CREDENTIALS": os.path.join(tmp, "credentials")}
        else:
            skip("ConfigMap run without its object_store keys: this tree's spiderd has none yet")
            conf_text = "".join(line for line in conf_text.splitlines(True)
                                if not line.startswith("object_store"))
        with open(os.path.join(tmp, "scrapyd.conf"), "w") as f:
            f.write(conf_text)
        with open(os.path.join(tmp, "conf.d", "50-store.conf"), "w") as f:
            f.write(store_conf)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        env = dict(os.environ, HOME=tmp,
                   SPIDERD_CONFIG_FILES=f"{tmp}/scrapyd.conf:{tmp}/conf.d",
                   SPIDERD_BIND_ADDRESS="127.0.0.1", SPIDERD_HTTP_PORT=str(port),
                   SPIDERD_EGGS_DIR=f"{tmp}/eggs", SPIDERD_DBS_DIR=f"{tmp}/dbs",
                   SPIDERD_LOGS_DIR=f"{tmp}/logs", SPIDERD_ITEMS_DIR=f"{tmp}/items",
                   SPIDERD_STORE=f"sqlite:{tmp}/spiderd.db",
                   SPIDERD_NODE_NAME="spiderd-pod-0", SPIDERD_NODE_URL=f"http://127.0.0.1:{port}",
                   **extra)
        env.pop("NOTIFY_SOCKET", None)
        for k in [k for k in env if k.startswith("AWS_")]:
            env.pop(k)  # the pods have none: the credentials file it is
        # the Secret's login: the pods refuse strangers
        secret = configparser.ConfigParser()
        secret.read_string(store_conf)
        login = base64.b64encode(("%s:%s" % (secret.get("scrapyd", "username"),
                                              secret.get("scrapyd", "password"))).encode()).decode()

        def get(path):
            req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                         headers={"Authorization": "Basic " + login})
            with urllib.request.urlopen(req, timeout=2) as r:
                return r.read().decode()

        proc = subprocess.Popen([BIN, "serve"], cwd=tmp, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        status = None
        try:
            deadline = time.time() + 20
            while time.time() < deadline and proc.poll() is None and status is None:
                try:
                    status = get("/daemonstatus.json")
                except OSError:
                    time.sleep(0.05)
            check(status and '"spiderd-pod-0"' in status,
                  f"the ConfigMap's scrapyd.conf and the Secret's drop-in start spiderd ({status})")
            if status and HAS_OBJECT_STORE:
                ready = None
                try:
                    ready = get("/readyz")
                except OSError as e:
                    ready = str(e)
                check(ready is not None and "not ready" not in ready,
                      f"and it is ready with the bucket and the Secret's credentials format ({ready})")
            if status:
                k8s_prestop_runs(cm["prestop.py"], tmp, env, get)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(30)
            check(rc == 0, f"and it stops on SIGTERM with 0 ({rc})")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err = proc.stderr.read()
            if not status:
                print(err[-2000:])
    finally:
        if s3_started:
            subprocess.run([s3server, "stop", s3dir], check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def k8s_prestop_runs(script, tmp, env, get):
    """The preStop script, run as the kubelet runs it (in the container's
    environment, `spiderd` on PATH), drains the node and, with no crawl
    running and nothing waiting for upload, returns at once."""
    import time
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir, exist_ok=True)
    os.symlink(os.path.abspath(BIN), os.path.join(bindir, "spiderd"))
    path = os.path.join(tmp, "prestop.py")
    with open(path, "w") as f:
        f.write(script)
    t = time.monotonic()
    r = subprocess.run(["python3", path, "20"], capture_output=True, text=True, timeout=60,
                       env=dict(env, PATH=bindir + os.pathsep + env.get("PATH", "")))
    took = time.monotonic() - t
    check(r.returncode == 0 and "drained" in r.stdout and took < 15,
          f"the preStop script drains and returns ({r.returncode}, {took:.1f} s: {r.stdout.strip()} {r.stderr.strip()})")
    st = json.loads(get("/api/v1/status"))
    check(st.get("draining") is True, f"and the node is draining ({st.get('draining')})")


def test_tools():
    """The schema checks that need no daemon or cluster, where the tools are
    installed: `docker-compose config` (Compose v1 knows no top-level name:,
    so a copy without it) and `kubectl kustomize`."""
    deploy = os.path.join(ROOT, "deploy")
    if subprocess.run(["which", "docker-compose"], capture_output=True).returncode == 0:
        copy = os.path.join(deploy, ".compose-check.yaml")
        with open(os.path.join(deploy, "compose.yaml")) as f, open(copy, "w") as g:
            g.write("".join(l for l in f if not l.startswith("name:")))
        try:
            r = subprocess.run(["docker-compose", "-f", copy, "config", "-q"],
                               capture_output=True, text=True, cwd=deploy)
        finally:
            os.unlink(copy)
        check(r.returncode == 0, "docker-compose config: schema valid " + r.stderr.strip())
    else:
        skip("docker-compose not installed: compose schema not checked")
    if subprocess.run(["which", "kubectl"], capture_output=True).returncode == 0:
        r = subprocess.run(["kubectl", "kustomize", os.path.join(deploy, "k8s")],
                           capture_output=True, text=True)
        check(r.returncode == 0 and r.stdout.count("\nkind: ") + r.stdout.startswith("kind: ") >= 5,
              "kubectl kustomize deploy/k8s builds every object " + r.stderr.strip())
        for name, kind in (("keda", "ScaledObject"), ("hpa", "HorizontalPodAutoscaler")):
            r = subprocess.run(["kubectl", "kustomize", os.path.join(deploy, "k8s-autoscale", name)],
                               capture_output=True, text=True)
            built = [d for d in yaml.safe_load_all(r.stdout) if d] if r.returncode == 0 else []
            kinds = [d.get("kind") for d in built]
            dep = [d for d in built if d.get("kind") == "Deployment"]
            check(r.returncode == 0 and kind in kinds and "ConfigMap" in kinds and dep and
                  "replicas" not in dep[0]["spec"],
                  f"kubectl kustomize deploy/k8s-autoscale/{name}: deploy/k8s and a {kind}, "
                  "no replica count " + r.stderr.strip())
    else:
        skip("kubectl not installed: kustomization not built")


for t in (test_dockerfile, test_compose, test_k8s, test_k8s_autoscale, test_k8s_config_runs, test_tools):
    try:
        t()
    except Exception as e:  # a missing key is a failure of that file, not a crash
        check(False, f"{t.__name__}: {type(e).__name__}: {e}")
print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
sys.exit(1 if failed else 0)
