"""The release agent, as the chart ships it (its 256Mi memory limit, every
bound at its default), against a tenant that asks it for all it can hold
(issue 45). Runs before test_cluster.py's tests (they end by uninstalling
the agent), and leaves none of its namespaces behind."""

import os
import re
import threading

import hoard
from conftest import memcg_of, wait_for
from test_cluster import apply, deployment, fns, probe, report_of, running_pods

GREEDY = [f"greedy-{i}" for i in range(3)]  # one namespace more than the node's kept bound holds
COPIES = 7  # of kubectl, ~16 MiB of analysis each: more than --analysis-max-bytes holds
LIMIT = 256 << 20  # the chart's resources.limits.memory
KEPT = re.compile(r"namespace (\S+) keep on this node hold ([0-9.]+) of the (\d+) MiB a "
                  r"namespace's may, and every namespace's ([0-9.]+) of the node's (\d+) MiB")


def memcg_stat(memcg):
    with open(os.path.join(memcg, "memory.stat")) as f:
        return {k: int(v) for k, v in (line.split() for line in f)}


def oom_kills(memcg):
    with open(os.path.join(memcg, "memory.oom_control")) as f:
        return int(dict(line.split() for line in f).get("oom_kill", 0))


class Sampler(threading.Thread):
    """The most anonymous memory (the agent's heap, not the page cache of
    the files it reads) its cgroup held, sampled every 0.2 s."""

    def __init__(self, memcg):
        super().__init__(daemon=True)
        self.memcg, self.peak, self.done = memcg, 0, threading.Event()

    def run(self):
        while not self.done.wait(0.2):
            try:
                self.peak = max(self.peak, memcg_stat(self.memcg)["rss"])
            except OSError:
                return


def quiet_deployment():
    """podapp, one worker that leaves the CPU to the others most of the time."""
    doc = deployment("quiet", "web", 1, {"app": "web"})
    doc["spec"]["template"]["spec"]["containers"][0]["args"] = [
        "-workers", "1", "-latency", "12ms", "-lookup", "4ms", "-gap", "24ms"]
    return doc


def hoard_deployment(ns):
    doc = deployment(ns, "hoard", 1, {"app": "hoard"})
    (ctr,) = doc["spec"]["template"]["spec"]["containers"]
    ctr.update(image=hoard.HOARD_IMAGE, args=[])
    return doc


def hoard_probe(ns):
    """Every keep_ function, the most slowest calls a probe keeps, the
    windows in which each function is called more than 20 times, no overhead guard: as much kept as the spec allows."""
    doc = probe(ns, "hoard", {"app": "hoard"})
    doc["spec"].update(functions=["keep_*"], slowCalls={"keep": 20}, window="10s",
                       maxOverhead="0")
    return doc


def copies_pod(ns):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "copies", "namespace": ns, "labels": {"app": "copies"}},
            "spec": {"terminationGracePeriodSeconds": 1, "containers": [
                {"name": f"kubectl-{n}", "image": hoard.HOARD_IMAGE, "imagePullPolicy": "Never",
                 "command": hoard.copy_command(n)} for n in range(COPIES)]}}


def errors_of(node, ns, name):
    r = report_of(node, ns, name)
    return (r or {}).get("status", {}).get("errors", [])


def test_a_hoarding_tenant_leaves_the_agent_under_its_limit_and_others_reported(node, tmp_path):
    """Three namespaces of one tenant keep the most slowest calls they may
    (frames of 500 bytes, 20 a function and window, 64 functions: more than
    the 16 MiB a namespace's calls may hold, three namespaces more than the
    node's 32 MiB), and one of them runs seven distinct copies of kubectl
    (about 16 MiB of analysis each: more than the 96 MiB all analyses may
    hold). The agent
    refuses what passes each bound and says so in the probes' reports; it is
    not OOM-killed or restarted, and another namespace's probe goes on
    reporting its calls."""
    node.c.import_image(hoard.build_hoard_image(str(tmp_path)))
    agent = node.ready_agent_pod()
    restarts = agent["status"]["containerStatuses"][0]["restartCount"]
    (pid,) = node.container_pids(agent, "agent")
    memcg = memcg_of(pid)
    with open(os.path.join(memcg, "memory.limit_in_bytes")) as f:
        assert int(f.read()) == LIMIT
    kills = oom_kills(memcg)
    with open(os.path.join(memcg, "memory.max_usage_in_bytes"), "w") as f:
        f.write("0")
    sampler = Sampler(memcg)
    sampler.start()
    try:
        node.kubectl("create", "namespace", "quiet")
        apply(node, quiet_deployment())
        running_pods(node, "quiet", "app=web", 1)
        apply(node, probe("quiet", "lat", {"app": "web"}))

        def quiet_calls():
            s = node.kubectl_json("get", "fprobe", "lat", "-n", "quiet").get("status", {})
            return s.get("summary") and sum(
                f["calls"] for f in fns(s["summary"]).values()) or None
        wait_for("calls in the quiet namespace's probe", quiet_calls, timeout=20)

        for ns in GREEDY:
            node.kubectl("create", "namespace", ns)
            apply(node, hoard_deployment(ns))
            apply(node, hoard_probe(ns))
        apply(node, copies_pod(GREEDY[0]))
        apply(node, {**probe(GREEDY[0], "copies", {"app": "copies"}),
                     "spec": {"selector": {"matchLabels": {"app": "copies"}},
                              "functions": ["main.main"], "reportInterval": "2s"}})

        def kept_refused():
            said = {ns: [m for m in errors_of(node, ns, "hoard") if KEPT.search(m)]
                    for ns in GREEDY}
            return all(said.values()) and said
        said = wait_for("every greedy namespace's kept calls refused", kept_refused,
                        timeout=120)
        for ns, (msg, *_) in said.items():
            m = KEPT.search(msg)
            assert m.group(1) == ns, msg
            ns_used, ns_max, used, node_max = (float(m.group(i)) for i in (2, 3, 4, 5))
            assert (ns_max, node_max) == (16, 32), msg
            assert ns_used <= ns_max and used <= node_max, msg
        # the node's bound holds two namespaces' at most
        full = [ns for ns, (msg, *_) in said.items()
                if float(KEPT.search(msg).group(2)) >= 15]
        assert len(full) <= 2, said

        def analysis_refused():
            return [m for m in errors_of(node, GREEDY[0], "copies")
                    if "--analysis-max-bytes" in m] or None
        (refused, *_) = wait_for("a copy of kubectl refused for the analyses' bound",
                                 analysis_refused, timeout=180)
        assert "over the 96.0 MiB that the agent's --analysis-max-bytes allows" in refused, \
            refused
        report = report_of(node, GREEDY[0], "copies")
        traced = sum(len(p.get("processes", [])) for p in report["status"].get("pods", []))
        assert 1 <= traced < COPIES, report["status"]

        # the quiet namespace is still reported, its calls counted
        before = quiet_calls()
        wait_for("more calls in the quiet namespace's probe",
                 lambda: quiet_calls() > before, timeout=20)
    finally:
        sampler.done.set()
        sampler.join()
        node.timings["agent under a hoarding tenant: peak anonymous memory"] = \
            f"{sampler.peak / 2**20:.1f} MiB"
        with open(os.path.join(memcg, "memory.max_usage_in_bytes")) as f:
            node.timings["agent under a hoarding tenant: cgroup max usage (page cache in)"] = \
                f"{int(f.read()) / 2**20:.1f} MiB"
        for ns in ["quiet", *GREEDY]:
            node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
    agent = node.ready_agent_pod()
    assert agent["status"]["containerStatuses"][0]["restartCount"] == restarts
    assert node.container_pids(agent, "agent") == [pid]
    assert oom_kills(memcg) == kills
    assert sampler.peak < LIMIT
    for ns in ["quiet", *GREEDY]:
        wait_for(f"namespace {ns} gone", lambda ns=ns: node.kubectl(
            "get", "namespace", ns, check=False).returncode != 0, timeout=120)
