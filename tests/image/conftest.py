"""Tests of the node agent's container image (Dockerfile): built with buildah
on a Debian base made with debootstrap, since there is no registry, then run
with runc with only the DaemonSet's capabilities.

Run (from the repository root, as root):
    make imagetest
or  python3 -m pytest -q -p no:cacheprovider tests/image

Nothing is skipped: without root, buildah, debootstrap or runc the run stops
with an error. The first run debootstraps the base (about 50 s) and builds
both stages (about 35 s); the base tarball is cached in
${RETWATCH_CACHE:-~/.cache/retwatch}/image and every build step in
containers storage (`buildah images`), so a later run takes seconds.
"""

import os
import shutil
import tempfile
import time

import pytest

pytest.register_assert_rewrite("imagectl")

import imagectl  # noqa: E402

_report = {}


def pytest_configure(config):
    problems = []
    if os.geteuid() != 0:
        problems.append("the image tests need root (buildah, runc, BPF)")
    for tool in ("buildah", "debootstrap", "runc"):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            problems.append(f"{tool} is not installed (scripts/deps.sh installs it)")
    if problems:
        raise pytest.UsageError("image tests cannot run:\n  " + "\n  ".join(problems))


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="retwatch-image-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def image(workdir):
    """The image, built from the working tree (layers reused when unchanged)."""
    imagectl.remove_leftovers()
    start = time.monotonic()
    try:
        made_base = imagectl.build(os.path.join(workdir, "build.log"))
    except imagectl.ImageError as e:
        pytest.fail(str(e), pytrace=False)
    _report.update(seconds=time.monotonic() - start, made_base=made_base,
                   size=imagectl.size_bytes())
    return imagectl.IMAGE


@pytest.fixture(scope="session")
def rootfs(image):
    with imagectl.Rootfs(image) as r:
        yield r


@pytest.fixture(scope="session")
def runc_root(workdir):
    d = os.path.join(workdir, "runc")
    os.makedirs(d)
    return d


def pytest_terminal_summary(terminalreporter):
    if _report:
        base = "debootstrapped the base" if _report["made_base"] else "base cached"
        terminalreporter.write_line(
            f"image: {imagectl.IMAGE}, {_report['size'] / 1e6:.1f} MB, "
            f"built in {_report['seconds']:.1f} s ({base})")
