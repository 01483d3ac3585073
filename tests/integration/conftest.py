"""Integration tests of `retwatch inspect` against real binaries.

Run (from the repository root):
    make itest
or  RETWATCH=build/asan/retwatch RETWATCH_FIXTURES=build/fixtures \
        python3 -m pytest -q tests/integration

Nothing is skipped: a missing retwatch binary or fixture directory stops the
run with an error.
"""

import os
import shutil

import pytest

pytest.register_assert_rewrite("harness", "reference", "tracing")

import harness  # noqa: E402


def pytest_configure(config):
    problems = []
    if not harness.RETWATCH:
        problems.append("RETWATCH is not set (path of the retwatch binary under test)")
    elif not (os.path.isfile(harness.RETWATCH) and os.access(harness.RETWATCH, os.X_OK)):
        problems.append(f"RETWATCH={harness.RETWATCH}: no such executable (run `make asan`)")
    if not harness.FIXTURES:
        problems.append("RETWATCH_FIXTURES is not set (OUTDIR of tests/fixtures/build.sh)")
    elif not os.path.isfile(os.path.join(harness.FIXTURES, "manifest.json")):
        problems.append(f"RETWATCH_FIXTURES={harness.FIXTURES}: no manifest.json "
                        f"(run `bash tests/fixtures/build.sh {harness.FIXTURES}`)")
    for tool in ("go", "objdump", "nm", "readelf"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} is not on PATH (reference tool)")
    if problems:
        raise pytest.UsageError("integration tests cannot run:\n  " + "\n  ".join(problems))
    # Absolute paths: retwatch and the reference tools run from other directories.
    harness.RETWATCH = os.path.abspath(harness.RETWATCH)
    harness.FIXTURES = os.path.abspath(harness.FIXTURES)
