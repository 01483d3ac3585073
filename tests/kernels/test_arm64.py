"""retwatch on arm64: build-arm64/retwatch (make arm64) traces arm64 Go
(stripped PIE) and C tracees in Debian's arm64 kernel under
qemu-system-aarch64 (TCG), on a root of Debian's arm64 packages.

The VM has busybox and no Python: tests/kernels/arm64_guest.sh runs the
traced runs there, once, and leaves their output in a directory of this
machine's, which the tests here read. Counts, not timings: under TCG a trap
costs tens of microseconds.
[REF] every expected count is the tracee's own (tests/fixtures/tracee,
tests/fixtures/c/tracee.c).
"""

import json
import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
RELEASE = "arm64-6.1"
MS = 1_000_000


@pytest.fixture(scope="module")
def runs():
    for f in ("build-arm64/retwatch", "build-arm64/tracees/go-tracee", "build-arm64/tracees/c-tracee"):
        assert os.path.exists(os.path.join(ROOT, f)), f"{f} is missing: make arm64test builds it"
    share = tempfile.mkdtemp(prefix="retwatch-arm64-")
    try:
        rc, lines = vm.run(RELEASE, ["sh", "tests/kernels/arm64_guest.sh", "build-arm64/retwatch",
                                     "build-arm64/tracees", "/tmp/retwatch-vm"],
                           cwd=ROOT, share=share, timeout=900, prefix="[arm64] ")
        console = "\n".join(lines[-40:])
        assert rc == 0 and os.path.exists(os.path.join(share, "done")), \
            f"the arm64 VM did not finish its runs (exit {rc})\n{console}"
        for name in ("go", "c"):
            if os.path.exists(os.path.join(share, name, "seconds")):
                with open(os.path.join(share, name, "seconds")) as f:
                    print(f"arm64 run {name}: {f.read().strip()} s")
        yield Runs(share)
    finally:
        shutil.rmtree(share, ignore_errors=True)


class Runs:
    def __init__(self, share):
        self.share = share

    def read(self, *path):
        with open(os.path.join(self.share, *path)) as f:
            return f.read()

    def get(self, name):
        """The run NAME: (retwatch's document, [each tracee's counts])."""
        rc = self.read(name, "rc").strip()
        err = self.read(name, "retwatch.err")
        assert rc == "0", f"{name}: retwatch {rc}\n{err[-3000:]}"
        doc = json.loads(self.read(name, "retwatch.json"))
        reports = []
        for n in range(1, 3):
            try:
                out = self.read(name, f"tracee-{n}.out")
            except FileNotFoundError:
                break
            lines = [line for line in out.splitlines() if line.startswith("{")]
            assert lines, f"{name}: tracee {n} printed no counts\n{out}"
            reports.append(json.loads(lines[-1]))
        return doc, reports, err


def function(doc, name):
    found = [f for f in doc["functions"] if f["name"] == name]
    assert len(found) == 1, f"{name} not in {[f['name'] for f in doc['functions']]}"
    return found[0]


def assert_exact(doc, report, name):
    f = function(doc, name)
    want = report["calls"][name]
    assert want > 0, report
    assert (f["calls"], f["orphans"], f["lost"], f["mode"]) == \
        (want, report.get("orphans", {}).get(name, 0), 0, "entry+ret"), (f, report)
    return f


def test_the_agent_starts(runs):
    assert runs.read("agent-version").startswith("retwatch-agent "), runs.read("agent-version")
    assert runs.read("agent-help").startswith("usage: retwatch-agent"), runs.read("agent-help")


def test_the_vm_runs_the_arm64_kernel(runs):
    assert runs.read("kernel").strip().endswith("-arm64")
    doc, _, err = runs.get("go")
    kernel = doc["kernel"]
    # Debian's 6.1 has no uprobe_multi links: the per-offset path, said at start
    assert (kernel["release"], kernel["attach"]) == (runs.read("kernel").strip(), "perf_event"), kernel
    assert "no uprobe_multi links in this kernel" in err, err


def test_go_recursion_and_stack_growth_counted_exactly(runs):
    """5 fresh goroutines 40 levels deep with 4 KiB frames: their stacks
    grow (morestack through X28's g), and the calls restart at their entries."""
    doc, (report, _), _ = runs.get("go")
    f = assert_exact(doc, report, "main.deep")
    assert f["max_ns"] >= report["depth"] * MS, f


def test_go_slow_calls_come_with_their_stacks(runs):
    """Named from the stripped PIE's pclntab: the function, the levels of
    deep above it (the frame-record walk), then the goroutine's function."""
    doc, _, _ = runs.get("go")
    slowest = function(doc, "main.deep")["slowest_calls"]
    assert doc["slow_calls"] > 0 and slowest, doc
    for call in slowest:
        stack = call["stack"]
        assert call["duration_ns"] >= 20 * MS, call
        assert stack[0].startswith("main.deep+"), stack
        callers = [s for s in stack[1:] if not s.startswith("main.deep+")]
        assert callers and callers[0].startswith("main.scenarioRecursive.func"), stack


def test_go_two_return_paths_counted_exactly(runs):
    doc, (_, report), _ = runs.get("go")
    f = assert_exact(doc, report, "main.validate")
    assert f["returns"] >= 2, f


def test_c_two_paths_and_recursion_in_threads_counted_exactly(runs):
    doc, (paths, recursive), _ = runs.get("c")
    assert_exact(doc, paths, "validate")
    assert_exact(doc, recursive, "deep")
    slowest = function(doc, "deep")["slowest_calls"]
    assert slowest, doc
    for call in slowest:
        # the slowest are the outermost levels: deep, then its thread's function
        stack = call["stack"]
        assert stack[0].startswith("deep+"), stack
        callers = [s for s in stack[1:] if not s.startswith("deep+")]
        assert callers and callers[0].startswith("deep_thread+"), stack


def test_the_calibration_measures_arm64s_entry_kinds(runs):
    """Every kind measured; the kinds the arm64 kernel simulates rather
    than steps (its branches: B.cond, BL) cost less than a stepped entry."""
    doc, _, err = runs.get("go")
    bias = doc["probe_bias_by_entry"]
    print(f"arm64 calibration (probe bias by entry kind, ns): {bias}")
    assert set(bias) >= {"stepped", "push", "nop", "nop5", "jump", "call"}, bias
    assert all(v > 0 for v in bias.values()), bias
    for kind in ("jump", "call"):
        assert bias[kind] < bias["stepped"], bias
