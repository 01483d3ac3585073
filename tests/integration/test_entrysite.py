"""Entry probes past the first byte: on the PUSH that follows ENDBR64 (C
built for CET) or Go's stack check, where the kernel emulates the
instruction in the trap instead of stepping it out of line. Every call still
counted once, with the same scenarios as the first-byte probes: recursion,
longjmp out of traced calls, threads, tail calls. On the direct CALL that ends
a function's entry run: relay (tests/fixtures/c/tracee.c). Past a frame made
by SUB RSP, on the branch to an early exit: framed. A Go function whose
switch table has no case in its prologue: main.opcode. Past a Go leaf's
store of an argument to its spill slot above the return address: main.spill
(tests/fixtures/tracee/main.go). (Go's stack growth and
recursion past the stack check: test_counters.py; the site rules on crafted
code, a loop back into the entry run, a jump table, a shrink-wrapped early
exit: tests/unit/test_entrysite.c.)"""

import pytest

import harness
import tracing
from test_trace import MS, SLACK_NS, assert_bounded, assert_p50
from tracing import assert_calls

CET = tracing.c_tracee("cet")
NATIVE = tracing.go_tracee("native", "default")

# (scenario, roles): the C tracee's scenarios and what each times
CASES = [("sleep", ("sleep_for", "sleep_short")), ("recursive", ("deep",)),
         ("longjmp", ("jumper",)), ("threads", ("sleep_for",)), ("output", ("mix", "checksum"))]


def sites(path, names):
    """{name: (entry_site, entry_kind)} from `retwatch inspect --json`."""
    doc = harness.inspect_json(path, list(names))
    return {f["name"]: (f["entry_site"], f["entry_kind"]) for f in doc["functions"]}


def test_cet_functions_are_entered_at_their_push():
    """Each function that pushes before its first branch has its entry probe
    on that PUSH, past ENDBR64; the others stay at the first byte."""
    got = sites(CET.path, [CET.fn(r) for r in ("sleep_for", "deep", "jumper", "checksum")])
    for name, (site, kind) in got.items():
        assert site >= 4 and kind == "push", (name, site, kind)


def test_go_functions_are_entered_past_their_stack_check():
    got = sites(NATIVE.path, [NATIVE.fn(r) for r in ("sleep_for", "deep", "validate")])
    for name, (site, kind) in got.items():
        assert site > 0 and kind == "push", (name, site, kind)


@pytest.mark.parametrize("name,roles", CASES, ids=[c[0] for c in CASES])
def test_cet_calls_counted_once(name, roles):
    r = tracing.scenario(CET, name, roles)
    tracing.assert_document(r)
    moved = 0
    for role in roles:
        fn = CET.fn(role)
        f = assert_calls(r, role, CET, r.report["calls"][fn], r.report["orphans"].get(fn, 0))
        moved += f["entry"] == "push"
    assert moved, f"no function of {roles} entered at a push\n{r.describe()}"


@pytest.mark.parametrize("t", [tracing.c_tracee(), CET], ids=tracing.param_id)
def test_call_that_ends_the_entry_run(t):
    """relay's entry run is a TEST and the direct CALL of a function that
    calls sleep_for: its entry probe sits on the CALL, which the kernel
    emulates (pushing the return address after the programs ran). Each call
    is counted once, at the entry's stack pointer; sleep_for, entered just
    after the emulated CALL two frames deeper, once too; relay's durations
    within the tracee's own."""
    (site, kind), = sites(t.path, [t.fn("relay")]).values()
    assert (site, kind) == (3, "call")
    r = tracing.scenario(t, "relay", ("relay", "sleep_for"))
    tracing.assert_document(r)
    want = r.report["calls"][t.fn("relay")]
    f = assert_calls(r, "relay", t, want)
    assert f["entry"] == "call", f
    assert r.doc["probe_bias_by_entry"]["call"] > 0, r.doc["probe_bias_by_entry"]
    assert f["probe_bias_ns"] == r.doc["probe_bias_by_entry"]["call"], f
    assert_calls(r, "sleep_for", t, want)
    assert_bounded(r, f, MS)
    assert_p50(r, f)


@pytest.mark.parametrize("t", [tracing.c_tracee(), CET], ids=tracing.param_id)
def test_frame_made_by_sub(t):
    """framed makes its frame with SUB RSP, 0x18 (no PUSH), stores into it,
    and branches to its early exit before its call: its entry probe sits on
    that JLE, 0x18 bytes below the entry's stack pointer, which the probe
    adds back to key the call at the entry's depth. Each call in 3 threads is
    counted once, framed(0)'s early exits too, none an orphan (a key 0x18
    off would match no RET); no call lasts longer than the tracee's longest,
    and the p50 is among its 1 ms calls."""
    (f,) = harness.inspect_json(t.path, [t.fn("framed")])["functions"]
    assert (f["entry_kind"], f["entry_sp"]) == ("jump", 0x18), f
    assert f["entry_site"] == (0x19 if t.variant == "normal" else 0x1d), f
    r = tracing.scenario(t, "framed", ("framed",))
    tracing.assert_document(r)
    want = r.report["calls"][t.fn("framed")]
    assert want == 3 * (40 + 10), r.report
    got = assert_calls(r, "framed", t, want)
    assert got["entry"] == "jump", got
    assert got["probe_bias_ns"] == r.doc["probe_bias_by_entry"]["jump"], got
    name, rep = got["name"], r.report
    assert got["max_ns"] <= rep["max_ns"][name] + SLACK_NS, \
        f"{name}: max_ns {got['max_ns']} > the tracee's own max {rep['max_ns'][name]}\n{r.describe()}"
    cost = r.doc["call_cost_by_entry"]["jump"]
    assert rep["min_ns"][name] - cost <= got["p50_ns"] <= rep["median_ns"][name] * 1.05, \
        f"{name}: p50_ns {got['p50_ns']}, the tracee's 1 ms calls {rep}\n{r.describe()}"


@pytest.mark.parametrize("t", [NATIVE, tracing.go_tracee("native", "pie-stripped"),
                               tracing.go_tracee("go1.19.8")], ids=tracing.param_id)
def test_go_switch_table_entered_past_its_prologue(t):
    """main.opcode's switch is a jump table (LEAQ table; JMP (table)(idx*8)),
    which the analysis reads: no case lands in the prologue, so its entry
    probe leaves the first byte as a function without a table's would (on
    the PUSH past the stack check; Go 1.19: past its SUB frame). Its 300
    calls, 25 of them sleeping 1 ms, counted exactly, none longer than the
    tracee's longest."""
    (f,) = harness.inspect_json(t.path, ["main.opcode"])["functions"]
    assert f["indirect_jumps"] == 1, f
    assert f["entry_site"] > 0 and f["entry_kind"] != "stepped", f
    r = tracing.run_ok([(t, "switch")], ["main.opcode"], bpf_check=True)
    tracing.assert_document(r)
    got = r.function("main.opcode")
    assert (got["calls"], got["orphans"]) == (r.report["calls"]["main.opcode"], 0) == (300, 0), \
        f"{got['calls']} calls, {got['orphans']} orphans; the tracee made 300\n{r.describe()}"
    assert got["entry"] == f["entry_kind"], (got, f)
    assert got["max_ns"] <= r.report["max_ns"]["main.opcode"] + SLACK_NS, got


def test_go_leaf_entered_past_its_spill_store():
    """main.spill[go.shape.int] has no frame and stores its slice's pointer
    to its spill slot, 0x10(%rsp), before its first branch. The store reaches
    neither the return address nor RSP: the entry probe goes past it (and two
    XORs, which write RAX and RDX), on the JMP into the loop. Each of its 200
    calls is counted once, its durations within the tracee's own."""
    doc = harness.inspect_json(NATIVE.path, ["main.spill"])
    (f,) = doc["functions"]
    with open(NATIVE.path, "rb") as fp:
        fp.seek(f["file_offset"])
        code = fp.read(5)
    # mov %r64,disp8(%rsp): REX.W, 89, ModRM [SIB + disp8], SIB base RSP no index
    assert code[0] in (0x48, 0x4c) and code[1] == 0x89 and code[2] & 0xc7 == 0x44 \
        and code[3] == 0x24 and 8 <= code[4] < 0x80, (f["name"], code.hex())
    assert (f["entry_site"], f["entry_kind"]) == (9, "jump"), f
    assert f["entry_clobbers"] == ["rax", "rdx"], f
    r = tracing.run_ok([(NATIVE, "spill")], ["main.spill"], bpf_check=True)
    tracing.assert_document(r)
    got = r.function(f["name"])
    assert got["entry"] == "jump", got
    assert (got["calls"], got["orphans"]) == (r.report["calls"]["main.spill"], 0) == (200, 0), \
        f"{got['calls']} calls, {got['orphans']} orphans; the tracee made 200\n{r.describe()}"
    assert got["probe_bias_ns"] == r.doc["probe_bias_by_entry"]["jump"], got
    # the tracee reports the instance as main.spill
    named = dict(got, name="main.spill")
    assert_bounded(r, named, 0)
    assert_p50(r, named)
