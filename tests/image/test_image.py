"""The node agent's image as the DaemonSet runs it."""

import glob
import os
import re

import imagectl

BINARIES = ("/usr/local/bin/retwatch-agent", "/usr/local/bin/retwatch")
# Generous: the runtime stage is about 100 MB; a compiler or the build
# stage's libraries would add hundreds.
MAX_IMAGE_BYTES = 160e6


def _output(res):
    return f"exit {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"


def test_entrypoint_is_the_agent_with_no_default_args(image):
    config = imagectl.inspect(image)
    assert config.get("Entrypoint") == ["/usr/local/bin/retwatch-agent"]
    # A Cmd inherited from the base (bash) would become the agent's argument.
    assert not config.get("Cmd")


def test_version_label_follows_the_agent(image):
    labels = imagectl.inspect(image).get("Labels") or {}
    assert labels.get("org.opencontainers.image.version") == imagectl.agent_version(), \
        "ARG VERSION in the Dockerfile must follow RETWATCH_VERSION in cmd/retwatch-agent/main.c"
    assert labels.get("org.opencontainers.image.title") == "retwatch-agent"


def test_version(rootfs, runc_root):
    res = imagectl.run(rootfs, runc_root, ["--version"])
    assert res.returncode == 0, _output(res)
    assert res.stdout.strip() == f"retwatch-agent {imagectl.agent_version()}", _output(res)


def test_the_kubectl_plugin_runs(rootfs, runc_root):
    res = imagectl.run(rootfs, runc_root, ["/usr/local/bin/kubectl-retwatch", "--help"],
                       entrypoint=False)
    assert res.returncode == 0 and "kubectl retwatch trace" in res.stdout, _output(res)
    res = imagectl.run(rootfs, runc_root, ["ldd", "/usr/local/bin/kubectl-retwatch"],
                       entrypoint=False)
    assert res.returncode == 0 and "libcurl.so.4 => " in res.stdout, _output(res)
    assert "not found" not in res.stdout, _output(res)


def test_self_check_passes_with_the_daemonsets_capabilities(rootfs, runc_root):
    res = imagectl.run(rootfs, runc_root, ["--self-check"])
    assert res.returncode == 0, _output(res)
    lines = res.stdout.strip().splitlines()
    assert lines and re.search(r"\bok\b", lines[-1]), _output(res)
    assert "FAIL" not in res.stdout.upper(), _output(res)


def test_self_check_fails_without_capabilities(rootfs, runc_root):
    # Proves the capabilities above were what let it pass, and that a node
    # where tracing cannot work gets told so.
    res = imagectl.run(rootfs, runc_root, ["--self-check"], caps=[])
    assert res.returncode == 1, _output(res)
    assert re.search(r"fail|not permitted", res.stdout + res.stderr, re.IGNORECASE), _output(res)


def test_every_library_resolves(rootfs, runc_root):
    for binary in BINARIES:
        res = imagectl.run(rootfs, runc_root, ["ldd", binary], entrypoint=False)
        assert res.returncode == 0, _output(res)
        assert "not found" not in res.stdout, _output(res)
        assert "libbpf.so.1 => " in res.stdout, _output(res)


def test_no_compiler_or_build_dependency(rootfs):
    compilers = [p for pattern in ("usr/bin/*gcc*", "usr/bin/cc", "usr/bin/c++", "usr/bin/*g++*",
                                   "usr/bin/clang*", "usr/bin/llc*", "usr/bin/bpftool",
                                   "usr/sbin/bpftool", "usr/lib/gcc", "usr/lib/llvm-*")
                 for p in glob.glob(rootfs.file(pattern))]
    assert not compilers
    with open(rootfs.file("/var/lib/dpkg/status")) as f:
        installed = re.findall(r"^Package: (\S+)\nStatus: install ok installed$", f.read(), re.M)
    assert "libbpf1" in installed
    assert [p for p in installed if p.endswith("-dev")] == []


def test_apt_lists_removed(rootfs):
    lists = rootfs.file("/var/lib/apt/lists")
    assert [n for n in os.listdir(lists) if n not in ("lock", "partial", "auxfiles")] == []


def test_image_size(image):
    assert imagectl.size_bytes(image) < MAX_IMAGE_BYTES
