"""The overhead guard of `retwatch trace --max-overhead`: a function whose
probes cost a process more than the budget (calls per second times the
calibrated cost of one traced call, as a share of one CPU) for two checks in
a row is detached from that process; the other functions go on being
measured and the process never stops.

[REF] the Go tracee's hot scenario: for 6 s one goroutine calls main.hotAdd
in a tight loop (millions of calls a second untraced, tens of thousands
traced: far over 2% of a CPU) while main.sleepFor(10ms) is called about 100
times a second (well under it); the tracee counts both.
"""

import subprocess

import pytest

import harness
import tracing
from tracing import go_tracee

NATIVE = go_tracee("native", "default")
HOT, SLOW = "main.hotAdd", "main.sleepFor"
INTERVAL = 1.0
DETACHED = f"retwatch: {HOT} detached from process "


def hot_run(options):
    return tracing.once(("guard", options),
                        lambda: tracing.run_ok([(NATIVE, "hot")], (HOT, SLOW), options=options))


def guarded():
    return hot_run(("--interval", str(INTERVAL), "--max-overhead", "2%"))


def test_hot_function_detached_within_two_intervals():
    r = guarded()
    lines = [(at, line) for at, line in r.stderr_lines if line.startswith(DETACHED)]
    assert len(lines) == 1, r.describe()
    at, line = lines[0]
    # the guard looks every interval from the start; two looks over the budget
    assert at - r.attached_at <= 2 * INTERVAL + 0.5, (at - r.attached_at, r.describe())
    # the message says what was seen and what to change
    for words in ("calls/s", "of a CPU", "--max-overhead 2.00%", "two intervals"):
        assert words in line, line
    hot = r.function(HOT)
    assert hot["detached"] == 1, hot
    assert 0 < hot["calls"] < r.report["calls"][HOT], (hot, r.report)


def test_slow_function_keeps_counting():
    r = guarded()
    slow = r.function(SLOW)
    assert slow["detached"] == 0, slow
    assert slow["calls"] == r.report["calls"][SLOW], (slow, r.report)
    assert slow["orphans"] == 0 and slow["lost"] == 0, slow
    # and still measured after the detach: calls kept coming for about 4 s
    assert r.report["calls"][SLOW] > 300, r.report


def test_without_guard_every_call_is_counted():
    r = hot_run(("--interval", str(INTERVAL), "--max-overhead", "0"))
    assert not any(line.startswith(DETACHED) for _, line in r.stderr_lines), r.describe()
    hot = r.function(HOT)
    assert hot["detached"] == 0 and hot["calls"] == r.report["calls"][HOT], (hot, r.report)


@pytest.mark.parametrize("value", ["-1", "101%", "two", "2%%", ""])
def test_bad_max_overhead_is_named(value):
    argv = (harness.RETWATCH, "trace", "--pid", "1", "--max-overhead", value, "f")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    run = harness.Run(argv, proc.returncode, proc.stdout, proc.stderr)
    run.assert_refused()
    assert run.returncode == 2, run.describe()
    assert f"invalid --max-overhead '{value}'" in run.stderr and "2%" in run.stderr, run.describe()
