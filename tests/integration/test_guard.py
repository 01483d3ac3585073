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

import json
import re
import signal
import subprocess
import time

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
    # the breakpoints left the process, not only the counting: traced, the
    # loop ran at most as fast as in the two seconds retwatch counted; after
    # the detach it ran untrapped, far faster, for the remaining four
    assert r.report["calls"][HOT] > 20 * hot["calls"], (hot, r.report)


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


def test_processes_add_up_to_the_function_while_they_count_fast():
    """Two processes in their tight loops when retwatch stops: its last
    document's processes add up to the function's calls, read at one moment
    though the kernel counts on while retwatch writes it."""
    def release(result, tracees):
        for t in tracees:
            t.release()
        time.sleep(2)
        result.proc.send_signal(signal.SIGINT)
        result.proc.wait(tracing.EXIT_TIMEOUT)
        for i, t in enumerate(tracees):
            t.finish()
            result.reports[i] = t.report()

    r = tracing.run([(NATIVE, "hot"), (NATIVE, "hot")], (HOT,),
                    options=("--max-overhead", "0"), release=release)
    assert r.retwatch.returncode == 0, r.describe()
    hot = r.function(HOT)
    assert len(hot["processes"]) == 2, hot
    assert sum(p["calls"] for p in hot["processes"]) == hot["calls"], hot
    # the tracees went on calling after retwatch stopped
    assert hot["calls"] > 10000 and sum(t["calls"][HOT] for t in r.reports) > hot["calls"], \
        (hot, r.reports)


@pytest.mark.parametrize("value", ["-1", "101%", "two", "2%%", ""])
def test_bad_max_overhead_is_named(value):
    argv = (harness.RETWATCH, "trace", "--pid", "1", "--max-overhead", value, "f")
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    run = harness.Run(argv, proc.returncode, proc.stdout, proc.stderr)
    run.assert_refused()
    assert run.returncode == 2, run.describe()
    assert f"invalid --max-overhead '{value}'" in run.stderr and "2%" in run.stderr, run.describe()


@pytest.mark.parametrize("attach", ["uprobe_multi", "perf_event"])
def test_detached_from_one_process_of_a_shared_file(monkeypatch, attach):
    """Two processes of one file: the function's probes were attached once
    for both; detached from the hot one, they move to the other alone, which
    goes on being measured call for call while the hot one no longer traps.
    Both tracees linger after their JSON line, so that retwatch's last
    document still lists them."""
    monkeypatch.setenv("TRACEE_LINGER", "1")

    def release(result, tracees):
        for t in tracees:
            t.release()
        for i, t in enumerate(tracees):
            line = t.out.wait_for(lambda l: l.startswith("{"), tracing.TRACEE_TIMEOUT)
            assert line, t.describe()
            result.reports[i] = t.report()
        result.proc.send_signal(signal.SIGINT)
        result.proc.wait(tracing.EXIT_TIMEOUT)
        for t in tracees:
            t.proc.stdin.close()
            t.finish()

    r = tracing.run([(NATIVE, "hot"), (NATIVE, "warm")], (HOT, SLOW),
                    options=("--interval", str(INTERVAL), "--attach", attach), release=release)
    assert r.retwatch.returncode == 0, r.describe()
    hot_pid, warm_pid = (t.pid for t in r.tracees)
    hot_report, warm_report = r.reports
    lines = [line for _, line in r.stderr_lines if line.startswith(DETACHED)]
    assert lines == [line for line in lines if f"process {hot_pid}:" in line] and len(lines) == 1, \
        r.describe()
    procs = {p["pid"]: p for p in r.function(HOT)["processes"]}
    assert procs[hot_pid]["detached"] is True and procs[warm_pid]["detached"] is False, procs
    # the warm process: every call measured, before and after the detach
    assert procs[warm_pid]["calls"] == warm_report["calls"][HOT], (procs, warm_report)
    # the hot one: its breakpoints left it
    assert hot_report["calls"][HOT] > 20 * procs[hot_pid]["calls"], (procs, hot_report)
    slow = {p["pid"]: p for p in r.function(SLOW)["processes"]}
    assert slow[hot_pid]["calls"] == hot_report["calls"][SLOW], (slow, hot_report)
    assert slow[warm_pid]["calls"] == warm_report["calls"][SLOW], (slow, warm_report)


# Two functions called in turn in a tight loop once told: entry_only leaves
# by a jump to its return address (no RET: probed at its entry alone),
# with_ret by a RET. Both enter at a LEA (single-stepped).
HOT_C = r"""
#include <unistd.h>

int entry_only(int x);
int with_ret(int x);
__asm__(".text\n.globl entry_only\n.type entry_only,@function\nentry_only:\n"
        "lea 1(%rdi),%eax\npop %rcx\njmp *%rcx\n.size entry_only,.-entry_only\n"
        ".globl with_ret\n.type with_ret,@function\nwith_ret:\n"
        "lea 1(%rdi),%eax\nret\n.size with_ret,.-with_ret\n");

int main(int argc, char **argv)
{
        volatile int sink = 0;

        while (access(argv[1], F_OK))
                usleep(10000);
        for (;;)
                sink += entry_only(sink) + with_ret(sink);
        return argc;
}
"""

DETACH = re.compile(r"retwatch: (\w+) detached from process \d+: (\d+) calls/s cost "
                    r"([0-9.]+)% of a CPU")


def guard_costs(tmp_path, options=()):
    """HOT_C traced with the guard: the cost per call it charged each
    function (its overhead over the rate it saw), the JSON document, and
    retwatch's functions."""
    src, exe, go = tmp_path / "hot.c", tmp_path / "hot", tmp_path / "go"
    src.write_text(HOT_C)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True, capture_output=True)
    proc = subprocess.Popen([str(exe), str(go)])
    try:
        def workload():
            go.write_text("go\n")
            time.sleep(2 * INTERVAL + 1.5)

        run, fns = tracing.trace_during([proc.pid], ["entry_only", "with_ret"], workload,
                                        options=("--interval", str(INTERVAL),
                                                 "--max-overhead", "2%", *options))
        assert proc.poll() is None, "the target stopped"
    finally:
        proc.kill()
        proc.wait()
    assert fns["entry_only"]["mode"] == "entry-only" and fns["with_ret"]["mode"] == "entry+ret"
    seen = {m[0]: float(m[2]) / 100 / int(m[1]) * 1e9 for m in DETACH.findall(run.stderr)}
    assert set(seen) == {"entry_only", "with_ret"}, run.describe()
    return seen, json.loads(run.stdout), fns


def test_the_guard_charges_an_entry_only_call_one_trap(tmp_path):
    """The guard's cost of a call of a function probed at its entry alone is
    the calibrated entry-only cost (one trap, one program), not that of a
    call probed at both ends: the overhead it reports, over the rate it
    saw, is that cost. with_ret's calls end at its RET probes here."""
    seen, doc, _ = guard_costs(tmp_path, ("--returns", "ret"))
    assert tracing.within(seen["entry_only"], doc["entry_only_call_cost_ns"], 0.02), (seen, doc)
    assert tracing.within(seen["with_ret"], doc["call_cost_ns"], 0.02), (seen, doc)
    # and the two differ: one trap against two
    assert seen["entry_only"] < 0.75 * seen["with_ret"], seen


def test_the_guard_charges_a_trampoline_call_its_own_cost(tmp_path):
    """with_ret calls nothing: by default its calls end at the kernel's
    return trampoline (Linux 6.14+), and the guard charges them the cost of
    a call entered at its LEA with the trampoline's share in place of the
    RET's (calibrate__to_trampoline)."""
    seen, doc, fns = guard_costs(tmp_path)
    if fns["with_ret"]["return"] != "trampoline":
        assert "6.14" in fns["with_ret"]["return_reason"], fns["with_ret"]
        return
    by_entry = doc["call_cost_by_entry"]
    want = by_entry["stepped"] - by_entry["push"] + doc["call_cost_trampoline_ns"]
    assert tracing.within(seen["with_ret"], want, 0.02), (seen, doc)
    assert seen["with_ret"] < doc["call_cost_ns"], (seen, doc)
