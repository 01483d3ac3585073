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
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vm  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
MS = 1_000_000


# Debian's arm64 6.1 (bookworm) and 6.12 (bookworm-backports: uprobe_multi links)
@pytest.fixture(scope="module", params=["arm64-6.1", "arm64-6.12"])
def runs(request):
    release = request.param
    for f in ("build-arm64/retwatch", "build-arm64/tracees/go-tracee", "build-arm64/tracees/c-tracee"):
        assert os.path.exists(os.path.join(ROOT, f)), f"{f} is missing: make arm64test builds it"
    share = tempfile.mkdtemp(prefix="retwatch-arm64-")
    try:
        rc, lines = vm.run(release, ["sh", "tests/kernels/arm64_guest.sh", "build-arm64/retwatch",
                                     "build-arm64/tracees", "/tmp/retwatch-vm"],
                           cwd=ROOT, share=share, timeout=900, prefix=f"[{release}] ")
        console = "\n".join(lines[-40:])
        assert rc == 0 and os.path.exists(os.path.join(share, "done")), \
            f"the arm64 VM did not finish its runs (exit {rc})\n{console}"
        for name in ("go", "native"):
            if os.path.exists(os.path.join(share, name, "seconds")):
                with open(os.path.join(share, name, "seconds")) as f:
                    print(f"{release} run {name}: {f.read().strip()} s")
        yield Runs(share, release)
    finally:
        shutil.rmtree(share, ignore_errors=True)


class Runs:
    def __init__(self, share, release):
        self.share = share
        self.release = release
        self.kernel = tuple(int(x) for x in vm.arch_of(release)[1].split("."))

    def read(self, *path):
        with open(os.path.join(self.share, *path)) as f:
            return f.read()

    # the tracees of the native run: the C tracee's two, inline, deepstack
    PART = {"c": ("native", 0, 2), "inline": ("native", 2, 3), "deep": ("native", 3, 4)}

    def get(self, name):
        """The run NAME, or part of the native run (PART): (retwatch's
        document, [each of its tracees' counts], retwatch's log)."""
        if name in self.PART:
            run, lo, hi = self.PART[name]
            doc, reports, err = self.get(run)
            return doc, reports[lo:hi], err
        rc = self.read(name, "rc").strip()
        err = self.read(name, "retwatch.err")
        assert rc == "0", f"{name}: retwatch {rc}\n{err[-3000:]}"
        doc = json.loads(self.read(name, "retwatch.json"))
        reports = []
        for n in range(1, 10):
            try:
                out = self.read(name, f"tracee-{n}.out")
            except FileNotFoundError:
                break
            lines = [line for line in out.splitlines() if line.startswith("{")]
            # deepstack and inline print no counts: their output, then
            assert lines or len(out.splitlines()) >= 2, f"{name}: tracee {n} did not finish\n{out}"
            reports.append(json.loads(lines[-1]) if lines else {"out": out})
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
    # 6.1 has no uprobe_multi links (6.6 brought them): the per-offset path, said at start
    multi = runs.kernel >= (6, 6)
    assert (kernel["release"], kernel["attach"]) == \
        (runs.read("kernel").strip(), "uprobe_multi" if multi else "perf_event"), kernel
    assert multi or "no uprobe_multi links in this kernel" in err, err


def test_go_recursion_and_stack_growth_counted_exactly(runs):
    """5 fresh goroutines 40 levels deep with 4 KiB frames: their stacks
    grow (morestack through X28's g), and the calls restart at their entries."""
    doc, (report, _, _), _ = runs.get("go")
    f = assert_exact(doc, report, "main.deep")
    assert f["max_ns"] >= report["depth"] * MS, f
    # its entry probe on the stack check's B.LS, which the kernel simulates:
    # a stack growth's restart passes it twice, one call all the same
    assert f["entry"] == "jump", f


def args_of(call):
    return {a["name"]: a["value"] for a in call["arguments"]}


def test_go_arguments_from_arm64s_registers(runs):
    """A stripped Go binary has no DWARF: its calls carry the argument
    registers of Go's arm64 ABI, X0 first. The 10 slowest calls of
    deep(n, rec) are outer levels of the goroutines (one slow goroutine's
    may fill them): n in X0 near the depth, and in X1 the one recorder they
    all share."""
    doc, (report, _, _), _ = runs.get("go")
    slowest = function(doc, "main.deep")["slowest_calls"]
    assert len(slowest) == 10, slowest
    for call in slowest:
        a = args_of(call)
        assert list(a)[:2] == ["x0", "x1"], call
        assert report["depth"] - 20 < int(a["x0"], 16) <= report["depth"], call
        assert a["x1"] == args_of(slowest[0])["x1"], slowest
        assert call["arguments_note"].startswith("the file has no DWARF"), call


def test_go_arguments_named_from_dwarf(runs):
    """With DWARF, main.charge(customer string, cents int64, express bool)'s
    slowest calls carry exactly the inputs the tracee passed: those it made
    slow ("slow-co"), and any 1 ms call a loaded host held up longer under
    emulation (call i: "customer-i", 100 + i, i % 3 == 0)."""
    doc, (_, _, report), _ = runs.get("go")
    f = function(doc, "main.charge")
    assert f["calls"] == 400, f
    slow = {(s["cents"], s["express"]) for s in report["slow"]}
    got = []
    for call in f["slowest_calls"]:
        a = args_of(call)
        assert list(a) == ["customer", "cents", "express"], call
        cents, express = int(a["cents"]), a["express"] == "true"
        if a["customer"] == "slow-co":
            assert (cents, express) in slow, call
            got.append(cents)
        else:
            i = cents - 100
            assert (a["customer"], express) == (f"customer-{i}", i % 3 == 0), call
    assert len(f["slowest_calls"]) == 10 and len(set(got)) == len(got) >= 1, f["slowest_calls"]


def test_c_arguments_named_from_dwarf(runs):
    """AAPCS64 passes deep(int n)'s n in W0: the 5 slowest calls are outer
    levels of the threads' recursions (one slow thread's may fill them)."""
    doc, (_, recursive), _ = runs.get("c")
    slowest = function(doc, "deep")["slowest_calls"]
    assert len(slowest) == 5, doc
    depths = [int(args_of(call)["n"]) for call in slowest]
    assert all(recursive["depth"] - 10 < d <= recursive["depth"] for d in depths), \
        (depths, recursive)
    for call in function(doc, "validate")["slowest_calls"]:
        assert list(args_of(call)) == ["x"], call


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
    doc, (_, report, _), _ = runs.get("go")
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


def test_go_inlined_copies_counted_exactly(runs):
    """tests/fixtures/inline, 5 rounds: main.clamp exists only inlined, in
    each of main.validate's three copies (5 x 1,001 + 1 calls); main.nap in
    main.naps (20, 2 ms each); main.risky in main.try, which recovers from
    its panic on even numbers (1,000: 500 returns, 500 orphans); main.grade
    in main.grades, leaving through a jump table (300, counted at its
    entry). Their entries and exits are found by the AArch64 sweep."""
    doc, (inl,), _ = runs.get("inline")
    assert len(inl["out"].split("\n")[1].split()) == 3, inl  # ready, then its answer
    calls = 5 * 1001 + 1
    clamp = function(doc, "main.clamp")
    assert (clamp["calls"], clamp["inlined_calls"], clamp["orphans"], clamp["lost"]) == \
        (calls, calls, 0, 0), clamp
    assert clamp["inlined_copies"] == clamp["inlined_timed"] == 3, clamp
    nap = function(doc, "main.nap")
    assert (nap["calls"], nap["orphans"], nap["inlined_timed"]) == (20, 0, 1), nap
    assert nap["p50_ns"] >= 2 * MS, nap
    risky = function(doc, "main.risky")
    assert (risky["calls"], risky["orphans"], risky["lost"]) == (500, 500, 0), risky
    grade = function(doc, "main.grade")
    assert (grade["calls"], grade["inlined_untimed_calls"], grade["mode"]) == \
        (300, 300, "entry-only"), grade


DEEPSTACK = ["slow_leaf", "inner", "middle", "outer", "main"]


def frame_records(path):
    """deepstack's functions that make a frame record (MOV X29, SP): none,
    when built as the Makefile builds it, so that a frame-record walk from
    slow_leaf skips its callers."""
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=True).stdout
    made, func = set(), None
    for line in out.splitlines():
        if line.endswith(">:"):
            func = line.split("<")[1].rstrip(">:")
        elif func in DEEPSTACK and "mov\tx29, sp" in line:
            made.add(func)
    return made


def test_c_slow_call_stacks_unwound_without_frame_pointers(runs):
    """deepstack (tests/fixtures/c/deepstack.c), built with
    -fomit-frame-pointer, keeps no frame records: the stacks of slow_leaf's
    slowest calls come from its unwind tables (.eh_frame) over the top of
    the stack sent with each, from X30 and the callee-saved registers at
    the RET: main -> outer -> middle -> inner -> slow_leaf, innermost first."""
    assert frame_records(os.path.join(ROOT, "build-arm64/tracees/deepstack")) == set()
    doc, _, _ = runs.get("deep")
    f = function(doc, "slow_leaf")
    assert (f["calls"], f["orphans"], f["lost"]) == (60, 0, 0), f
    assert len(f["slowest_calls"]) == 5, f
    for call in f["slowest_calls"]:
        names = [s.split("+")[0] for s in call["stack"]]
        assert names[:len(DEEPSTACK)] == DEEPSTACK, call["stack"]


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


def share_simulated(path, emulated):
    """How many of a binary's functions have their entry probe on a kind of
    instruction this kernel simulates, and how many there are: read on this
    machine (`retwatch inspect` reads arm64 code anywhere)."""
    run = subprocess.run([os.path.join(ROOT, "build", "retwatch"), "inspect", "--json",
                          "--limit", "1000000", path, "*"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    funcs = json.loads(run.stdout)["functions"]
    return sum(f["entry_kind"] in emulated for f in funcs), len(funcs)


def test_entries_moved_where_the_kernel_simulates(runs):
    """Go's entries move to their stack check's B.LS (or a branch past it),
    which every arm64 kernel simulates: most of a Go binary's functions
    take one trap at entry. C's take one where they begin (or soon) with a
    kind this kernel simulates. The figures, printed, go in the notes."""
    doc, _, _ = runs.get("go")
    emulated = set(doc["kernel"]["emulated_entries"])
    assert {"jump", "call"} <= emulated, doc["kernel"]
    go = share_simulated(os.path.join(ROOT, "build-arm64/tracees/go-tracee"), emulated)
    c = share_simulated(os.path.join(ROOT, "build-arm64/tracees/c-tracee"), emulated)
    print(f"{runs.release}: simulates {sorted(emulated)}; entries simulated: "
          f"Go {go[0]} of {go[1]}, C {c[0]} of {c[1]}")
    assert go[0] > go[1] // 2, go
