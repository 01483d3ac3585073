"""Debian's kernels under QEMU, running a command on this machine's root.

    python3 tests/kernels/vm.py fetch 6.1 6.12 5.10
    python3 tests/kernels/vm.py run 6.1 -- CMD [ARG...]
    python3 tests/kernels/vm.py matrix 6.1 6.12 5.10
    python3 tests/kernels/vm.py debs arm64 NAME PACKAGE...

`fetch` downloads Debian's `linux-image-amd64` of a release (6.1 is
bookworm's, 6.12 bookworm-backports', 5.10 bullseye's) through apt with a private list and
cache (the host's apt sources and its /boot are not touched), and keeps the
kernel, its config and the modules the VM needs under
$RETWATCH_CACHE/kernels (~/.cache/retwatch/kernels).

`run` boots that kernel under qemu-system-x86_64 (TCG: KVM is not used) with
an initramfs of busybox and the 9p modules. The VM mounts this machine's
root read-only over 9p, a tmpfs on /tmp (a directory of the host's /tmp the
run starts in stays reachable), and a writable share of its own
(a fresh directory under /tmp), and runs CMD there in the current
directory; CMD's output is the VM's console. The exit status is CMD's, or
125 when the VM did not run it to the end (boot failure, panic, timeout).

`debs` unpacks Debian packages of another architecture (arm64) into
$RETWATCH_CACHE/debs-ARCH/NAME, through apt with lists of that
architecture alone: dpkg is not given a foreign architecture.

`matrix` runs the kernel tests (tests/kernels/guest, with build/retwatch and
build/fixtures) on each kernel, the kernels side by side, each line of a
VM's output prefixed with its release, and ends with each kernel's
`N passed, N failed` line; its exit status is 0 when every kernel passed.
"""

import argparse
import gzip
import threading
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(os.environ.get("RETWATCH_CACHE", os.path.expanduser("~/.cache/retwatch")), "kernels")

# Release -> the apt suite whose linux-image-amd64 is that kernel.
SUITES = {"5.10": "bullseye", "6.1": "bookworm", "6.12": "bookworm-backports"}
# Each architecture's QEMU (its machine and CPU), console and accelerator. A release
# named arm64-6.1 is arm64's 6.1 kernel, run on the arm64 sysroot (below)
# with this machine's root at /host.
# An x86-64 guest runs its vCPUs in one host thread (TCG's thread=single):
# with a thread per vCPU, a vCPU ran the INT3 the kernel had just patched
# out on the other (a static key flipped by perf_event_open), and 6.12's
# kernel died in "Oops: int3" at __schedule, once in a full run. Two VMs at
# once on 2 host cores are no slower for it.
QEMU = {"amd64": (["qemu-system-x86_64", "-cpu", "max"], "ttyS0", "tcg,thread=single"),
        "arm64": (["qemu-system-aarch64", "-M", "virt", "-cpu", "max"], "ttyAMA0", "tcg")}
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# What the initramfs loads, in this order (dependencies first): virtio's
# PCI transport and 9p over it, and overlayfs for containers' root
# filesystems. A module a kernel has built in, or lacks (fscache went into
# netfs in 6.12), is left out. A kernel fetched with another list is
# fetched again.
MODULES = ("virtio", "virtio_ring", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci",
           "netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "overlay")


def log(msg):
    print(f"kernels: {msg}", file=sys.stderr, flush=True)


def apt_root(arch):
    return os.path.join(CACHE, "apt" if arch == "amd64" else f"apt-{arch}")


def apt(*args, cwd=None, arch="amd64", tool="apt-get"):
    """apt-get (or apt-cache) with its own sources, lists and cache under
    CACHE/apt (or apt-ARCH: another architecture's packages, without adding
    it to dpkg)."""
    root = apt_root(arch)
    opts = ["-o", f"APT::Architecture={arch}", "-o", f"APT::Architectures={arch}"]
    for k, v in (("Dir::Etc::SourceList", os.path.join(root, "sources.list")),
                 ("Dir::Etc::SourceParts", os.path.join(root, "sources.list.d")),
                 ("Dir::Etc::Preferences", os.path.join(root, "preferences")),
                 ("Dir::Etc::PreferencesParts", os.path.join(root, "preferences.d")),
                 ("Dir::State::Lists", os.path.join(root, "lists")),
                 ("Dir::Cache", os.path.join(root, "cache")),
                 ("APT::Sandbox::User", "root")):
        opts += ["-o", f"{k}={v}"]
    return subprocess.run([tool, *opts, *args], cwd=cwd,
                          check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout


def apt_update(arch="amd64"):
    root = apt_root(arch)
    for d in ("lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "sources.list"), "w") as f:
        for suite in sorted(set(SUITES.values())):
            f.write(f"deb [signed-by={KEYRING}] {MIRROR} {suite} main\n")
    apt("update", "-qq", arch=arch)


def fetch_debs(arch, name, packages):
    """Debian's packages of arch unpacked (not installed) into
    $RETWATCH_CACHE/debs-ARCH/NAME, once; the directory."""
    dest = os.path.join(os.path.dirname(CACHE), f"debs-{arch}", name)
    if os.path.exists(os.path.join(dest, ".done")):
        return dest
    os.makedirs(CACHE, exist_ok=True)
    apt_update(arch)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        os.chmod(tmp, 0o755)
        apt("download", "-qq", *packages, cwd=tmp, arch=arch)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".deb"):
                subprocess.run(["dpkg-deb", "-x", os.path.join(tmp, f), dest], check=True)
    open(os.path.join(dest, ".done"), "w").close()
    log(f"{arch}: {' '.join(packages)} in {dest}")
    return dest


# What the arm64 build links against (scripts/deps.sh's build packages) and
# what its VM runs (busybox): unpacked with their dependencies into
# debs-arm64/sysroot, the cross compiler's --sysroot and the VM's root.
SYSROOT_PACKAGES = ("libc6-dev", "libbpf-dev", "libelf-dev", "libdw-dev", "libzydis-dev", "zlib1g-dev",
                    "libcurl4-openssl-dev", "libcjson-dev", "libyaml-dev", "libmicrohttpd-dev",
                    "libiberty-dev", "busybox-static")


# What the agent's image holds for arm64: the Dockerfile's runtime packages.
RUNTIME_PACKAGES = ("libbpf1", "libelf1", "libdw1", "libzydis4.0", "libzycore1.4", "libcjson1",
                    "libyaml-0-2", "libcurl4", "zlib1g", "libmicrohttpd12")


def sysroot(arch, name="sysroot", packages=SYSROOT_PACKAGES):
    """packages of arch and everything they depend on, unpacked into
    debs-ARCH/NAME once, with absolute symbolic links made relative (so
    that they stay inside it); the directory."""
    dest = os.path.join(os.path.dirname(CACHE), f"debs-{arch}", name)
    if os.path.exists(os.path.join(dest, ".sysroot")):
        return dest
    apt_update(arch)
    out = apt("depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks",
              "--no-replaces", "--no-enhances", *packages, arch=arch, tool="apt-cache")
    names = sorted({l.strip() for l in out.splitlines() if l and l[0] not in " <"})
    dest = fetch_debs(arch, name, names)
    for dirpath, dirs, files in os.walk(dest):
        for f in dirs + files:
            p = os.path.join(dirpath, f)
            if os.path.islink(p) and os.readlink(p).startswith("/"):
                target = dest + os.readlink(p)
                os.remove(p)
                os.symlink(os.path.relpath(target, dirpath), p)
    open(os.path.join(dest, ".sysroot"), "w").close()
    return dest


def arch_of(release):
    """("arm64", "6.1") for arm64-6.1; ("amd64", "6.1") for 6.1."""
    arch, _, rel = release.rpartition("-")
    return arch or "amd64", rel


def image_package(release):
    """linux-image-X-ARCH that the release's suite's linux-image-ARCH names."""
    arch, rel = arch_of(release)
    suite = SUITES[rel]
    out = apt("show", f"linux-image-{arch}/{suite}", tool="apt-cache", arch=arch)
    m = re.search(rf"^Depends: (linux-image-[^ ,]+-{arch}) \(= ([^)]+)\)", out, re.M)
    if not m:
        raise SystemExit(f"kernels: linux-image-{arch} in {suite} names no kernel:\n{out}")
    return m.group(1), m.group(2)


def kernel_dir(release):
    """The cached kernel of a release (its `current` link), or None."""
    link = os.path.join(CACHE, release)
    return os.path.realpath(link) if os.path.isfile(os.path.join(link, "vmlinuz")) else None


def module_deps(path):
    with open(path, "rb") as f:
        m = re.search(rb"\0depends=([^\0]*)\0", f.read())
    return [d for d in (m.group(1).decode().split(",") if m else []) if d]


def fetch(release):
    kdir = kernel_dir(release)
    if kdir and os.path.exists(os.path.join(kdir, "modules.wanted")):
        with open(os.path.join(kdir, "modules.wanted")) as f:
            if f.read().split() == list(MODULES):
                return kdir
    arch, rel = arch_of(release)
    if rel not in SUITES or arch not in QEMU:
        raise SystemExit(f"kernels: no kernel {release!r} (known: {', '.join(SUITES)}, "
                         f"and arm64-{', arm64-'.join(SUITES)})")
    apt_update(arch)
    pkg, ver = image_package(release)
    log(f"{release}: downloading {pkg} {ver}")
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        os.chmod(tmp, 0o755)
        apt("download", "-qq", f"{pkg}={ver}", cwd=tmp, arch=arch)
        deb = next(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".deb"))
        x = os.path.join(tmp, "x")
        subprocess.run(["dpkg-deb", "-x", deb, x], check=True)
        uname = pkg[len("linux-image-"):]
        dest = os.path.join(CACHE, uname)
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(os.path.join(dest, "modules"))
        shutil.copy(os.path.join(x, "boot", f"vmlinuz-{uname}"), os.path.join(dest, "vmlinuz"))
        shutil.copy(os.path.join(x, "boot", f"config-{uname}"), os.path.join(dest, "config"))
        mods = {}
        for dirpath, _, files in os.walk(os.path.join(x, "lib", "modules", uname)):
            for f in files:
                name = re.sub(r"\.ko(\.xz|\.zst)?$", "", f)
                if name in MODULES:
                    mods[name] = os.path.join(dirpath, f)
        order = []
        for name in MODULES:
            if name not in mods:
                continue
            src = mods[name]
            raw = os.path.join(dest, "modules", name + ".ko")
            if src.endswith(".xz"):
                subprocess.run(f"xz -dc {shlex.quote(src)} > {shlex.quote(raw)}", shell=True, check=True)
            elif src.endswith(".zst"):
                subprocess.run(["zstd", "-qdf", src, "-o", raw], check=True)
            else:
                shutil.copy(src, raw)
            missing = [d for d in module_deps(raw) if d not in order]
            if missing:
                raise SystemExit(f"kernels: {uname}: {name} needs {', '.join(missing)}, "
                                 f"which tests/kernels/vm.py does not load before it")
            order.append(name)
        with open(os.path.join(dest, "modules.order"), "w") as f:
            f.write("\n".join(order) + "\n")
        with open(os.path.join(dest, "version"), "w") as f:
            f.write(f"{pkg} {ver}\n")
        with open(os.path.join(dest, "modules.wanted"), "w") as f:
            f.write("\n".join(MODULES) + "\n")
    link = os.path.join(CACHE, release)
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(uname, link)
    log(f"{release}: {pkg} {ver} in {dest}")
    return dest


def btf(release, dest):
    """The kernel's own BTF (what it shows as /sys/kernel/btf/vmlinux),
    taken from its image into dest: the types the BPF programs of another
    architecture are compiled against."""
    kdir = fetch(release)
    with open(os.path.join(kdir, "vmlinuz"), "rb") as f:
        image = f.read()
    if image[:2] == b"\x1f\x8b":
        image = gzip.decompress(image)
    # struct btf_header: magic 0xeb9f, version 1, flags 0, hdr_len 24, then
    # the type and string sections' offsets and lengths after the header
    blobs = []
    at = image.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00")
    while at >= 0:
        hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", image, at + 4)
        blobs.append(image[at:at + hdr_len + max(type_off + type_len, str_off + str_len)])
        at = image.find(b"\x9f\xeb\x01\x00\x18\x00\x00\x00", at + 1)
    if len(blobs) != 1:
        raise SystemExit(f"kernels: {release}: {len(blobs)} BTF headers in its image, not one")
    with open(dest + ".tmp", "wb") as f:
        f.write(blobs[0])
    os.replace(dest + ".tmp", dest)


def cpio_newc(entries):
    """A newc archive of (name, mode, data) entries."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate(list(entries) + [("TRAILER!!!", 0, b"")], 1):
        nb = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0)
        out += b"070701" + b"".join(b"%08x" % v for v in fields) + nb
        out += b"\0" * (-len(out) % 4)
        out += data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def initramfs(kdir, arch):
    path = os.path.join(kdir, "initrd.gz")
    init = os.path.join(HERE, "init.sh")
    if os.path.exists(path) and os.path.getmtime(path) >= os.path.getmtime(init):
        return path
    busybox = shutil.which("busybox") if arch == "amd64" else os.path.join(sysroot(arch), "bin/busybox")
    if not busybox:
        raise SystemExit("kernels: busybox is not installed (busybox-static; run `make deps`)")
    with open(os.path.join(kdir, "modules.order")) as f:
        order = f.read().split()
    entries = [(d, 0o40755, b"") for d in ("bin", "lib", "lib/modules")]
    with open(busybox, "rb") as f:
        entries.append(("bin/busybox", 0o100755, f.read()))
    with open(init, "rb") as f:
        entries.append(("init", 0o100755, f.read()))
    entries.append(("modules.order", 0o100644, ("\n".join(order) + "\n").encode()))
    for m in order:
        with open(os.path.join(kdir, "modules", m + ".ko"), "rb") as f:
            entries.append((f"lib/modules/{m}.ko", 0o100644, f.read()))
    with open(path + ".tmp", "wb") as f:
        f.write(gzip.compress(cpio_newc(entries), 1))
    os.replace(path + ".tmp", path)
    return path


def run(release, cmd, cwd=None, cpus=2, memory="2G", timeout=600, env=None, prefix="", share=None):
    """Boots the release's kernel and runs cmd (a list) in cwd; returns
    (exit status, console output). share: a directory of the host the VM
    writes at /tmp/retwatch-vm (kept; else a fresh one, removed)."""
    kdir = kernel_dir(release)
    if not kdir:
        raise SystemExit(f"kernels: no kernel {release} in {CACHE} (python3 tests/kernels/vm.py fetch {release})")
    arch, _ = arch_of(release)
    initrd = initramfs(kdir, arch)
    cwd = os.path.abspath(cwd or os.getcwd())
    root = "/" if arch == "amd64" else sysroot(arch)
    if root != "/":  # the mount points init.sh uses, and where it binds /host's cwd
        for d in ("proc", "sys", "dev", "tmp", "run", "var/tmp", cwd[1:]):
            os.makedirs(os.path.join(root, d), exist_ok=True)
    out = share or tempfile.mkdtemp(prefix=f"retwatch-vm-{release}-")
    try:
        exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
        with open(os.path.join(out, "cwd"), "w") as f:
            f.write(cwd)
        with open(os.path.join(out, "cmd.sh"), "w") as f:
            path = os.environ.get("PATH", "/usr/bin:/bin") if root == "/" else "/tmp/.bin:/usr/bin:/bin"
            f.write(f"export HOME=/tmp PATH={shlex.quote(path)}\n"
                    f"{exports}cd {shlex.quote(cwd)} || exit 126\nexec {shlex.join(cmd)}\n")
        machine, console, accel = QEMU[arch]
        qemu = [*machine, "-accel", accel, "-smp", str(cpus), "-m", memory,
                "-nodefaults", "-display", "none", "-serial", "stdio", "-no-reboot",
                "-kernel", os.path.join(kdir, "vmlinuz"), "-initrd", initrd,
                "-append", f"console={console} quiet loglevel=3 panic=-1",
                "-virtfs", f"local,path={root},mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
                "-virtfs", f"local,path={out},mount_tag=out,security_model=none"]
        if root != "/":
            qemu += ["-virtfs", "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap"]
        p = subprocess.Popen(qemu, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        lines = []
        deadline = time.monotonic() + timeout
        timed_out = False
        try:
            for raw in p.stdout:
                line = raw.decode(errors="replace").rstrip("\r\n")
                lines.append(line)
                print(prefix + line, flush=True)
                if time.monotonic() > deadline:
                    timed_out = True
                    break
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        if timed_out:
            print(f"{prefix}kernels: {release}: no end after {timeout} s; the VM was stopped", flush=True)
        try:
            with open(os.path.join(out, "rc")) as f:
                rc = int(f.read().strip())
        except (OSError, ValueError):
            rc = 125
        return rc, lines
    finally:
        if not share:
            shutil.rmtree(out, ignore_errors=True)


GUEST_TESTS = ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--color=no", "--durations=5",
               "tests/kernels/guest"]
GUEST_ENV = {"RETWATCH": "build/retwatch", "RETWATCH_FIXTURES": "build/fixtures",
             "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "120"}


def matrix(releases, timeout):
    """Runs the guest tests on each release at once; returns the exit status."""
    results = {}

    def one(rel):
        t0 = time.monotonic()
        rc, lines = run(rel, GUEST_TESTS, env=GUEST_ENV, timeout=timeout, prefix=f"[{rel}] ")
        results[rel] = (rc, lines, time.monotonic() - t0)

    for rel in releases:
        fetch(rel)
    threads = [threading.Thread(target=one, args=(rel,)) for rel in releases]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    status = 0
    print()
    for rel in releases:
        rc, lines, secs = results[rel]
        counts = {}
        for line in lines:  # pytest's last line: "3 passed, 1 failed, 2 skipped in 9.1s"
            if re.search(r"\b(passed|failed|error|errors|skipped)\b.* in [0-9.]+s", line):
                counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped)", line)}
        failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
        with open(os.path.join(kernel_dir(rel), "version")) as f:
            pkg = f.read().strip()
        ok = rc == 0 and counts.get("passed", 0) > 0 and not failed
        how = "" if ok else (f" (exit {rc})" if rc != 125 else " (the VM did not finish its run)")
        print(f"kernel {rel} ({pkg}): {counts.get('passed', 0)} passed, {failed} failed, "
              f"{counts.get('skipped', 0)} skipped in {secs:.0f} s{how}")
        status = status or (0 if ok else 1)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="verb", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("release", nargs="+")
    d = sub.add_parser("debs", help="unpack another architecture's packages into the cache")
    d.add_argument("arch")
    d.add_argument("name")
    d.add_argument("package", nargs="+")
    s = sub.add_parser("sysroot", help="another architecture's build packages and busybox, unpacked")
    s.add_argument("arch")
    s.add_argument("--runtime", action="store_true", help="the agent image's runtime packages instead")
    b = sub.add_parser("btf", help="a kernel's BTF, from its image")
    b.add_argument("release")
    b.add_argument("dest")
    m = sub.add_parser("matrix")
    m.add_argument("release", nargs="+")
    m.add_argument("--timeout", type=int, default=420)
    r = sub.add_parser("run")
    r.add_argument("release")
    r.add_argument("--cpus", type=int, default=2)
    r.add_argument("--timeout", type=int, default=600)
    r.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    os.makedirs(CACHE, exist_ok=True)
    if a.verb == "fetch":
        for rel in a.release:
            fetch(rel)
        return 0
    if a.verb == "debs":
        print(fetch_debs(a.arch, a.name, a.package))
        return 0
    if a.verb == "btf":
        btf(a.release, a.dest)
        return 0
    if a.verb == "sysroot":
        print(sysroot(a.arch, "runtime", RUNTIME_PACKAGES) if a.runtime else sysroot(a.arch))
        return 0
    if a.verb == "matrix":
        return matrix(a.release, a.timeout)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("run: no command")
    rc, _ = run(a.release, cmd, cpus=a.cpus, timeout=a.timeout)
    return rc


if __name__ == "__main__":
    sys.exit(main())
