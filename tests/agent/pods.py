"""Pods without a kubelet, for the node agent's tests.

A Container is a real container started with runc, in the cgroup a kubelet
with the cgroupfs driver would give it (/kubepods/besteffort/pod<uid>/<id>),
so that the agent finds it through /proc/PID/cgroup as on a real node. A Pod
is a Pod object in the test API server whose status names its Containers
(containerd://<id>) as a kubelet would report them.

Each container's root is an overlay whose lower layer is a directory made by
make_rootfs(), the "image": as with containerd's overlayfs snapshotter, every
container of the image runs the same binary inode, seen through a different
mount (another st_dev), and writes to its own upper layer.

    podapp = build_podapp(tmp)
    image = make_rootfs(os.path.join(tmp, "image"), podapp)
    with Container(image, pod_uid, tmp) as c:
        c.stats()["functions"]["main.handleRequest"]["median_ns"]

State lives under the workdir: runc's state in workdir/runc (runtime_root()),
bundles in workdir/containers/<id>. cleanup_all() removes whatever a crashed
run left there. Needs root, runc and busybox-static. Standard library only.
"""

import datetime
import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PODAPP_SRC = os.path.join(REPO, "tests", "fixtures", "podapp")
BUSYBOX = "/bin/busybox"
RUNC = "runc"
CGROUP_MOUNT = "/sys/fs/cgroup"
QOS_CGROUP = "/kubepods/besteffort"
IMAGE = "retwatch.test/podapp:latest"
STATS_PATH = "/tmp/podapp-stats.json"
DEFAULT_ARGS = ("/app/podapp",)
BUSYBOX_APPLETS = ("sh", "sleep", "cat", "ls")
ROOTFS_DIRS = ("bin", "app", "proc", "dev", "sys", "tmp")


class ContainerError(RuntimeError):
    pass


# -- the image ---------------------------------------------------------------

def build_podapp(outdir):
    """Build tests/fixtures/podapp (static, CGO_ENABLED=0) into outdir; return
    the binary's path. A binary newer than its sources is kept."""
    out = os.path.join(outdir, "podapp")
    sources = [os.path.join(PODAPP_SRC, f) for f in ("main.go", "go.mod")]
    if os.path.exists(out) and os.path.getmtime(out) > max(map(os.path.getmtime, sources)):
        return out
    os.makedirs(outdir, exist_ok=True)
    tmp = f"{out}.tmp{os.getpid()}"  # renamed into place: concurrent runs never see half a file
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    subprocess.run(["go", "build", "-o", tmp, "."], cwd=PODAPP_SRC, env=env, check=True)
    os.replace(tmp, out)
    return out


def make_rootfs(root, podapp_path):
    """Make (or bring up to date) a minimal root filesystem in root; return root.

    /bin/busybox with applets sh, sleep, cat, ls; /app/podapp; mount points
    /proc, /dev, /sys; /tmp; /app/current -> /app/podapp; /app/escape ->
    /../../../../etc/hostname, a link that leads out of the root when followed
    from the host without confining it to the root; and /app/fifo, a FIFO no
    one writes to, whose plain open blocks for ever."""
    for d in ROOTFS_DIRS:
        os.makedirs(os.path.join(root, d), exist_ok=True)
    os.chmod(os.path.join(root, "tmp"), 0o1777)
    _install(BUSYBOX, os.path.join(root, "bin", "busybox"))
    for applet in BUSYBOX_APPLETS:
        _symlink("busybox", os.path.join(root, "bin", applet))
    _install(podapp_path, os.path.join(root, "app", "podapp"))
    _symlink("/app/podapp", os.path.join(root, "app", "current"))
    _symlink("/../../../../etc/hostname", os.path.join(root, "app", "escape"))
    fifo = os.path.join(root, "app", "fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo, 0o755)
    return root


def _install(src, dst):
    """Copy src to dst unless dst has the same bytes. The copy is renamed into
    place: running containers keep their (old) inode, and an overlay's lower
    layer is never rewritten in place."""
    if os.path.exists(dst) and _same_bytes(src, dst):
        return
    tmp = f"{dst}.tmp{os.getpid()}"
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def _same_bytes(a, b):
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def _symlink(target, path):
    if os.path.islink(path) and os.readlink(path) == target:
        return
    if os.path.lexists(path):
        os.remove(path)
    os.symlink(target, path)


SHLIB_SRC = os.path.join(REPO, "tests", "fixtures", "c", "shlib")
SHPOD_FILES = ("shpod", "libshfix.so", "libshplug.so", "preforkd", "dbpod", "leafpod")


def build_shpod(outdir):
    """Build tests/fixtures/c/shlib's shpod (a C program linked against
    libshfix.so, which dlopens libshplug.so) with gcc into outdir; return
    outdir. Outputs newer than their sources are kept."""
    os.makedirs(outdir, exist_ok=True)
    steps = (
        ("libshfix.so", ["libshfix.c"], ["-shared", "-fPIC", "-Wl,-Ttext-segment=0x40000"]),
        ("libshplug.so", ["libshplug.c"], ["-shared", "-fPIC"]),
        ("shpod", ["shpod.c"], [f"-L{outdir}", "-lshfix", "-ldl", "-Wl,-rpath,$ORIGIN"]),
        ("preforkd", ["preforkd.c"], []),
        ("dbpod", ["dbpod.c"], []),
        ("leafpod", ["leafpod.c"], []),
    )
    for out, srcs, flags in steps:
        target = os.path.join(outdir, out)
        paths = [os.path.join(SHLIB_SRC, f) for f in srcs]
        if os.path.exists(target) and os.path.getmtime(target) > max(map(os.path.getmtime, paths)):
            continue
        tmp = f"{target}.tmp{os.getpid()}"
        src_first = [*paths, *flags] if out == "shpod" else [*flags, *paths]
        subprocess.run(["gcc", "-O2", "-g", "-o", tmp, *src_first], check=True)
        os.replace(tmp, target)
    return outdir


def add_shpod(root, bindir):
    """Install shpod and its two libraries in the image's /app, and the C
    runtime its loader needs (what ldd lists) at the same paths."""
    for f in SHPOD_FILES:
        _install(os.path.join(bindir, f), os.path.join(root, "app", f))
    add_libraries(root, os.path.join(bindir, "shpod"), skip=bindir)


def add_libraries(root, binary, skip):
    """Install in root, at the same paths, what the loader maps for binary
    (what ldd lists), but for what lies under skip."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        path = next((w for w in line.split() if w.startswith("/")), None)
        if not path or path.startswith(skip.rstrip("/") + "/"):
            continue
        dst = os.path.join(root, path.lstrip("/"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        _install(os.path.realpath(path), dst)


def image_digest(root):
    """A sha256 digest standing for the image: that of its podapp binary."""
    with open(os.path.join(root, "app", "podapp"), "rb") as f:
        return "sha256:" + hashlib.sha256(f.read()).hexdigest()


# -- containers --------------------------------------------------------------

def runtime_root(workdir):
    """runc's state directory (its --root) for the containers of workdir."""
    return os.path.join(os.path.abspath(workdir), "runc")


def pod_cgroup(pod_uid):
    return f"{QOS_CGROUP}/pod{pod_uid}"


def _runc(root, *args, check=True, **kwargs):
    res = subprocess.run([RUNC, "--root", root, *args], text=True, capture_output=True,
                         **kwargs)
    if check and res.returncode != 0:
        raise ContainerError(f"runc {' '.join(args)} exited {res.returncode}: "
                             f"{res.stderr.strip()}")
    return res


def _now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Container:
    """A runc container of pod pod_uid, running args (default /app/podapp).

    image is a directory made by make_rootfs(). Attributes once started: id (64
    lowercase hex, like containerd's), pid (host PID of its init process),
    rootfs (its root as the host sees it), started_at (RFC 3339),
    start_seconds (how long `runc run -d` took)."""

    def __init__(self, image, pod_uid, workdir, args=None, hostname="podapp", user=None):
        self.image = os.path.abspath(image)
        self.user = user  # (uid, gid) its processes run as; None: root
        self.pod_uid = pod_uid
        self.workdir = os.path.abspath(workdir)
        self.args = list(args or DEFAULT_ARGS)
        self.hostname = hostname
        self.id = secrets.token_hex(32)
        self.runtime_root = runtime_root(workdir)
        self.bundle = os.path.join(self.workdir, "containers", self.id)
        self.rootfs = os.path.join(self.bundle, "rootfs")
        self.log_path = os.path.join(self.bundle, "log")
        self.cgroup = f"{pod_cgroup(pod_uid)}/{self.id}"
        self.pid = None
        self.started_at = None
        self.start_seconds = None
        self._gone = False  # delete() has torn it down

    def __enter__(self):
        if self.pid is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.delete()

    def start(self):
        """Start the container detached; return self once its init runs in
        the expected cgroups with its root readable from the host."""
        self._gone = False
        try:
            self._mount_rootfs()
            self._write_config()
            begin = time.monotonic()
            self._runc_detached("run", "-d", "--bundle", self.bundle, self.id)
            self.start_seconds = time.monotonic() - begin
            self.started_at = _now_rfc3339()
            self.pid = self.state()["pid"]
            self._verify()
        except BaseException:
            self.delete()
            raise
        return self

    def _runc_detached(self, *args):
        """runc run -d or exec -d. The process keeps runc's stdio: the log
        file, never a pipe, which would block it once full."""
        with open(self.log_path, "ab") as log:
            res = subprocess.run([RUNC, "--root", self.runtime_root, *args],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        if res.returncode != 0:
            raise ContainerError(f"runc {args[0]} {self.id} exited {res.returncode}:\n"
                                 f"{self.log_tail()}")

    def _mount_rootfs(self):
        upper, work = (os.path.join(self.bundle, d) for d in ("upper", "work"))
        for d in (upper, work, self.rootfs):
            os.makedirs(d)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={self.image},upperdir={upper},workdir={work}", self.rootfs],
                       check=True, capture_output=True)

    def _write_config(self):
        _runc(self.runtime_root, "spec", "--bundle", self.bundle)
        path = os.path.join(self.bundle, "config.json")
        with open(path) as f:
            spec = json.load(f)
        spec["process"]["terminal"] = False
        spec["process"]["args"] = self.args
        spec["root"] = {"path": "rootfs", "readonly": False}
        spec["hostname"] = self.hostname
        if self.user:
            spec["process"]["user"] = {"uid": self.user[0], "gid": self.user[1]}
        spec["linux"]["cgroupsPath"] = self.cgroup
        with open(path, "w") as f:
            json.dump(spec, f, indent=1)

    def _verify(self):
        """The agent's view of the container: its cgroup in every v1 hierarchy,
        and its binary through /proc/PID/root."""
        with open(f"/proc/{self.pid}/cgroup") as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
        wrong = [line for line in lines if line[1] and line[2] != self.cgroup]
        if wrong or not any(line[1] for line in lines):
            raise ContainerError(f"container {self.id}: /proc/{self.pid}/cgroup is {lines}, "
                                 f"expected {self.cgroup} in every v1 hierarchy")
        with open(f"/proc/{self.pid}/root/app/podapp", "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise ContainerError(f"/proc/{self.pid}/root/app/podapp is not an ELF file")

    def state(self):
        """runc's state of the container (status, pid, bundle, ...)."""
        return json.loads(_runc(self.runtime_root, "state", self.id).stdout)

    def running(self):
        return self.state()["status"] == "running"

    def exec(self, args):
        """Start args as another process of the container, detached; return its
        host PID. Its output goes to the container's log."""
        pid_file = os.path.join(self.bundle, f"exec-{secrets.token_hex(4)}.pid")
        self._runc_detached("exec", "-d", "--pid-file", pid_file, self.id, *args)
        with open(pid_file) as f:
            return int(f.read())

    def run(self, args, timeout=30):
        """Run args in the container to completion; return the CompletedProcess
        (text, output captured)."""
        return _runc(self.runtime_root, "exec", self.id, *args, check=False, timeout=timeout)

    def stats(self, timeout=10.0, path=STATS_PATH, fresh=True):
        """podapp's stats file (read from the host through rootfs), parsed.

        fresh: wait for a write that began after this call, so that the
        numbers cover every call made before it. Without it, take any write
        (e.g. the last one of a process that has exited)."""
        since = time.time_ns() if fresh else 0
        deadline = time.monotonic() + timeout
        host_path = os.path.join(self.rootfs, path.lstrip("/"))
        while True:
            try:
                with open(host_path) as f:
                    doc = json.load(f)
                if doc["time_unix_ns"] >= since:
                    return doc
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise ContainerError(f"container {self.id}: no fresh {path} after "
                                     f"{timeout} s\n{self.log_tail()}")
            time.sleep(0.05)

    def kill(self, sig=signal.SIGKILL):
        """Send sig to the container's init process (runc kill)."""
        _runc(self.runtime_root, "kill", self.id, str(int(sig)))

    def wait_stopped(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise ContainerError(f"container {self.id} still running after {timeout} s")
            time.sleep(0.05)

    def restart(self):
        """Kill and delete this container; start and return a new one of the
        same pod with a new id, as a kubelet replaces a crashed container."""
        self.delete()
        return Container(self.image, self.pod_uid, self.workdir, self.args,
                         self.hostname, self.user).start()

    def delete(self):
        """Force-delete the container and remove its cgroups and root. Safe to
        call more than once (once it is gone, again costs nothing); the
        bundle keeps config.json and the log."""
        if self._gone:
            return
        _teardown(self.runtime_root, self.id, self.bundle, self.cgroup)
        self._gone = True

    def log_tail(self, lines=20):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return f"({e})"


def _teardown(root, container_id, bundle, cgroup):
    # runc delete removes the container's cgroups only when the kill reached
    # every process, and never the pod's: remove what is left.
    _runc(root, "delete", "--force", container_id, check=False)
    _rmdir_cgroups(cgroup)
    _rmdir_cgroups(os.path.dirname(cgroup))
    rootfs = os.path.join(bundle, "rootfs")
    if os.path.ismount(rootfs):
        subprocess.run(["umount", rootfs], check=True, capture_output=True)
    for d in ("rootfs", "upper", "work"):
        shutil.rmtree(os.path.join(bundle, d), ignore_errors=True)


def _rmdir_cgroups(cgroup):
    """rmdir cgroup in every hierarchy that has it; one with child cgroups or
    processes stays (the pod's cgroup while another container runs)."""
    for hierarchy in os.listdir(CGROUP_MOUNT):
        try:
            os.rmdir(os.path.join(CGROUP_MOUNT, hierarchy, cgroup.lstrip("/")))
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBUSY, errno.ENOTEMPTY):
                raise


def leftover_cgroups(pod_uid):
    """Directories of the pod's cgroup still present, in any hierarchy."""
    rel = pod_cgroup(pod_uid).lstrip("/")
    return [p for p in (os.path.join(CGROUP_MOUNT, h, rel) for h in os.listdir(CGROUP_MOUNT))
            if os.path.isdir(p)]


def list_containers(root):
    """runc's list of containers under state directory root (dicts with id,
    pid, status, bundle, ...)."""
    if not os.path.isdir(root):
        return []
    return json.loads(_runc(root, "list", "--format", "json").stdout) or []


def cleanup_all(root):
    """Kill and force-delete every container under runc state directory root,
    with its cgroups and overlay: what a crashed test run left behind."""
    for c in list_containers(root):
        with open(os.path.join(c["bundle"], "config.json")) as f:
            cgroup = json.load(f)["linux"]["cgroupsPath"]
        _teardown(root, c["id"], c["bundle"], cgroup)


# -- pods --------------------------------------------------------------------

class Pod:
    """A Pod object in the API server, on node `node`, plus a Container per
    entry of containers ({name: args or None}).

    kubectl(*args, input=None, check=True) runs kubectl against the API server
    and returns the CompletedProcess (ControlPlane.kubectl does). rootfs is
    the image (make_rootfs()); workdir holds the containers' state.
    owner: the name of a ReplicaSet said to own it (as a Deployment's pods
    are: with its pod-template-hash label), or None.
    Attributes once created: uid, containers ({name: Container})."""

    def __init__(self, kubectl, namespace, name, labels, node, containers, rootfs, workdir,
                 owner=None, user=None):
        self.kubectl = kubectl
        self.user = user
        self.namespace = namespace
        self.name = name
        self.labels = dict(labels)
        self.node = node
        self.args = {cname: list(args or DEFAULT_ARGS) for cname, args in containers.items()}
        self.rootfs = rootfs
        self.workdir = workdir
        self.uid = None
        self.started_at = None
        self.containers = {}
        self._restarts = {cname: 0 for cname in containers}
        self._last_state = {}
        self.owner = owner
        self.image_id = f"{IMAGE.rsplit(':', 1)[0]}@{image_digest(rootfs)}"

    def __enter__(self):
        return self.create()

    def __exit__(self, *exc):
        self.delete()

    def create(self):
        """Create the Pod object, start its containers in cgroups named by the
        uid the API server gave it, and report them Running in its status."""
        obj = json.loads(self.kubectl("create", "-f", "-", "-o", "json",
                                      input=json.dumps(self.manifest())).stdout)
        self.uid = obj["metadata"]["uid"]
        try:
            for cname, args in self.args.items():
                self.containers[cname] = Container(self.rootfs, self.uid, self.workdir, args,
                                                   hostname=self.name, user=self.user).start()
            self.started_at = _now_rfc3339()
            self._patch_status()
        except BaseException:
            self.delete()
            raise
        return self

    def manifest(self):
        metadata = {"name": self.name, "namespace": self.namespace, "labels": self.labels}
        if self.owner:
            metadata["labels"] = {**self.labels,
                                  "pod-template-hash": self.owner.rsplit("-", 1)[-1]}
            # no controller manager runs: nothing acts on an owner that does not exist
            metadata["ownerReferences"] = [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": self.owner,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, self.owner)), "controller": True}]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "nodeName": self.node,
                "containers": [{"name": cname, "image": IMAGE, "command": args}
                               for cname, args in self.args.items()],
            },
        }

    def restart_container(self, name):
        """Kill the container and start a new one (new id), as a kubelet restarts
        a crashed container; the status gets the new containerID, restartCount
        + 1 and lastState.terminated. Returns the new Container."""
        old = self.containers[name]
        new = old.restart()
        self.containers[name] = new
        self._restarts[name] += 1
        # 128 + SIGKILL, as a kubelet reports a killed container.
        self._last_state[name] = {"terminated": {
            "exitCode": 128 + signal.SIGKILL, "reason": "Error",
            "startedAt": old.started_at, "finishedAt": new.started_at,
            "containerID": f"containerd://{old.id}"}}
        self._patch_status()
        return new

    def delete(self):
        """Delete the Pod object (at once: no kubelet would confirm a graceful
        deletion), then its containers. Safe to call more than once (once
        deleted, again costs nothing: make_pod deletes every pod it made,
        after a test that deleted some)."""
        try:
            if self.uid is not None:
                self.kubectl("delete", "pod", self.name, "-n", self.namespace,
                             "--grace-period=0", "--force", "--ignore-not-found", "--wait=false")
                self.uid = None
        finally:
            for c in self.containers.values():
                c.delete()

    def _patch_status(self):
        conditions = [{"type": t, "status": "True", "lastTransitionTime": self.started_at}
                      for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
        status = {
            "phase": "Running",
            "conditions": conditions,
            "hostIP": "127.0.0.1",
            "startTime": self.started_at,
            "qosClass": "BestEffort",  # the cgroup path says so too
            "containerStatuses": [self._container_status(n) for n in self.containers],
        }
        self.kubectl("patch", "pod", self.name, "-n", self.namespace, "--subresource=status",
                     "--type=merge", "-p", json.dumps({"status": status}))

    def _container_status(self, name):
        c = self.containers[name]
        return {
            "name": name,
            "containerID": f"containerd://{c.id}",
            "image": IMAGE,
            "imageID": self.image_id,
            "ready": True,
            "started": True,
            "restartCount": self._restarts[name],
            "state": {"running": {"startedAt": c.started_at}},
            "lastState": self._last_state.get(name, {}),
        }
