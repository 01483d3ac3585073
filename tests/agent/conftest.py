"""End-to-end tests of retwatch-agent against real parts: a kube-apiserver
and etcd built from Go modules (tests/k8s), runc containers in kubelet-style
cgroups running a Go service with known latencies (tests/fixtures/podapp),
and real uprobes.

Run (from the repository root, as root):
    make agenttest
or  RETWATCH_AGENT=build/asan/retwatch-agent python3 -m pytest -q tests/agent

Nothing is skipped: without root, runc or bpftool the run stops with an error.
"""

import itertools
import json
import os
import re
import shutil
import signal
import tempfile
import time
import urllib.error

import pytest

pytest.register_assert_rewrite("agentproc")

import agentproc  # noqa: E402
from agentproc import INSTALL_YAML, REPO  # noqa: E402
import pods  # noqa: E402
from controlplane import ControlPlane, build_bindir  # noqa: E402

AGENT = os.environ.get("RETWATCH_AGENT", os.path.join(REPO, "build/asan/retwatch-agent"))
# Rendered from the Helm chart (`make manifests`; test_install.py checks it is
# up to date): the CRD, the namespace retwatch, the agent's ServiceAccount
# retwatch-agent (the "agent" user of the control plane) and RBAC, and its
# DaemonSet: agentproc.INSTALL_YAML.


def pytest_configure(config):
    problems = []
    if os.geteuid() != 0:
        problems.append("the agent's tests need root (uprobes, runc, /proc of other processes)")
    if not os.access(AGENT, os.X_OK):
        problems.append(f"RETWATCH_AGENT={AGENT}: no such executable (run `make asan`)")
    for tool in ("runc", "bpftool", "openssl", "go"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            problems.append(f"{tool} is not installed (scripts/deps.sh installs it)")
    if problems:
        raise pytest.UsageError("agent tests cannot run:\n  " + "\n  ".join(problems))


def agent_pids():
    """Pids of the agent binary under test that are running."""
    binary, pids = os.path.realpath(AGENT), []
    for d in os.listdir("/proc"):
        try:
            if d.isdigit() and os.readlink(f"/proc/{d}/exe") == binary:
                pids.append(int(d))
        except OSError:
            pass
    return pids


@pytest.fixture(autouse=True)
def no_stray_agent():
    """Each test stops the agents it started: one left running would write
    the status of its node's probes in the tests that follow."""
    yield
    stray = agent_pids()
    for pid in stray:
        os.kill(pid, signal.SIGKILL)
    assert not stray, f"agents left running after the test: {stray}"


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="retwatch-agent-test-")
    yield d
    pods.cleanup_all(pods.runtime_root(d))
    shutil.rmtree(d, ignore_errors=True)


# The chart's policy on spec.captureArguments (test_arguments.py): as
# install.yaml has it, it refuses every probe that asks, the tests' too; the
# cluster is made without it, and test_arguments.py applies it and takes it
# away again.
ARGUMENT_POLICY = "retwatch-agent-arguments"


def install_manifests(kinds=None, without=(), without_names=()):
    """The documents of manifests/install.yaml whose kind is in kinds (default
    all) and not in without, and whose name is not in without_names, as one
    YAML text for `kubectl apply -f -`."""
    with open(INSTALL_YAML) as f:
        docs = re.split(r"^---[ \t]*\n", f.read(), flags=re.M)
    picked = []
    for doc in docs:
        kind = re.search(r"^kind:[ \t]*(\S+)", doc, re.M)
        name = re.search(r"^metadata:\n(?:  .*\n)*?  name:[ \t]*(\S+)", doc, re.M)
        if name and name.group(1) in without_names:
            continue
        if kind and (kinds is None or kind.group(1) in kinds) and kind.group(1) not in without:
            picked.append(doc)
    assert picked, f"{INSTALL_YAML}: no document of kind {kinds} without {without}"
    return "---\n" + "---\n".join(picked)


class Cluster:
    """The test control plane with manifests/install.yaml applied: the CRD and
    the agent's RBAC. Its DaemonSet is stored but never runs: no controller
    manager or kubelet does."""

    def __init__(self, cp, workdir):
        self.cp = cp
        self.workdir = workdir
        self._ns = itertools.count(1)

    def kubectl(self, *args, **kw):
        return self.cp.kubectl(*args, **kw)

    def namespace(self):
        """A fresh namespace (namespaces are never deleted: no controller
        manager runs to finish a deletion)."""
        name = f"t{next(self._ns)}"
        self.kubectl("create", "namespace", name)
        return name

    def apply_probe(self, ns, name, spec, check=True):
        doc = {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
               "metadata": {"name": name, "namespace": ns}, "spec": spec}
        return self.kubectl("apply", "-f", "-", input=json.dumps(doc), check=check)

    def get(self, path):
        """A GET of an API path as admin, parsed, as `kubectl get -o json`
        prints it (without managedFields). Tests poll the probes' status and
        reports with it: a kubectl process takes 0.2 s here, a request 6 ms.
        Like kubectl (client-go), it waits out a 429 or a 5xx that has a
        Retry-After (an API server just restarted answers 429 for a while),
        10 times at most."""
        for attempt in range(11):
            try:
                with self.cp.urlopen(path) as r:
                    obj = json.loads(r.read())
                break
            except urllib.error.HTTPError as e:
                retry_after = e.headers.get("Retry-After")
                if attempt == 10 or not retry_after or not (e.code == 429 or e.code >= 500):
                    raise
                time.sleep(min(int(retry_after) if retry_after.isdigit() else 1, 10))
        for o in obj.get("items", [obj]):
            o.get("metadata", {}).pop("managedFields", None)
        return obj

    def probe(self, ns, name):
        return self.get(f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobes/{name}")

    def status(self, ns, name):
        return self.probe(ns, name).get("status", {})

    def reports(self, ns, name=None):
        """The FunctionProbeReports in ns (of probe name, when given)."""
        path = f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobereports"
        items = self.get(path)["items"]
        return [r for r in items if name is None or r.get("probe", {}).get("name") == name]

    def node_entry(self, ns, name, node):
        """What node's agent reports of probe name: its report's status."""
        for r in self.reports(ns, name):
            if r.get("node") == node:
                return r.get("status")
        return None

    def ensure_summary_lease(self):
        """The summary Lease, made without a holder when no agent made it yet:
        the admission policy on status writes takes it as its parameter, and
        without one refuses every writer."""
        if self.kubectl("get", "lease", "-n", "retwatch", "retwatch-summary",
                        check=False).returncode:
            self.kubectl("create", "-f", "-", input=json.dumps({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "retwatch-summary", "namespace": "retwatch"},
                "spec": {}}))

    def condition(self, ns, name, ctype):
        for c in self.status(ns, name).get("conditions", []):
            if c["type"] == ctype:
                return c
        return None

    def agent(self, node, user="agent", extra=(), caps=None):
        """The agent for node, with the DaemonSet's capabilities unless caps.
        The images' layers (pods.make_rootfs, the containers' upper dirs) are
        under workdir, which stands for the runtime's snapshot directory."""
        extra = ("--layer-root", os.path.abspath(self.workdir)) + tuple(extra)
        return agentproc.Agent(AGENT, self.cp.kubeconfig(user), node, self.workdir, extra, caps)


@pytest.fixture(scope="session")
def cluster(workdir):
    cp = ControlPlane(os.path.join(workdir, "cp"), build_bindir())
    cp.start()
    try:
        cp.kubectl("apply", "-f", "-", input=install_manifests(without_names=(ARGUMENT_POLICY,)))
        cp.kubectl("wait", "--for=condition=Established", "crd/functionprobes.retwatch.io",
                   "crd/functionprobereports.retwatch.io",
                   "crd/clusterfunctionprobes.retwatch.io")
        yield Cluster(cp, workdir)
    finally:
        cp.stop()


@pytest.fixture(autouse=True)
def no_stray_nodes(request):
    """Each test's Node objects (a pod's token names one) are deleted after
    it: the summary writer sums only the reports of the cluster's nodes once
    any exist, so a Node left behind would leave node-a's reports out of
    every summary in the tests that follow."""
    yield
    if "cluster" not in request.fixturenames:
        return
    cluster = request.getfixturevalue("cluster")
    if cluster.get("/api/v1/nodes")["items"]:
        cluster.kubectl("delete", "nodes", "--all", "--wait=false")


@pytest.fixture(scope="session")
def image(workdir):
    """The rootfs every test container runs: busybox, the podapp service, and
    shpod with its libraries."""
    app = pods.build_podapp(os.path.join(workdir, "bin"))
    root = os.path.join(workdir, "image")
    pods.make_rootfs(root, app)
    # a C program whose functions live in shared libraries (and its C runtime)
    pods.add_shpod(root, pods.build_shpod(os.path.join(workdir, "bin", "shpod")))
    return root


@pytest.fixture
def make_pod(cluster, image, workdir):
    """make_pod(ns, name, labels, node, containers={"app": args}) -> a created Pod,
    deleted after the test."""
    made = []

    def make(ns, name, labels, node, containers=None, owner=None):
        pod = pods.Pod(cluster.kubectl, ns, name, labels, node, containers or {"app": None},
                       image, workdir, owner)
        made.append(pod)
        return pod.create()

    yield make
    for pod in made:
        pod.delete()
