"""A real single-node Kubernetes cluster on this machine, for the tests of
the agent as a DaemonSet pod (conftest.py) and for `make demo`.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet
(tests/cluster/build.sh), Debian's containerd and runc, and the CNI bridge and
host-local plugins (Debian's containernetworking-plugins). Every image is built
here with buildah and imported into containerd: nothing is pulled.

Isolation (the machine is shared with the rest of the test suite):
  - Every daemon runs in the cluster's own network namespace and mount
    namespace, both held by one "holder" process (unshare). The API server,
    etcd and the kubelet listen there only; the pods' bridge (cni0, subnet
    POD_SUBNET) and their veths exist there only. kubectl reaches the API
    server by entering the network namespace (kubectl()).
  - In the mount namespace, tmpfs over the fixed paths containerd, the CNI
    plugins and the kubelet write outside their configured directories
    (/run/containerd, /var/lib/cni, /var/log), so nothing of theirs appears on
    the host, and every mount (overlays, pods' volumes, netns files) goes away
    with the namespace.
  - The kubelet changes no kernel setting: protectKernelDefaults makes it only
    check the six sysctls it would otherwise set (vm.overcommit_memory,
    vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
    kernel.keys.root_maxkeys and root_maxbytes), and in its mount namespace
    those /proc/sys files are covered by plain files holding the values it
    expects, so the check passes whatever the host's values are.
  - cgroups: the kubelet's cgroupfs driver with its own root, CGROUP_ROOT,
    in every cgroup v1 hierarchy (the pods in CGROUP_ROOT/kubepods); the
    daemons join CGROUP_ROOT/system of the pids hierarchy only, so that
    they, the shims they start and the pods are all found there. Nothing
    outside it is moved or limited. (This machine has cgroup v1; the v2
    paths, one unified hierarchy, are written but have not run here.)
  - stop() (and start(), for what a killed run left) kills every process in
    CGROUP_ROOT, removes its cgroups and the state directory STATE: the
    namespaces, with their interfaces and mounts, end with their last process.

State lives in STATE (/var/lib/retwatch-cluster): containerd's root there is
a plain directory of the host, so that the paths of the pods' overlay layers
are the same in the cluster's mount namespace and in the host's (the chart's
extraArgs pass it to the agent as --layer-root, since it is not containerd's
default directory).

    python3 tests/cluster/cluster.py up      # build, start, print KUBECONFIG
    python3 tests/cluster/cluster.py down
    python3 tests/cluster/cluster.py kubectl get pods -A

Needs root. Standard library only.
"""

import base64
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STATE = "/var/lib/retwatch-cluster"
CGROUP_ROOT = "retwatch-cluster"
CGROUP_MOUNT = "/sys/fs/cgroup"
NODE = "retwatch-node"
NODE_IP = "10.247.255.1"
POD_SUBNET = "10.247.0.0/24"
SERVICE_RANGE = "10.247.128.0/24"
SERVICE_IP = "10.247.128.1"  # the "kubernetes" Service: the first of SERVICE_RANGE
API_PORT = 443
CNI_BIN = "/usr/lib/cni"
CONTAINERD = "/usr/bin/containerd"
RUNC = "/usr/sbin/runc"
PAUSE_IMAGE = "localhost/retwatch-pause:cluster"
AGENT_IMAGE = "localhost/retwatch-agent:cluster"
PODAPP_IMAGE = "localhost/retwatch-podapp:cluster"
CSERVICE_IMAGE = "localhost/retwatch-cservice:cluster"
CSERVICE_STRIPPED_IMAGE = "localhost/retwatch-cservice-stripped:cluster"
LAYER_ROOT = f"{STATE}/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots"

# What the kubelet checks of the kernel (protectKernelDefaults), as its
# setupKernelTunables wants them.
KUBELET_SYSCTLS = {
    "vm/overcommit_memory": 1,
    "vm/panic_on_oom": 0,
    "kernel/panic": 10,
    "kernel/panic_on_oops": 1,
    "kernel/keys/root_maxkeys": 1000000,
    "kernel/keys/root_maxbytes": 25000000,
}
# Fixed paths the daemons write beside their configured directories: a tmpfs
# over each, in the cluster's mount namespace only.
PRIVATE_TMPFS = ("/run/containerd", "/var/lib/cni", "/var/log")

# Where cleanup() keeps the logs of the run it ends.
LAST_LOGS = os.path.join(os.environ.get("RETWATCH_CACHE", os.path.expanduser("~/.cache/retwatch")),
                         "cluster", "last-logs")
# Held by the process running a cluster (see Cluster.start()).
LOCK = os.path.join(os.path.dirname(LAST_LOGS), "lock")
# The mount points cleanup() removes from the host.
MADE_DIRS = "/run/retwatch-cluster.made-dirs"

START_TIMEOUT = 120.0


class ClusterError(RuntimeError):
    pass


def log(msg):
    print(f"cluster: {msg}", file=sys.stderr, flush=True)


def build_bindir():
    """tests/cluster/build.sh: the Kubernetes binaries (cached); their directory."""
    out = subprocess.run(["bash", os.path.join(HERE, "build.sh")], stdout=subprocess.PIPE,
                         text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def _tail(path, lines=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"({e})"


# -- cgroups -------------------------------------------------------------------

def _unified():
    """cgroup v2 alone (the unified hierarchy mounted at CGROUP_MOUNT)."""
    return os.path.exists(os.path.join(CGROUP_MOUNT, "cgroup.controllers"))


def _hierarchies():
    """The mounted cgroup hierarchies' directories (v1 controllers, named
    hierarchies and the unified one)."""
    if _unified():
        return [CGROUP_MOUNT]
    out = []
    for name in sorted(os.listdir(CGROUP_MOUNT)):
        path = os.path.join(CGROUP_MOUNT, name)
        if os.path.isdir(path) and not os.path.islink(path) and \
                os.path.exists(os.path.join(path, "cgroup.procs")):
            out.append(path)
    return out


def _cgroup_dirs():
    """Every cgroup of CGROUP_ROOT, deepest first."""
    dirs = []
    for h in _hierarchies():
        top = os.path.join(h, CGROUP_ROOT)
        if os.path.isdir(top):
            for d, _, _ in os.walk(top):
                dirs.append(d)
    return sorted(dirs, key=lambda d: d.count("/"), reverse=True)


def cgroup_pids():
    """Every process in CGROUP_ROOT, in any hierarchy."""
    pids = set()
    for d in _cgroup_dirs():
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids.update(int(x) for x in f.read().split())
        except OSError:
            pass
    return pids


def _make_cgroups():
    """CGROUP_ROOT in every hierarchy (the kubelet checks that its cgroup root
    exists in each), and CGROUP_ROOT/system for the daemons."""
    for h in _hierarchies():
        system = _unified() or h.endswith("/pids")
        subs = [CGROUP_ROOT] + ([f"{CGROUP_ROOT}/system"] if system else [])
        for sub in subs:
            d = os.path.join(h, sub)
            os.makedirs(d, exist_ok=True)
            # a cpuset cgroup takes no process until it has cpus and mems
            for knob in ("cpuset.cpus", "cpuset.mems"):
                own = os.path.join(d, knob)
                if os.path.exists(own):
                    with open(os.path.join(os.path.dirname(d), knob)) as f:
                        value = f.read().strip()
                    with open(own) as f:
                        if f.read().strip():
                            continue
                    with open(own, "w") as f:
                        f.write(value)


def _join_system_cgroup():
    """A preexec_fn: the child joins CGROUP_ROOT/system of the pids hierarchy
    (its other cgroups stay as they are), so that kill_all() finds it and
    whatever it starts (containerd's shims)."""
    pids = CGROUP_MOUNT if _unified() else os.path.join(CGROUP_MOUNT, "pids")
    paths = [os.path.join(pids, CGROUP_ROOT, "system", "cgroup.procs")]

    def preexec():
        os.setsid()
        for p in paths:
            fd = os.open(p, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    return preexec


def _signal(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def stop_agents(grace=30.0):
    """SIGTERM the retwatch agents in CGROUP_ROOT, as the kubelet stops a pod,
    and wait up to grace seconds for them to exit: an agent stopped so
    releases its uprobe links many at once, where one SIGKILLed releases
    them one after another while it exits, uninterruptible. Returns how long
    they took (None: none ran)."""
    def named(name):
        found = []
        for pid in cgroup_pids():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == name:
                        found.append(pid)
            except OSError:
                pass
        return found

    def agents():
        return named("retwatch-agent")

    pids, start = agents(), time.monotonic()
    if not pids:
        return None
    _signal(named("kubelet"), signal.SIGKILL)  # it would start the agent again
    _signal(pids, signal.SIGTERM)
    while agents() and time.monotonic() - start < grace:
        time.sleep(0.1)
    return time.monotonic() - start


def kill_all(timeout=30.0):
    """SIGKILL every process in CGROUP_ROOT until none is left; remove its
    cgroups. Processes are found by the cgroups, so a run killed before it
    could record anything is cleaned up too."""
    deadline = time.monotonic() + timeout
    while True:
        pids = cgroup_pids()
        if not pids:
            break
        if time.monotonic() > deadline:
            raise ClusterError(f"processes of cgroup {CGROUP_ROOT} survive SIGKILL: {sorted(pids)}")
        # frozen cgroups would hold a SIGKILLed process: thaw them first
        for d in _cgroup_dirs():
            state = os.path.join(d, "freezer.state")
            if os.path.exists(state):
                try:
                    with open(state, "w") as f:
                        f.write("THAWED")
                except OSError:
                    pass
        _signal(pids, signal.SIGKILL)
        time.sleep(0.1)
    for d in _cgroup_dirs():
        for _ in range(50):
            try:
                os.rmdir(d)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                if e.errno != errno.EBUSY:
                    raise
                time.sleep(0.1)  # a killed process is still leaving it


# -- the cluster ---------------------------------------------------------------

class Cluster:
    def __init__(self, bindir, state=STATE):
        self.bindir = bindir
        self.state = state
        self.pki = os.path.join(state, "pki")
        self.logs = os.path.join(state, "logs")
        self.holder = None
        self.procs = {}
        self._lock = None

    def path(self, *parts):
        return os.path.join(self.state, *parts)

    @property
    def admin_kubeconfig(self):
        return self.path("kubeconfig-admin")

    # -- life cycle --------------------------------------------------------

    def start(self):
        """Clean what an earlier run left, then start every daemon; return
        self once the node is Ready. While this process runs the cluster, it
        holds LOCK: another run on this machine waits for it instead of
        killing its cluster (one left by a killed run or by `make
        demo` has no holder and is replaced)."""
        start = time.monotonic()
        self._take_lock()
        self.cleanup()
        try:
            os.makedirs(self.logs)
            os.makedirs(self.pki)
            self._make_pki()
            _make_cgroups()
            self._start_holder()
            self._start_etcd()
            self._start_apiserver()
            self._start_controllers()
            self._start_containerd()
            self._start_kubelet()
            self._wait("node Ready", self._node_ready)
        except BaseException:
            self.stop()
            raise
        log(f"up in {time.monotonic() - start:.1f} s (node {NODE}, logs in {self.logs})")
        return self

    def stop(self):
        """Stop everything the cluster started and remove its state."""
        self.cleanup()
        self.holder = None
        self.procs = {}
        self.release()

    def _take_lock(self):
        os.makedirs(os.path.dirname(LOCK), exist_ok=True)
        self._lock = open(LOCK, "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another run's cluster to stop (it holds {LOCK})")
            fcntl.flock(self._lock, fcntl.LOCK_EX)

    def down(self):
        """Stop a cluster left running (make demo-down): not one another
        run is using; wait for that run to end."""
        self._take_lock()
        self.stop()

    def release(self):
        """Lets another run replace this cluster (it stays up)."""
        if self._lock:
            self._lock.close()
            self._lock = None

    def cleanup(self):
        took = stop_agents()
        if took is not None:
            log(f"agent stopped by SIGTERM in {took:.1f} s")
        kill_all()
        # the last run's logs stay for a look after the fact
        if os.path.isdir(self.logs):
            shutil.rmtree(LAST_LOGS, ignore_errors=True)
            shutil.copytree(self.logs, LAST_LOGS)
        for p in list(self.procs.values()) + ([self.holder] if self.holder else []):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if os.path.lexists(self.state):
            shutil.rmtree(self.state)
        try:
            with open(MADE_DIRS) as f:
                made = f.read().split()
        except FileNotFoundError:
            made = []
        for d in made:
            try:
                os.rmdir(d)
            except FileNotFoundError:
                pass
        if os.path.exists(MADE_DIRS):
            os.remove(MADE_DIRS)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- clients -----------------------------------------------------------

    def in_netns(self, argv):
        """argv run in the cluster's network namespace."""
        return ["nsenter", f"--net=/proc/{self.holder_pid()}/ns/net", "--", *argv]

    def holder_pid(self):
        with open(self.path("holder.pid")) as f:
            return int(f.read())

    def kubectl(self, *args, input=None, check=True, timeout=60):
        argv = self.in_netns([os.path.join(self.bindir, "kubectl"),
                              "--kubeconfig", self.admin_kubeconfig, *args])
        res = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} exited {res.returncode}: "
                               f"{res.stderr.strip()}")
        return res

    def kubectl_json(self, *args):
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def run_in_netns(self, argv, **kw):
        return subprocess.run(self.in_netns(argv), **kw)

    # -- internals ---------------------------------------------------------

    def _spawn(self, name, argv, env=None):
        """A daemon in the cluster's namespaces and cgroup; output to logs/<name>.log."""
        pid = self.holder_pid()
        full = ["nsenter", f"--net=/proc/{pid}/ns/net", f"--mount=/proc/{pid}/ns/mnt",
                "--", *argv]
        with open(os.path.join(self.logs, f"{name}.log"), "ab") as out:
            p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, env=env,
                                 preexec_fn=_join_system_cgroup())
        self.procs[name] = p
        return p

    def _wait(self, what, ready, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise ClusterError(f"{what}: {name} exited with {p.returncode}\n"
                                       f"--- {name}.log (tail) ---\n"
                                       f"{_tail(os.path.join(self.logs, name + '.log'))}")
            try:
                if ready():
                    return
            except (OSError, ValueError, ClusterError, subprocess.SubprocessError) as e:
                last = e
            time.sleep(0.2)
        logs = "".join(f"\n--- {n}.log (tail) ---\n{_tail(os.path.join(self.logs, n + '.log'), 15)}"
                       for n in self.procs)
        raise ClusterError(f"{what}: not ready after {timeout:.0f} s (last error: {last}){logs}")

    def _ns_sh(self, script):
        """A shell script run in the cluster's namespaces (set-up steps)."""
        pid = self.holder_pid()
        res = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net",
                              f"--mount=/proc/{pid}/ns/mnt", "--", "sh", "-euc", script],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise ClusterError(f"cluster set-up failed: {res.stderr.strip()}\nscript:\n{script}")

    def _start_holder(self):
        """The process that holds the namespaces: unshare execs sleep in a new
        network and mount namespace (mounts private: none leaks to the host)."""
        p = subprocess.Popen(["unshare", "--net", "--mount", "--propagation", "private",
                              "sleep", "infinity"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=_join_system_cgroup())
        self.holder = p
        with open(self.path("holder.pid"), "w") as f:
            f.write(str(p.pid))
        # unshare has run once the namespaces differ from ours
        deadline = time.monotonic() + 10
        while os.readlink(f"/proc/{p.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            if p.poll() is not None or time.monotonic() > deadline:
                raise ClusterError("unshare did not make the cluster's namespaces")
            time.sleep(0.02)
        sysctl_dir = self.path("sysctl")
        os.makedirs(sysctl_dir)
        # The node's address and the "kubernetes" Service's on the namespace's
        # loopback: local to it, so pods reach the API server through their
        # gateway (the bridge) with no kube-proxy and no forwarding.
        script = ["ip link set lo up",
                  f"ip addr add {NODE_IP}/32 dev lo",
                  f"ip addr add {SERVICE_IP}/32 dev lo"]
        # a mount point the host lacks is made for the tmpfs, and removed by
        # cleanup() (listed outside STATE, which goes first)
        made = [d for d in PRIVATE_TMPFS if not os.path.isdir(d)]
        with open(MADE_DIRS, "w") as f:
            f.write("".join(d + "\n" for d in made))
        for d in PRIVATE_TMPFS:
            script.append(f"mkdir -p {d} && mount -t tmpfs -o mode=755 retwatch-cluster {d}")
        for key, value in KUBELET_SYSCTLS.items():
            fake = os.path.join(sysctl_dir, key.replace("/", "."))
            with open(fake, "w") as f:
                f.write(f"{value}\n")
            script.append(f"mount --bind {fake} /proc/sys/{key}")
        self._ns_sh("\n".join(script))

    # PKI: a CA and ECDSA certificates made with openssl

    def _openssl(self, *args):
        res = subprocess.run(["openssl", *args], cwd=self.pki, capture_output=True, text=True)
        if res.returncode != 0:
            raise ClusterError(f"openssl {' '.join(args)}: {res.stderr.strip()}")

    def _cert(self, name, subject, ext, serial):
        newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        with open(os.path.join(self.pki, f"{name}.ext"), "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n" + ext)
        self._openssl("req", "-new", *newkey, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                      "-subj", subject)
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                      "-set_serial", str(serial), "-days", "3650", "-extfile", f"{name}.ext",
                      "-out", f"{name}.crt")

    def _make_pki(self):
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
                      "-subj", "/CN=retwatch-cluster-ca")
        client = "extendedKeyUsage=clientAuth\n"
        self._cert("apiserver", "/CN=kube-apiserver",
                   f"subjectAltName=IP:{NODE_IP},IP:{SERVICE_IP},IP:127.0.0.1,DNS:localhost,"
                   "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
                   "DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n", 2)
        self._cert("admin", "/O=system:masters/CN=admin", client, 3)
        self._cert("kubelet", f"/O=system:nodes/CN=system:node:{NODE}", client, 4)
        self._cert("controller-manager", "/CN=system:kube-controller-manager", client, 5)
        self._cert("scheduler", "/CN=system:kube-scheduler", client, 6)
        self._openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                      "-out", "sa.key")
        self._openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        url = f"https://{NODE_IP}:{API_PORT}"
        for user in ("admin", "kubelet", "controller-manager", "scheduler"):
            self._kubeconfig(self.path(f"kubeconfig-{user}"), url, user)

    def _kubeconfig(self, path, url, user):
        def b64(name):
            with open(os.path.join(self.pki, name), "rb") as f:
                return base64.b64encode(f.read()).decode()
        # JSON is YAML: kubectl reads either
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": "retwatch-cluster",
               "clusters": [{"name": "retwatch-cluster", "cluster": {
                   "server": url, "certificate-authority-data": b64("ca.crt")}}],
               "users": [{"name": user, "user": {
                   "client-certificate-data": b64(f"{user}.crt"),
                   "client-key-data": b64(f"{user}.key")}}],
               "contexts": [{"name": "retwatch-cluster", "context": {
                   "cluster": "retwatch-cluster", "user": user}}]}
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)

    # the daemons

    def _bin(self, name):
        return os.path.join(self.bindir, name)

    def _start_etcd(self):
        self._spawn("etcd", [
            self._bin("etcd"), "--name", "default", "--data-dir", self.path("etcd"),
            "--listen-client-urls", "http://127.0.0.1:2379",
            "--advertise-client-urls", "http://127.0.0.1:2379",
            "--listen-peer-urls", "http://127.0.0.1:2380",
            "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
            "--initial-cluster", "default=http://127.0.0.1:2380",
            "--listen-metrics-urls", "",
            # test data need not survive a power cut
            "--unsafe-no-fsync"])

    def _start_apiserver(self):
        pki = lambda n: os.path.join(self.pki, n)  # noqa: E731
        self._spawn("kube-apiserver", [
            self._bin("kube-apiserver"),
            "--etcd-servers", "http://127.0.0.1:2379",
            "--bind-address", "0.0.0.0", "--secure-port", str(API_PORT),
            "--advertise-address", NODE_IP,
            "--cert-dir", self.path("apiserver-certs"),
            "--tls-cert-file", pki("apiserver.crt"),
            "--tls-private-key-file", pki("apiserver.key"),
            "--client-ca-file", pki("ca.crt"),
            "--kubelet-client-certificate", pki("admin.crt"),
            "--kubelet-client-key", pki("admin.key"),
            # no DNS here: the kubelet by its address (exec, logs)
            "--kubelet-preferred-address-types", "InternalIP",
            "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", pki("sa.pub"),
            "--service-account-signing-key-file", pki("sa.key"),
            "--service-cluster-ip-range", SERVICE_RANGE,
            "--allow-privileged=true"])
        self._wait("kube-apiserver", lambda: self.kubectl(
            "get", "--raw", "/readyz", timeout=10).stdout.strip() == "ok")

    def _start_controllers(self):
        pki = lambda n: os.path.join(self.pki, n)  # noqa: E731
        self._spawn("kube-controller-manager", [
            self._bin("kube-controller-manager"),
            "--kubeconfig", self.path("kubeconfig-controller-manager"),
            "--authentication-kubeconfig", self.path("kubeconfig-controller-manager"),
            "--authorization-kubeconfig", self.path("kubeconfig-controller-manager"),
            "--bind-address", "127.0.0.1", "--leader-elect=false",
            "--service-account-private-key-file", pki("sa.key"),
            "--root-ca-file", pki("ca.crt"),
            "--use-service-account-credentials=true",
            "--service-cluster-ip-range", SERVICE_RANGE,
            # pods' addresses come from the CNI's host-local ranges
            "--allocate-node-cidrs=false"])
        self._spawn("kube-scheduler", [
            self._bin("kube-scheduler"),
            "--kubeconfig", self.path("kubeconfig-scheduler"),
            "--authentication-kubeconfig", self.path("kubeconfig-scheduler"),
            "--authorization-kubeconfig", self.path("kubeconfig-scheduler"),
            "--bind-address", "127.0.0.1", "--leader-elect=false"])

    def _start_containerd(self):
        cni_conf = self.path("cni", "net.d")
        os.makedirs(cni_conf)
        with open(os.path.join(cni_conf, "10-retwatch.conflist"), "w") as f:
            json.dump({"cniVersion": "1.0.0", "name": "retwatch-cluster", "plugins": [{
                "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "dataDir": self.path("cni", "ipam"),
                         "ranges": [[{"subnet": POD_SUBNET}]],
                         "routes": [{"dst": "0.0.0.0/0"}]}}]}, f, indent=1)
        config = f"""version = 2
root = "{self.path('containerd')}"
state = "{self.path('containerd-state')}"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{self.path('containerd.sock')}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  netns_mounts_under_state_dir = true
  # No lower OOM score than containerd's own: the pause container's -998
  # needs CAP_SYS_RESOURCE, which a machine (this one) may withhold.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        Root = "{self.path('runc')}"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni_conf}"
"""
        with open(self.path("containerd.toml"), "w") as f:
            f.write(config)
        self._spawn("containerd", [CONTAINERD, "--config", self.path("containerd.toml")])
        self._wait("containerd", lambda: self.ctr("version").returncode == 0)

    def ctr(self, *args, check=False):
        """ctr against the cluster's containerd, in the namespace of the CRI (k8s.io)."""
        return subprocess.run(["ctr", "--address", self.path("containerd.sock"),
                               "--namespace", "k8s.io", *args],
                              capture_output=True, text=True, check=check)

    def _start_kubelet(self):
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": os.path.join(self.pki, "ca.crt")}},
            "authorization": {"mode": "AlwaysAllow"},
            "address": NODE_IP, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
            "containerRuntimeEndpoint": f"unix://{self.path('containerd.sock')}",
            "cgroupDriver": "cgroupfs", "cgroupRoot": f"/{CGROUP_ROOT}", "cgroupsPerQOS": True,
            # this machine's cgroups are v1; the kubelet still runs there when asked
            "failCgroupV1": False, "failSwapOn": False,
            # check, never set, the kernel's settings (see the module's doc)
            "protectKernelDefaults": True,
            "podLogsDir": self.path("pod-logs"),
            "resolvConf": "",
            "clusterDomain": "cluster.local",
            # a shared test machine's disk: no eviction or image GC on its fill level
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%",
                             "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "syncFrequency": "5s", "fileCheckFrequency": "5s",
        }
        with open(self.path("kubelet.json"), "w") as f:
            json.dump(config, f, indent=1)
        self._spawn("kubelet", [
            self._bin("kubelet"), "--config", self.path("kubelet.json"),
            "--kubeconfig", self.path("kubeconfig-kubelet"),
            "--root-dir", self.path("kubelet"), "--cert-dir", self.path("kubelet-pki"),
            "--hostname-override", NODE, "--node-ip", NODE_IP])

    def _node_ready(self):
        node = self.kubectl_json("get", "node", NODE)
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in node["status"].get("conditions", []))

    # -- images ------------------------------------------------------------

    def import_image(self, image):
        """An image of buildah's store into containerd (k8s.io namespace)."""
        tar = self.path(f"image-{os.getpid()}.tar")
        try:
            subprocess.run(["buildah", "push", "--quiet", image,
                            f"docker-archive:{tar}:{image}"], check=True,
                           stdout=subprocess.DEVNULL)
            res = self.ctr("images", "import", tar)
            if res.returncode != 0:
                raise ClusterError(f"ctr images import {image}: {res.stderr.strip()}")
        finally:
            if os.path.exists(tar):
                os.remove(tar)


# -- images built here (buildah, no registry) ------------------------------------

def _buildah(*args, **kw):
    return subprocess.run(["buildah", *args], check=True, text=True, stdout=subprocess.PIPE,
                          **kw).stdout.strip()


def _tree_digest(rootfs, entrypoint):
    """A digest of a directory tree's names, modes, link targets and bytes."""
    h = hashlib.sha256(json.dumps(entrypoint).encode())
    for d, dirs, files in os.walk(rootfs):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(d, name)
            st = os.lstat(path)
            h.update(f"{os.path.relpath(path, rootfs)}\0{st.st_mode:o}\0".encode())
            if os.path.islink(path):
                h.update(os.readlink(path).encode())
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    h.update(f.read())
    return h.hexdigest()[:16]


def _image_id(image):
    res = subprocess.run(["buildah", "inspect", "--type", "image", "--format", "{{.FromImageID}}",
                          image], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else None


def _image_from_dir(image, rootfs, entrypoint):
    """An image of one layer: the directory rootfs, run as entrypoint. Made
    again only when the tree changed (its digest is a label of the image);
    the image it replaces is removed."""
    digest = _tree_digest(rootfs, entrypoint)
    res = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                          '{{index .ImageAnnotations "retwatch.tree"}}{{index .Docker.Config.Labels "retwatch.tree"}}',
                          image], capture_output=True, text=True)
    if res.returncode == 0 and digest in res.stdout:
        return
    old = _image_id(image)
    ctr = _buildah("from", "scratch")
    try:
        _buildah("copy", ctr, rootfs, "/")
        _buildah("config", "--os", "linux", "--arch", "amd64", "--label", f"retwatch.tree={digest}",
                 "--entrypoint", json.dumps(entrypoint), "--cmd", "[]", ctr)
        _buildah("commit", "--quiet", "--rm", ctr, image)
        ctr = None
    finally:
        if ctr:
            subprocess.run(["buildah", "rm", ctr], capture_output=True)
    if old and old != _image_id(image):
        subprocess.run(["buildah", "rmi", old], capture_output=True)


def build_pause_image(workdir):
    """PAUSE_IMAGE: tests/cluster/pause.c, static, alone in its image."""
    root = os.path.join(workdir, "pause-root")
    os.makedirs(root, exist_ok=True)
    subprocess.run(["gcc", "-O2", "-static", "-Wall", "-Wextra", "-Werror", "-o",
                    os.path.join(root, "pause"), os.path.join(HERE, "pause.c")], check=True)
    _image_from_dir(PAUSE_IMAGE, root, ["/pause"])
    return PAUSE_IMAGE


def build_podapp_image(workdir):
    """PODAPP_IMAGE: the agent tests' Go service (tests/fixtures/podapp) as
    /app/podapp, with busybox for `kubectl exec` (tests/agent/pods.py makes
    the same root filesystem for its runc containers)."""
    sys.path.insert(0, os.path.join(REPO, "tests", "agent"))
    import pods  # noqa: E402
    app = pods.build_podapp(os.path.join(workdir, "bin"))
    root = pods.make_rootfs(os.path.join(workdir, "podapp-root"), app)
    os.remove(os.path.join(root, "app", "fifo"))  # a FIFO buildah would not copy
    _image_from_dir(PODAPP_IMAGE, root, ["/app/podapp"])
    return PODAPP_IMAGE


# The functions of tests/fixtures/c/cservice.c whose frames a slow call's
# stack holds: innermost first.
CSERVICE_STACK = ("lookup_record", "handle_request", "worker_main")


def _frame_pointer_free(exe, fn):
    """Whether gcc kept rbp of exe's function fn for a value of its own: it
    saves rbp, never points it at its frame (mov %rsp,%rbp), and writes it."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={fn}", exe],
                         capture_output=True, text=True, check=True).stdout
    insns = [line.split("\t", 1)[1].split() for line in out.splitlines()
             if line.startswith("  ") and "\t" in line]
    saves = ["push", "%rbp"] in insns
    frames = any(i[0] == "mov" and i[1:] == ["%rsp,%rbp"] for i in insns)
    writes = any(len(i) == 2 and i[0] != "push" and i[1].endswith(",%rbp") for i in insns)
    return saves and writes and not frames


def build_cservice_image(workdir):
    """CSERVICE_IMAGE: the C service tests/fixtures/c/cservice.c as
    /app/cservice, static, gcc -O2 -g -fomit-frame-pointer (DWARF names its
    functions' parameters): a slow call's stack
    unwinds through its frames only by their unwind tables (checked here: the
    functions of CSERVICE_STACK use rbp for values of their own, so a
    frame-pointer walk reads garbage). Returns the image and the binary's
    path (the same bytes as the image's)."""
    root = os.path.join(workdir, "cservice-root")
    os.makedirs(os.path.join(root, "app"), exist_ok=True)
    os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    exe = os.path.join(root, "app", "cservice")
    subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", "-static", "-pthread", "-Wall",
                    "-Wextra", "-Werror", "-o", exe,
                    os.path.join(REPO, "tests", "fixtures", "c", "cservice.c")], check=True)
    for fn in CSERVICE_STACK:
        if not _frame_pointer_free(exe, fn):
            raise ClusterError(f"{exe}: gcc kept a frame pointer in {fn} (or no value in rbp); "
                               "the stack test would pass with a frame-pointer walk")
    _image_from_dir(CSERVICE_IMAGE, root, ["/app/cservice"])
    return CSERVICE_IMAGE


def build_cservice_stripped_image(workdir):
    """CSERVICE_STRIPPED_IMAGE: the C service as distributions ship a
    program: /app/cservice stripped of every symbol, and its debug file
    (objcopy --only-keep-debug) in the image's /usr/lib/debug/.build-id,
    where gdb finds it by the binary's build id. Its functions are named only
    by the debug file."""
    root = os.path.join(workdir, "cservice-stripped-root")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "app"))
    os.makedirs(os.path.join(root, "tmp"))
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    full = os.path.join(workdir, "cservice-full")
    subprocess.run(["gcc", "-O2", "-g", "-fomit-frame-pointer", "-static", "-pthread", "-Wall",
                    "-Wextra", "-Werror", "-Wl,--build-id", "-o", full,
                    os.path.join(REPO, "tests", "fixtures", "c", "cservice.c")], check=True)
    notes = subprocess.run(["readelf", "-n", full], capture_output=True, text=True,
                           check=True).stdout
    build_id = re.search(r"Build ID: ([0-9a-f]+)", notes).group(1)
    debug = os.path.join(root, "usr", "lib", "debug", ".build-id", build_id[:2],
                         build_id[2:] + ".debug")
    os.makedirs(os.path.dirname(debug))
    subprocess.run(["objcopy", "--only-keep-debug", full, debug], check=True)
    exe = os.path.join(root, "app", "cservice")
    subprocess.run(["strip", "--strip-all", "-o", exe, full], check=True)
    if ".symtab" in subprocess.run(["readelf", "-S", exe], capture_output=True, text=True,
                                   check=True).stdout:
        raise ClusterError(f"{exe} still has a symbol table")
    _image_from_dir(CSERVICE_STRIPPED_IMAGE, root, ["/app/cservice"])
    return CSERVICE_STRIPPED_IMAGE


def build_agent_image():
    """AGENT_IMAGE: the Dockerfile's image, as tests/image/build.sh builds it."""
    subprocess.run(["bash", os.path.join(REPO, "tests", "image", "build.sh"), AGENT_IMAGE],
                   check=True, stdout=subprocess.DEVNULL)
    return AGENT_IMAGE


def build_images(workdir):
    """Every image the cluster runs, built (layers cached by buildah)."""
    return [build_pause_image(workdir), build_agent_image(), build_podapp_image(workdir),
            build_cservice_image(workdir), build_cservice_stripped_image(workdir)]


def main(argv):
    if not argv or argv[0] not in ("up", "down", "kubectl"):
        print("usage: cluster.py up | down | kubectl ARGS...", file=sys.stderr)
        return 2
    if argv[0] == "down":
        Cluster(None).down()
        return 0
    c = Cluster(build_bindir())
    if argv[0] == "kubectl":
        res = c.kubectl(*argv[1:], check=False)
        sys.stdout.write(res.stdout)
        sys.stderr.write(res.stderr)
        return res.returncode
    c.start()
    print(c.admin_kubeconfig)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
