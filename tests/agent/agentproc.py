"""The agent under test as a process: start, read its JSON-line log, stop.

The agent runs with only the capabilities the DaemonSet grants it (as
manifests/install.yaml, rendered from the chart, says), not as full root."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Rendered from the Helm chart (`make manifests`; test_install.py checks it is
# up to date): the CRD, the namespace retwatch, the agent's ServiceAccount
# retwatch-agent (the "agent" user of the control plane) and RBAC, and its
# DaemonSet.
INSTALL_YAML = os.path.join(REPO, "manifests", "install.yaml")


def daemonset_capabilities(path=INSTALL_YAML):
    """The capabilities the DaemonSet's agent container adds (it drops ALL),
    as capsh names them: ["cap_bpf", ...]."""
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc.get("kind") == "DaemonSet":
                (container,) = [c for c in doc["spec"]["template"]["spec"]["containers"]
                                if c["name"] == "agent"]
                caps = container["securityContext"]["capabilities"]
                assert caps.get("drop") == ["ALL"], f"the DaemonSet must drop ALL first: {caps}"
                return sorted("cap_" + c.lower() for c in caps["add"])
    raise AssertionError(f"{path}: no DaemonSet")


def kernel_has_uprobe_multi():
    """Whether this kernel has uprobe_multi links (Linux 6.6 or later)."""
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return (int(m.group(1)), int(m.group(2))) >= (6, 6)


def agent_capabilities():
    """The DaemonSet's capabilities for this kernel: before 6.6, those of the
    chart's perfEventUprobes: true, which adds SYS_ADMIN (perf_event_open's
    uprobes need it; tests/kernels runs the agent on Debian's 6.1)."""
    caps = daemonset_capabilities()
    return caps if kernel_has_uprobe_multi() else sorted(set(caps) | {"cap_sys_admin"})


def capsh_argv(caps, argv):
    """argv run as root with only caps: capsh drops every other capability
    from the bounding set, so root's exec gets just these (as a container
    runtime does)."""
    every = subprocess.run(["capsh", "--print"], capture_output=True, text=True,
                           check=True).stdout
    bounding = re.search(r"^Bounding set =(.*)$", every, re.M).group(1).split(",")
    drop = [c for c in bounding if c and c not in caps]
    return ["capsh", "--drop=" + ",".join(drop), "--", "-c", 'exec "$0" "$@"', *argv]


def effective_caps(pid):
    """The names of the capabilities process pid runs with (CapEff)."""
    with open(f"/proc/{pid}/status") as f:
        mask = re.search(r"^CapEff:\s*([0-9a-f]+)$", f.read(), re.M).group(1)
    out = subprocess.run(["capsh", f"--decode={mask}"], capture_output=True, text=True,
                         check=True).stdout.strip()
    names = out.partition("=")[2]
    return sorted(names.split(",")) if names else []


def held_link_ids(pid):
    """BPF link ids that process pid holds open (from /proc/PID/fdinfo)."""
    links = set()
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        return links
    for fd in fds:
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key == "link_id":
                links.add(int(value))
    return links


def system_link_ids():
    """Ids of every BPF link the kernel has (bpftool link list)."""
    out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True,
                         check=True).stdout
    return {link["id"] for link in json.loads(out or "[]")}


def wait_for(what, fn, timeout, interval=0.1):
    """Polls fn until it returns something true; returns it, or fails naming what."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
        except (KeyError, IndexError, TypeError, ValueError) as e:
            last = e
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


class Agent:
    """retwatch-agent for one node, as the agent identity of the test cluster,
    with the DaemonSet's capabilities (or caps) only. Its metrics endpoint
    listens on a free loopback port (metrics_url), open to every client
    unless extra has --metrics-auth, over plain HTTP unless extra has
    --metrics-tls or --metrics-tls-cert."""

    def __init__(self, binary, kubeconfig, node, workdir, extra=(), caps=None):
        metrics = [] if "--metrics-address" in extra else ["--metrics-address", "127.0.0.1:0"]
        # /metrics is read without a token unless a test asks for the review
        metrics += [] if "--metrics-auth" in extra else ["--metrics-auth", "none"]
        # and over plain HTTP unless a test asks for TLS (the agent's default)
        metrics += [] if {"--metrics-tls", "--metrics-tls-cert"} & set(extra) \
            else ["--metrics-tls", "none"]
        self.binary = binary
        self.caps = sorted(agent_capabilities() if caps is None else caps)
        self.argv = [binary, "--kubeconfig", kubeconfig, "--node-name", node,
                     "--lease-namespace", "retwatch", *metrics, *extra]
        self.node = node
        self.log_path = os.path.join(workdir, f"agent-{node}-{time.monotonic_ns()}.log")
        self.proc = None

    def start(self, wait_listed=True):
        """Starts the agent; unless told not to, waits until it has listed
        pods and probes."""
        env = dict(os.environ)
        # leaks are reported at exit (a SIGTERM exit runs the full teardown)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(capsh_argv(self.caps, self.argv), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log, env=env)
        try:
            if wait_listed:
                wait_for(f"agent {self.node} to list pods and probes",
                         lambda: self.proc.poll() is not None or self.listed(), timeout=20)
            else:
                wait_for(f"agent {self.node} to start", lambda: self.proc.poll() is not None
                         or self.find(msg_has="serving /metrics")
                         or self.find(level="error"), timeout=20)
            assert self.proc.poll() is None, f"agent {self.node} exited early:\n{self.tail()}"
            wait_for(f"agent {self.node} to run with only {self.caps}",
                     lambda: effective_caps(self.pid) == self.caps, timeout=2)
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise
        return self

    @property
    def pid(self):
        return self.proc.pid

    def lines(self):
        """The log as parsed JSON lines; a line that is not JSON fails the test
        (sanitizer reports excepted: they are checked at stop())."""
        out = []
        with open(self.log_path, "rb") as f:
            for raw in f.read().decode(errors="replace").splitlines():
                if not raw.strip():
                    continue
                try:
                    out.append(json.loads(raw))
                except json.JSONDecodeError:
                    out.append({"msg": raw, "level": "raw"})
        return out

    def listed(self):
        """Whether the agent has listed the FunctionProbes and its node's pods
        (the informers of ClusterFunctionProbes and namespaces list beside them)."""
        msgs = [e.get("msg", "") for e in self.find(msg_has=": listed ", count=0)]
        return (any(m.startswith("functionprobes: listed ") for m in msgs)
                and any(m.startswith("pods: listed ") for m in msgs))

    def find(self, msg_has=None, count=1, **fields):
        """Log events whose msg contains msg_has and whose fields equal fields;
        the list when at least count match, else []."""
        hits = [ev for ev in self.lines()
                if (msg_has is None or msg_has in ev.get("msg", ""))
                and all(ev.get(k) == v for k, v in fields.items())]
        return hits if len(hits) >= count else []

    def tail(self, n=40):
        with open(self.log_path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])

    def links(self):
        return held_link_ids(self.proc.pid)

    def metrics_url(self, path="/metrics"):
        (ev,) = wait_for(f"agent {self.node} to serve metrics",
                         lambda: self.find(msg_has="serving /metrics"), timeout=10)
        port = int(ev["msg"].rsplit(" ", 1)[1])
        return f"http://127.0.0.1:{port}{path}"

    def get(self, path):
        """(status, body) of a GET of the agent's HTTP endpoint."""
        try:
            with urllib.request.urlopen(self.metrics_url(path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Stops the agent; returns its exit status. A sanitizer report or a
        line that is not JSON fails the test."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"agent {self.node} did not stop within {timeout}s:\n{self.tail()}")
        self.log.close()
        raw = [ev["msg"] for ev in self.lines() if ev.get("level") == "raw"]
        assert not raw, f"agent {self.node} wrote lines that are not JSON:\n" + "\n".join(raw[:40])
        return rc

    def __enter__(self):
        """Starts the agent, unless start() did already: a second process
        for the same node would go on writing its status unstopped."""
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc):
        self.stop()
