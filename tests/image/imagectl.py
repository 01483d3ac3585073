"""Build the node agent's image with buildah and run it with runc the way the
DaemonSet (charts/retwatch/templates/daemonset.yaml) runs it: the image's
entrypoint, root but only CAPABILITIES, no privilege escalation, a read-only
root, the host's pid namespace, and its own sysfs, where the agent finds
/sys/kernel/btf/vmlinux.

    image = build(log_path)                 # tests/image/build.sh
    with Rootfs(image) as rootfs:           # buildah from + mount, then rm
        res = run(rootfs, runc_root, ["--version"])

Needs root, buildah, debootstrap, runc and PyYAML (scripts/deps.sh).
"""

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
# The DaemonSet's capabilities as manifests/install.yaml (rendered from the
# chart, the one place they are listed) says: read as the agent's tests do.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "agent"))
from agentproc import daemonset_capabilities  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
IMAGE = os.environ.get("RETWATCH_IMAGE", "localhost/retwatch-agent:test")
BUILDAH = ["buildah"] + (["--storage-driver", os.environ["RETWATCH_BUILDAH_STORAGE"]]
                         if os.environ.get("RETWATCH_BUILDAH_STORAGE") else [])
RUNC = "runc"
# Working containers are named so that a run can remove a crashed run's.
CONTAINER_PREFIX = "retwatch-imagetest-"

_ids = itertools.count(1)


class ImageError(RuntimeError):
    pass


# The agent in the image must trace with these alone, as OCI names them.
CAPABILITIES = ["CAP_" + c[len("cap_"):].upper() for c in daemonset_capabilities()]


def _cmd(args, check=True, **kwargs):
    res = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if check and res.returncode != 0:
        raise ImageError(f"{' '.join(args)} exited {res.returncode}: {res.stderr.strip()}")
    return res


def agent_version():
    """RETWATCH_VERSION as cmd/retwatch-agent/main.c defines it."""
    with open(os.path.join(REPO, "cmd", "retwatch-agent", "main.c")) as f:
        m = re.search(r'#define RETWATCH_VERSION "([^"]+)"', f.read())
    if not m:
        raise ImageError("no RETWATCH_VERSION in cmd/retwatch-agent/main.c")
    return m.group(1)


def build(log_path, image=IMAGE):
    """Build image from the Dockerfile (tests/image/build.sh), its output in
    log_path. Returns whether the base had to be debootstrapped."""
    with open(log_path, "w") as log:
        res = subprocess.run(["bash", os.path.join(HERE, "build.sh"), image],
                             stdout=subprocess.PIPE, stderr=log, text=True)
    with open(log_path) as f:
        out = f.read()
    if res.returncode != 0:
        tail = "\n".join(out.splitlines()[-40:])
        raise ImageError(f"tests/image/build.sh exited {res.returncode}; "
                         f"last lines of {log_path}:\n{tail}")
    return "base: debootstrap" in out


def inspect(image=IMAGE):
    """The image's OCI config (Entrypoint, Cmd, Env, Labels, ...)."""
    res = _cmd(BUILDAH + ["inspect", "--type", "image", image])
    return json.loads(res.stdout)["OCIv1"]["config"]


def size_bytes(image=IMAGE):
    """The image's size as containers storage reports it (uncompressed)."""
    # One row per name of the image: the cluster tests tag the same build
    # (same layers, same ID) under a second name, and both rows are listed.
    res = _cmd(BUILDAH + ["images", "--format", "{{.ID}} {{.Size}}", image])
    rows = set(res.stdout.strip().splitlines())
    m = re.fullmatch(r"\S+\s+([\d.]+)\s*([kMG]?B)", rows.pop()) if len(rows) == 1 else None
    if not m:
        raise ImageError(f"cannot read the size of {image}: {res.stdout.strip()!r}")
    return float(m.group(1)) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[m.group(2)]


def remove_leftovers():
    """Remove the working containers a crashed run left (buildah rm unmounts)."""
    res = _cmd(BUILDAH + ["containers", "--format", "{{.ContainerName}}"])
    for name in res.stdout.split():
        if name.startswith(CONTAINER_PREFIX):
            _cmd(BUILDAH + ["rm", name], check=False)


class Rootfs:
    """The image's filesystem, mounted read-only for runc through a buildah
    working container, which __exit__ removes."""

    def __init__(self, image=IMAGE):
        self.image = image
        self.name = f"{CONTAINER_PREFIX}{os.getpid()}-{next(_ids)}"
        self.path = None

    def __enter__(self):
        _cmd(BUILDAH + ["from", "--pull=never", "--name", self.name, self.image])
        try:
            self.path = _cmd(BUILDAH + ["mount", self.name]).stdout.strip()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc):
        self.remove()

    def remove(self):
        _cmd(BUILDAH + ["rm", self.name], check=False)

    def file(self, path):
        """path inside the image, as seen from the host."""
        return os.path.join(self.path, path.lstrip("/"))


def _config(rootfs, args, env, caps):
    """An OCI runtime config after runc's default spec: the image's root
    read-only, args, env and exactly caps."""
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": list(args),
            "env": list(env),
            "cwd": "/",
            # as Kubernetes sets them for `drop: [ALL]` and `add: caps`
            "capabilities": {s: list(caps) for s in ("bounding", "effective", "permitted")},
            # allowPrivilegeEscalation: false
            "noNewPrivileges": True,
        },
        "root": {"path": rootfs.path, "readonly": True},
        "hostname": "retwatch-imagetest",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            # The container's own sysfs, read-only as Kubernetes mounts it:
            # the agent reads /sys/kernel/btf/vmlinux and the uprobe PMU's type.
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
        ],
        "linux": {
            # No pid namespace: the DaemonSet sets hostPID, and the agent
            # keys processes by their pid as the kernel's BPF helpers see it.
            "namespaces": [{"type": t} for t in ("network", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list",
                            "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
        },
    }


def run(rootfs, runc_root, args, entrypoint=True, caps=None, timeout=120):
    """Run args in a runc container on rootfs (after the image's entrypoint
    unless entrypoint is False) with caps (default CAPABILITIES); return the
    CompletedProcess. The container and its bundle are gone on return."""
    config = inspect(rootfs.image)
    argv = (config.get("Entrypoint") or []) + list(args) if entrypoint else list(args)
    caps = CAPABILITIES if caps is None else caps
    cid = f"{CONTAINER_PREFIX}{os.getpid()}-{next(_ids)}"
    bundle = tempfile.mkdtemp(prefix="bundle-", dir=runc_root)
    try:
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump(_config(rootfs, argv, config.get("Env") or [], caps), f, indent=1)
        return subprocess.run([RUNC, "--root", runc_root, "run", "--bundle", bundle, cid],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        _cmd([RUNC, "--root", runc_root, "delete", "--force", cid], check=False)
        shutil.rmtree(bundle, ignore_errors=True)
