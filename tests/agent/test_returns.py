"""Where the agent's traced calls end (issue 52): with --returns trampoline,
its default, a function of native code that calls nothing returns through
the kernel's return trampoline on Linux 6.14 and later, and every report's
function says which return it uses and why not the trampoline. leafpod
(tests/fixtures/c/shlib/leafpod.c) makes 10,000 calls of its leaf mix a
round and writes their checksum: the same traced as untraced, every call
counted, whichever the return."""

import json
import os
import subprocess

import pods
from agentproc import wait_for
from test_agent import fns, spec

CALLS = 40 * 250  # leafpod's ROUNDS x CALLS
CRD_FILE = os.path.join(pods.REPO, "crds", "functionprobereport.yaml")


def kernel_has_trampoline():
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 14) and os.uname().machine == "x86_64"


def untraced_round(workdir):
    leafpod = os.path.join(workdir, "bin", "shpod", "leafpod")
    return subprocess.run([leafpod, "once"], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def traced_round(cluster, agent, ns, c, name):
    """One round of leafpod's calls under the probe name on mix: its line,
    and the report's entry once it holds every call."""
    cluster.apply_probe(ns, name, spec(functions=["mix"]))
    try:
        wait_for("the attach", lambda: agent.find(msg_has=f"attached to process {c.pid}:"),
                 timeout=15)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{agent.tail(15)}") from None
    tmp = os.path.join(c.rootfs, "tmp")
    if os.path.exists(os.path.join(tmp, "done")):
        os.remove(os.path.join(tmp, "done"))
    with open(os.path.join(tmp, "go"), "w") as f:
        f.write("go\n")
    wait_for("leafpod's round", lambda: os.path.exists(os.path.join(tmp, "done")), timeout=60)
    with open(os.path.join(tmp, "done")) as f:
        line = f.read()
    last = {}

    def complete():
        e = last["entry"] = cluster.node_entry(ns, name, "node-a")
        return e and fns(e).get("mix", {}).get("calls") == CALLS and e
    try:
        entry = wait_for("every call in the report", complete, timeout=15)
    except AssertionError as e:
        raise AssertionError(f"{e}: leafpod wrote {line!r}, the report {last}\n{agent.tail(12)}") from None
    return line, fns(entry)["mix"]


def test_leaf_calls_end_at_the_trampoline_and_compute_the_same(cluster, make_pod, workdir):
    ns = cluster.namespace()
    untraced = untraced_round(workdir)
    pod = make_pod(ns, "leaf-1", {"app": "web"}, "node-a", containers={"app": ["/app/leafpod"]})
    c = pod.containers["app"]
    with cluster.agent("node-a") as agent:
        line, mix = traced_round(cluster, agent, ns, c, "leaf")
    assert line == untraced, (line, untraced)
    assert mix["orphans"] == 0, mix
    if kernel_has_trampoline():
        assert mix["probeReturn"] == "trampoline" and "probeReturnReason" not in mix, mix
        assert mix["returnSites"] == 0, mix
    else:
        assert mix["probeReturn"] == "ret" and "6.14" in mix["probeReturnReason"], mix


def test_returns_ret_keeps_every_call_at_the_rets(cluster, make_pod, workdir):
    ns = cluster.namespace()
    untraced = untraced_round(workdir)
    pod = make_pod(ns, "leaf-2", {"app": "web"}, "node-a", containers={"app": ["/app/leafpod"]})
    c = pod.containers["app"]
    with cluster.agent("node-a", extra=("--returns", "ret")) as agent:
        line, mix = traced_round(cluster, agent, ns, c, "rets")
    assert line == untraced, (line, untraced)
    assert mix["probeReturn"] == "ret" and mix["returnSites"] >= 1 and mix["orphans"] == 0, mix


FIELD = ("/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/functions/"
         "items/properties/probeReturn")


def test_an_older_crd_is_named_as_the_cause_and_the_write_follows_its_update(
        cluster, make_pod):
    """A cluster whose FunctionProbeReport CRD predates a field the agent
    writes (Helm never upgrades a chart's CRDs) refuses the whole report
    with a 500: the agent says to apply this version's CRDs, and writes the
    report once they are."""
    ns = cluster.namespace()
    crd = "functionprobereports.retwatch.io"
    make_pod(ns, "leaf-3", {"app": "web"}, "node-a", containers={"app": ["/app/leafpod"]})
    cluster.kubectl("patch", "crd", crd, "--type", "json",
                    "-p", json.dumps([{"op": "remove", "path": FIELD}]))
    try:
        with cluster.agent("node-a") as agent:
            cluster.apply_probe(ns, "old", spec(functions=["mix"]))
            (said,) = wait_for("the agent to name the CRD", lambda: agent.find(
                level="error", msg_has="the cluster's CRD is older than this agent"),
                timeout=20)[:1]
            assert "probeReturn" in said["msg"] and "kubectl apply -f crds/" in said["msg"], said
            assert not cluster.node_entry(ns, "old", "node-a")
            cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", CRD_FILE)
            wait_for("the report once the CRD has the field", lambda: (
                (e := cluster.node_entry(ns, "old", "node-a")) and "mix" in fns(e)), timeout=20)
    finally:
        cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", CRD_FILE)
