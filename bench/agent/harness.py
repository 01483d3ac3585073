"""What the agent's benchmarks run against: the end-to-end tests' parts
(tests/agent: a real kube-apiserver and etcd, runc pods running podapp, the
agent as a process), set up once and torn down whatever happens.

    with Bench(agent_binary) as b:
        ns = b.namespace("one")
        pod = b.pod(ns, "web-0", {"app": "web"}, "node-a")
        agent = b.agent("node-a")
        b.apply([probe_doc(ns, "lat", {"app": "web"})])
"""

import datetime
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "agent"))

import agentproc  # noqa: E402
import pods  # noqa: E402
from agentproc import wait_for  # noqa: E402
from controlplane import ControlPlane, build_bindir  # noqa: E402

FUNCS = ["main.handleRequest", "main.lookupUser"]
PROBES_PATH = "/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobes"
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/retwatch/leases/retwatch-summary"


# -- figures -----------------------------------------------------------------

def percentile(values, q):
    """The nearest-rank q-quantile (0 < q <= 1) of values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def log_time(event):
    """An agent log event's "ts" (RFC 3339, ms) as Unix seconds."""
    ts = datetime.datetime.strptime(event["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return ts.replace(tzinfo=datetime.timezone.utc).timestamp()


def age_s(rfc3339):
    """Seconds since an RFC 3339 time written to the API (any precision)."""
    when = datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    return now() - when.timestamp()


def proc_status_kib(pid, *keys):
    """Fields of /proc/PID/status given in kB (VmRSS, VmHWM, ...), as ints."""
    with open(f"/proc/{pid}/status") as f:
        fields = dict(line.split(":", 1) for line in f)
    return [int(fields[k].split()[0]) for k in keys]


def cpu_seconds(pid):
    """User + system CPU time process pid has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- objects -----------------------------------------------------------------

def probe_doc(ns, name, labels, report_interval="2s"):
    return {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": labels}, "functions": FUNCS,
                     "reportInterval": report_interval}}


def live_entry(probe, node):
    """probe's status entry of node once it shows attached and a process."""
    for entry in probe.get("status", {}).get("nodes", []):
        if entry["node"] == node and entry.get("attached") and entry.get("processes", 0) >= 1:
            return entry
    return None


# -- the bench ---------------------------------------------------------------

class Bench:
    """A control plane with the CRD and RBAC applied, the podapp image, and
    the agents and containers started through it, all removed by close()."""

    def __init__(self, agent_binary):
        self.agent_binary = agent_binary
        self.workdir = tempfile.mkdtemp(prefix="retwatch-agent-bench-")
        self.cp = ControlPlane(os.path.join(self.workdir, "cp"), build_bindir())
        self.image = None
        self.agents = []

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _start(self):
        self.cp.start()
        # the CRD, the agent's ServiceAccount and RBAC (and its DaemonSet,
        # which nothing runs here)
        self.kubectl("apply", "-f", os.path.join(REPO, "manifests", "install.yaml"))
        self.kubectl("wait", "--for=condition=Established", "crd/functionprobes.retwatch.io")
        app = pods.build_podapp(os.path.join(self.workdir, "bin"))
        self.image = pods.make_rootfs(os.path.join(self.workdir, "image"), app)

    def close(self):
        """Stop the agents, remove every container, stop the control plane."""
        try:
            for agent in self.agents:
                self.stop_agent(agent)
        finally:
            try:
                pods.cleanup_all(pods.runtime_root(self.workdir))
            finally:
                self.cp.stop()
                shutil.rmtree(self.workdir, ignore_errors=True)

    # -- parts --

    def kubectl(self, *args, **kw):
        return self.cp.kubectl(*args, **kw)

    def namespace(self, name):
        self.kubectl("create", "namespace", name)
        return name

    def agent(self, node):
        agent = agentproc.Agent(self.agent_binary, self.cp.kubeconfig("agent"), node,
                                self.workdir)
        self.agents.append(agent)
        return agent.start()

    def stop_agent(self, agent):
        """Stop agent; a log line that is not JSON is printed, not raised."""
        try:
            agent.stop()
        except AssertionError as e:
            print(f"agent {agent.node}: {e}", file=sys.stderr)

    def pod(self, ns, name, labels, node):
        """A created podapp Pod (one container, "app")."""
        return pods.Pod(self.kubectl, ns, name, labels, node, {"app": None}, self.image,
                        self.workdir).create()

    # -- API --

    def apply(self, docs):
        """kubectl apply the objects docs at once."""
        self.kubectl("apply", "-f", "-",
                     input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))

    def delete_probe(self, ns, name):
        self.kubectl("delete", "functionprobe", name, "-n", ns, "--wait=false")

    def get(self, path):
        with self.cp.urlopen(path) as r:
            return json.load(r)

    def probe(self, ns, name):
        return self.get(PROBES_PATH.format(ns=ns) + "/" + name)

    def probes(self, ns):
        return self.get(PROBES_PATH.format(ns=ns))["items"]


# -- the agent's log ---------------------------------------------------------

def attached_event(agent, timeout, **fields):
    """The agent's first "attached to process" log event with fields (msg_has
    may narrow it to a PID: "attached to process 123:")."""
    fields.setdefault("msg_has", "attached to process")
    return wait_for(f"the agent to log an attach ({fields})",
                    lambda: agent.find(**fields), timeout, interval=0.02)[0]


def stats_event(agent):
    """Ask the agent for its counters (SIGUSR1); return the stats event."""
    seen = len(agent.find(event="stats"))
    os.kill(agent.pid, signal.SIGUSR1)
    return wait_for("the agent's stats line", lambda: agent.find(event="stats", count=seen + 1),
                    timeout=10, interval=0.05)[-1]


def now():
    """Wall-clock seconds: the clock of the agent's "ts" fields."""
    return time.time()
