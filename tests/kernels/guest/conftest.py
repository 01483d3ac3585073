"""The kernel matrix's tests, run inside each kernel's VM (and runnable on
this machine's kernel as they are):

    RETWATCH=build/retwatch RETWATCH_FIXTURES=build/fixtures \
        python3 -m pytest -q tests/kernels/guest

They reuse the integration tests' tracees and harness (tests/integration).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "integration"))
pytest.register_assert_rewrite("harness", "tracing")

import harness  # noqa: E402
import tracing  # noqa: E402

# Under QEMU's TCG every instruction is emulated: loading the programs,
# calibrating the probes and attaching take 15-25 s there (1.9 s on the
# host), past the 20 s the host's tests give them.
tracing.ATTACH_TIMEOUT = 90


def pytest_configure(config):
    if not (harness.RETWATCH and os.access(harness.RETWATCH, os.X_OK)):
        raise pytest.UsageError("RETWATCH is not set to the retwatch binary under test")
    if not (harness.FIXTURES and os.path.isfile(os.path.join(harness.FIXTURES, "manifest.json"))):
        raise pytest.UsageError("RETWATCH_FIXTURES is not set to the fixtures' directory")
    if os.geteuid() != 0:
        raise pytest.UsageError("the kernel tests trace: they need root")
    harness.RETWATCH = os.path.abspath(harness.RETWATCH)
    harness.FIXTURES = os.path.abspath(harness.FIXTURES)
