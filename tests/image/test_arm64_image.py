"""The node agent's image for linux/arm64 (tests/image/build-arm64.sh): its
programs start in Debian's arm64 kernel under qemu-system-aarch64, on the
image's own filesystem, and one manifest list names it with the amd64 image."""

import json
import os
import subprocess
import sys

import pytest

import imagectl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "kernels"))
import vm  # noqa: E402

IMAGE = "localhost/retwatch-agent:test-arm64"
MANIFEST = "localhost/retwatch-agent:test-multiarch"


@pytest.fixture(scope="module")
def arm64_image():
    res = subprocess.run(["bash", os.path.join(HERE, "build-arm64.sh"), IMAGE],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"build-arm64.sh exited {res.returncode}\n{res.stderr}"
    return IMAGE


@pytest.fixture(scope="module")
def started(arm64_image, tmp_path_factory):
    """What the image's programs print in the arm64 VM, chrooted into the
    image (its libraries, its loader): {name: output}."""
    share = str(tmp_path_factory.mktemp("arm64-vm"))
    script = " && ".join(
        [f"chroot . /usr/local/bin/{cmd} >/tmp/retwatch-vm/{name} 2>&1"
         for name, cmd in (("version", "retwatch-agent --version"), ("help", "retwatch-agent --help"),
                           ("cli", "retwatch --version"), ("plugin", "kubectl-retwatch --help"))]
        + ["uname -m >/tmp/retwatch-vm/uname"])
    with imagectl.Rootfs(arm64_image) as root:
        rc, lines = vm.run("arm64-6.1", ["sh", "-c", script], cwd=root.path, share=share,
                           timeout=300, prefix="[arm64] ")
    out = {}
    for name in os.listdir(share):
        with open(os.path.join(share, name), errors="replace") as f:
            out[name] = f.read()
    assert rc == 0, f"exit {rc}\n{out}\n" + "\n".join(lines[-30:])
    return out


def test_the_image_is_arm64_with_the_agent_as_entrypoint(arm64_image):
    res = subprocess.run(imagectl.BUILDAH + ["inspect", "--type", "image", arm64_image],
                         capture_output=True, text=True, check=True)
    oci = json.loads(res.stdout)["OCIv1"]
    assert (oci["architecture"], oci["os"]) == ("arm64", "linux")
    assert oci["config"].get("Entrypoint") == ["/usr/local/bin/retwatch-agent"]
    assert not oci["config"].get("Cmd")
    labels = oci["config"].get("Labels") or {}
    assert labels.get("org.opencontainers.image.version") == imagectl.agent_version()


def test_the_agent_starts_on_arm64(started):
    assert started["uname"].strip() == "aarch64", started
    assert started["version"].strip() == f"retwatch-agent {imagectl.agent_version()}", started
    assert started["help"].startswith("usage: retwatch-agent"), started
    assert started["cli"].startswith("retwatch "), started
    assert "kubectl retwatch" in started["plugin"], started


def test_one_manifest_list_names_both_architectures(image, arm64_image):
    subprocess.run(imagectl.BUILDAH + ["manifest", "rm", MANIFEST], capture_output=True)
    try:
        subprocess.run(imagectl.BUILDAH + ["manifest", "create", MANIFEST], capture_output=True, check=True)
        for img in (image, arm64_image):
            subprocess.run(imagectl.BUILDAH + ["manifest", "add", MANIFEST, f"containers-storage:{img}"],
                           capture_output=True, check=True)
        res = subprocess.run(imagectl.BUILDAH + ["manifest", "inspect", MANIFEST],
                             capture_output=True, text=True, check=True)
    finally:
        subprocess.run(imagectl.BUILDAH + ["manifest", "rm", MANIFEST], capture_output=True)
    platforms = sorted((m["platform"]["os"], m["platform"]["architecture"])
                       for m in json.loads(res.stdout)["manifests"])
    assert platforms == [("linux", "amd64"), ("linux", "arm64")], platforms
