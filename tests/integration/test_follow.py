"""`retwatch trace --follow`, `--comm` and `--cgroup`: processes a traced
process starts (a pre-fork server's workers, their children) and processes
chosen by name or cgroup are traced as they come, on tests/fixtures/c/
prefork.c.

[REF] Counts come from the program: every worker calls work() CALLS times;
in its follow mode the late ones wait 2.5 s before their first call, longer
than retwatch takes to attach a new process (within a second); in its burst
mode they do not wait, and end within milliseconds. Needs root.
"""

import json
import os
import signal
import subprocess
import time

import harness
import tracing


def prefork():
    path = harness.fixture("c/prefork/prefork")
    assert os.path.exists(path), f"{path} is missing (rebuild the fixtures)"
    return tracing.Tracee(path=path, kind="c", toolchain="gcc", variant="prefork",
                          stripped=False)


def test_follow_traces_workers_and_their_children():
    r = tracing.run_ok([(prefork(), "follow")], ("work", "serve"), options=("--follow",))
    rep = r.report
    assert rep["failed"] == 0, r.describe()
    work, serve = r.function("work"), r.function("serve")
    # the early workers (forked before retwatch started), the late ones and
    # their children (the server's grandchildren): every call
    assert work["calls"] == rep["calls"]["work"], f"{work}\n{r.describe()}"
    assert work["orphans"] == 0 and work["lost"] == 0, work
    assert serve["calls"] == rep["calls"]["serve"], f"{serve}\n{r.describe()}"
    err = r.retwatch.stderr
    assert err.count(" traced too") == rep["workers"], err


def test_follow_counts_workers_from_their_fork():
    """Workers that live a millisecond, one after another, and their own
    children: gone long before /proc is read again, each is counted from
    its first instruction, in the histograms of the process that forked it."""
    r = tracing.run_ok([(prefork(), "burst")], ("work", "serve"), options=("--follow",))
    rep = r.report
    assert rep["failed"] == 0 and rep["workers"] == 52, r.describe()
    work, serve = r.function("work"), r.function("serve")
    assert work["calls"] == rep["calls"]["work"], f"{work}\n{r.describe()}"
    assert work["orphans"] == 0 and work["lost"] == 0, work
    assert serve["calls"] == rep["calls"]["serve"], f"{serve}\n{r.describe()}"


def test_follow_says_the_workers_it_could_not_count():
    """Where another process runs the same executable untraced, each traced
    process's probes are its own, which the workers it forks do not
    inherit: workers gone within a millisecond are not counted, and retwatch
    says how many, on stderr and in the document, never a silent zero."""
    other = tracing.TraceeProcess(prefork(), "follow")
    try:
        r = tracing.run_ok([(prefork(), "burst")], ("work", "serve"), options=("--follow",))
    finally:
        other.kill()
    rep = r.report
    assert rep["failed"] == 0 and rep["workers"] == 52, r.describe()
    # 25 workers and their 25 children, each gone within a millisecond or
    # so; a scan a second apart may find one or two of them alive, which
    # are then traced (or gone before their probes are), not said
    assert 45 <= r.doc["children_unprobed"] <= 50, r.describe()
    assert "calls not counted: " in r.retwatch.stderr, r.describe()
    assert "more processes forked by process" in r.retwatch.stderr, r.describe()
    assert r.function("work")["calls"] < rep["calls"]["work"], r.describe()


def test_without_follow_only_the_server_counts():
    """And retwatch says why: the server has workers running its executable."""
    r = tracing.run_ok([(prefork(), "follow")], ("work", "serve"))
    assert r.function("work")["calls"] == 0, r.describe()
    assert "has 2 child processes running its executable" in r.retwatch.stderr, r.describe()
    assert "--follow traces them too" in r.retwatch.stderr, r.describe()
    assert r.function("serve")["calls"] == r.report["calls"]["serve"], r.describe()


def test_comm_selects_processes_by_name():
    """--comm without --pid: every process named so, the ones already
    running and the ones that start; the run ends with its duration."""
    t = tracing.TraceeProcess(prefork(), "follow")
    try:
        proc = subprocess.Popen([harness.RETWATCH, "trace", "--json", "--duration", "9",
                                 "--comm", "prefork", "work"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        err = tracing.Stream(proc.stderr)
        line = err.wait_for(lambda l: l.startswith(tracing.TRACING_LINE), tracing.ATTACH_TIMEOUT)
        assert line is not None, f"no '{tracing.TRACING_LINE}' line: {err.text}"
        t.release()
        report = t.finish()
        out = proc.stdout.read()
        proc.wait(timeout=60)
        err.join()
    finally:
        t.kill()
    assert proc.returncode == 0, err.text
    doc = json.loads(out)
    work = next(f for f in doc["functions"] if f["name"] == "work")
    assert work["calls"] == report["calls"]["work"], (work, report, err.text)


def test_comm_and_cgroup_are_checked():
    run = subprocess.run([harness.RETWATCH, "trace", "--comm", "a-name-of-more-than-15-bytes",
                          "work"], capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and "at most 15 bytes" in run.stderr, run.stderr
    run = subprocess.run([harness.RETWATCH, "trace", "--cgroup", "relative/path", "work"],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and "starting with /" in run.stderr, run.stderr
    run = subprocess.run([harness.RETWATCH, "trace", "--follow", "--comm", "x", "work"],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and "--follow follows the processes --pid names" in run.stderr


def unified_cgroups():
    """Where the unified (v2) cgroup hierarchy is mounted on this machine."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "/sys/fs/cgroup"
    return "/sys/fs/cgroup/unified"


def rmdir_when_empty(cg, timeout=10):
    """Removes cgroup cg once the processes that were in it are gone."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(cg)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_cgroup_counts_a_program_started_there_again_and_again():
    """--cgroup alone: a program a shell starts again and again in the
    cgroup, each run gone within milliseconds (long before /proc is read
    again), is counted from its first instruction, lent the numbers of a
    traced process there running the same executable; its parent is not
    traced. Every call of the server, its workers and the 20 runs."""
    cg = os.path.join(unified_cgroups(), f"retwatch-itest-{os.getpid()}")
    os.mkdir(cg)

    def join():
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("0")
    path = prefork().path
    server = subprocess.Popen([path, "follow"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, preexec_fn=join)
    proc = None
    try:
        ready = server.stdout.readline()
        assert ready.startswith("ready "), ready
        with open(f"/proc/{server.pid}/cgroup") as f:
            where = next(l[3:].strip() for l in f if l.startswith("0::"))
        # the overhead guard off: under emulation (the kernel matrix's VMs)
        # each call's traps cost more than it allows
        proc = subprocess.Popen([harness.RETWATCH, "trace", "--json", "--max-overhead", "0",
                                 "--cgroup", where, "work", "serve"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        err = tracing.Stream(proc.stderr)
        line = err.wait_for(lambda l: l.startswith(tracing.TRACING_LINE), tracing.ATTACH_TIMEOUT)
        assert line is not None, f"no '{tracing.TRACING_LINE}' line: {err.text}"
        runs = 0
        for _ in range(20):
            run = subprocess.run([path, "once"], capture_output=True, text=True, timeout=60,
                                 preexec_fn=join)
            assert run.returncode == 0, run
            runs += json.loads(run.stdout)["calls"]["work"]
        server.stdin.write("go\n")
        server.stdin.flush()
        out, _ = server.communicate(timeout=60)
        assert server.returncode == 0, out
        served = json.loads(out.splitlines()[-1])["calls"]
        proc.send_signal(signal.SIGINT)
        doc = json.loads(proc.stdout.read())
        proc.wait(timeout=60)
        err.join()
    finally:
        for p in (server, proc):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        rmdir_when_empty(cg)
    work = next(f for f in doc["functions"] if f["name"] == "work")
    assert work["calls"] == served["work"] + runs, \
        f"{work}\nthe server's {served}, the runs' {runs}\nretwatch's stderr:\n{err.text}"
    assert work["orphans"] == 0, work
