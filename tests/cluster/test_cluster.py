"""The agent as a DaemonSet pod under a real kubelet: installed with helm,
probing a Deployment's pods that containerd started, results read back with
kubectl."""

import base64
import calendar
import json
import os
import re
import signal
import subprocess
import time

import pytest

import cluster as clusterlib
from conftest import AGENT_NS, container_id, memory_of, pod_ready, wait_for

FUNCS = ["main.handleRequest", "main.lookupUser"]
UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
# podapp's calls: long enough that what its own measurement holds beyond the
# agent's (the call itself, and the uprobes' traps, tens of microseconds each
# on a loaded virtual machine) stays well under 5% of them
PODAPP_ARGS = ["-latency", "12ms", "-lookup", "4ms"]
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
                                         "imagePullPolicy": "Never", "args": PODAPP_ARGS}]}}}}


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
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
    # Ready means it has listed FunctionProbes and pods with the token
    assert pod_ready(pod)
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def summary_after_pause(node, ns, probe, paused, own, calls):
    """The probe's first summary written after the pause that holds at least
    calls (per function): every call the paused services made; own (their
    stats) is for the message."""
    last = {}

    def complete():
        s = last["summary"] = node.kubectl_json("get", "fprobe", probe, "-n", ns)[
            "status"]["summary"]
        f = fns(s)
        return (rfc3339(s["lastUpdate"]) > paused and
                all(f[n]["calls"] >= c for n, c in calls.items()) and s)
    try:
        return wait_for("a summary holding every call made before the pause", complete,
                        timeout=15)
    except AssertionError as e:
        raise AssertionError(f"{e}: paused at {paused:.3f}, own stats {own}, "
                             f"last summary {last.get('summary')}") from None


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

    # The same window of calls for the comparison: with both podapps paused,
    # a second probe of the same pods attaches; then they count afresh,
    # resume, run a while and pause again. That probe saw exactly the calls
    # the podapps counted.
    for p in pods:
        signal_podapp(node, ns, p, "USR2")
    apply(node, probe(ns, "window", labels))

    def attached():
        r = report_of(node, ns, "window")
        return r and r["status"].get("attached") and len(r["status"].get("pods", [])) == 2
    wait_for("the second probe to attach to both pods", attached, timeout=15)
    for p in pods:
        signal_podapp(node, ns, p, "USR1")
    for p in pods:
        signal_podapp(node, ns, p, "USR2")
    time.sleep(2)
    for p in pods:
        signal_podapp(node, ns, p, "USR2")
    paused = time.time()
    time.sleep(0.5)  # podapp writes its stats once the calls under way are done
    own = {p: own_stats(node, ns, p) for p in pods}
    summary = summary_after_pause(node, ns, "window", paused, own, {
        n: sum(o[n]["calls"] for o in own.values()) for n in FUNCS})
    for name, f in fns(summary).items():
        assert f["mode"] == "entry+ret" and f["returnSites"] >= 1, f
        assert f["calls"] == sum(o[name]["calls"] for o in own.values()), (name, f, own)
        # each replica's p50 (the status names the slowest pods: both here)
        # against its own median; the replicas' merged p50 between theirs
        per_pod = {sp["pod"]: ns_of(sp["p50"]) for sp in f["slowestPods"]}
        assert set(per_pod) == set(pods), (name, f["slowestPods"])
        for p in pods:
            median = own[p][name]["median_ns"]
            assert abs(per_pod[p] - median) / median < 0.05, (name, p, per_pod[p], median)
        medians = [o[name]["median_ns"] for o in own.values()]
        assert 0.95 * min(medians) <= ns_of(f["p50"]) <= 1.05 * max(medians), \
            (name, f["p50"], medians)

    # both replicas' processes, found through the kubelet's cgroups
    reports = node.kubectl_json("get", "functionprobereports", "-n", ns)["items"]
    (report,) = [r for r in reports if r.get("probe", {}).get("name") == "window"]
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
            assert per_pod[p] == own[p][f["name"]]["calls"] > 0, (f["name"], per_pod, own)
    for p in pods:
        signal_podapp(node, ns, p, "USR2")  # resume
    node.kubectl("delete", "fprobe", "-n", ns, "window")
    agent = node.ready_agent_pod()
    (pid,) = node.container_pids(agent, "agent")
    node.timings["agent pod memory, probing 2 pods"] = memory_of(pid)


def report_of(node, ns, name):
    for r in node.kubectl_json("get", "functionprobereports", "-n", ns)["items"]:
        if r.get("probe", {}).get("name") == name:
            return r
    return None


def pod_calls(report, pod):
    """pod's calls of each function in a node's report."""
    out = {}
    for f in report["status"].get("functions", []):
        out[f["name"]] = sum(p["calls"] for p in f.get("pods", []) if p["name"] == pod)
    return out


def test_replaced_pod_is_probed(node):
    ns = "shop"  # the Deployment and probe of the test above
    old = sorted(p["metadata"]["name"] for p in running_pods(node, ns, "app=web", 2))
    node.kubectl("delete", "pod", "-n", ns, old[0], "--wait=false")
    pods = running_pods(node, ns, "app=web", 2)
    (new,) = [p for p in pods if p["metadata"]["name"] not in old]
    started = new["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
    name = new["metadata"]["name"]

    def probed():
        r = report_of(node, ns, "lat")
        return r and all(n > 0 for n in pod_calls(r, name).values()) and \
            len(pod_calls(r, name)) == len(FUNCS) and r
    report = wait_for(f"calls of the new pod {name} in the node's report", probed, timeout=15)
    node.timings["container start -> calls in report"] = \
        time.time() - rfc3339(started)
    assert old[0] not in {p["name"] for p in report["status"]["pods"]}
    # the other replica kept counting
    assert all(n > 0 for n in pod_calls(report, old[1]).values())


def test_crashed_container_is_probed_again(node):
    """The kubelet restarts a container that died: its new process is
    probed, and the pod's calls keep counting from where they were."""
    ns = "shop"
    pod = running_pods(node, ns, "app=web", 2)[0]
    name = pod["metadata"]["name"]
    (pid,) = node.container_pids(pod, "app")
    before = pod_calls(report_of(node, ns, "lat"), name)
    assert all(n > 0 for n in before.values()), before
    os.kill(pid, signal.SIGKILL)

    def restarted():
        p = node.kubectl_json("get", "pod", "-n", ns, name)
        s = p["status"]["containerStatuses"][0]
        return s["restartCount"] >= 1 and s.get("ready") and p
    pod = wait_for(f"the kubelet to restart {name}'s container", restarted, timeout=60)
    (new_pid,) = node.container_pids(pod, "app")
    assert new_pid != pid

    def counting():
        r = report_of(node, ns, "lat")
        entry = [p for p in r["status"]["pods"] if p["name"] == name]
        now = pod_calls(r, name)
        return (entry and entry[0]["processes"] == [new_pid]
                and all(now[f] > before[f] for f in FUNCS) and now)
    wait_for(f"calls of {name}'s new process (PID {new_pid})", counting, timeout=15)


def revision(pod):
    """A pod's revision as the agent names it: its owner ReplicaSet."""
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner["kind"] == "ReplicaSet", owner
    return owner["name"]


def test_rollout_restart_shows_both_revisions_then_the_new_one(node):
    """kubectl rollout restart: while a new ReplicaSet's pod runs beside
    the old one's (one surge pod, held 6 s before the next step), the
    summary has a row for each revision with calls; when the rollout is
    done, the report's pods are the new revision's, each counting."""
    ns = "shop"
    old = {revision(p) for p in running_pods(node, ns, "app=web", 2)}
    assert len(old) == 1
    (old_rev,) = old
    node.kubectl("patch", "deployment", "web", "-n", ns, "--type=merge", "-p", json.dumps({
        "spec": {"minReadySeconds": 6, "strategy": {"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 1, "maxUnavailable": 0}}}}))
    node.kubectl("rollout", "restart", "deployment/web", "-n", ns)

    def both():
        s = node.kubectl_json("get", "fprobe", "lat", "-n", ns)["status"].get("summary", {})
        f = fns(s).get("main.handleRequest", {})
        revs = {r["revision"]: r for r in f.get("revisions", [])}
        return len(revs) == 2 and old_rev in revs and all(
            r["calls"] > 0 for r in revs.values()) and revs
    revs = wait_for("a summary with the old and the new revision", both, timeout=30)
    (new_rev,) = set(revs) - {old_rev}
    node.kubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=90s", timeout=120)
    pods = running_pods(node, ns, "app=web", 2)
    names = {p["metadata"]["name"] for p in pods}
    assert {revision(p) for p in pods} == {new_rev}

    def only_new():
        r = report_of(node, ns, "lat")
        here = {p["name"] for p in r["status"]["pods"]}
        return here == names and all(
            all(n > 0 for n in pod_calls(r, name).values()) for name in names) and r
    report = wait_for("the new revision's pods alone in the report, counting", only_new,
                      timeout=20)
    assert {p["revision"] for p in report["status"]["pods"]} == {new_rev}, report["status"]


def old_pod(node):
    return node.kubectl_json("get", "pods", "-n", "shop", "-l", "app=web")["items"][0][
        "metadata"]["name"]


def test_probe_in_another_namespace_never_touches_these_pods(node):
    node.kubectl("create", "namespace", "elsewhere")
    apply(node, probe("elsewhere", "same-labels", {"app": "web"}))

    def seen():
        s = node.kubectl_json("get", "fprobe", "same-labels", "-n", "elsewhere").get("status")
        return s and s.get("conditions") and s
    status = wait_for("the other namespace's probe to get a status", seen, timeout=15)
    time.sleep(4)  # two report intervals: time to attach, were it to select them
    status = node.kubectl_json("get", "fprobe", "same-labels", "-n", "elsewhere")["status"]
    assert status.get("summary", {}).get("calls", 0) == 0, status
    assert status.get("summary", {}).get("pods", 0) == 0, status
    for r in node.kubectl_json("get", "functionprobereports", "-n", "elsewhere")["items"]:
        assert r["status"].get("pods", []) == [], r["status"]
        assert all(f.get("calls", 0) == 0 for f in r["status"].get("functions", []))
    # the shop pods' own probe still counts them
    assert all(n > 0 for n in pod_calls(report_of(node, "shop", "lat"), old_pod(node)).values())
    node.kubectl("delete", "namespace", "elsewhere", "--wait=false")


# -- a C service (tests/fixtures/c/cservice.c) --------------------------------

CFUNCS = ["handle_request", "lookup_record"]
CSERVICE_ARGS = ["-l", "12000", "-k", "4000"]  # as PODAPP_ARGS: 12 ms calls, 4 of them in lookup


def cservice(node, ns, labels, name="csvc", image=clusterlib.CSERVICE_IMAGE):
    """A Deployment of one C service pod (labels {"app": name}); its pod once
    Running and Ready."""
    apply(node, {"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": name, "namespace": ns},
                 "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                          "template": {"metadata": {"labels": labels}, "spec": {
                              "terminationGracePeriodSeconds": 2,
                              "containers": [{"name": "svc", "image": image,
                                              "imagePullPolicy": "Never",
                                              "args": CSERVICE_ARGS}]}}}})
    (pod,) = running_pods(node, ns, f"app={name}", 1)
    return pod


def cservice_pid(node, pod):
    (pid,) = node.container_pids(pod, "svc")
    return pid


def cservice_stats(pid):
    """What the service measured itself, read through its root from the host."""
    with open(f"/proc/{pid}/root/tmp/cservice-stats.json") as f:
        return json.load(f)["functions"]


def test_c_service_in_a_pod_shows_calls_and_p50(node):
    """A static C program (no frame pointers) in a pod: its C functions are
    probed at entry and RET, and the status's calls and p50 are the
    service's own over the same window of calls (as the Go test's)."""
    ns, labels = "native", {"app": "csvc"}
    node.kubectl("create", "namespace", ns)
    pod = cservice(node, ns, labels)
    name, pid = pod["metadata"]["name"], cservice_pid(node, pod)
    os.kill(pid, signal.SIGUSR2)  # paused while the probe attaches
    apply(node, {**probe(ns, "clat", labels), "spec": {
        "selector": {"matchLabels": labels}, "functions": CFUNCS, "reportInterval": "2s"}})

    def attached():
        r = report_of(node, ns, "clat")
        return r and r["status"].get("attached") and len(r["status"].get("pods", [])) == 1 and r
    report = wait_for("the probe to attach to the C service", attached, timeout=15)
    assert [(p["name"], p["containerID"], p["processes"]) for p in report["status"]["pods"]] == \
        [(name, container_id(pod, "svc"), [pid])], report["status"]["pods"]
    os.kill(pid, signal.SIGUSR1)  # counts afresh, then (a higher signal) resumes
    os.kill(pid, signal.SIGUSR2)
    time.sleep(2)
    os.kill(pid, signal.SIGUSR2)
    paused = time.time()
    time.sleep(0.5)  # the stats are written once the calls under way are done
    own = cservice_stats(pid)
    assert all(own[f]["calls"] > 50 for f in CFUNCS), own
    summary = summary_after_pause(node, ns, "clat", paused, own,
                                  {n: own[n]["calls"] for n in CFUNCS})
    assert sorted(fns(summary)) == sorted(CFUNCS), summary
    for fname, f in fns(summary).items():
        assert f["mode"] == "entry+ret" and f["returnSites"] >= 1, f
        assert f["calls"] == own[fname]["calls"], (fname, f, own)
        median = own[fname]["median_ns"]
        assert abs(ns_of(f["p50"]) - median) / median < 0.05, (fname, f["p50"], median)
    os.kill(pid, signal.SIGUSR2)  # resume
    node.kubectl("delete", "fprobe", "-n", ns, "clat")


def test_stripped_service_is_probed_by_its_debug_file(node):
    """A pod's image holds a program stripped of every symbol and its debug
    file under /usr/lib/debug/.build-id: the agent finds the debug file
    inside the container's root by the program's build id, names the
    functions by it, and counts their calls as the service does."""
    ns, labels = "stripped", {"app": "csvc-stripped"}
    node.kubectl("create", "namespace", ns)
    pod = cservice(node, ns, labels, "csvc-stripped", clusterlib.CSERVICE_STRIPPED_IMAGE)
    pid = cservice_pid(node, pod)
    os.kill(pid, signal.SIGUSR2)  # paused while the probe attaches
    apply(node, {**probe(ns, "dbg", labels), "spec": {
        "selector": {"matchLabels": labels}, "functions": CFUNCS, "reportInterval": "2s"}})

    def attached():
        r = report_of(node, ns, "dbg")
        return r and r["status"].get("attached") and len(r["status"].get("pods", [])) == 1 and r
    try:
        wait_for("the probe to attach to the stripped service", attached, timeout=15)
    except AssertionError as e:
        status = node.kubectl_json("get", "fprobe", "dbg", "-n", ns).get("status")
        raise AssertionError(f"{e}: the probe's status {status}, its report "
                             f"{report_of(node, ns, 'dbg')}") from None
    os.kill(pid, signal.SIGUSR1)  # counts afresh, then resumes
    os.kill(pid, signal.SIGUSR2)
    time.sleep(2)
    os.kill(pid, signal.SIGUSR2)
    paused = time.time()
    time.sleep(0.5)
    own = cservice_stats(pid)
    assert all(own[f]["calls"] > 50 for f in CFUNCS), own
    summary = summary_after_pause(node, ns, "dbg", paused, own,
                                  {n: own[n]["calls"] for n in CFUNCS})
    assert sorted(fns(summary)) == sorted(CFUNCS), summary
    for fname, f in fns(summary).items():
        assert f["calls"] == own[fname]["calls"], (fname, f, own)
    node.kubectl("delete", "namespace", ns, "--wait=false")


def call_sites(exe):
    """Of exe's functions in clusterlib.CSERVICE_STACK, by objdump: each one's
    RET offsets, and the offset in it just past its call of the next inner
    one (the return address a caller's frame holds)."""
    funcs = clusterlib.CSERVICE_STACK
    rets, after_call = {}, {}
    for fn in funcs:
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={fn}", exe],
                             capture_output=True, text=True, check=True).stdout
        start = int(re.search(rf"^([0-9a-f]+) <{re.escape(fn)}>:", out, re.M).group(1), 16)
        insns = [(int(m.group(1), 16), m.group(2)) for m in
                 re.finditer(r"^ +([0-9a-f]+):\t(.*)$", out, re.M)]
        rets[fn] = {a - start for a, text in insns if text.split()[0] == "ret"}
        for (a, text), (next_a, _) in zip(insns, insns[1:]):
            for inner in funcs:
                if text.startswith("call") and text.endswith(f"<{inner}>"):
                    after_call[(fn, inner)] = next_a - start
    want = [(funcs[0], rets[funcs[0]])]
    for inner, outer in zip(funcs, funcs[1:]):
        want.append((outer, {after_call[(outer, inner)]}))
    return want


def agent_log_events(node, pod, event):
    """The agent's log lines (JSON) of one event (None: all)."""
    out = node.kubectl("logs", "-n", AGENT_NS, pod).stdout
    return [json.loads(line) for line in out.splitlines()
            if line.startswith("{") and (event is None or f'"event":"{event}"' in line)]


def test_c_slow_call_stack_unwound_from_the_agent_pod(node):
    """A slow call of a C function without frame pointers: the agent's log
    holds its stack, unwound by the unwind tables of the service's binary
    (reached from the agent's mount namespace through /proc/PID), each frame
    named and at the very instruction objdump finds: the RET, then the
    return address past each caller's call."""
    ns, labels = "native", {"app": "csvc"}
    (pod,) = running_pods(node, ns, "app=csvc", 1)
    name, pid = pod["metadata"]["name"], cservice_pid(node, pod)
    agent = node.ready_agent_pod()["metadata"]["name"]
    apply(node, {**probe(ns, "cslow", labels), "spec": {
        "selector": {"matchLabels": labels}, "functions": ["lookup_record"],
        "slowThreshold": "3ms", "reportInterval": "2s", "captureArguments": True}})

    def slow_calls():
        return [e for e in agent_log_events(node, agent, "slow_call")
                if e.get("namespace") == ns and e.get("probe") == "cslow"]
    events = wait_for("a slow call of lookup_record in the agent's log", slow_calls, timeout=15)

    def slowest_in_status():
        s = node.kubectl_json("get", "fprobe", "cslow", "-n", ns).get("status", {})
        f = fns(s.get("summary", {})).get("lookup_record", {})
        calls = f.get("slowestCalls") or []
        return any("arguments" in c for c in calls) and calls
    # the same calls, with their stacks, in the probe's status: for users of
    # the namespace, who may not read the agent's log
    kept = wait_for("lookup_record's slowest calls in the status, with arguments",
                    slowest_in_status, timeout=15)
    node.kubectl("delete", "fprobe", "-n", ns, "cslow")
    ev = events[0]
    top = kept[0]
    assert (top["pod"], top["container"], top["pid"], top["node"]) == \
        (name, "svc", pid, clusterlib.NODE), top
    assert (ev["function"], ev["pod"], ev["container"], ev["pid"]) == \
        ("lookup_record", name, "svc", pid), ev
    assert ev["duration_ns"] >= 3e6, ev
    # its argument, read at the entry from DWARF's location (captureArguments);
    # the log names it, its value is in the status alone. A call already under
    # way when the capture was turned on (the function's slot is the earlier
    # probe's, clat's, until that one is detached) carries none: the first
    # calls that do, of the status and of the log
    top_args = next(c for c in kept if "arguments" in c)
    ev_args = wait_for("a logged slow call with its arguments", lambda: next(
        (e for e in slow_calls() if "arguments" in e), None), timeout=15)
    for call in (top_args, ev_args):
        key = call["arguments"]
        assert [(a["name"], a["type"]) for a in key] == [("key", "uint64_t")], call
    assert int(top_args["arguments"][0]["value"]) >= 0, top_args
    assert "value" not in ev_args["arguments"][0] and "status" in ev_args["arguments_values"], \
        ev_args
    want = call_sites(f"/proc/{pid}/exe")
    frames = []
    for frame in ev["stack"][:len(want)]:
        m = re.fullmatch(r"(\w+)\+0x([0-9a-f]+) \((\S+)\)", frame)
        assert m, (frame, ev["stack"])
        frames.append((m.group(1), int(m.group(2), 16), m.group(3)))
    assert [f[0] for f in frames] == [w[0] for w in want], ev["stack"]
    # the status's slowest call unwound the same way
    assert [f.split("+")[0] for f in top["stack"][:len(want)]] == [w[0] for w in want], \
        top["stack"]
    assert all(path == "/app/cservice" for _, _, path in frames), ev["stack"]
    for (fn, off, _), (_, offsets) in zip(frames, want):
        assert off in offsets, (fn, hex(off), [hex(o) for o in offsets], ev["stack"])
    # below worker_main: the C library's thread start, by its own tables
    assert len(ev["stack"]) > len(want) and ev["stack"][len(want)].startswith("start_thread+"), \
        ev["stack"]


def test_container_found_by_its_cgroup_v2_line(node, tmp_path):
    """The agent tells a process's container from the cgroup v2 line of
    /proc/PID/cgroup ("0::/...") when no v1 line names it, as on a cgroup v2
    node. This machine mounts cgroup v1 with the v2 hierarchy beside it
    (/sys/fs/cgroup/unified, no controllers), where runc puts every
    container too: a process of the test's, in its own v1 cgroups, joins the
    C service's container cgroup in the v2 hierarchy only, before it runs;
    the agent counts it among the container's processes and its calls."""
    unified = os.path.join(clusterlib.CGROUP_MOUNT, "unified")
    if clusterlib._unified():
        pytest.skip("cgroup v2 alone: every other test finds its pods by their v2 line")
    if not os.path.exists(os.path.join(unified, "cgroup.procs")):
        pytest.skip(f"no cgroup v2 hierarchy at {unified} (cgroup v1 alone)")
    ns, labels = "native", {"app": "csvc"}
    (pod,) = running_pods(node, ns, "app=csvc", 1)
    name, pid = pod["metadata"]["name"], cservice_pid(node, pod)
    with open(f"/proc/{pid}/cgroup") as f:
        (v2,) = [line.split(":", 2)[2].strip() for line in f if line.startswith("0::")]
    cid = container_id(pod, "svc")
    assert v2.endswith("/" + cid), v2
    procs = os.path.join(unified, v2.lstrip("/"), "cgroup.procs")

    def join_v2_only():
        with open(procs, "w") as f:
            f.write("0")
    # the container's own file (the agent probes the processes that run the
    # executable of the container's first one), its stats out of the way
    child = subprocess.Popen([f"/proc/{pid}/exe", "-s", str(tmp_path / "stats.json"),
                              *CSERVICE_ARGS], preexec_fn=join_v2_only)
    try:
        with open(f"/proc/{child.pid}/cgroup") as f:
            lines = f.read().splitlines()
        assert f"0::{v2}" in lines, lines
        assert not [line for line in lines if not line.startswith("0::") and cid in line], lines
        apply(node, {**probe(ns, "cv2", labels), "spec": {
            "selector": {"matchLabels": labels}, "functions": CFUNCS, "reportInterval": "2s"}})

        def counted():
            r = report_of(node, ns, "cv2")
            entry = [p for p in r["status"]["pods"] if p["name"] == name] if r else []
            return entry and sorted(entry[0]["processes"]) == sorted([pid, child.pid]) and \
                all(n > 0 for n in pod_calls(r, name).values()) and r
        wait_for(f"the report to count process {child.pid} as {name}'s", counted, timeout=15)
        agent = node.ready_agent_pod()["metadata"]["name"]
        assert [e for e in agent_log_events(node, agent, None)
                if e.get("msg", "").startswith(f"attached to process {child.pid}:")]
    finally:
        child.kill()
        child.wait()
        node.kubectl("delete", "fprobe", "-n", ns, "cv2", "--ignore-not-found")


def agent_links(pid):
    """Ids of the BPF links process pid holds: its fds of bpf_link, whose
    fdinfo names the link."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:bpf_link":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("link_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def system_link_ids():
    out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True,
                         check=True).stdout
    return {link["id"] for link in json.loads(out or "[]")}


# Run in the cluster's network namespace: holds 32 connections to the agent's
# metrics port (8 from each of four addresses, the port's per-address limit;
# each past its TLS handshake) for HOLD seconds, a header line on each every
# 5 s (its idle timeout is 10 s), and asks the health port for /healthz
# every second meanwhile.
HOLDER = r"""
import json, socket, ssl, sys, time, urllib.request
ip, mport, hport, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
sources = sys.argv[5:]
tls = ssl._create_unverified_context()

def held(i):
    s = socket.socket()
    s.bind((sources[i // 8], 0))
    s.settimeout(2)
    s.connect((ip, mport))
    s = tls.wrap_socket(s)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: agent\r\n")
    return s

def get(port, path, timeout):
    start = time.monotonic()
    scheme = "https" if port == mport else "http"
    try:
        with urllib.request.urlopen(f"{scheme}://{ip}:{port}{path}", timeout=timeout,
                                    context=tls) as r:
            code = r.status
    except urllib.error.HTTPError as e:
        code = e.code
    except OSError as e:
        code = type(e).__name__
    return code, time.monotonic() - start

socks = [held(i) for i in range(32)]
time.sleep(0.5)
full = get(mport, "/healthz", 2)[0]
answers, reopened, start, last = [], 0, time.monotonic(), time.monotonic()
while time.monotonic() - start < hold:
    if time.monotonic() - last >= 5:
        for i, s in enumerate(socks):
            try:
                s.sendall(b"X-Idle: 1\r\n")
            except OSError:
                s.close()
                socks[i] = held(i)
                reopened += 1
        last = time.monotonic()
    answers.append(get(hport, "/healthz", 5))
    time.sleep(1)
for s in socks:
    s.close()
released, back = time.monotonic(), None
while back is None and time.monotonic() - released < 30:
    if get(mport, "/healthz", 2)[0] == 200:
        back = time.monotonic() - released
    else:
        time.sleep(0.5)
print(json.dumps({"full": full, "answers": answers, "reopened": reopened, "back": back}))
"""
HOLD_S = 60
HOLD_SOURCES = [f"10.247.255.{i}" for i in range(2, 6)]


def test_health_port_outlasts_held_metrics_connections(node):
    """Issue 25: 32 idle connections held for 60 s to the agent pod's metrics
    port (from four addresses of the node's network namespace, standing for
    four pods) leave /healthz on the health port answering within 1 s every
    time; the kubelet's probes, which use that port, neither restart the
    agent nor take it out of Ready."""
    pod = node.ready_agent_pod()
    ip = pod["status"]["podIP"]
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    for a in HOLD_SOURCES:
        node.c.run_in_netns(["ip", "addr", "add", f"{a}/32", "dev", "lo"], check=True)
    try:
        holder = subprocess.Popen(
            node.c.in_netns(["python3", "-c", HOLDER, ip, "9431", "9432", str(HOLD_S),
                             *HOLD_SOURCES]), stdout=subprocess.PIPE, text=True)
        unready = []
        while holder.poll() is None:
            p = node.kubectl_json("get", "pod", "-n", AGENT_NS, pod["metadata"]["name"])
            if not pod_ready(p):
                unready.append(time.monotonic())
            time.sleep(2)
        out = json.loads(holder.stdout.read())
        assert holder.returncode == 0
    finally:
        for a in HOLD_SOURCES:
            node.c.run_in_netns(["ip", "addr", "del", f"{a}/32", "dev", "lo"])
    slowest = max(t for _, t in out["answers"])
    node.timings["slowest /healthz with 32 metrics connections held 60 s"] = slowest
    print(f"{len(out['answers'])} /healthz answers, slowest {slowest * 1000:.1f} ms; "
          f"/healthz on the full metrics port: {out['full']}; reopened {out['reopened']}; "
          f"the metrics port answered again {out['back']} s after they closed")
    assert out["full"] != 200, "the 32 connections should fill the metrics port"
    assert all(code == 200 for code, _ in out["answers"]), out["answers"]
    assert slowest < 1, slowest
    assert not unready, f"the agent's pod was not Ready {len(unready)} times"
    assert out["back"] is not None, "the metrics port did not answer again once they closed"
    p = node.kubectl_json("get", "pod", "-n", AGENT_NS, pod["metadata"]["name"])
    assert p["status"]["containerStatuses"][0]["restartCount"] == restarts


# Run in the cluster's network namespace: GET /metrics of the agent at ip
# over TLS, the certificate verified with the CA in argv[2] for the name
# argv[3], with the token argv[4] if given; prints the status.
SCRAPE = r"""
import http.client, socket, ssl, sys
ip, ca, name, token = sys.argv[1], sys.argv[2], sys.argv[3], (sys.argv[4:] or [None])[0]
ctx = ssl.create_default_context(cafile=ca)
try:
    s = ctx.wrap_socket(socket.create_connection((ip, 9431), timeout=10), server_hostname=name)
except ssl.SSLCertVerificationError as e:
    print("unverified", e.verify_message)
    sys.exit(0)
conn = http.client.HTTPConnection(ip, 9431, timeout=10)
conn.sock = s
conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
r = conn.getresponse()
print(r.status, r.read().decode()[:20000])
"""


def test_metrics_over_tls_refuse_a_pod_without_a_token(node, tmp_path):
    """Issues 25 and 46: /metrics is served over TLS only, with the
    certificate the chart made: another pod's plain HTTP GET gets no answer
    (the cluster's CNI bridge does not enforce the chart's NetworkPolicy,
    so the request reaches the agent); over TLS, the certificate verifies
    with the chart's CA for retwatch-agent.retwatch.svc (and not for another
    name), a scrape without a token gets 401, and with the token of a
    ServiceAccount bound to the chart's metrics-reader ClusterRole the
    metrics."""
    ip = node.ready_agent_pod()["status"]["podIP"]
    ns = "metrics-client"
    secret = node.kubectl_json("get", "secret", "-n", AGENT_NS, "retwatch-agent-metrics-tls")
    ca = tmp_path / "ca.crt"
    ca.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    name = f"retwatch-agent.{AGENT_NS}.svc"

    def scrape(*args, name=name):
        res = node.c.run_in_netns(["python3", "-c", SCRAPE, ip, str(ca), name, *args],
                                  capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout

    node.kubectl("create", "namespace", ns)
    try:
        apply(node, deployment(ns, "client", 1, {"app": "client"}))
        (pod,) = running_pods(node, ns, "app=client", 1)
        res = node.kubectl("exec", "-n", ns, pod["metadata"]["name"], "-c", "app", "--",
                           "/bin/busybox", "wget", "-q", "-O-", f"http://{ip}:9431/metrics",
                           check=False)
        assert res.returncode != 0 and "401" not in res.stderr, (res.stdout[:200], res.stderr)
        assert scrape().startswith("401 "), scrape()
        assert scrape(name="retwatch-agent.other.svc").startswith("unverified")
        node.kubectl("create", "serviceaccount", "prometheus", "-n", ns)
        node.kubectl("create", "clusterrolebinding", "metrics-client-prometheus",
                     "--clusterrole=retwatch-agent-metrics-reader",
                     f"--serviceaccount={ns}:prometheus")
        token = node.kubectl("create", "token", "prometheus", "-n", ns).stdout.strip()
        out = scrape(token)
        assert out.startswith("200 ") and "retwatch_build_info" in out, out[:300]
    finally:
        node.kubectl("delete", "clusterrolebinding", "metrics-client-prometheus", check=False)
        node.kubectl("delete", "namespace", ns, "--wait=false")


def test_helm_uninstall_detaches_and_exits_0(node):
    """Last: it removes the agent. The kubelet's SIGTERM reaches the agent,
    which detaches everything and exits 0 within the grace period."""
    pod = node.ready_agent_pod()
    (pid,) = node.container_pids(pod, "agent")
    cid = container_id(pod, "agent")
    links = agent_links(pid)
    assert links, "the agent holds no BPF link while probing"
    events = subprocess.Popen(["ctr", "--address", node.c.path("containerd.sock"),
                               "--namespace", "k8s.io", "events"],
                              stdout=subprocess.PIPE, text=True)
    try:
        start = time.monotonic()
        node.helm("uninstall", "retwatch", "--namespace", AGENT_NS, "--wait")
        wait_for("the agent's process to end", lambda: not os.path.exists(f"/proc/{pid}"),
                 timeout=30)
        took = time.monotonic() - start
        exit_status = None
        deadline = time.monotonic() + 10
        while exit_status is None and time.monotonic() < deadline:
            line = events.stdout.readline()
            if "/tasks/exit" in line and cid in line:
                exit_status = json.loads(line[line.index("{"):]).get("exit_status", 0)
    finally:
        events.kill()
        events.wait()
    assert exit_status == 0, f"the agent's container exited {exit_status}"
    assert took < 30, took
    node.timings["helm uninstall -> agent gone"] = took
    # none of the links it held is left in the kernel
    assert not links & system_link_ids()
