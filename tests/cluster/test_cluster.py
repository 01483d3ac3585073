"""The agent as a DaemonSet pod under a real kubelet: installed with helm,
probing a Deployment's pods that containerd started, results read back with
kubectl."""

import calendar
import json
import re
import time

import cluster as clusterlib
from conftest import AGENT_NS, container_id, pod_ready, wait_for

FUNCS = ["main.handleRequest", "main.lookupUser"]
UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
# CAP_SYS_PTRACE (19), CAP_PERFMON (38), CAP_BPF (39): the chart's set
CHART_CAPS = (1 << 19) | (1 << 38) | (1 << 39)


def ns_of(duration):
    m = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", duration)
    assert m, f"not a duration: {duration!r}"
    return float(m.group(1)) * UNITS[m.group(2)]


def rfc3339(ts):
    """Seconds since the epoch of an RFC 3339 UTC time."""
    whole, _, frac = ts.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def fns(entry):
    return {f["name"]: f for f in entry.get("functions", [])}


def deployment(ns, name, replicas, labels):
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 2,
                         "containers": [{"name": "app", "image": clusterlib.PODAPP_IMAGE,
                                         "imagePullPolicy": "Never"}]}}}}


def probe(ns, name, labels):
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": labels}, "functions": FUNCS,
                     "reportInterval": "2s"}}


def apply(node, doc):
    node.kubectl("apply", "-f", "-", input=json.dumps(doc))


def running_pods(node, ns, selector, n):
    """The n pods of selector once all are Running and Ready (and no other)."""
    def ready():
        items = [p for p in node.kubectl_json("get", "pods", "-n", ns, "-l", selector)["items"]
                 if not p["metadata"].get("deletionTimestamp")]
        return len(items) == n and all(pod_ready(p) for p in items) and items
    return wait_for(f"{n} pods {selector} in {ns} Running and Ready", ready, timeout=90)


def podapp(node, ns, pod, *argv):
    """A command in the pod's app container (busybox sh)."""
    return node.kubectl("exec", "-n", ns, pod, "-c", "app", "--", *argv).stdout


def own_stats(node, ns, pod):
    return json.loads(podapp(node, ns, pod, "cat", "/tmp/podapp-stats.json"))["functions"]


def signal_podapp(node, ns, pod, sig):
    # podapp is the container's first process: PID 1 of the pod's PID namespace
    podapp(node, ns, pod, "sh", "-c", f"kill -{sig} 1")


def test_agent_pod_runs_as_the_chart_ships_it(node):
    pod = node.ready_agent_pod()
    spec, (ctr,) = pod["spec"], pod["spec"]["containers"]
    assert spec["hostPID"] is True
    assert spec["serviceAccountName"] == "retwatch-agent"
    sc = ctr["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["privileged"] is False
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["BPF", "PERFMON", "SYS_PTRACE"]}
    assert ctr["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert ctr["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # the in-cluster token: the kubelet's projected volume, no kubeconfig
    assert not any(a.startswith("--kubeconfig") for a in ctr["args"])
    mounts = {m["mountPath"]: m for m in ctr["volumeMounts"]}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts
    # what the kernel says of the process the kubelet started
    (pid,) = node.container_pids(pod, "agent")
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines())
    assert int(status["CapEff"], 16) == CHART_CAPS, status["CapEff"]
    assert int(status["CapBnd"], 16) == CHART_CAPS, status["CapBnd"]
    assert status["Seccomp"].strip() == "0"  # the chart's Unconfined
    with open(f"/proc/{pid}/mountinfo") as f:
        root = next(line.split() for line in f if line.split()[4] == "/")
    assert "ro" in root[5].split(","), root
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[0] == b"/usr/local/bin/retwatch-agent"
    # its own mount namespace, the host's PID namespace
    assert os_readlink(f"/proc/{pid}/ns/mnt") != os_readlink("/proc/self/ns/mnt")
    assert os_readlink(f"/proc/{pid}/ns/pid") == os_readlink("/proc/self/ns/pid")
    # Ready means it has listed FunctionProbes and pods with the token
    assert pod_ready(pod)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def os_readlink(path):
    import os
    return os.readlink(path)


def test_probe_of_a_deployment_shows_calls_and_p50(node):
    ns, labels = "shop", {"app": "web"}
    node.kubectl("create", "namespace", ns)
    apply(node, deployment(ns, "web", 2, labels))
    pods = [p["metadata"]["name"] for p in running_pods(node, ns, "app=web", 2)]

    start = time.monotonic()
    apply(node, probe(ns, "lat", labels))

    def calls_in_status():
        s = node.kubectl_json("get", "fprobe", "lat", "-n", ns).get("status", {})
        f = fns(s.get("summary", {}))
        return (s["summary"].get("pods") == 2 and all(f[n]["calls"] > 0 for n in FUNCS)
                and s)
    wait_for("calls of both pods in the probe's status", calls_in_status, timeout=10)
    took = time.monotonic() - start
    node.timings["kubectl apply -> calls in status"] = took
    assert took < 5, f"calls took {took:.1f} s to reach the status"
    table = node.kubectl("get", "fprobe", "lat", "-n", ns).stdout
    assert "main.handleRequest" in table and re.search(r"\b2\b", table), table

    # The same window of calls: every podapp counts afresh (the agent has
    # long been attached), runs a while, then pauses; the agent's next
    # summary holds at least all those calls.
    for p in pods:
        signal_podapp(node, ns, p, "USR1")
    time.sleep(2)
    for p in pods:
        signal_podapp(node, ns, p, "USR2")
    paused = time.time()
    time.sleep(0.5)  # podapp writes its stats once the calls under way are done
    own = {p: own_stats(node, ns, p) for p in pods}

    last = {}

    def summary_after_pause():
        s = last["summary"] = node.kubectl_json("get", "fprobe", "lat", "-n", ns)["status"]["summary"]
        f = fns(s)
        return (rfc3339(s["lastUpdate"]) > paused and all(
            f[n]["calls"] >= sum(o[n]["calls"] for o in own.values()) for n in FUNCS) and s)
    try:
        summary = wait_for("a summary holding every call made before the pause",
                           summary_after_pause, timeout=15)
    except AssertionError as e:
        raise AssertionError(f"{e}: paused at {paused:.3f}, own stats {own}, "
                             f"last summary {last.get('summary')}") from None
    for name, f in fns(summary).items():
        assert f["mode"] == "entry+ret" and f["returnSites"] >= 1, f
        medians = [o[name]["median_ns"] for o in own.values()]
        median = sum(medians) / len(medians)
        p50 = ns_of(f["p50"])
        assert abs(p50 - median) / median < 0.05, (name, f["p50"], medians)

    # both replicas' processes, found through the kubelet's cgroups
    reports = node.kubectl_json("get", "functionprobereports", "-n", ns)["items"]
    (report,) = [r for r in reports if r.get("probe", {}).get("name") == "lat"]
    assert report["node"] == clusterlib.NODE
    seen = {(p["name"], p["containerID"]) for p in report["status"]["pods"]}
    want = {(p["metadata"]["name"], container_id(p, "app"))
            for p in node.kubectl_json("get", "pods", "-n", ns, "-l", "app=web")["items"]}
    assert seen == want
    # every replica's calls counted (the two share the image's binary: one
    # attachment to the layer's file serves both)
    for f in report["status"]["functions"]:
        per_pod = {p["name"]: p["calls"] for p in f["pods"]}
        for p in pods:
            assert per_pod[p] >= own[p][f["name"]]["calls"] > 0, (f["name"], per_pod, own)
    for p in pods:
        signal_podapp(node, ns, p, "USR2")  # resume
