"""A process is its pid and its start time: a pid that another pod's process
takes over is a new process, looked up afresh, never traced for the pod (and
the namespace) its pid belonged to before."""

import datetime
import json
import os
import secrets
import signal
import subprocess
import time

import pods
from agentproc import wait_for
from test_agent import spec

HERE = os.path.dirname(os.path.abspath(__file__))


def build_setpid(outdir):
    """tests/agent/setpid.c (clone3 with set_tid: a child with a chosen pid)."""
    src, out = os.path.join(HERE, "setpid.c"), os.path.join(outdir, "setpid")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        os.makedirs(outdir, exist_ok=True)
        tmp = f"{out}.tmp{os.getpid()}"
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", tmp, src], check=True)
        os.replace(tmp, out)
    return out


def _inherit_cpuset(path):
    """A new cpuset cgroup (v1) has no CPUs and no memory nodes, and takes no
    process: its parent's, as runc gives it."""
    for f in ("cpuset.cpus", "cpuset.mems"):
        mine = os.path.join(path, f)
        if not os.path.exists(mine):
            continue
        with open(mine) as fd:
            if fd.read().strip():
                continue
        with open(os.path.join(os.path.dirname(path), f)) as fd:
            value = fd.read().strip()
        with open(mine, "w") as fd:
            fd.write(value)


class HostContainer:
    """A container made of a cgroup (where a kubelet with the cgroupfs driver
    puts one) and processes started in it from the host: each runs one file
    seen as the same (device, inode) whatever its container, as a binary
    shared from the host (a hostPath volume) is."""

    def __init__(self, setpid, pod_uid, workdir):
        self.setpid, self.workdir = setpid, workdir
        self.id = secrets.token_hex(32)
        self.cgroup = f"{pods.pod_cgroup(pod_uid)}/{self.id}"
        self.started_at = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        self.helpers = {}  # pid -> the setpid process that waits for it
        self.procs_files = []
        for h in os.listdir(pods.CGROUP_MOUNT):
            d = os.path.join(pods.CGROUP_MOUNT, h)
            if os.path.islink(d) or not os.path.exists(os.path.join(d, "cgroup.procs")):
                continue
            path = d
            for part in self.cgroup.strip("/").split("/"):
                path = os.path.join(path, part)
                os.makedirs(path, exist_ok=True)
                _inherit_cpuset(path)
            self.procs_files.append(os.path.join(d, self.cgroup.lstrip("/"), "cgroup.procs"))

    def start(self, program, args, pid=0):
        """Runs program in the container, with that pid (0: any); its pid."""
        helper = subprocess.Popen([self.setpid, str(pid), ":".join(self.procs_files), program,
                                   *args], stdout=subprocess.PIPE, text=True)
        line = helper.stdout.readline()
        assert line.strip().isdigit(), f"setpid failed ({helper.wait()})"
        self.helpers[int(line)] = helper
        return int(line)

    def kill(self, pid):
        """Kills the process and waits for it: its pid is free when this returns."""
        os.kill(pid, signal.SIGKILL)
        self.helpers.pop(pid).wait(10)

    def cgroup_of(self, pid):
        with open(f"/proc/{pid}/cgroup") as f:
            return f.read()

    def delete(self):
        for pid in list(self.helpers):
            try:
                self.kill(pid)
            except ProcessLookupError:
                self.helpers.pop(pid).wait(10)
        pods._rmdir_cgroups(self.cgroup)
        pods._rmdir_cgroups(os.path.dirname(self.cgroup))


class HostPod(pods.Pod):
    """A Pod object whose one container, app, is a HostContainer."""

    def __init__(self, cluster, setpid, namespace, name, image, workdir):
        super().__init__(cluster.kubectl, namespace, name, {"app": "web"}, "node-a",
                         {"app": None}, image, workdir)
        self.setpid = setpid

    def create(self):
        obj = json.loads(self.kubectl("create", "-f", "-", "-o", "json",
                                      input=json.dumps(self.manifest())).stdout)
        self.uid = obj["metadata"]["uid"]
        self.started_at = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        self.containers["app"] = HostContainer(self.setpid, self.uid, self.workdir)
        self._patch_status()
        return self


def listed(cluster, ns, name):
    """The pids node-a's report of probe name lists, or None without one."""
    e = cluster.node_entry(ns, name, "node-a")
    return e and sorted(p for item in e.get("pods", []) for p in item["processes"])


def test_reused_pid_is_traced_for_its_new_pod_only(cluster, image, workdir):
    """Pods of namespaces A and B run the same file (one inode). A's second
    process is killed and, before the agent's next scan, a process of B's
    container takes its pid (clone3 set_tid). A's probe stops listing that
    pid and B's probe lists it; the agent says it detached A from it."""
    setpid = build_setpid(os.path.join(workdir, "bin"))
    app = os.path.join(image, "app", "podapp")
    a, b = cluster.namespace(), cluster.namespace()
    made = []
    try:
        pa = HostPod(cluster, setpid, a, "a-1", image, workdir)
        made.append(pa)
        pa.create()
        pb = HostPod(cluster, setpid, b, "b-1", image, workdir)
        made.append(pb)
        pb.create()
        ca, cb = pa.containers["app"], pb.containers["app"]

        def podapp(c, who, pid=0):
            return c.start(app, ["-stats", os.path.join(workdir, f"{who}-{secrets.token_hex(4)}"
                                                        ".json"), "-workers", "1"], pid)

        a0, a1, b0 = podapp(ca, "a0"), podapp(ca, "a1"), podapp(cb, "b0")
        with cluster.agent("node-a") as agent:
            cluster.apply_probe(a, "pa", spec())
            cluster.apply_probe(b, "pb", spec())
            wait_for("A's probe to list its two processes",
                     lambda: listed(cluster, a, "pa") == sorted([a0, a1]), timeout=15)
            wait_for("B's probe to list its process",
                     lambda: listed(cluster, b, "pb") == [b0], timeout=15)

            # between two of the agent's scans (1 s apart): a1 dies, and B's
            # new process takes its pid
            ca.kill(a1)
            reused = podapp(cb, "b1", pid=a1)
            assert reused == a1
            assert cb.cgroup in cb.cgroup_of(reused)

            try:
                wait_for("B's probe to list the process that took A's pid",
                         lambda: listed(cluster, b, "pb") == sorted([b0, reused]), timeout=15)
                wait_for("A's probe to stop listing the pid",
                         lambda: listed(cluster, a, "pa") == [a0], timeout=15)
            except AssertionError as e:
                raise AssertionError(f"{e}: A lists {listed(cluster, a, 'pa')}, B lists "
                                     f"{listed(cluster, b, 'pb')}\n{agent.tail()}") from None
            # and it stays so: A never takes it back
            time.sleep(3)
            assert listed(cluster, a, "pa") == [a0]
            assert listed(cluster, b, "pb") == sorted([b0, reused])
            detached = agent.find(msg_has=f"detached from process {reused}:", namespace=a)
            attached = agent.find(msg_has=f"attached to process {reused}:", count=0,
                                  namespace=b)
            assert detached and attached, agent.tail()
            # A's process a1 was attached once, never again under the same pid
            assert len(agent.find(msg_has=f"attached to process {reused}:", count=0,
                                  namespace=a)) == 1
            assert agent.proc.poll() is None
    finally:
        for p in made:
            p.delete()
