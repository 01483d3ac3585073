"""The agent as every user runs it: the DaemonSet pod that `helm install` of
charts/retwatch makes, started by a kubelet, on a real single-node cluster
(cluster.py) brought up once per session and stopped at its end.

Run (from the repository root, as root):
    make clustertest
or  python3 -m pytest -q -p no:cacheprovider tests/cluster

Nothing is skipped: without root or a tool the run stops with an error.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cluster as clusterlib  # noqa: E402

REPO = clusterlib.REPO
RELEASE = "retwatch"
AGENT_NS = "retwatch"


def pytest_configure(config):
    problems = []
    if os.geteuid() != 0:
        problems.append("the cluster's tests need root (a kubelet, containerd, uprobes)")
    for tool in ("containerd", "runc", "ctr", "buildah", "nsenter", "unshare", "ip", "openssl",
                 "go", "gcc", "bpftool"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            problems.append(f"{tool} is not installed (scripts/deps.sh installs it)")
    for plugin in ("bridge", "host-local"):
        if not os.path.exists(os.path.join(clusterlib.CNI_BIN, plugin)):
            problems.append(f"CNI plugin {plugin} is missing from {clusterlib.CNI_BIN} "
                            "(scripts/deps.sh installs containernetworking-plugins)")
    if problems:
        raise pytest.UsageError("cluster tests cannot run:\n  " + "\n  ".join(problems))


def helm_bindir():
    out = subprocess.run(["bash", os.path.join(REPO, "tests", "helm", "build.sh")],
                         stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


# What the tests measured (seconds, or text), printed at the end of the run.
TIMINGS = {}


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_sep("-", "cluster timings")
        for what, value in TIMINGS.items():
            terminalreporter.write_line(
                f"{what}: {value:.2f} s" if isinstance(value, float) else f"{what}: {value}")


class Node:
    """The running cluster, with helm and what the tests need of it."""

    def __init__(self, c, helm):
        self.c = c
        self.helm_bin = helm
        self.timings = TIMINGS

    def kubectl(self, *args, **kw):
        return self.c.kubectl(*args, **kw)

    def kubectl_json(self, *args):
        return self.c.kubectl_json(*args)

    def helm(self, *args, check=True, timeout=180):
        env = dict(os.environ, KUBECONFIG=self.c.admin_kubeconfig,
                   HELM_CACHE_HOME=self.c.path("helm", "cache"),
                   HELM_CONFIG_HOME=self.c.path("helm", "config"),
                   HELM_DATA_HOME=self.c.path("helm", "data"))
        res = subprocess.run(self.c.in_netns([self.helm_bin, *args]), env=env,
                             capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise clusterlib.ClusterError(f"helm {' '.join(args)} exited {res.returncode}: "
                                          f"{res.stderr.strip()}")
        return res

    def install_agent(self):
        """helm install of the chart, the image set to the local one; the
        layer root is containerd's of this cluster (cluster.LAYER_ROOT).
        Argument capture allowed, as an administrator would to show the
        slowest calls' arguments: the cluster's admin may ask for them."""
        repo, tag = clusterlib.AGENT_IMAGE.rsplit(":", 1)
        return self.helm("install", RELEASE, os.path.join(REPO, "charts", "retwatch"),
                         "--namespace", AGENT_NS, "--create-namespace",
                         "--set", f"image.repository={repo}", "--set", f"image.tag={tag}",
                         "--set", "image.pullPolicy=Never", "--set", "allowArgumentCapture=true",
                         "--set-json",
                         "extraArgs=" + json.dumps([f"--layer-root={clusterlib.LAYER_ROOT}"]))

    def agent_pods(self):
        return self.kubectl_json("get", "pods", "-n", AGENT_NS, "-l",
                                 "app.kubernetes.io/name=retwatch")["items"]

    def ready_agent_pod(self, timeout=120):
        """The agent's pod once it is Running and Ready (its readiness probe)."""
        return wait_for("the agent's pod to be Ready", lambda: next(
            (p for p in self.agent_pods() if pod_ready(p)
             and not p["metadata"].get("deletionTimestamp")), None), timeout)

    def container_pids(self, pod, container):
        """Host PIDs of a pod's container: the processes of its cgroup."""
        cid = container_id(pod, container)
        found = set()
        for h in ("pids", "memory"):
            base = os.path.join(clusterlib.CGROUP_MOUNT, h, clusterlib.CGROUP_ROOT)
            for d, _, _ in os.walk(base):
                if os.path.basename(d) == cid:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        found.update(int(x) for x in f.read().split())
        return sorted(found)


def memcg_of(pid):
    """The directory of pid's memory cgroup (v1)."""
    with open(f"/proc/{pid}/cgroup") as f:
        cg = next(line.strip().split(":", 2)[2] for line in f if ":memory:" in line)
    return os.path.join(clusterlib.CGROUP_MOUNT, "memory", cg.lstrip("/"))


def memory_of(pid):
    """pid's RSS and its container's memory cgroup usage, as text."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    with open(os.path.join(memcg_of(pid), "memory.usage_in_bytes")) as f:
        usage = int(f.read())
    return f"VmRSS {rss / 1024:.1f} MiB, cgroup memory.usage_in_bytes {usage / 2**20:.1f} MiB"


def container_id(pod, container):
    for s in pod["status"].get("containerStatuses", []):
        if s["name"] == container and s.get("containerID"):
            return s["containerID"].split("://", 1)[1]
    raise AssertionError(f"pod {pod['metadata']['name']}: no container {container} yet")


def pod_ready(pod):
    return pod["status"].get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in pod["status"].get("conditions", []))


def wait_for(what, fn, timeout, interval=0.2):
    """Polls fn until it returns something true; returns it, or fails naming what."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
        except (KeyError, IndexError, TypeError, ValueError, AssertionError,
                clusterlib.ClusterError) as e:
            last = e
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} "
                                 f"(last: {last!r})")
        time.sleep(interval)


@pytest.fixture(scope="session")
def node():
    """The cluster with the agent installed by helm and Ready; stopped at the
    end of the session, whatever happened."""
    workdir = tempfile.mkdtemp(prefix="retwatch-cluster-test-")
    c = clusterlib.Cluster(clusterlib.build_bindir())
    try:
        images = clusterlib.build_images(workdir)
        helm = os.path.join(helm_bindir(), "helm")
        t = time.monotonic()
        c.start()
        TIMINGS["cluster start -> node Ready"] = time.monotonic() - t
        t = time.monotonic()
        for image in images:
            c.import_image(image)
        TIMINGS["image import"] = time.monotonic() - t
        n = Node(c, helm)
        t = time.monotonic()
        n.install_agent()
        n.ready_agent_pod()
        n.timings["helm install -> agent Ready"] = time.monotonic() - t
        yield n
    finally:
        c.stop()
        shutil.rmtree(workdir, ignore_errors=True)
