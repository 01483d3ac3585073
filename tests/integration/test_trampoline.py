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
import subprocess

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


UNWINDING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                         "unwinding")


def build(tmp_path, source, compiler, *flags):
    out = str(tmp_path / os.path.splitext(source)[0])
    subprocess.run([compiler, "-O2", "-g", "-Wall", "-Wextra", "-Werror", *flags,
                    os.path.join(UNWINDING, source), "-o", out], check=True)
    return out


def untraced_output(path):
    return subprocess.run([path], input="go\n", capture_output=True, text=True, timeout=60,
                          check=True).stdout


def traced_output(path, functions):
    """path's output run under `retwatch trace --returns trampoline` on
    functions (attached before it starts its work), and retwatch's
    functions by name."""
    prog = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = []

    def workload():
        out.append(prog.communicate("go\n", timeout=60)[0])
    try:
        _, funcs = tracing.trace_during([prog.pid], functions, workload,
                                        options=("--returns", "trampoline", "--max-overhead",
                                                 "0"))
    finally:
        if prog.poll() is None:
            prog.kill()
            prog.wait()
    assert prog.returncode == 0, out
    return out[0], funcs


def counts(output):
    """The calls a fixture says it made, by function."""
    words = output.split()
    return {w: int(n) for w, n in zip(words, words[1:]) if n.isdigit()}


def test_cxx_exceptions_through_traced_functions(tmp_path):
    """throwfix: outer catches what thrower throws through middle. They
    call, so they keep their RET probes; cheap, a leaf, ends at the
    trampoline. The program prints, traced, what it prints untraced; every
    call is counted, those left by the exception as orphans or not."""
    path = build(tmp_path, "throwfix.cc", "g++")
    want = untraced_output(path)
    got, funcs = traced_output(path, ["cheap", "thrower", "middle", "outer"])
    assert got == want
    made = counts(want)
    for name in ("thrower", "middle", "outer"):
        f = funcs[name]
        assert f["return"] == "ret" and "calls other code" in f["return_reason"], f
        assert f["calls"] + f["orphans"] == made[name], (name, f, made)
    cheap = funcs["cheap"]
    assert cheap["calls"] == made["cheap"] and cheap["orphans"] == 0, cheap
    assert cheap["return"] == ("trampoline" if kernel_has_trampoline() else "ret"), cheap
    # the calls that returned, timed; every third one left by the exception
    assert funcs["outer"]["calls"] == made["outer"], funcs["outer"]


def test_pthread_exit_from_under_a_traced_function(tmp_path):
    """exitfix: each thread's step calls finish, which ends the thread on
    its 100th step; the thread's cleanup handler runs. The output is the
    same traced; leaf's calls all end at the trampoline and are counted."""
    path = build(tmp_path, "exitfix.c", "gcc", "-pthread")
    want = untraced_output(path)
    got, funcs = traced_output(path, ["leaf", "step", "finish"])
    assert got == want
    made = counts(want)
    leaf, step = funcs["leaf"], funcs["step"]
    assert leaf["calls"] == made["leaf"] and leaf["orphans"] == 0, leaf
    assert leaf["return"] == ("trampoline" if kernel_has_trampoline() else "ret"), leaf
    # the last step of each thread never returns
    assert step["calls"] + step["orphans"] == made["step"], step


def test_go_keeps_its_ret_probes():
    """A Go program with --returns trampoline: every function keeps its RET
    probes (the runtime walks goroutine stacks at any time), and computes
    what it computes untraced (run_ok)."""
    t = tracing.go_tracee("native", "default")
    r = tracing.scenario(t, "recursive", ("deep",), options=("--returns", "trampoline"))
    f = assert_calls(r, "deep", t, r.report["calls"][t.fn("deep")])
    assert f["return"] == "ret" and "Go" in f["return_reason"], f


def test_recursion_100_deep_over_a_trampoline_leaf(tmp_path):
    """deepfix: descend recurses 100 levels (past the kernel's 64 pending
    returns a thread may have) above leaf. descend calls, so it keeps its
    RET probes and every one of its 20,200 calls is counted and timed; leaf
    ends at the trampoline with one pending return at a time. Output the
    same traced, by default (--returns trampoline)."""
    path = build(tmp_path, "deepfix.c", "gcc")
    want = untraced_output(path)
    got, funcs = traced_output(path, ["descend", "leaf"])
    assert got == want
    made = counts(want)
    descend, leaf = funcs["descend"], funcs["leaf"]
    assert descend["return"] == "ret" and "calls other code" in descend["return_reason"], descend
    assert leaf["return"] == ("trampoline" if kernel_has_trampoline() else "ret"), leaf
    for name, f in (("descend", descend), ("leaf", leaf)):
        assert f["calls"] == made[name] and f["orphans"] == 0, (name, f, made)
    # the outermost calls hold the 100 levels under them
    assert descend["max_ns"] > 10 * descend["min_ns"], descend
