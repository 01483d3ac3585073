"""The tracer's own counters (tracer__counters), its sweep schedule
(tracer__tick) and tracer__reap, through counters.c: a small program built
here against the layers' archives beside $RETWATCH, tracing the tracees of
tests/fixtures as `retwatch trace` does. Needs root.

[REF] expected counts come from the tracees' own reports (calls that
returned, calls left by a panic or runtime.Goexit), from what the driver read
of the in-flight map before reaping, and from the sweep's fixed policy
(frames untouched for 60 s, contexts with nothing in flight for 5 s, checked
at most every 5 s).
"""

import functools
import json
import os
import re
import signal
import subprocess
import time

import pytest

import harness
import tracing
from tracing import go_tracee

NS_PER_S = 1_000_000_000
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NATIVE = go_tracee("native", "default")
# Go 1.23 and 1.24 keep runtime.g.goid at another offset (160, not 152).
GOID_160 = [t for t in tracing.tracees() if t.kind == "go" and t.variant == "default"
            and re.match(r"go1\.2[34]\.", t.toolchain)]

# Every counter of the BPF programs, by the name tracer__counters gives it.
ALL = {
    "other_process", "not_g_stack", "read_failed", "frames_full", "contexts_full", "no_func",
    "no_hist", "unmatched_ret", "orphans_purged", "goid_changed", "restarts", "ringbuf_full",
    "morestack_read_failed", "frames_insert_failed", "slow_limited", "tail_closed", "tail_exits",
    "share_contexts", "share_events", "contexts_hashed", "untraced_hits", "reused_pid_hits",
    "keep_sent", "keep_refused", "follow_full", "hook_targets", "hook_lost",
    "keep_nested",
}
# Calls the kernel side could not measure, by cause.
UNMEASURED = {
    "frames_full", "contexts_full", "read_failed", "not_g_stack", "no_hist", "no_func",
    "morestack_read_failed", "frames_insert_failed", "share_contexts",
}


@pytest.fixture(scope="module", autouse=True)
def can_trace():
    if os.geteuid() != 0:
        pytest.fail("tracing tests cannot run: the tracer needs root", pytrace=False)


@functools.lru_cache(maxsize=None)
def build_flags():
    """The layers' archives beside $RETWATCH and their libraries (make
    link-flags), and the Makefile's sanitizer flags when the archives were
    built with them."""
    out = os.path.relpath(os.path.dirname(os.path.abspath(harness.RETWATCH)), REPO)
    link = subprocess.run(["make", "-s", "--no-print-directory", "-C", REPO, "OUTPUT=" + out,
                           "link-flags"], capture_output=True, text=True, timeout=60)
    assert link.returncode == 0, link.stderr
    link = [a if a.startswith("-") else os.path.join(REPO, a) for a in link.stdout.split()]
    archives = [a for a in link if a.endswith(".a")]
    for a in archives:
        assert os.path.isfile(a), f"{a}: no such file (built with {harness.RETWATCH} by make)"
    with open(os.path.join(REPO, "Makefile")) as f:
        make = f.read()
    flags = []
    nm = subprocess.run(["nm", "-A", archives[-1]], capture_output=True, text=True, timeout=60)
    if "__asan_" in nm.stdout:
        flags = re.search(r"^SAN_FLAGS := (.+)$", make, re.M).group(1).split()
    return link, flags


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    link, flags = build_flags()
    out = str(tmp_path_factory.mktemp("counters") / "counters")
    argv = ["gcc", "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
            *flags, "-I" + os.path.join(REPO, "src"),
            os.path.join(REPO, "tests", "integration", "counters.c"), *link, "-lpthread",
            "-o", out]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stderr}"
    return out


class Driver:
    """counters.c tracing one process (or itself), answering commands."""

    def __init__(self, path, args):
        self.argv = [path, *args]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.out = tracing.Stream(self.proc.stdout)
        self.err = tracing.Stream(self.proc.stderr)
        self.answers = 0

    def describe(self):
        return (f"{' '.join(self.argv)}: exit {self.proc.poll()}\n--- stdout\n{self.out.text[-4000:]}"
                f"--- stderr\n{self.err.text[-4000:]}")

    def wait_tracing(self):
        line = self.err.wait_for(lambda l: l == "tracing", tracing.ATTACH_TIMEOUT)
        assert line is not None, f"the driver did not attach\n{self.describe()}"

    def next_line(self, timeout):
        deadline = time.monotonic() + timeout
        while len(self.out.lines) <= self.answers:
            assert time.monotonic() < deadline and self.proc.poll() is None, \
                f"no answer from the driver\n{self.describe()}"
            time.sleep(0.01)
        self.answers += 1
        return self.out.lines[self.answers - 1][1]

    def ask(self, command, timeout=30):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.next_line(timeout)

    def report(self, line):
        try:
            return json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON report: {line!r}\n{self.describe()}") from None

    def finish(self, timeout=30):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.out.join()
        self.err.join()
        assert self.proc.returncode == 0, f"the driver failed\n{self.describe()}"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def trace(driver_path, tracee, scenario, roles, during=None, options=()):
    """Traces a tracee's scenario with the driver; reaps once the tracee has
    exited. during(driver, tracee_process) replaces waiting for the scenario
    to finish. Returns (the driver's report, the tracee's report or None)."""
    t = tracing.TraceeProcess(tracee, scenario)
    d = None
    try:
        d = Driver(driver_path, [*options, str(t.pid), tracee.path,
                                 *(tracee.fn(r) for r in roles)])
        d.wait_tracing()
        t.release()
        if during:
            during(d, t)
            tracee_report = None
        else:
            tracee_report = t.finish()
            assert t.proc.returncode == 0 and tracee_report, f"tracee failed\n{t.describe()}"
        rep = d.report(d.ask("reap"))
        d.finish()
        return rep, tracee_report
    except AssertionError as e:
        raise AssertionError(f"{e}\n{t.describe()}") from None
    finally:
        if d:
            d.kill()
        t.kill()


def check_consistent(rep):
    """What every report must satisfy: each kernel counter once by name,
    the derived counters from them."""
    c = rep["counters"]
    assert set(c["all"]) == ALL, f"counter names {sorted(c['all'])}\n{rep}"
    assert set(c["unmeasured"]) == UNMEASURED, f"unmeasured causes {sorted(c['unmeasured'])}\n{rep}"
    for name, n in c["unmeasured"].items():
        assert n == c["all"][name], f"unmeasured {name} {n} != {c['all'][name]}\n{rep}"
    assert c["purged"] == c["all"]["orphans_purged"] + c["all"]["goid_changed"], rep
    assert c["lost_events"] == c["all"]["ringbuf_full"], rep
    assert c["slow_limited"] == c["all"]["slow_limited"], rep


# where the entry probes go: the first byte, where a stack growth runs the
# stack check twice; or past the check (the entry site), where it does not
ENTRIES = [pytest.param(["--entry-at-start"], id="first-byte"), pytest.param([], id="site")]


@pytest.mark.parametrize("options", ENTRIES)
def test_counters_of_a_recursion_across_stack_growth(driver, options):
    """Every call measured: nothing unmeasured, nothing dropped. With the
    entry probe at the first byte, the restarts after runtime.morestack are
    recognized as such; past the stack check, none reaches the probe."""
    rep, tracee = trace(driver, NATIVE, "recursive", ["deep"], options=options)
    check_consistent(rep)
    c = rep["counters"]
    assert rep["functions"]["main.deep"] == {"calls": tracee["calls"]["main.deep"], "orphans": 0,
                                             "lost": 0}, rep
    assert all(n == 0 for n in c["unmeasured"].values()), rep
    if options:
        assert c["all"]["restarts"] > 0, f"no restart after morestack recognized\n{rep}"
    else:
        assert c["all"]["restarts"] == 0, f"a restart reached the entry site\n{rep}"
    assert (c["purged"], c["swept"], rep["reaped"], rep["ticks"], c["lost_events"]) == (0, 0, 0, 0, 0), rep


def test_recursion_sends_only_its_outer_levels_as_slowest_candidates(driver):
    """Keeping the 5 slowest calls of main.deep (40 levels in each of 5
    goroutines): the inner levels return first, each a new slowest on its
    CPU, but each has at least 5 calls of main.deep in flight around it,
    every one slower: only the 5 outermost levels of each goroutine may be
    sent (keep_sent), the rest are counted keep_nested."""
    keep = 5
    rep, tracee = trace(driver, NATIVE, "recursive", ["deep"], options=["--keep", str(keep)])
    check_consistent(rep)
    c = rep["counters"]["all"]
    calls = tracee["calls"]["main.deep"]
    goroutines = calls // 40
    assert calls == 40 * goroutines and goroutines >= 2, tracee
    assert rep["functions"]["main.deep"]["calls"] == calls, rep
    assert c["keep_nested"] > 0, rep
    assert 0 < c["keep_sent"] <= keep * goroutines, rep
    assert c["keep_sent"] + c["keep_nested"] + c["keep_refused"] <= calls, rep
    assert rep["counters"]["lost_events"] == 0 and c["ringbuf_full"] == 0, rep


@pytest.mark.parametrize("options", ENTRIES)
def test_counters_of_a_recursion_deeper_than_the_bound(driver, options):
    """Recursion past TRACER_MAX_DEPTH: the calls beyond it are counted lost
    for their function and as frames_full (what the agent exposes), once
    each (an entry repeated after runtime.morestack is no second loss); the
    shallower ones all measured, nothing purged, nothing left in flight."""
    max_depth = 1024  # TRACER_MAX_DEPTH in src/trace/tracer.h
    rep, tracee = trace(driver, NATIVE, "deeprec", ["recurse_shallow", "recurse_deep"],
                        options=options)
    check_consistent(rep)
    c = rep["counters"]
    shallow, deep = "main.recurseShallow", "main.recurseDeep"
    measured = tracee["chains"] * max_depth
    lost = tracee["calls"][deep] - measured
    assert rep["functions"][shallow] == {"calls": tracee["calls"][shallow], "orphans": 0,
                                         "lost": 0}, rep
    assert rep["functions"][deep] == {"calls": measured, "orphans": 0, "lost": lost}, rep
    assert c["unmeasured"]["frames_full"] == lost, rep
    assert all(n == 0 for name, n in c["unmeasured"].items() if name != "frames_full"), rep
    assert (c["purged"], c["swept"], rep["reaped"], rep["inflight_before"]) == (0, 0, 0, 0), rep


def test_deep_dead_frames_purged_and_reaped_once(driver):
    """Dead frames past the ones every hit looks at: a panic from 300 levels
    deep, 3 times in one goroutine. The next chain's entry purges the last
    chain's frames (all of them), the reap drops the third's: each counted
    once, as an orphan of its function."""
    rep, tracee = trace(driver, NATIVE, "deeppanic", ["recurse_panic"])
    check_consistent(rep)
    c = rep["counters"]
    fn, depth = "main.recursePanic", tracee["depth"]
    assert rep["functions"][fn] == {"calls": 0, "orphans": tracee["orphans"][fn], "lost": 0}, rep
    assert (c["purged"], c["swept"]) == (tracee["orphans"][fn] - depth, depth), rep
    assert (rep["reaped"], rep["inflight_before"]) == (depth, depth), rep


@pytest.mark.parametrize("tracee", [NATIVE, *GOID_160[:1]], ids=lambda t: t.id)
def test_purged_counts_each_dead_call_once(driver, tracee):
    """Calls left by panics and runtime.Goexit: the kernel purges them (a
    newer call at their depth, or their g running another goroutine) or the
    reap drops them at the exit; each is counted once, in purged or swept."""
    rep, report = trace(driver, tracee, "panic", ["may_panic", "exit_goroutine"])
    check_consistent(rep)
    c = rep["counters"]
    orphans = report["orphans"]
    for fn in orphans:
        assert rep["functions"][fn] == {"calls": report["calls"][fn], "orphans": orphans[fn],
                                     "lost": 0}, \
            f"{fn}: the tracee says {report['calls'][fn]} calls, {orphans[fn]} orphans\n{rep}"
    assert c["purged"] + c["swept"] == sum(orphans.values()), \
        f"purged {c['purged']} + swept {c['swept']} != {sum(orphans.values())} orphans\n{rep}"
    assert c["swept"] == rep["reaped"], rep
    assert all(n == 0 for n in c["unmeasured"].values()), rep


def test_reap_counts_calls_left_in_flight_as_swept(driver):
    """A process killed during its calls: tracer__reap drops what it left in
    flight, returns how many, and counts them in swept and as orphans."""
    inflight = []

    def kill_during_calls(d, t):
        deadline = time.monotonic() + tracing.TRACEE_TIMEOUT
        while int(d.ask("inflight")) == 0:
            assert time.monotonic() < deadline, f"no call in flight\n{d.describe()}"
            time.sleep(0.002)
        t.proc.send_signal(signal.SIGKILL)
        t.proc.wait(10)
        inflight.append(int(d.ask("inflight")))

    rep, _ = trace(driver, NATIVE, "recursive", ["deep"], during=kill_during_calls)
    check_consistent(rep)
    c = rep["counters"]
    assert inflight[0] > 0 and rep["inflight_before"] == inflight[0], f"{inflight}\n{rep}"
    assert rep["reaped"] == inflight[0] and rep["inflight"] == 0, rep
    assert c["swept"] == rep["reaped"], rep
    assert rep["functions"]["main.deep"]["orphans"] == rep["reaped"], rep
    assert c["purged"] == 0, rep


def test_tick_sweeps_a_call_untouched_for_the_sweep_age(driver):
    """tracer__tick, called every 100 ms, drops a call in flight for the
    sweep age (60 s by default; 10 s here, tracer_opts.sweep_age_ns) at the
    first sweep due after that (sweeps run every 5 s), and not before."""
    d = Driver(driver, ["--self", "30", "10"])
    try:
        rep = d.report(d.next_line(120))
        d.finish()
    finally:
        d.kill()
    check_consistent(rep)
    c = rep["counters"]
    assert rep["tick_dropped"] == 1, f"tracer__tick dropped {rep['tick_dropped']}\n{rep}"
    after = rep["swept_after_ns"] / NS_PER_S
    assert 10 <= after <= 10 + 5 + 2, f"swept {after:.1f} s after the call began\n{rep}"
    assert c["swept"] == 1, rep
    assert rep["functions"]["held_call"] == {"calls": 0, "orphans": 1, "lost": 0}, rep
    assert c["all"]["unmatched_ret"] == 1, f"its RET found a frame\n{rep}"
    assert c["purged"] == 0 and rep["inflight"] == 0, rep


def test_more_goroutines_in_calls_than_the_context_index_holds(driver):
    """6,000 goroutines in calls at once, where the context index (an array
    the programs search without a helper call) holds 4,096: those it has no
    room for go to the frames hash map, counted as contexts_hashed, and every
    call is measured either way; nothing left in flight once they return."""
    rep, tracee = trace(driver, NATIVE, "crowd", ["sleep_for"])
    check_consistent(rep)
    c = rep["counters"]
    assert tracee["calls"]["main.sleepFor"] == 6000, tracee
    assert rep["functions"]["main.sleepFor"] == {"calls": 6000, "orphans": 0, "lost": 0}, rep
    assert all(n == 0 for n in c["unmeasured"].values()), rep
    assert 0 < c["all"]["contexts_hashed"] < 6000, rep
    assert (c["purged"], c["swept"], rep["reaped"], rep["inflight_before"]) == (0, 0, 0, 0), rep


def test_contexts_with_nothing_in_flight_are_given_back_within_seconds(driver):
    """Two waves of 3,200 short-lived threads, 12 s apart, as a server that
    starts a thread per request: the first wave's contexts, with nothing in
    flight, are given back after 5 s untouched (at a sweep, every 5 s), so the
    second wave finds the context index free again rather than full of the
    first one's for a minute; no call is dropped for it."""
    rep, tracee = trace(driver, tracing.c_tracee(), "thread_waves", ["sleep_for"])
    check_consistent(rep)
    c = rep["counters"]
    assert tracee["wave_calls"] == 6400, tracee
    assert rep["functions"]["sleep_for"] == {"calls": 6400, "orphans": 0, "lost": 0}, rep
    assert all(n == 0 for n in c["unmeasured"].values()), rep
    # one wave: 3,200 contexts in 4,096 slots, none or a few past 8 probes;
    # the second in an index still holding the first: 2,304 in one run
    assert c["all"]["contexts_hashed"] < 500, rep
    assert (c["purged"], c["swept"], rep["ticks"], rep["inflight_before"]) == (0, 0, 0, 0), rep
