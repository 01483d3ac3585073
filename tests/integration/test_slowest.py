"""The slowest calls kept: each function's K slowest calls with who made them
and their stacks, chosen whether or not a slow-call threshold is set. The
tracees call a function 400 times, 10 of them with the input that makes it
slow (the Go tracee's main.charge for customer "slow-co", 100 ms instead of
1 ms; the C tracee's lookup for key "slow-key", 100 ms instead of 200 us;
far apart: on two busy cores a 200 us sleep has taken over 10 ms): the
slowest calls kept are exactly those 10."""

import re
import signal
import subprocess

import pytest

import harness
import tracing

GO = [tracing.go_tracee("native", "default"), tracing.go_tracee("go1.21.13", "pie-stripped")]
C = tracing.c_tracee()
CASES = [(t, "charge", "main.charge", "main.scenarioCharge", 100e6, 1e6) for t in GO] + \
        [(C, "lookup", "lookup", "scenario_lookup", 100e6, 200e3)]
ENDED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.mark.parametrize("t,scenario,fn,caller,slow_ns,fast_ns", CASES,
                         ids=[f"{c[0].id}-{c[1]}" for c in CASES])
def test_the_slowest_calls_are_the_slow_inputs(t, scenario, fn, caller, slow_ns, fast_ns):
    r = tracing.run_ok([(t, scenario)], [fn], options=("--slowest", "12"))
    f = r.function(fn)
    assert f["calls"] == 400, r.describe()
    calls = f["slowest_calls"]
    assert len(calls) == 12, r.describe()
    durations = [c["duration_ns"] for c in calls]
    assert durations == sorted(durations, reverse=True), durations
    # exactly the 10 slow inputs, then two of the fast ones
    assert all(d >= slow_ns * 0.99 for d in durations[:10]), durations
    assert all(d < slow_ns * 0.99 and d >= fast_ns * 0.9 for d in durations[10:]), durations
    pid = r.tracees[0].pid
    for c in calls:
        assert c["pid"] == pid and c["tid"] > 0, c
        assert c["raw_duration_ns"] >= c["duration_ns"], c
        assert ENDED.match(c["ended"]), c
        # the stack: the function, then its caller
        assert c["stack"][0].startswith(fn + "+"), c["stack"]
        assert any(s.startswith(caller + "+") for s in c["stack"][1:3]), c["stack"]
        if t.kind == "go":
            assert c["goroutine"] > 0, c
    # no threshold: none of them is a slow call, none was dropped as one
    assert r.doc["slow_calls"] == 0 and f["slow_dropped"] == 0, r.describe()


def test_json_keeps_five_unless_told():
    r = tracing.run_ok([(GO[0], "charge")], ["main.charge"])
    calls = r.function("main.charge")["slowest_calls"]
    assert len(calls) == 5 and all(c["duration_ns"] >= 99e6 for c in calls), calls
    r = tracing.run_ok([(GO[0], "charge")], ["main.charge"], options=("--slowest", "0"))
    assert r.function("main.charge")["slowest_calls"] == []


def test_a_threshold_counts_only_the_calls_over_it():
    """With --threshold the kept calls are still the slowest, and only the
    calls over the threshold are slow calls."""
    r = tracing.run_ok([(GO[0], "charge")], ["main.charge"],
                       options=("--threshold", "60ms", "--slowest", "15"))
    f = r.function("main.charge")
    assert r.doc["slow_calls"] == 10 and f["slow_dropped"] == 0, r.describe()
    assert len(f["slowest_calls"]) == 15, r.describe()


def test_text_lists_the_slowest_calls_with_stacks():
    r = tracing.run_ok([(GO[0], "charge")], ["main.charge"], json_out=False,
                       options=("--slowest", "3"))
    out = r.retwatch.stdout
    head = out.index("slowest calls of main.charge:")
    lines = out[head:].splitlines()[1:]
    calls = [l for l in lines if l.startswith("  ") and not l.startswith("      ")]
    assert len(calls) == 3, out
    assert all(re.match(r"  1\d\d\.\d+ms \(pid \d+, tid \d+, goroutine \d+, ended ", l)
               for l in calls), out
    assert lines[1].strip().startswith("main.charge+"), out


def test_bad_slowest_is_refused():
    for bad in ("21", "-1", "x"):
        argv = (harness.RETWATCH, "trace", "--pid", "1", "--slowest", bad, "main.x")
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        run = harness.Run(argv, proc.returncode, proc.stdout, proc.stderr)
        run.assert_refused()
        assert "invalid --slowest" in proc.stderr and "from 0 to 20" in proc.stderr, \
            run.describe()


@pytest.mark.parametrize("t,scenario,fn,caller", [(GO[1], "charge", "main.charge", "main.scenarioCharge"),
                                                   (C, "lookup", "lookup", "scenario_lookup")],
                         ids=lambda v: getattr(v, "id", None))
def test_slow_calls_read_after_the_process_exited_are_named(t, scenario, fn, caller):
    """retwatch is stopped (SIGSTOP) while the tracee runs its calls and
    exits, then continued: the slow calls wait in the ring buffer until the
    process is gone, as on a loaded node, and are still named (its files
    were opened when it was attached), not left as addresses."""
    def release(result, started):
        result.proc.send_signal(signal.SIGSTOP)
        try:
            for tracee in started:
                tracee.release()
            for tracee in started:
                tracee.finish()
        finally:
            result.proc.send_signal(signal.SIGCONT)

    r = tracing.run_ok([(t, scenario)], [fn], options=("--threshold", "50ms"), release=release)
    f = r.function(fn)
    assert f["calls"] == 400 and r.doc["slow_calls"] == 10, r.describe()
    for c in f["slowest_calls"]:
        assert c["stack"][0].startswith(fn + "+"), c["stack"]
        assert any(s.startswith(caller + "+") for s in c["stack"][1:3]), c["stack"]
