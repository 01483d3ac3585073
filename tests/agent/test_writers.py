"""Only the right writer writes (the chart's admission policies,
charts/retwatch/templates/admissionpolicy.yaml): the summary Lease only by
the agent of the node it names, and FunctionProbeReports only by the
agent's ServiceAccount. The agents run with pod-bound tokens, which name
their node as the kubelet's do."""

import json
import time
import urllib.error
import urllib.request

from agentproc import wait_for
from test_agent import has_calls, pod_token, rfc3339, spec

LEASE = "/apis/coordination.k8s.io/v1/namespaces/retwatch/leases"
AGENT_USER = "system:serviceaccount:retwatch:retwatch-agent"


def request(cluster, token, method, path, doc=None):
    """(HTTP status, body) of a request to the API server with token."""
    req = urllib.request.Request(cluster.cp.url + path, method=method,
                                 data=json.dumps(doc).encode() if doc is not None else None,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=cluster.cp.ssl_context(), timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def lease(cluster):
    return cluster.get(f"{LEASE}/retwatch-summary")


def put_lease(cluster, token, holder):
    """Writes the summary Lease as it is but for its holder, with token; a
    409 (the holder renewed meanwhile) is tried again on the newer Lease."""
    for _ in range(10):
        doc = lease(cluster)
        doc["spec"]["holderIdentity"] = holder
        code, text = request(cluster, token, "PUT", f"{LEASE}/retwatch-summary", doc)
        if code != 409:
            return code, text
        time.sleep(0.2)
    raise AssertionError(f"the Lease kept changing: {text}")


def test_only_the_holder_writes_the_summary_lease(cluster):
    """An agent's token writes the Lease only naming the token's node: the
    holder renews and releases it, another node's token can neither take it
    for a third node, renew it for its holder, nor release it."""
    tokens = {node: pod_token(cluster, node) for node in ("lease-a", "lease-b")}
    cluster.cp.add_token_user("pod-lease-a", tokens["lease-a"])
    with cluster.agent("lease-a", user="pod-lease-a") as agent:
        # an earlier test's agent may hold it until it expires (15 s)
        wait_for("lease-a to hold the Lease", lambda: agent.find(msg_has="holding Lease"),
                 timeout=40)
        first = lease(cluster)["spec"]
        assert first["holderIdentity"] == "lease-a", first
        wait_for("a renewal", lambda: lease(cluster)["spec"]["renewTime"] != first["renewTime"],
                 timeout=12)

        other = tokens["lease-b"]
        for holder, says in (("lease-c", "only as itself, not as lease-c"),
                             ("lease-a", "only as itself, not as lease-a"),
                             ("", "only as itself, not as nobody (only its holder "
                                  "releases it; held by lease-a)")):
            code, text = put_lease(cluster, other, holder)
            assert code == 403 and "the retwatch agent on node lease-b may hold the Lease " \
                "retwatch-summary " + says in text, (holder, code, text)
        # nor make another Lease beside it (RBAC cannot limit a create to a name)
        code, text = request(cluster, other, "POST", LEASE, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "retwatch-summary-2"}, "spec": {"holderIdentity": "lease-b"}})
        assert code == 403 and "may write only the Lease retwatch-summary, not " \
            "retwatch-summary-2" in text, (code, text)

        # the holder goes on renewing, unrefused
        renewed = lease(cluster)["spec"]
        assert renewed["holderIdentity"] == "lease-a", renewed
        wait_for("another renewal",
                 lambda: lease(cluster)["spec"]["renewTime"] != renewed["renewTime"], timeout=12)
        assert not agent.find(msg_has="may hold the Lease"), agent.tail()
        assert not agent.find(msg_has="not holding Lease"), agent.tail()
    # and releases it as it stops
    assert agent.find(msg_has="released Lease"), agent.tail()
    assert lease(cluster)["spec"].get("holderIdentity", "") == ""


def report_writer_role(cluster, ns, user):
    """Every right on ns's FunctionProbeReports for user, through a Role."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "report-writer", "namespace": ns},
             "rules": [{"apiGroups": ["retwatch.io"], "resources": ["functionprobereports"],
                        "verbs": ["create", "get", "list", "update", "patch", "delete"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
             "metadata": {"name": "report-writer", "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                         "name": "report-writer"},
             "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                           "name": user}]}]}))


def test_only_the_agent_writes_reports(cluster, make_pod):
    """The agent's own reports, Lease and summary pass; a user with create
    rights on FunctionProbeReports (and an administrator) can neither create
    one nor change what one says; the garbage collector's metadata writes
    and deletes stay with RBAC."""
    ns = cluster.namespace()
    cluster.cp.add_token_user("pod-wr-a", pod_token(cluster, "wr-a"))
    make_pod(ns, "web-a", {"app": "web"}, "wr-a")
    with cluster.agent("wr-a", user="pod-wr-a") as agent:
        cluster.apply_probe(ns, "own", spec())
        wait_for("wr-a's calls", lambda: has_calls(cluster, ns, "own", "wr-a"), timeout=15)
        first = cluster.node_entry(ns, "own", "wr-a")["lastUpdate"]
        wait_for("wr-a's report written again",
                 lambda: cluster.node_entry(ns, "own", "wr-a")["lastUpdate"] != first, timeout=8)
        # an earlier test's agent may hold the Lease until it expires (15 s)
        wait_for("wr-a's summary", lambda: (cluster.status(ns, "own").get("summary") or {})
                 .get("calls"), timeout=40)
        assert lease(cluster)["spec"]["holderIdentity"] == "wr-a"
        for says in ("only the retwatch agent", "may write only", "may hold the Lease",
                     "only while it holds"):
            assert not agent.find(msg_has=says), agent.tail()

    (mine,) = cluster.reports(ns, "own")
    name = mine["metadata"]["name"]
    report_writer_role(cluster, ns, "mallory")
    forged = json.loads(json.dumps(mine))
    for k in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        forged["metadata"].pop(k, None)
    forged["metadata"]["name"] = "own.wr-z"
    forged["metadata"]["labels"]["retwatch.io/node"] = "wr-z"
    forged["node"] = forged["status"]["node"] = "wr-z"
    for who in (("--as=mallory",), ()):
        res = cluster.kubectl("create", "-f", "-", *who, input=json.dumps(forged), check=False)
        user = "mallory" if who else "admin"
        assert res.returncode != 0 and "only the retwatch agent (" + AGENT_USER + ") may " \
            "create FunctionProbeReports, not " + user in res.stderr, res.stderr
    assert [r["node"] for r in cluster.reports(ns, "own")] == ["wr-a"]

    # what a report says: its results, its labels (which probe's it is)
    changes = (("patch", "fpreport", name, "--type=merge", "-p",
                json.dumps({"status": {"processes": 99}})),
               ("label", "fpreport", name, "retwatch.io/probe-uid=someone-else", "--overwrite"),
               ("patch", "fpreport", name, "--type=merge", "-p", json.dumps({"node": "wr-z"})))
    for args in changes:
        res = cluster.kubectl(*args, "-n", ns, "--as=mallory", check=False)
        assert res.returncode != 0 and "may change what a FunctionProbeReport says, not " \
            "mallory" in res.stderr, (args, res.stderr)
    (now,) = cluster.reports(ns, "own")
    assert (now["node"], now["status"], now["metadata"]["labels"]) == \
        (mine["node"], mine["status"], mine["metadata"]["labels"])

    # the garbage collector's writes: orphaning (owner references gone), a
    # finalizer added and taken away; then the delete
    for patch in ([{"op": "remove", "path": "/metadata/ownerReferences"}],
                  [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]}],
                  [{"op": "remove", "path": "/metadata/finalizers"}]):
        cluster.kubectl("patch", "fpreport", name, "-n", ns, "--type=json", "-p",
                        json.dumps(patch), "--as=mallory")
    cluster.kubectl("delete", "fpreport", name, "-n", ns, "--as=mallory")
    assert cluster.reports(ns, "own") == []


def test_reports_of_no_node_of_the_cluster_are_not_summed(cluster, make_pod):
    """The summary writer sums only the reports of the cluster's nodes: with
    a Node object for node-a, a report written by the agent's own
    ServiceAccount (a token that names no node, such as a legacy secret's)
    for node ghost, claiming a million calls, adds nothing; the summary is
    node-a's alone and the agent says why. (Without Node objects, as in the
    other tests here, nothing is checked.)"""
    ns = cluster.namespace()
    make_pod(ns, "web-1", {"app": "web"}, "node-a")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(node))
    try:
        with cluster.agent("node-a") as agent:
            cluster.apply_probe(ns, "ghosts", spec())
            (mine,) = wait_for("node-a's report", lambda: cluster.reports(ns, "ghosts"),
                               timeout=10)
            ghost = json.loads(json.dumps(mine))
            ghost["metadata"] = {"name": "ghosts-ghost", "namespace": ns,
                                 "labels": mine["metadata"]["labels"]
                                 | {"retwatch.io/node": "ghost"},
                                 "ownerReferences": mine["metadata"]["ownerReferences"]}
            ghost["node"] = ghost["status"]["node"] = "ghost"
            for f in ghost["status"].get("functions", []):
                f["calls"] = 1000000
            cluster.kubectl("create", "-f", "-", input=json.dumps(ghost), user="agent")
            try:
                said = wait_for("the ghost report ignored", lambda: agent.find(
                    msg_has="names node ghost, which is no node of the cluster"), timeout=30)
            except AssertionError as e:
                raise AssertionError(f"{e}\nthe agent's log:\n{agent.tail()}") from None
            wait_for("calls in node-a's report",
                     lambda: has_calls(cluster, ns, "ghosts", "node-a"), timeout=20)
            # a summary made after the ghost's report was listed (late in the
            # suite, the summary writer has every earlier test's probes too)
            listed = time.time()
            summary = wait_for("a summary after the ghost's report", lambda: (
                s := cluster.status(ns, "ghosts").get("summary", {})).get("calls")
                and rfc3339(s["lastUpdate"]) > listed and s, timeout=30, interval=0.5)
    finally:
        cluster.kubectl("delete", "node", "node-a")
    assert said and summary.get("nodes") == 1, summary
    assert 0 < summary.get("calls", 0) < 1000000, summary
