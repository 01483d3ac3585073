"""The agent as a DaemonSet pod under a real kubelet, timed: the single-node
cluster of tests/cluster (started here, stopped at the end), the agent
installed with helm, podapp pods (tests/fixtures/podapp) as the targets.

1. helm install -> agent Ready (INSTALLS times, helm uninstall between):
   split at the container's start and the agent's first log line.
2. kubectl apply of a FunctionProbe over a Deployment of 2 podapp pods ->
   (a) the agent's "attached" log line, (b) this node's FunctionProbeReport
   with both pods attached and calls, (c) the FunctionProbe's status summary
   with calls (what `kubectl get fprobe` shows); RUNS runs after an untimed
   one, the probe deleted (and detached) after each.
3. container start -> probed, under a live probe (STARTS pods, one at a
   time): from the container's process start (/proc/PID/stat) to the
   agent's "attached to process PID" line, and to the report showing the
   pod's process with calls; also from before `kubectl apply` of the pod.
4. memory of the agent's pod, probing 2 + 1 pods: its cgroup (v1 memory
   controller: usage, max usage, rss, cache) and the kubelet's summary API
   (working set), and the process's VmRSS and VmHWM.

A state read back is polled with kubectl (in the cluster's network
namespace): the poll's own time is printed, it bounds those figures'
resolution. Log times are the agent's "ts" (ms). Prints figures and the
goals; asserts nothing.

Env: RUNS (20), STARTS (10), INSTALLS (3). Needs root (as make clustertest).
    python3 bench/cluster_bench.py      # or: make cluster-bench
"""

import datetime
import json
import math
import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "cluster"))
import cluster as clusterlib  # noqa: E402
import conftest  # noqa: E402
from conftest import AGENT_NS, RELEASE, pod_ready, wait_for  # noqa: E402

RUNS = int(os.environ.get("RUNS", "20"))
STARTS = int(os.environ.get("STARTS", "10"))
INSTALLS = int(os.environ.get("INSTALLS", "3"))
GOAL_S = 2.0
NS = "bench"
FUNCS = ["main.handleRequest", "main.lookupUser"]
PODAPP_ARGS = ["-latency", "3ms", "-lookup", "1ms"]


def percentile(values, q):
    """The nearest-rank q-quantile (0 < q <= 1) of values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def ms(seconds):
    return f"{seconds * 1000:.0f} ms"


def figure(what, value, goal=None, met=None):
    line = f"  {what}: {value}"
    if goal:
        line += f"   [goal {goal}: {'met' if met else 'NOT MET'}]"
    print(line, flush=True)


def dist(what, values, goal=False):
    """p50 / p99 / max of values (seconds), the goal on p99."""
    p99 = percentile(values, 0.99)
    figure(f"{what} p50 / p99 / max ({len(values)})",
           f"{ms(percentile(values, 0.5))} / {ms(p99)} / {ms(max(values))}",
           f"p99 < {GOAL_S:g} s" if goal else None, p99 < GOAL_S)


def section(title):
    print(f"\n== {title}", flush=True)


def log_time(event):
    """An agent log event's "ts" (RFC 3339, ms) as Unix seconds."""
    ts = datetime.datetime.strptime(event["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return ts.replace(tzinfo=datetime.timezone.utc).timestamp()


def process_start(pid):
    """Unix time (10 ms ticks) at which process pid started."""
    with open(f"/proc/{pid}/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    since = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - since


class Bench:
    def __init__(self, node):
        self.node = node
        self.polls = []  # seconds each state read took

    def kubectl_json(self, *args):
        t = time.monotonic()
        try:
            return self.node.kubectl_json(*args)
        finally:
            self.polls.append(time.monotonic() - t)

    def agent_pod(self):
        return self.node.ready_agent_pod()

    def agent_events(self, pod_name, **fields):
        """The agent's log events (JSON lines) whose fields are as given;
        msg_has narrows on the message."""
        out = self.node.kubectl("logs", "-n", AGENT_NS, pod_name).stdout
        has = fields.pop("msg_has", None)
        events = []
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            ev = json.loads(line)
            if (has is None or has in ev.get("msg", "")) and \
                    all(ev.get(k) == v for k, v in fields.items()):
                events.append(ev)
        return events

    def report(self, probe):
        for r in self.kubectl_json("get", "functionprobereports", "-n", NS)["items"]:
            if r.get("probe", {}).get("name") == probe:
                return r
        return None


def apply(node, doc):
    node.kubectl("apply", "-f", "-", input=json.dumps(doc))


def probe_doc(name, labels):
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"matchLabels": labels}, "functions": FUNCS,
                     "reportInterval": "2s"}}


def podapp_pod(name, labels):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "app", "image": clusterlib.PODAPP_IMAGE,
                                     "imagePullPolicy": "Never", "args": PODAPP_ARGS}]}}


# -- 1. helm install -> agent Ready -------------------------------------------

def install_to_ready(b):
    node = b.node
    times = []
    for i in range(INSTALLS):
        if i:
            node.helm("uninstall", RELEASE, "--namespace", AGENT_NS, "--wait")
            wait_for("the agent's pod to go", lambda: not node.agent_pods(), timeout=60)
        start = time.time()
        node.install_agent()
        installed = time.time()
        pod = node.ready_agent_pod()
        ready = time.time()
        (pid,) = node.container_pids(pod, "agent")
        first = b.agent_events(pod["metadata"]["name"])[0]
        times.append((ready - start, installed - start, process_start(pid) - start,
                      log_time(first) - start))
    total, helm, started, logged = zip(*times)
    dist("helm install -> agent pod Ready", total)
    dist("  of it: helm install returned", helm)
    dist("  of it: the agent's container process started", started)
    dist("  of it: the agent's first log line", logged)
    print("  (the chart's readinessProbe runs every 2 s: Ready waits for its next run)")


# -- 2. kubectl apply -> status ----------------------------------------------

def timed_apply(b, agent, name, labels):
    node = b.node
    start = time.time()
    apply(node, probe_doc(name, labels))
    applied = time.time()
    seen = {}

    def poll():
        doc = b.kubectl_json("get", "functionprobes,functionprobereports", "-n", NS)
        t = time.time()
        for obj in doc["items"]:
            if obj["kind"] == "FunctionProbe" and obj["metadata"]["name"] == name:
                s = obj.get("status", {}).get("summary", {})
                f = {x["name"]: x for x in s.get("functions", [])}
                if "status" not in seen and s.get("pods") == 2 and \
                        all(f.get(n, {}).get("calls", 0) > 0 for n in FUNCS):
                    seen["status"] = t
            elif obj.get("probe", {}).get("name") == name and "report" not in seen:
                st = obj.get("status", {})
                calls = {f["name"]: f.get("calls", 0) for f in st.get("functions", [])}
                if st.get("attached") and len(st.get("pods", [])) == 2 and \
                        all(calls.get(n, 0) > 0 for n in FUNCS):
                    seen["report"] = t
        return len(seen) == 2
    wait_for(f"{name}'s calls in its report and status", poll, timeout=20, interval=0.02)
    attached = min(log_time(e) for e in wait_for(
        f"the agent's attach line for {name}",
        lambda: b.agent_events(agent, msg_has="attached to process", namespace=NS, probe=name),
        timeout=5))
    node.kubectl("delete", "fprobe", "-n", NS, name)
    wait_for(f"{name}'s detach", lambda: b.agent_events(agent, msg_has="detached from",
                                                         namespace=NS, probe=name), timeout=10)
    return (seen["status"] - start, seen["report"] - start, attached - start, applied - start)


def apply_to_status(b):
    node = b.node
    labels = {"app": "web"}
    apply(node, {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": "web", "namespace": NS},
                 "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels},
                                       "spec": podapp_pod("x", labels)["spec"]}}})
    node.kubectl("rollout", "status", "-n", NS, "deployment/web", "--timeout=90s", timeout=120)
    agent = b.agent_pod()["metadata"]["name"]
    timed_apply(b, agent, "warmup", labels)
    b.polls.clear()
    times = [timed_apply(b, agent, f"lat-{i}", labels) for i in range(RUNS)]
    status, report, attached, applied = zip(*times)
    dist("kubectl apply -> FunctionProbe status with calls (kubectl get fprobe)", status,
         goal=True)
    dist("kubectl apply -> this node's report with calls", report)
    dist("kubectl apply -> the agent's attach line", attached)
    dist("  (kubectl apply returned)", applied)
    dist("  (one poll: kubectl get of the probe and the reports)", b.polls)


# -- 3. container start -> probed ---------------------------------------------

def start_to_probed(b):
    node = b.node
    labels = {"app": "start"}
    apply(node, probe_doc("starts", labels))
    agent = b.agent_pod()["metadata"]["name"]
    times = []
    for i in range(STARTS):
        name = f"start-{i}"
        before = time.time()
        apply(node, podapp_pod(name, labels))
        pod = wait_for(f"{name} Running", lambda: (lambda p: pod_ready(p) and p)(
            node.kubectl_json("get", "pod", "-n", NS, name)), timeout=60, interval=0.1)
        (pid,) = node.container_pids(pod, "app")
        started = process_start(pid)
        (ev,) = wait_for(f"the attach to {pid}", lambda: b.agent_events(
            agent, msg_has=f"attached to process {pid}:"), timeout=10, interval=0.1)

        def counted():
            r = b.report("starts")
            entry = [p for p in r["status"]["pods"] if p["name"] == name] if r else []
            calls = [sum(p["calls"] for p in f.get("pods", []) if p["name"] == name)
                     for f in r["status"].get("functions", [])] if r else []
            return entry and entry[0].get("processes") == [pid] and calls and \
                all(c > 0 for c in calls)
        wait_for(f"{name}'s calls in the report", counted, timeout=15, interval=0.02)
        counted_at = time.time()
        times.append((log_time(ev) - started, counted_at - started, log_time(ev) - before,
                      started - before))
        node.kubectl("delete", "pod", "-n", NS, name, "--wait=false")
        wait_for(f"the detach from {pid}", lambda: b.agent_events(
            agent, msg_has=f"detached from process {pid}:"), timeout=15, interval=0.2)
    attach, counted, from_apply, runtime = zip(*times)
    dist("container process start -> the agent's attach line", attach, goal=True)
    dist("container process start -> the report with its calls", counted)
    dist("  kubectl apply of the pod -> attach line", from_apply)
    dist("  (kubectl apply of the pod -> its process started)", runtime)


# -- 4. memory ----------------------------------------------------------------

def memory(b):
    node = b.node
    pod = b.agent_pod()
    apply(node, probe_doc("mem", {"app": "web"}))
    apply(node, podapp_pod("mem-1", {"app": "start"}))
    wait_for("both probes counting", lambda: all(
        (r := b.report(p)) and r["status"].get("attached") and r["status"].get("pods")
        for p in ("mem", "starts")), timeout=30)
    time.sleep(10)  # a few report intervals at steady state
    (pid,) = node.container_pids(pod, "agent")
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    with open(f"/proc/{pid}/cgroup") as f:
        cg = next(line.strip().split(":", 2)[2] for line in f if ":memory:" in line)
    base = os.path.join(clusterlib.CGROUP_MOUNT, "memory", cg.lstrip("/"))

    def read(name):
        with open(os.path.join(base, name)) as f:
            return f.read()
    stat = dict(line.split() for line in read("memory.stat").splitlines())
    mib = lambda n: f"{int(n) / 2**20:.1f} MiB"  # noqa: E731
    figure("agent container cgroup memory.usage_in_bytes", mib(read("memory.usage_in_bytes")))
    figure("agent container cgroup memory.max_usage_in_bytes",
           mib(read("memory.max_usage_in_bytes")))
    figure("  of it: rss / cache / mapped_file",
           f"{mib(stat['rss'])} / {mib(stat['cache'])} / {mib(stat['mapped_file'])}")
    figure("  working set (usage - inactive_file, as the kubelet counts it)",
           mib(int(read("memory.usage_in_bytes")) - int(stat["total_inactive_file"])))
    figure("agent process VmRSS / VmHWM",
           f"{int(status['VmRSS'].split()[0]) / 1024:.1f} MiB / "
           f"{int(status['VmHWM'].split()[0]) / 1024:.1f} MiB")
    res = node.kubectl("get", "--raw",
                       f"/api/v1/nodes/{clusterlib.NODE}/proxy/stats/summary", check=False)
    if res.returncode == 0:
        for p in json.loads(res.stdout).get("pods", []):
            if p["podRef"]["name"] == pod["metadata"]["name"]:
                for c in p.get("containers", []):
                    m = c.get("memory", {})
                    figure(f"kubelet summary API, container {c['name']}: workingSet / rss",
                           f"{mib(m.get('workingSetBytes', 0))} / {mib(m.get('rssBytes', 0))}")
    else:
        figure("kubelet summary API", f"not read: {res.stderr.strip()[:200]}")


def main():
    start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="retwatch-cluster-bench-")
    c = clusterlib.Cluster(clusterlib.build_bindir())
    try:
        images = clusterlib.build_images(workdir)
        helm = os.path.join(conftest.helm_bindir(), "helm")
        t = time.monotonic()
        c.start()
        for image in images:
            c.import_image(image)
        print(f"cluster up, images imported in {time.monotonic() - t:.1f} s", flush=True)
        node = conftest.Node(c, helm)
        b = Bench(node)
        node.kubectl("create", "namespace", NS)
        section(f"1. helm install -> agent Ready ({INSTALLS} installs)")
        install_to_ready(b)
        section(f"2. kubectl apply -> status (2 pods, {RUNS} runs)")
        apply_to_status(b)
        section(f"3. container start -> probed ({STARTS} pods)")
        start_to_probed(b)
        section("4. the agent pod's memory (probes over 3 pods)")
        memory(b)
    finally:
        c.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n(bench ran {time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
