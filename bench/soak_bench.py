"""A soak of the agent under churn: the single-node cluster of tests/cluster
(started here, stopped at the end), the agent installed with helm, a
Deployment of PODS podapp pods (tests/fixtures/podapp) all replaced every
minute, and PROBES FunctionProbes over them created, changed (another
function, a threshold, arguments) and deleted every 5 minutes, for MINUTES
minutes. Each minute it samples the agent: its process's VmRSS, its open
files (and of them BPF maps, programs and links), its container cgroup's
memory. Then every
probe is deleted, the agent sampled again, uninstalled, and the host
checked for any of the agent's BPF programs, and links running them, left
in the kernel (bpftool). Prints the
first and last minute's figures, the slope per hour of each (a least-squares
line over the minutes after the first two), and what was left; asserts
nothing.

Env: MINUTES (60), PODS (20), PROBES (5). Needs root (as make clustertest).
    bash bench/soak_bench.sh
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "cluster"))
import cluster as clusterlib  # noqa: E402
import conftest  # noqa: E402
from conftest import AGENT_NS, RELEASE, wait_for  # noqa: E402

MINUTES = int(os.environ.get("MINUTES", "60"))
PODS = int(os.environ.get("PODS", "20"))
PROBES = int(os.environ.get("PROBES", "5"))
NS = "soak"
LABELS = {"app": "soak"}
FUNCS = ["main.handleRequest", "main.lookupUser"]
PODAPP_ARGS = ["-latency", "3ms", "-lookup", "1ms"]


def apply(node, doc):
    node.kubectl("apply", "-f", "-", input=json.dumps(doc))


def deployment():
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "soak", "namespace": NS},
            "spec": {"replicas": PODS, "selector": {"matchLabels": LABELS},
                     "template": {"metadata": {"labels": LABELS}, "spec": {
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "app", "image": clusterlib.PODAPP_IMAGE,
                                         "imagePullPolicy": "Never",
                                         "args": PODAPP_ARGS}]}}}}


def probe(i, changed):
    spec = {"selector": {"matchLabels": LABELS}, "functions": FUNCS[:1],
            "reportInterval": "10s"}
    if changed:
        spec.update(functions=FUNCS, slowThreshold="2ms", captureArguments=True,
                    slowCalls={"keep": 10})
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
            "metadata": {"name": f"soak-{i}", "namespace": NS}, "spec": spec}


def bpftool(kind):
    return json.loads(subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True,
                                     text=True, check=True).stdout or "[]")


def left_in_kernel(prog_ids):
    """Of the programs the agent held (prog_ids), those the kernel still has,
    and the links running them: another retwatch on the host (a test) does
    not count."""
    progs = {p["id"] for p in bpftool("prog")} & prog_ids
    return len(progs), len([lk for lk in bpftool("link") if lk.get("prog_id") in progs])


def fds(pid, prog_ids):
    """Open files of pid: all, BPF maps, programs and links, perf events, and
    the rest by kind (files of the file system, pidfds, sockets, other); the
    programs' ids into prog_ids."""
    out = {"files": 0, "maps": 0, "progs": 0, "links": 0, "perf": 0, "paths": 0,
           "pidfds": 0, "sockets": 0, "other": 0}
    kinds = {"anon_inode:bpf-map": "maps", "anon_inode:bpf-prog": "progs",
             "anon_inode:bpf_link": "links", "anon_inode:[perf_event]": "perf",
             "anon_inode:[pidfd]": "pidfds"}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        out["files"] += 1
        key = kinds.get(target) or ("paths" if target.startswith("/") else
                                    "sockets" if target.startswith("socket:") else "other")
        out[key] += 1
        if key == "progs":
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    prog_ids.update(int(line.split()[1]) for line in f
                                    if line.startswith("prog_id:"))
            except OSError:
                pass
    return out


def cgroup_memory(pid):
    """The container's cgroup memory usage, MiB (v1 memory controller, as the kubelet's)."""
    with open(f"/proc/{pid}/cgroup") as f:
        cg = next(line.strip().split(":", 2)[2] for line in f if ":memory:" in line)
    with open(os.path.join(clusterlib.CGROUP_MOUNT, "memory", cg.lstrip("/"),
                           "memory.usage_in_bytes")) as f:
        return int(f.read()) / 2**20


def sample(node, pid, minute, prog_ids):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f)
    s = {"minute": minute, "rss": int(status["VmRSS"].split()[0]) / 1024,
         "cgroup": cgroup_memory(pid), **fds(pid, prog_ids)}
    pods = node.kubectl_json("get", "pods", "-n", NS, "-l", "app=soak")["items"]
    s["pods"] = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
    print(f"  minute {minute:3d}: rss {s['rss']:6.1f} MiB  cgroup {s['cgroup']:6.1f} MiB  "
          f"files {s['files']:4d}  maps {s['maps']:3d}  progs {s['progs']:2d}  "
          f"links {s['links']:4d}  perf {s['perf']:4d}  (paths {s['paths']}, pidfds "
          f"{s['pidfds']}, sockets {s['sockets']}, other {s['other']})  "
          f"pods running {s['pods']}", flush=True)
    return s


def slope_per_hour(samples, key):
    """Least-squares slope of key over the minutes, per hour."""
    xs = [s["minute"] for s in samples]
    ys = [s[key] for s in samples]
    n = len(xs)
    if n < 2:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return 60 * sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def churn(node, minute):
    """This minute's churn: every pod replaced; the probes' 5-minute cycle."""
    node.kubectl("delete", "pods", "-n", NS, "-l", "app=soak", "--wait=false")
    phase = minute % 5
    if phase == 0:
        for i in range(PROBES):
            apply(node, probe(i, False))
    elif phase == 2:
        for i in range(PROBES):
            apply(node, probe(i, True))
    elif phase == 4:
        node.kubectl("delete", "fprobe", "-n", NS, "--all", "--wait=false")


def soak(node, prog_ids):
    pod = node.ready_agent_pod()
    (pid,) = node.container_pids(pod, "agent")
    apply(node, deployment())
    node.kubectl("rollout", "status", "-n", NS, "deployment/soak", "--timeout=300s",
                 timeout=320)
    samples = []
    start = time.monotonic()
    for minute in range(MINUTES):
        samples.append(sample(node, pid, minute, prog_ids))
        churn(node, minute)
        time.sleep(max(0.0, start + 60 * (minute + 1) - time.monotonic()))
    samples.append(sample(node, pid, MINUTES, prog_ids))
    node.kubectl("delete", "fprobe", "-n", NS, "--all")
    time.sleep(30)  # the probes' links are closed on background threads
    print("  every probe deleted, 30 s later:", flush=True)
    after = sample(node, pid, MINUTES + 1, prog_ids)
    return samples, after


def report(samples, after, left):
    first, last = samples[0], samples[-1]
    steady = samples[2:] if len(samples) > 4 else samples
    print("\n== figures", flush=True)
    for key, unit in (("rss", "MiB"), ("cgroup", "MiB"), ("files", ""), ("maps", ""),
                      ("links", ""), ("perf", ""), ("progs", ""), ("paths", ""),
                      ("pidfds", ""), ("sockets", ""), ("other", "")):
        half = samples[len(samples) // 2:]
        print(f"  {key}: first minute {first[key]:.1f}{unit}, last {last[key]:.1f}{unit}, "
              f"slope {slope_per_hour(steady, key):+.2f}{unit} an hour "
              f"(minutes {steady[0]['minute']}-{steady[-1]['minute']}), "
              f"{slope_per_hour(half, key):+.2f}{unit} over the second half; "
              f"after every probe was deleted {after[key]:.1f}{unit}", flush=True)
    print(f"  left in the kernel after helm uninstall: {left[0]} of the agent's programs, "
          f"{left[1]} links running them", flush=True)


def main():
    began = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="retwatch-soak-")
    c = clusterlib.Cluster(clusterlib.build_bindir())
    try:
        images = clusterlib.build_images(workdir)
        helm = os.path.join(conftest.helm_bindir(), "helm")
        c.start()
        for image in images:
            c.import_image(image)
        node = conftest.Node(c, helm)
        node.kubectl("create", "namespace", NS)
        node.install_agent()
        print(f"== soak: {MINUTES} minutes, {PODS} pods replaced every minute, {PROBES} "
              f"probes created, changed and deleted every 5 minutes", flush=True)
        prog_ids = set()
        samples, after = soak(node, prog_ids)
        node.helm("uninstall", RELEASE, "--namespace", AGENT_NS, "--wait")
        wait_for("the agent's pod to go", lambda: not node.agent_pods(), timeout=120)
        time.sleep(5)
        report(samples, after, left_in_kernel(prog_ids))
    finally:
        c.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n(soak ran {time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
