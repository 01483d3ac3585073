"""No harm to what it traces (issue 45): a probe goes only on an instruction
of the traced file's own code, so a traced program computes exactly what it
computes untraced, whatever a debug file says.

The target, tests/fixtures/c/harmfix.c, is a stripped static executable
that prints the sum it computes; its function mix() holds 8-byte immediates.
Two roots (chroots) hold one inode of it (hard links), as two containers of
one image layer do. Root A, the forger's, holds beside it a debug file
forged by tests/fixtures/forge_debug.py: mix's address moved one byte into
an immediate, the CRC-32 made the one its .gnu_debuglink holds, the build id
kept. Before the analysis held debug files against the code, tracing mix in
both processes put a breakpoint byte into that immediate and both printed a
wrong sum with no error anywhere (7451461911928093072 for
970863217660705168). Now the forged file is refused, said, and both sums are
the untraced one; the real debug file in the same place still names mix,
whose 20,000 calls are counted exactly; and a debug file in one root names
nothing in the other, whose root holds none.

[REF] The untraced sum: the program itself, run without retwatch.
"""

import json
import os
import re
import shutil
import subprocess

import harness
import tracing

PATTERN = "mix"


def fixture(name):
    path = os.path.join(harness.fixture("c/harm"), name)
    assert os.path.exists(path), f"{path} is missing (rebuild the fixtures)"
    return path


def make_roots(tmp, debug_in_a, debug_in_b=None):
    """Roots A and B holding one inode of harmfix at /bin/harmfix; A also
    holds debug_in_a (a fixture name) as /bin/harmfix.debug, where the
    link names it, and B debug_in_b. Returns a Tracee per root: a script
    that execs the program chrooted (the process keeps the script's pid)."""
    shutil.copy2(fixture("harmfix"), tmp / "harmfix")
    tracees = []
    for name in ("A", "B"):
        root = tmp / name
        (root / "bin").mkdir(parents=True)
        os.link(tmp / "harmfix", root / "bin" / "harmfix")
        debug = debug_in_a if name == "A" else debug_in_b
        if debug:
            shutil.copy2(fixture(debug), root / "bin" / "harmfix.debug")
        script = tmp / f"run-{name}"
        script.write_text(f"#!/bin/sh\nexec chroot {root} /bin/harmfix \"$@\"\n")
        script.chmod(0o755)
        tracees.append(tracing.Tracee(path=str(script), kind="c", toolchain="gcc",
                                      variant="harm", stripped=True))
    a, b = (tmp / n / "bin" / "harmfix" for n in "AB")
    assert os.stat(a).st_ino == os.stat(b).st_ino
    return tracees


def untraced_sum():
    proc = subprocess.run([fixture("harmfix"), "sum"], input="go\n", capture_output=True,
                          text=True, timeout=60, check=True)
    line = proc.stdout.splitlines()[-1]
    return json.loads(line)["sum"]


def trace_refused(tracees, want_of):
    """`retwatch trace` on the started tracees refuses mix; the tracees then
    run their scenario. Returns retwatch's run and the tracees' reports."""
    procs = [tracing.TraceeProcess(t, "sum") for t in tracees]
    try:
        argv = (harness.RETWATCH, "trace", "--json", *[a for p in procs for a in ("--pid", str(p.pid))],
                PATTERN)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        run = harness.Run(argv, proc.returncode, proc.stdout, proc.stderr)
        run.assert_no_crash()
        assert proc.returncode != 0, f"retwatch traced mix\n{run.describe()}"
        want = want_of(procs) if callable(want_of) else want_of
        assert re.search(want, run.stderr), f"{want!r} not said\n{run.describe()}"
        for p in procs:
            p.release()
        return run, [p.finish() for p in procs]
    finally:
        for p in procs:
            p.kill()


def test_forged_debug_file_is_refused_and_changes_nothing(tmp_path):
    """The forger's process first, then the victim's: the forged file is
    refused with the function, its address and why; neither sum changes."""
    want = untraced_sum()
    tracees = make_roots(tmp_path, "harmfix.forged.debug")
    run, reports = trace_refused(
        tracees,
        r"ignored debug file /bin/harmfix\.debug: it does not match the executable: "
        r"function mix: 0x[0-9a-f]+ is not an instruction boundary \(decoding from 0x[0-9a-f]+, "
        r"a function start in the file's unwind table\)")
    for t, rep in zip(tracees, reports):
        assert rep and rep["sum"] == want and rep["calls"]["mix"] == 20000, (t.path, rep, run.describe())


def test_victim_alone_is_told_the_name_is_not_found(tmp_path):
    """The victim's process alone: its root holds no debug file, so mix is
    not found, and nothing of the forger's file is said to it."""
    want = untraced_sum()
    tracees = make_roots(tmp_path, "harmfix.forged.debug")
    run, reports = trace_refused(tracees[1:], r"no function matches 'mix'.*its debug file, not found")
    assert "harmfix.debug" not in run.stderr, run.describe()
    assert reports[0]["sum"] == want, reports


def test_one_roots_debug_file_names_nothing_in_another(tmp_path):
    """The real debug file in root A alone: it names mix for A's process,
    not for B's, whose root holds none (the analysis is the view of the
    process that sees that file): A's calls are each counted, and B's
    process is told mix is not found there and left untraced."""
    want = untraced_sum()
    tracees = make_roots(tmp_path, "harmfix.debug")
    r = tracing.run_ok([(t, "sum") for t in tracees], [PATTERN])
    b = r.tracees[1]
    said = rf"process {b.pid}: no function matches 'mix'.*not found.*; not traced"
    assert re.search(said, r.retwatch.stderr, re.S), r.describe()
    assert r.function(PATTERN)["calls"] == 20000, r.describe()
    for rep in r.reports:
        assert rep["sum"] == want, (r.reports, r.describe())


def test_real_debug_file_still_names_the_function(tmp_path):
    """Each root holding the real debug file: mix is traced in both
    processes, every call counted, and the sums are the untraced one."""
    want = untraced_sum()
    tracees = make_roots(tmp_path, "harmfix.debug", "harmfix.debug")
    r = tracing.run_ok([(t, "sum") for t in tracees], [PATTERN])
    assert r.function(PATTERN)["calls"] == 2 * 20000, r.describe()
    for rep in r.reports:
        assert rep["sum"] == want and rep["calls"]["mix"] == 20000, (rep, r.describe())
