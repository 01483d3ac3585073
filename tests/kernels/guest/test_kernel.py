"""What must hold on every kernel users run retwatch on: the programs load
and attach (uprobe_multi links where the kernel has them, per-offset
perf_event uprobes where not), every call of Go (stripped PIE, cgo) and C
tracees is counted, across stack growth's restarts and recursion, slow calls
come with their stacks, and the calibration finds which entry instructions
this kernel emulates.

Counts, not timings: under QEMU's TCG a trap costs tens of microseconds, so
durations are only checked to be ordered and at least what was slept.
[REF] every expected count is the tracee's own (tests/fixtures/tracee).
"""

import os
import subprocess
import time

import pytest

import harness
import tracing
from tracing import c_tracee, go_tracee

MS = 1_000_000
GO = go_tracee("native", "pie-stripped")
C = c_tracee()


KERNEL = harness.kernel_version()
if KERNEL < (5, 15):
    pytest.skip("a kernel older than retwatch runs on: test_old_kernel.py checks its refusal",
                allow_module_level=True)
HAS_MULTI = KERNEL >= (6, 6)  # uprobe_multi links came in Linux 6.6
EMULATES_NOP5 = KERNEL >= (6, 16)  # x86 uprobes emulate the 5-byte NOP from 6.16


def traced(t, scenario, roles, options=()):
    return tracing.scenario(t, scenario, roles, options=("--threshold", "20ms", *options))


def assert_exact(r, t, role, report=None):
    """Every call of role's function counted, as the tracee (report, else
    the run's first) counted them."""
    report = report or r.report
    name = t.fn(role)
    assert report["calls"][name] > 0, r.describe()
    f = tracing.assert_calls(r, role, t, report["calls"][name], report["orphans"].get(name, 0))
    assert f["lost"] == 0 and f["mode"] == "entry+ret", f
    return f


def go_recursive():
    """The Go stripped PIE tracee's recursion: 5 fresh goroutines 40 levels
    deep, 4 KiB frames and 1 ms sleeps (their stacks grow, and the calls
    that grew them restart at their entries)."""
    return traced(GO, "recursive", ["deep"])


# --------------------------------------------------------------------------
# the kernel's features, as retwatch names them


def test_the_attach_mode_is_what_this_kernel_has():
    r = go_recursive()
    tracing.assert_document(r)
    kernel = r.doc["kernel"]
    assert kernel["release"] == os.uname().release, kernel
    assert (kernel["attach"], kernel["uprobe_multi"]) == \
        (("uprobe_multi", True) if HAS_MULTI else ("perf_event", False)), kernel
    said = f"retwatch: kernel {os.uname().release}: " + (
        "uprobe_multi links" if HAS_MULTI else "no uprobe_multi links in this kernel")
    assert said in r.retwatch.stderr, r.describe()


def test_uprobe_multi_asked_where_the_kernel_has_none_is_refused():
    if HAS_MULTI:
        pytest.skip(f"Linux {KERNEL[0]}.{KERNEL[1]} has uprobe_multi links")
    t = tracing.TraceeProcess(GO, "sleep")
    try:
        argv = (harness.RETWATCH, "trace", "--attach", "uprobe_multi", "--pid", str(t.pid), GO.fn("sleep_for"))
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    finally:
        t.kill()
    run = harness.Run(argv, p.returncode, p.stdout, p.stderr)
    run.assert_refused()
    assert "this kernel has no uprobe_multi links (Linux 6.6 or later)" in run.stderr, run.describe()


def test_the_calibration_finds_what_this_kernel_emulates():
    """Branches, PUSH and the short NOPs are emulated on every kernel here
    (one trap), the 5-byte NOP only from 6.16 (two traps, like a stepped
    instruction); an entry probe sits only on an emulated kind."""
    doc = go_recursive().doc
    emulated = set(doc["kernel"]["emulated_entries"])
    want = {"push", "nop", "jump", "call"} | ({"nop5"} if EMULATES_NOP5 else set())
    bias = doc["probe_bias_by_entry"]
    assert emulated == want, f"emulated {sorted(emulated)}, expected {sorted(want)}; bias by entry {bias}"
    for kind in emulated:
        assert 0 < bias[kind] < bias["stepped"] / 2, bias
    for f in doc["functions"]:
        assert f["entry"] in emulated | {"stepped"}, f


# --------------------------------------------------------------------------
# every call counted


def test_go_recursion_and_stack_growth_counted_exactly():
    r = go_recursive()
    f = assert_exact(r, GO, "deep")
    assert f["max_ns"] >= r.report["depth"] * MS, f


def test_go_deep_dead_frames_purged_exactly(monkeypatch):
    """A panic from 300 levels deep, recovered above them, 3 times: each
    next chain's first entry purges the dead frames past the 64 every hit
    looks at, in the bounded loop of a global function (not bpf_loop, which
    5.15 lacks): every level one orphan, two chains' worth purged in the
    kernel (RETWATCH_DEBUG prints its counters), the last reaped at exit."""
    monkeypatch.setenv("RETWATCH_DEBUG", "1")
    name = GO.fn("recurse_panic")
    r = tracing.run_ok([(GO, "deeppanic")], [name], options=("--threshold", "20ms"))
    depth = r.report["depth"]
    assert depth > 64, r.report
    f = tracing.assert_calls(r, "recurse_panic", GO, 0, r.report["orphans"][name])
    assert f["lost"] == 0, f
    purged = [l for _, l in r.stderr_lines if l.startswith("retwatch: stat orphans_purged ")]
    assert purged and int(purged[0].split()[-1]) == 2 * depth, r.describe()


def test_go_slow_calls_come_with_their_stacks():
    """The outer levels last over the 20 ms threshold; each slow call's
    stack is symbolized from the stripped binary's pclntab: the function
    itself, the levels of deep above it, then the scenario's goroutine."""
    r = go_recursive()
    name = GO.fn("deep")
    assert r.doc["slow_calls"] > 0, r.describe()
    slowest = r.function(name)["slowest_calls"]
    assert slowest, r.describe()
    for call in slowest:
        stack = call["stack"]
        assert call["duration_ns"] >= 20 * MS, call
        callers = [s for s in stack[1:] if not s.startswith(name + "+")]
        assert stack[0].startswith(name + "+"), stack
        assert callers and callers[0].startswith("main.scenarioRecursive.func"), stack


def c_run():
    """Two C tracees in one run: validate's two return paths, and deep's
    recursion in three threads."""
    def make():
        r = tracing.run_ok([(C, "paths"), (C, "recursive")], [C.fn("validate"), C.fn("deep")],
                           options=("--threshold", "20ms"))
        tracing.assert_document(r)
        return r
    return tracing.once(("kernels", "c"), make)


def test_c_two_return_paths_counted_exactly():
    r = c_run()
    f = assert_exact(r, C, "validate", r.reports[0])
    assert f["returns"] >= 2, f
    assert f["max_ns"] >= 2 * MS, f


def test_c_recursion_in_threads_counted_exactly():
    r = c_run()
    assert_exact(r, C, "deep", r.reports[1])
    slowest = r.function(C.fn("deep"))["slowest_calls"]
    assert slowest, r.describe()
    for call in slowest:
        assert call["stack"][0].startswith(C.fn("deep") + "+"), call["stack"]


def test_perf_event_uprobes_count_exactly():
    """The per-offset path, which a kernel before 6.6 takes on its own (the
    runs above): asked for here where the kernel has uprobe_multi."""
    if not HAS_MULTI:
        pytest.skip("the runs above used perf_event uprobes: this kernel has no uprobe_multi")
    r = traced(GO, "paths", ["validate"], options=("--attach", "perf_event"))
    assert r.doc["kernel"]["attach"] == "perf_event", r.doc["kernel"]
    assert_exact(r, GO, "validate")


def test_cgo_go_and_c_calls_counted_alike():
    """cgodemo (linked externally) calls checkout -> Fee -> fee_cents (C,
    through cgo) 30 times once every probe is attached, and says when the
    last has returned: each count is 30, with no orphans, whichever stack
    each runs on. (Stopping a program that calls them in a loop would
    leave a call half done now and then.)"""
    path = harness.fixture(f"go/{tracing.native_go_version()}/cgo/cgodemo")
    proc = subprocess.Popen([path, "stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    n = 30

    def workload():
        proc.stdin.write(f"{n}\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        assert line.strip() == f"done {n}", f"cgodemo said {line!r}"

    try:
        assert proc.stdout.readline().strip() == "ready"
        run, funcs = tracing.trace_during([proc.pid], ["main.checkout", "main.Fee", "fee_cents"], workload)
    finally:
        proc.kill()
        proc.wait()
    calls = {f: (funcs[f]["calls"], funcs[f]["orphans"], funcs[f]["mode"]) for f in funcs}
    assert calls == {name: (n, 0, "entry+ret") for name in ("main.checkout", "main.Fee", "fee_cents")}, \
        f"{calls}\n{run.describe()}"


# A program started again and again in a traced process's cgroup, counted
# from its first instruction: the exec program's lookup and the task
# iterator that reads a traced process's cgroup and executable.
from test_follow import test_cgroup_counts_a_program_started_there_again_and_again  # noqa: E402,F401,I001
