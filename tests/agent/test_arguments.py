"""Asking for arguments takes a permission of its own (docs/security.md):
the chart's ValidatingAdmissionPolicy retwatch-agent-arguments, on the real
API server. As manifests/install.yaml has it (the chart's default,
allowArgumentCapture false) it refuses spec.captureArguments to everybody,
saying how to turn it on; with allowArgumentCapture it refuses it to a user
without `create` on functionprobes/arguments (clusterfunctionprobes/arguments
for a ClusterFunctionProbe), naming the permission, and admits it once the
shipped ClusterRole retwatch-argument-capture is bound. The investigator
roles do not hold it. The rest of the suite runs without the policy
(conftest.ARGUMENT_POLICY)."""
import contextlib
import json

import yaml

from agentproc import wait_for
from conftest import ARGUMENT_POLICY, INSTALL_YAML
from test_install import CHART, helm  # noqa: F401 (the fixture)
from test_plugin import investigator

ROLE = "retwatch-argument-capture"


def policy_docs(text):
    """The argument policy and its binding of a rendered YAML stream."""
    docs = [d for d in yaml.safe_load_all(text) if d and d["metadata"]["name"] == ARGUMENT_POLICY]
    assert sorted(d["kind"] for d in docs) == ["ValidatingAdmissionPolicy",
                                               "ValidatingAdmissionPolicyBinding"], docs
    return docs


def probe(ns, name, capture=True):
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "functions": ["main.charge"],
                     "captureArguments": capture}}


def cluster_probe(name, capture=True):
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "ClusterFunctionProbe",
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {"matchLabels": {"team": "none"}},
                     "selector": {"matchLabels": {"app": "web"}},
                     "functions": ["main.charge"], "captureArguments": capture}}


def create(cluster, doc, user="admin"):
    """(admitted, what the API server said) of a server-side dry run."""
    res = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(doc),
                          user=user, check=False)
    return res.returncode == 0, res.stdout + res.stderr


@contextlib.contextmanager
def argument_policy(cluster, docs, ns, user="admin"):
    """The policy applied, in force (the API server loads a policy a moment
    after it is stored: until user's probe asking for arguments in ns is
    refused by it), then deleted and out of force again (the tests that
    follow ask for arguments as the cluster's admin)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                         "items": docs}))
    try:
        wait_for("the policy in force", lambda: "captureArguments" in create(
            cluster, probe(ns, "x"), user)[1], timeout=30, interval=0.5)
        yield
    finally:
        for d in docs:
            cluster.kubectl("delete", d["kind"], ARGUMENT_POLICY, "--ignore-not-found")
        wait_for("the policy out of force", lambda: create(cluster, probe(ns, "x"))[0],
                 timeout=30, interval=0.5)


def test_the_default_refuses_arguments_to_everybody(cluster):
    with open(INSTALL_YAML) as f:
        docs = policy_docs(f.read())
    ns = cluster.namespace()
    with argument_policy(cluster, docs, ns):
        ok, said = create(cluster, probe(ns, "args"))
        assert not ok and "spec.captureArguments: true is turned off in this cluster" in said \
            and "allowArgumentCapture: false" in said, said
        ok, said = create(cluster, cluster_probe("args"))
        assert not ok and "turned off in this cluster" in said, said
        # a probe that does not ask is admitted, as before
        assert create(cluster, probe(ns, "plain", capture=False))[0]


def test_arguments_need_their_own_permission_where_allowed(cluster, helm):  # noqa: F811
    text = helm("template", "retwatch", CHART, "--namespace", "retwatch",
                "--set", "allowArgumentCapture=true").stdout
    ns = cluster.namespace()
    user = investigator(cluster, ns)
    sa = f"system:serviceaccount:{ns}:investigator"
    with argument_policy(cluster, policy_docs(text), ns, user):
        ok, said = create(cluster, probe(ns, "args"), user)
        assert not ok and "needs the permission to create functionprobes/arguments " \
            f"(group retwatch.io) in namespace {ns}, which the ClusterRole {ROLE} grants" \
            in said, said
        # the same user's probe without arguments is admitted
        assert create(cluster, probe(ns, "plain", capture=False), user)[0]
        # a probe that asks, made by one who may: a label of it is no asking
        # again, a change of its spec is
        cluster.kubectl("apply", "-f", "-", input=json.dumps(probe(ns, "kept")))
        cluster.kubectl("create", "role", "patcher", "--verb", "patch",
                        "--resource", "functionprobes.retwatch.io", "-n", ns)
        cluster.kubectl("create", "rolebinding", "patcher", "--role", "patcher",
                        "--serviceaccount", f"{ns}:investigator", "-n", ns)
        wait_for("the label patched", lambda: cluster.kubectl(
            "label", "functionprobe", "kept", "-n", ns, "team=a", "--overwrite", user=user,
            check=False).returncode == 0, timeout=10)
        res = cluster.kubectl("patch", "functionprobe", "kept", "-n", ns, "--type", "merge",
                              "-p", '{"spec":{"functions":["main.*"]}}', user=user, check=False)
        assert res.returncode != 0 and "functionprobes/arguments" in res.stderr, res.stderr
        # bound in the namespace, the ClusterRole gives it
        cluster.kubectl("create", "rolebinding", "args", "--clusterrole", ROLE,
                        "--serviceaccount", f"{ns}:investigator", "-n", ns)
        wait_for("the permission", lambda: cluster.kubectl(
            "auth", "can-i", "create", "functionprobes.retwatch.io/arguments", "-n", ns,
            "--as", sa, check=False).stdout.strip() == "yes", timeout=10)
        ok, said = wait_for("the probe admitted", lambda: (r := create(
            cluster, probe(ns, "args"), user))[0] and r, timeout=10)

        # a ClusterFunctionProbe asks for it at the cluster's scope: the
        # RoleBinding in one namespace is not it
        cluster.kubectl("create", "clusterrolebinding", f"cfp-{ns}",
                        "--clusterrole", "retwatch-cluster-investigator",
                        "--serviceaccount", f"{ns}:investigator")
        try:
            ok, said = wait_for("the cluster probe refused for arguments", lambda: (r := create(
                cluster, cluster_probe(f"args-{ns}"), user)) and "arguments" in r[1] and r,
                timeout=10)
            assert not ok and "create clusterfunctionprobes/arguments (group retwatch.io), " \
                f"which the ClusterRole {ROLE} grants" in said, said
            cluster.kubectl("create", "clusterrolebinding", f"args-{ns}", "--clusterrole", ROLE,
                            "--serviceaccount", f"{ns}:investigator")
            wait_for("the cluster probe admitted", lambda: create(
                cluster, cluster_probe(f"args-{ns}"), user)[0], timeout=10)
        finally:
            cluster.kubectl("delete", "clusterrolebinding", f"cfp-{ns}", f"args-{ns}",
                            "--ignore-not-found")


def test_the_investigator_roles_hold_no_argument_permission():
    with open(INSTALL_YAML) as f:
        roles = {d["metadata"]["name"]: d for d in yaml.safe_load_all(f)
                 if d and d["kind"] == "ClusterRole"}
    for name in ("retwatch-investigator", "retwatch-cluster-investigator"):
        resources = [r for rule in roles[name]["rules"] for r in rule.get("resources", [])]
        assert not [r for r in resources if r.endswith("/arguments") or r == "*"], \
            (name, resources)
    rules = roles[ROLE]["rules"]
    assert rules == [{"apiGroups": ["retwatch.io"],
                      "resources": ["functionprobes/arguments",
                                    "clusterfunctionprobes/arguments"],
                      "verbs": ["create"]}], rules
