#!/bin/sh
# The deployment recipes of examples/deploy, validated as far as this
# machine can without a container runtime, a cluster or SLURM:
# - the systemd unit passes `systemd-analyze verify` (with the built
#   rumor-peer in ExecStart), stops with SIGTERM and gives the peer more
#   than its --leave-timeout to leave, and restarts on failure;
# - compose.yaml, k8s/rumor.yaml and monitoring/prometheus.yml parse as
#   YAML; the compose swarm's peers have distinct ranks, one peer list, and
#   a stop grace period above --leave-timeout; the StatefulSet's
#   serviceName is a headless Service, its termination grace period is
#   above --leave-timeout, its liveness probe is the metrics endpoint on the
#   port --metrics-listen serves, and its keys come from a Secret;
#   k8s/rumor-job.yaml (a run that ends) is an indexed Job of as many pods
#   as peers listed, all at once, that never restarts a finished peer,
#   whose pods the peer list names through a headless Service (subdomain),
#   whose rank is the completion index, with the StatefulSet's other
#   rumor-peer options, a checkpoint directory a peer on a persistent
#   volume, and a podFailurePolicy that fails on exit status 2 and ignores
#   preemption;
#   Prometheus scrapes the ports the compose peers and local-swarm.sh -m
#   serve;
# - the Dockerfile's stages are Debian 12, it runs as a non-root user,
#   stops with SIGTERM and installs with --no-install-recommends;
# - the SLURM script is valid bash and forwards SIGTERM before the limit;
# - the Grafana dashboard is JSON whose queries use only metric names that
#   rumor-peer serves (peers/promserve.c);
# - every rumor-peer option the recipes use exists (rumor-peer --help).
set -u
. "${RUMOR_SRCDIR:-$(dirname "$0")/..}/tests/shutil.sh"
d="$RUMOR_SRCDIR/examples/deploy"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not found"
"$PY" -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed (apt-get install python3-yaml)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- systemd
if command -v systemd-analyze >/dev/null; then
  sed "s|/usr/local/bin/rumor-peer|$RUMOR_BUILDDIR/rumor-peer|" "$d/systemd/rumor-peer@.service" \
    > "$tmp/rumor-peer@3.service"
  out=$(systemd-analyze verify --man=no "$tmp/rumor-peer@3.service" 2>&1) ||
    fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
else
  echo "test_deploy: systemd-analyze not found: the unit is checked by hand only"
fi
unit="$d/systemd/rumor-peer@.service"
grep -q '^KillSignal=SIGTERM$' "$unit" || fail "the unit does not stop with SIGTERM"
grep -q '^Restart=on-failure$' "$unit" || fail "the unit does not restart on failure"
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$unit")
leave=$(sed -n 's/.*--leave-timeout \([0-9]*\).*/\1/p' "$unit")
[ -n "$stop" ] && [ -n "$leave" ] && [ "$stop" -gt "$leave" ] ||
  fail "TimeoutStopSec=$stop is not above --leave-timeout $leave"

# ---- YAML, Dockerfile, dashboard: checked in Python
"$PY" - "$d" "$RUMOR_SRCDIR/peers/promserve.c" "$RUMOR_SRCDIR/examples/local-swarm.sh" <<'PYEOF' || fail "the recipes (see above)"
import json, re, sys, yaml
d, prom_src, local_swarm = sys.argv[1:4]
errors = []
def err(m):
    errors.append(m)
    print("test_deploy:", m, file=sys.stderr)
def arg(args, opt):
    args = args if isinstance(args, list) else args.split()
    return args[args.index(opt) + 1] if opt in args else None

# compose
c = yaml.safe_load(open(d + "/compose.yaml"))
peers = {k: v for k, v in c["services"].items() if k.startswith("peer")}
if len(peers) != 4:
    err("compose: %d peers, 4 expected" % len(peers))
ranks = sorted(int(arg(v["command"], "--rank")) for v in peers.values())
if ranks != [0, 1, 2, 3]:
    err("compose: ranks %s" % ranks)
lists = {arg(v["command"], "--peers") for v in peers.values()}
if len(lists) != 1 or any("tcp://%s:7000" % k not in next(iter(lists)) for k in peers):
    err("compose: peer lists differ or miss a peer: %s" % lists)
for k, v in peers.items():
    if v.get("stop_signal") != "SIGTERM":
        err("compose %s: stop_signal %s" % (k, v.get("stop_signal")))
    grace = int(str(v.get("stop_grace_period", "10s")).rstrip("s"))
    if grace <= int(arg(v["command"], "--leave-timeout")):
        err("compose %s: stop_grace_period %ss not above --leave-timeout" % (k, grace))
compose_metrics = {int(arg(v["command"], "--metrics-listen").split(":")[1]) for v in peers.values()}

# Kubernetes
docs = list(yaml.safe_load_all(open(d + "/k8s/rumor.yaml")))
svc = [x for x in docs if x["kind"] == "Service"]
sts = [x for x in docs if x["kind"] == "StatefulSet"]
if len(svc) != 1 or len(sts) != 1:
    err("k8s: %d Services, %d StatefulSets" % (len(svc), len(sts)))
else:
    svc, sts = svc[0], sts[0]
    if svc["spec"].get("clusterIP") != "None":
        err("k8s: the Service is not headless")
    if sts["spec"]["serviceName"] != svc["metadata"]["name"]:
        err("k8s: serviceName %s is not the Service %s" % (sts["spec"]["serviceName"], svc["metadata"]["name"]))
    pod = sts["spec"]["template"]["spec"]
    peer = pod["containers"][0]
    cmd = " ".join(peer["args"])
    leave = int(re.search(r"--leave-timeout (\d+)", cmd).group(1))
    if pod["terminationGracePeriodSeconds"] <= leave:
        err("k8s: terminationGracePeriodSeconds %d not above --leave-timeout %d" % (pod["terminationGracePeriodSeconds"], leave))
    port = int(re.search(r"--metrics-listen \S+:(\d+)", cmd).group(1))
    live = peer["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in peer["ports"]}
    if live["path"] != "/metrics" or ports.get(live["port"], live["port"]) != port:
        err("k8s: liveness probe %s is not the metrics endpoint on %d" % (live, port))
    if not pod.get("securityContext", {}).get("runAsNonRoot"):
        err("k8s: pods may run as root")
    if not any(v.get("secret") for v in pod["volumes"]):
        err("k8s: no keys from a Secret")
    n = sts["spec"]["replicas"]
    names = re.search(r"--peers (\S+)", cmd).group(1).split(",")
    if len(names) != n or any("rumor-%d.%s" % (i, svc["metadata"]["name"]) not in names[i] for i in range(n)):
        err("k8s: the peer list %s does not name the %d pods" % (names, n))

# Kubernetes, a run that ends: an indexed Job, the StatefulSet's peers
def peer_args(args):
    """rumor-peer's options in a container's shell command: {option: value}"""
    words = " ".join(args).split()
    words = words[words.index("rumor-peer") + 1:]
    out = {}
    for i, w in enumerate(words):
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else None
            out[w] = nxt if nxt is not None and not nxt.startswith("--") else True
    return out
jdocs = list(yaml.safe_load_all(open(d + "/k8s/rumor-job.yaml")))
jsvc = [x for x in jdocs if x["kind"] == "Service"]
jobs = [x for x in jdocs if x["kind"] == "Job"]
if len(jsvc) != 1 or len(jobs) != 1:
    err("k8s job: %d Services, %d Jobs" % (len(jsvc), len(jobs)))
elif isinstance(sts, dict):
    jsvc, job = jsvc[0], jobs[0]
    name, sname = job["metadata"]["name"], jsvc["metadata"]["name"]
    spec = job["spec"]
    pod = spec["template"]["spec"]
    peer = [c for c in pod["containers"] if c["name"] == "peer"][0]
    a = peer_args(peer["args"])
    names = str(a.get("--peers", "")).split(",")
    n = len(names)
    if job["apiVersion"] != "batch/v1":
        err("k8s job: apiVersion %s" % job["apiVersion"])
    if spec.get("completionMode") != "Indexed":
        err("k8s job: completionMode %s, not Indexed (no stable rank a pod)" % spec.get("completionMode"))
    if spec.get("completions") != n or spec.get("parallelism") != n:
        err("k8s job: completions %s and parallelism %s are not the %d peers listed"
            % (spec.get("completions"), spec.get("parallelism"), n))
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):
        err("k8s job: restartPolicy %s: a finished peer would start again" % pod.get("restartPolicy"))
    if jsvc["spec"].get("clusterIP") != "None" or pod.get("subdomain") != sname:
        err("k8s job: the pods' subdomain %s is not the headless Service %s" % (pod.get("subdomain"), sname))
    labels = dict(spec["template"].get("metadata", {}).get("labels", {}), **{"job-name": name})
    sel = jsvc["spec"].get("selector", {})
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        err("k8s job: the Service selects %s, not the Job's pods (%s)" % (sel, labels))
    if any("tcp://%s-%d.%s:" % (name, i, sname) not in names[i] for i in range(n)):
        err("k8s job: the peer list %s does not name the pods %s-N.%s" % (names, name, sname))
    # the rank is the completion index, in the peer and in its key's copy
    rank = str(a.get("--rank", ""))
    var = rank.lstrip("$").strip("{}")
    def is_index(c):  # the variable Kubernetes sets, or one from the pod's annotation
        return var == "JOB_COMPLETION_INDEX" or any(
            e["name"] == var and "['batch.kubernetes.io/job-completion-index']" in
            e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "") for e in c.get("env", []))
    for c in [peer] + pod.get("initContainers", []):
        if not is_index(c):
            err("k8s job: container %s: rank %s is not the completion index" % (c["name"], rank))
    if not any(rank in " ".join(c.get("args", [])) for c in pod.get("initContainers", [])):
        err("k8s job: the key copied is not peer %s's" % rank)
    # the same peers as the StatefulSet's: every other option the same
    sa = peer_args(sts["spec"]["template"]["spec"]["containers"][0]["args"])
    for o in sorted(set(a) | set(sa)):
        if o not in ("--rank", "--peers", "--checkpoint-dir") and a.get(o) != sa.get(o):
            err("k8s job: %s %s, the StatefulSet's %s" % (o, a.get(o), sa.get(o)))
    # a checkpoint directory a peer, on a claim a new pod finds again
    ck = str(a.get("--checkpoint-dir", ""))
    mounts = [m for m in peer["volumeMounts"] if ck.startswith(m["mountPath"] + "/")]
    vols = {v["name"]: v for v in pod["volumes"]}
    if rank not in ck or not mounts or "persistentVolumeClaim" not in vols.get(mounts[0]["name"], {}):
        err("k8s job: --checkpoint-dir %s is not a directory a peer on a persistent volume" % ck)
    if pod["terminationGracePeriodSeconds"] <= int(a.get("--leave-timeout", 10)):
        err("k8s job: terminationGracePeriodSeconds not above --leave-timeout")
    if not any(v.get("secret") for v in pod["volumes"]):
        err("k8s job: no keys from a Secret")
    if not pod.get("securityContext", {}).get("runAsNonRoot"):
        err("k8s job: pods may run as root")
    # bad usage (exit 2) ends the Job, a preemption does not count
    rules = spec.get("podFailurePolicy", {}).get("rules", [])
    if rules and pod.get("restartPolicy") != "Never":
        err("k8s job: a podFailurePolicy needs restartPolicy Never")
    if not any(r["action"] == "FailJob" and r.get("onExitCodes", {}).get("operator") == "In"
               and 2 in r["onExitCodes"].get("values", []) for r in rules):
        err("k8s job: exit status 2 (bad usage) does not fail the Job")
    if not any(r["action"] == "Ignore" and {"type": "DisruptionTarget"} in
               [{"type": c.get("type")} for c in r.get("onPodConditions", [])] for r in rules):
        err("k8s job: a preempted pod counts as a failure")
    live = peer["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in peer["ports"]}
    if live["path"] != "/metrics" or ports.get(live["port"], live["port"]) != \
            int(str(a.get("--metrics-listen", ":0")).split(":")[-1]):
        err("k8s job: liveness probe %s is not the metrics endpoint" % live)

# Prometheus
p = yaml.safe_load(open(d + "/monitoring/prometheus.yml"))
targets = {t for job in p["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
for port in compose_metrics:
    if not any(t.endswith(":%d" % port) for t in targets):
        err("prometheus: no target on the compose peers' port %d" % port)
m = re.search(r'--metrics-listen 127.0.0.1:\$\(\(mport', open(local_swarm).read())
if not m or not {"127.0.0.1:%d" % (9400 + i) for i in range(4)} <= targets:
    err("prometheus: local-swarm.sh -m 9400's ports are not scraped")

# Dockerfile
df = open(d + "/Dockerfile").read().replace("\\\n", " ")
froms = re.findall(r"^FROM (\S+)", df, re.M)
if not froms or any(not f.startswith("debian:12") for f in froms):
    err("Dockerfile: stages from %s, not Debian 12" % froms)
if len(froms) < 2:
    err("Dockerfile: not multi-stage")
users = re.findall(r"^USER (\S+)", df, re.M)
if not users or users[-1] in ("root", "0"):
    err("Dockerfile: runs as root")
if not re.search(r"^STOPSIGNAL SIGTERM$", df, re.M):
    err("Dockerfile: no STOPSIGNAL SIGTERM")
for line in re.findall(r"apt-get install[^\n]*", df):
    if "--no-install-recommends" not in line:
        err("Dockerfile: apt-get install without --no-install-recommends")
if re.search(r"^ADD https?://", df, re.M):
    err("Dockerfile: ADD from a URL")

# Grafana: every metric a query names is one rumor-peer serves
src = open(prom_src).read()
served = set(re.findall(r'"(rumor_[a-z_]+)"', src)) | set(re.findall(r"# TYPE (rumor_[a-z_]+)", src))
dash = json.load(open(d + "/monitoring/grafana-dashboard.json"))
for panel in dash["panels"]:
    for t in panel["targets"]:
        for name in re.findall(r"rumor_[a-z_]+", t["expr"]):
            if name not in served:
                err("grafana panel '%s': %s is not served" % (panel["title"], name))
print("test_deploy: compose, k8s, prometheus, Dockerfile and dashboard checked (%d metrics served)" % len(served))
sys.exit(1 if errors else 0)
PYEOF

# ---- SLURM
bash -n "$d/slurm/rumor-swarm.sbatch" || fail "the SLURM script does not parse"
grep -q '^#SBATCH --signal=TERM@' "$d/slurm/rumor-swarm.sbatch" ||
  fail "the SLURM script does not forward SIGTERM before the time limit"

# ---- every rumor-peer option the recipes use exists
help=$("$RUMOR_BUILDDIR/rumor-peer" --help)
for o in $(cat "$d/compose.yaml" "$d/k8s/rumor.yaml" "$d/k8s/rumor-job.yaml" "$d/systemd/rumor-peer@.service" \
             "$d/slurm/rumor-swarm.sbatch" | grep -v '^ *#' | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  case $o in
    --no-install-recommends|--from-file|--config|--kill-on-bad-exit|--job-name|--nodes|--ntasks-per-node|--cpus-per-task|--time|--signal|--prefix|--disable-static|--man) continue ;;
  esac
  printf '%s\n' "$help" | grep -q -- "$o" || fail "the recipes use rumor-peer $o, which --help does not list"
done
finish
