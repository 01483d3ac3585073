"""What one tenant writes in a FunctionProbe is bounded: a selector of
80,000 labels (1.3 MB, within the API server's request limit) is refused by
the CRD's schema, and, when written around it (a CRD without the bounds,
or an object stored before them), by every agent, which says why in the
probe's status and goes on tracing the other probes."""

import json
import os

import yaml

from agentproc import REPO, wait_for
from conftest import install_manifests
from test_agent import has_calls, spec

CRD = "crd/functionprobes.retwatch.io"


def probe_doc(ns, name, s):
    return json.dumps({"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
                       "metadata": {"name": name, "namespace": ns}, "spec": s})


def many_labels(n):
    """n labels, 1.3 MB at 80,000: within etcd's limit on a value (1.5 MiB)."""
    return {f"k{i}": "v" for i in range(n)}


def create(cluster, ns, name, s, check=False):
    # create, not apply: apply would also copy the object into an annotation
    return cluster.kubectl("create", "-f", "-", input=probe_doc(ns, name, s), check=check)


def test_api_server_refuses_an_80k_label_selector(cluster):
    ns = cluster.namespace()
    res = create(cluster, ns, "huge", spec(selector={"matchLabels": many_labels(80000)}))
    assert res.returncode != 0
    assert "spec.selector.matchLabels: Too many: 80000: must have at most 64 items" in res.stderr, \
        res.stderr[:2000]
    key = "p" * 254 + "/name"
    res = create(cluster, ns, "longkey", spec(selector={"matchLabels": {key: "v"}}))
    assert res.returncode != 0 and "matchLabels keys must be label keys" in res.stderr, res.stderr
    res = create(cluster, ns, "exprkey", spec(selector={"matchExpressions": [
        {"key": "a/" + "n" * 64, "operator": "Exists"}]}))
    assert res.returncode != 0 and "key must be a label key" in res.stderr, res.stderr
    res = create(cluster, ns, "exprs", spec(selector={"matchExpressions": [
        {"key": f"k{i}", "operator": "Exists"} for i in range(33)]}))
    assert res.returncode != 0 and "must have at most 32 items" in res.stderr, res.stderr
    # at the bounds: accepted
    create(cluster, ns, "most", spec(selector={
        "matchLabels": {"p" * 253 + "/" + "n" * 63: "v" * 63, **many_labels(63)},
        "matchExpressions": [{"key": f"k{i}", "operator": "In",
                              "values": [f"v{j}" for j in range(256)]} for i in range(32)]}),
        check=True)


def crd_docs():
    docs = [d for d in yaml.safe_load_all(install_manifests(kinds={"CustomResourceDefinition"}))
            if d]
    (probe_crd,) = [d for d in docs if d["metadata"]["name"] == "functionprobes.retwatch.io"]
    return probe_crd


def loosened_crd():
    """The CRD as it was before the selector's bounds."""
    crd = crd_docs()
    sel = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["selector"]
    sel["properties"]["matchLabels"] = {"type": "object",
                                        "additionalProperties": {"type": "string"}}
    return crd


def test_agent_refuses_an_80k_label_probe_written_around_the_crd(cluster, make_pod):
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    huge = spec(selector={"matchLabels": {"app": "web", **many_labels(80000)}})
    try:
        with cluster.agent("node-a") as agent:
            cluster.apply_probe(ns, "fine", spec())
            wait_for("calls of the other probe",
                     lambda: has_calls(cluster, ns, "fine", "node-a"), timeout=8)
            cluster.kubectl("apply", "-f", "-", input=json.dumps(loosened_crd()))
            # the server takes the new schema a moment after the update
            last = []

            def created():
                last[:] = [create(cluster, ns, "huge", huge)]
                return last[0].returncode == 0
            try:
                wait_for("the loosened CRD to take the probe", created, timeout=20,
                         interval=0.5)
            except AssertionError as e:
                raise AssertionError(f"{e}: {last[0].stderr[:1000]}") from None
            (ev,) = wait_for("the agent to refuse the probe",
                             lambda: agent.find(msg_has=f"probe {ns}/huge is not valid"),
                             timeout=15)
            assert ("spec.selector.matchLabels has more than 64 entries: select the pods by "
                    "fewer labels" in ev["msg"]), ev
            cond = wait_for("Ready=False", lambda: (c := cluster.condition(ns, "huge", "Ready"))
                            and c["status"] == "False" and c, timeout=20)
            assert cond["reason"] == "InvalidSpec", cond
            assert "spec.selector.matchLabels has more than 64 entries" in cond["message"], cond
            # nothing of it was traced, and the agent stays live and tracing
            assert not cluster.node_entry(ns, "huge", "node-a"), \
                cluster.node_entry(ns, "huge", "node-a")
            assert agent.get("/healthz") == (200, "ok\n")
            before = has_calls(cluster, ns, "fine", "node-a")["lastUpdate"]
            wait_for("a later report of the other probe",
                     lambda: (e := has_calls(cluster, ns, "fine", "node-a"))
                     and e["lastUpdate"] != before, timeout=8)
            assert agent.proc.poll() is None
    finally:
        cluster.kubectl("delete", "functionprobe", "huge", "-n", ns, "--ignore-not-found")
        cluster.kubectl("apply", "-f", "-", input=json.dumps(crd_docs()))
        cluster.kubectl("wait", "--for=condition=Established", CRD)


def test_the_quota_example_limits_probes_per_namespace(cluster):
    """manifests/examples/probe-quota.yaml in a namespace: the API server's
    quota admission refuses the probe past its count. No controller manager
    runs here, so the test writes the quota's status as its controller
    would (hard as the spec says, nothing used yet)."""
    ns = cluster.namespace()
    with open(os.path.join(REPO, "manifests", "examples", "probe-quota.yaml")) as f:
        quota = yaml.safe_load(f)
    quota["metadata"]["namespace"] = ns
    hard = quota["spec"]["hard"]
    limit = int(hard["count/functionprobes.retwatch.io"])
    cluster.kubectl("apply", "-f", "-", input=json.dumps(quota))
    cluster.kubectl("patch", "resourcequota", quota["metadata"]["name"], "-n", ns,
                    "--subresource=status", "--type=merge", "-p",
                    json.dumps({"status": {"hard": hard,
                                           "used": {k: "0" for k in hard}}}))
    for i in range(limit):
        create(cluster, ns, f"p{i}", spec(), check=True)
    res = create(cluster, ns, "over", spec())
    assert res.returncode != 0, res.stdout
    assert "exceeded quota: functionprobes" in res.stderr, res.stderr
    # another namespace is not limited by it
    create(cluster, cluster.namespace(), "p0", spec(), check=True)
