"""Calls that end at the kernel's return trampoline (issue 52): with
`--returns trampoline`, a native function that calls nothing
(binary__trampoline_refusal) is timed from its entry probe to the kernel's
uretprobe trampoline instead of to probes on its RETs, on Linux 6.14 and
later (tracer__kernel_trampoline_refusal); every other function, and every
function on an older kernel, keeps its RET probes. The C tracee's output
scenario: mix calls nothing; checksum, recursive, calls mix and leaves by
tail calls to it, so its calls end at mix's RETs while mix's own end at the
trampoline just after. Counts exact, the program's output unchanged
(run_ok), the slow call's stack its own frame then its caller."""

import os

import harness
import tracing
from tracing import assert_calls

C = tracing.c_tracee()


def kernel_has_trampoline():
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 14) and os.uname().machine == "x86_64"


def inspected(path, names):
    doc = harness.inspect_json(path, list(names))
    return {f["name"]: (f["return"], f["return_reason"]) for f in doc["functions"]}


def test_inspect_says_which_return_and_why():
    got = inspected(C.path, [C.fn("mix"), C.fn("checksum"), C.fn("relay")])
    for role in ("checksum", "relay"):
        kind, why = got[C.fn(role)]
        assert kind == "ret" and why, (role, kind, why)
    kind, why = got[C.fn("mix")]
    if kernel_has_trampoline():
        assert (kind, why) == ("trampoline", None), got
    else:
        assert kind == "ret" and "6.14" in why, got
    assert "calls other code" in got[C.fn("relay")][1], got


def test_leaf_calls_end_at_the_trampoline_counted_once():
    r = tracing.scenario(C, "output", ("mix", "checksum"),
                         options=("--returns", "trampoline", "--slowest", "3"))
    tracing.assert_document(r)
    mix = assert_calls(r, "mix", C, r.report["calls"][C.fn("mix")])
    checksum = assert_calls(r, "checksum", C, r.report["calls"][C.fn("checksum")])
    # no RET of its own: it leaves by tail calls
    assert checksum["return"] == "ret" and checksum["return_reason"], checksum
    if not kernel_has_trampoline():
        assert mix["return"] == "ret" and "6.14" in mix["return_reason"], mix
        return
    assert mix["return"] == "trampoline" and mix["return_reason"] is None, mix
    # checksum's calls still end at mix's RETs, after its tail calls
    assert checksum["tail_closed"] == checksum["calls"], checksum
    # the trampoline's own bias, calibrated apart from the RETs'
    assert r.doc["probe_bias_trampoline_ns"] > 0, r.doc
    assert mix["probe_bias_ns"] != r.doc["probe_bias_by_entry"][mix["entry"]], (mix, r.doc)
    # the slowest calls' stacks: mix's own frame, then where it returned to
    for call in mix["slowest_calls"]:
        stack = call["stack"]
        assert stack[0].startswith(C.fn("mix")), call
        assert len(stack) > 1 and not stack[1].startswith(C.fn("mix")), call
