"""Running the tracees (tests/fixtures/tracee/, tests/fixtures/c/tracee.c)
and `retwatch trace` against them.

A tracee prints "ready PID", waits for a line on stdin, runs its scenario,
prints one JSON line ("calls", "orphans", "min_ns", "median_ns", "max_ns" per
function, as it measured them) and exits 0. run() starts the tracees, starts
retwatch on them, waits for its "retwatch: tracing " line on stderr, releases
the tracees and collects everything.
"""

import functools
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

import harness

TRACING_LINE = "retwatch: tracing "
ATTACH_TIMEOUT = 20  # seconds for retwatch to attach
TRACEE_TIMEOUT = 60  # seconds for a released tracee to finish its scenario
EXIT_TIMEOUT = 20  # seconds for retwatch to exit once its processes are gone
OUR_PROGRAMS = ("rw_entry", "rw_ret")  # names of retwatch's BPF programs

# A function of the tests, by role, as each tracee names it.
FUNCS = {
    "go": {
        "sleep_for": "main.sleepFor",
        "sleep_short": "main.sleepShort",
        "validate": "main.validate",
        "deep": "main.deep",
        "may_panic": "main.mayPanic",
        "exit_goroutine": "main.exitGoroutine",
        "mix": "main.mix",
        "checksum": "main.checksum",
        "recurse_shallow": "main.recurseShallow",
        "recurse_deep": "main.recurseDeep",
        "recurse_panic": "main.recursePanic",
        "grow_panic": "main.growPanic",
    },
    "c": {
        "sleep_for": "sleep_for",
        "sleep_short": "sleep_short",
        "validate": "validate",
        "deep": "deep",
        "jumper": "jumper",
        "mix": "mix",
        "checksum": "checksum",
        "relay": "relay",
        "framed": "framed",
    },
}


@dataclass(frozen=True)
class Tracee:
    path: str  # absolute
    kind: str  # "go" or "c"
    toolchain: str  # go1.21.13, gcc-12.2.0
    variant: str  # default, pie-stripped; normal for C
    stripped: bool

    @property
    def id(self):
        return os.path.relpath(self.path, harness.FIXTURES)

    def fn(self, role):
        """This tracee's name of a function role ("sleep_for", ...)."""
        return FUNCS[self.kind][role]


def param_id(value):
    return value.id if isinstance(value, Tracee) else str(value)


@functools.lru_cache(maxsize=None)
def tracees():
    out = []
    for rec in harness.manifest().get("tracees", []):
        out.append(Tracee(path=os.path.join(harness.FIXTURES, rec["path"]), kind=rec["kind"],
                          toolchain=rec["toolchain"], variant=rec["variant"],
                          stripped=rec["stripped"]))
    return out


def native_go_version():
    return os.readlink(harness.fixture("tracee/native")).split("/")[0]


def go_tracee(toolchain, variant="default"):
    """The Go tracee of a toolchain ("native": the machine's go) and variant."""
    if toolchain == "native":
        toolchain = native_go_version()
    found = [t for t in tracees() if t.kind == "go" and t.toolchain == toolchain and t.variant == variant]
    assert len(found) == 1, f"no {toolchain} {variant} tracee in manifest.json (rebuild the fixtures)"
    return found[0]


def c_tracee(variant="normal"):
    found = [t for t in tracees() if t.kind == "c" and t.variant == variant]
    assert len(found) == 1, "no C tracee in manifest.json (rebuild the fixtures)"
    return found[0]


# --------------------------------------------------------------------------
# processes


class Stream:
    """Reads a pipe in a thread: every line with the time it arrived."""

    def __init__(self, pipe):
        self.lines = []  # (monotonic time, line without "\n")
        self._new = queue.Queue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe):
        for line in pipe:
            item = (time.monotonic(), line.rstrip("\n"))
            self.lines.append(item)
            self._new.put(item)
        self._closed.set()
        self._new.put(None)

    def wait_for(self, predicate, timeout):
        """The first line (in arrival order, from the start) that satisfies
        predicate, or None at the timeout or at end of file."""
        for _, line in list(self.lines):
            if predicate(line):
                return line
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                item = self._new.get(timeout=left)
            except queue.Empty:
                return None
            if item is None:
                return None
            if predicate(item[1]):
                return item[1]

    def join(self, timeout=10):
        self._thread.join(timeout)

    @property
    def text(self):
        return "".join(line + "\n" for _, line in self.lines)


class TraceeProcess:
    """A started tracee, stopped at its "ready" line."""

    def __init__(self, tracee, scenario, pid=0):
        """pid: the process id it must have (started through setpid), or 0."""
        self.tracee = tracee
        self.scenario = scenario
        argv = [tracee.path, scenario]
        if pid:
            argv = [setpid(), str(pid), "", *argv]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = Stream(self.proc.stdout)
        self.err = Stream(self.proc.stderr)
        ready = self.out.wait_for(lambda line: line.startswith("ready "), 20)
        if ready is None:
            self.kill()
            raise AssertionError(f"{tracee.id} {scenario}: no 'ready' line\n"
                                 f"--- stdout\n{self.out.text}--- stderr\n{self.err.text}")
        self.pid = int(ready.split()[1])
        assert self.pid == (pid or self.proc.pid)
        self.released_at = None

    def release(self):
        """Lets the scenario run."""
        self.released_at = time.monotonic()
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def finish(self, timeout=TRACEE_TIMEOUT):
        """Waits for the exit; the parsed JSON line (None if there is none)."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.tracee.id} {self.scenario}: still running after {timeout} s\n"
                                 f"--- stdout\n{self.out.text[-2000:]}--- stderr\n{self.err.text[-2000:]}")
        self.out.join()
        self.err.join()
        self.ended_at = time.monotonic()
        return self.report()

    def report(self):
        for _, line in reversed(self.out.lines):
            if line.startswith("{"):
                return json.loads(line)
        return None

    def output_lines(self):
        """stdout without the "ready PID" line."""
        return [line for _, line in self.out.lines][1:]

    def describe(self):
        return (f"tracee {self.tracee.id} {self.scenario} pid {self.pid} exit {self.proc.returncode}\n"
                f"--- tracee stdout\n{self.out.text[-2000:]}--- tracee stderr\n{self.err.text[-2000:]}")

    def kill(self):
        if self.proc.poll() is None:
            pid = getattr(self, "pid", self.proc.pid)
            if pid != self.proc.pid:  # setpid's child: setpid exits after it
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            self.proc.wait()


def setpid():
    """tests/agent/setpid.c built: runs a program with a chosen process id."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent", "setpid.c")
    out = os.path.join(tempfile.gettempdir(), f"retwatch-setpid-{os.getuid()}")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        tmp = f"{out}.tmp{os.getpid()}"
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", tmp, src], check=True)
        os.replace(tmp, out)
    return out


def bpf_objects(kind):
    """bpftool's JSON list of BPF programs ("prog") or links ("link")."""
    proc = subprocess.run(["bpftool", "-j", kind, "show"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"bpftool {kind} show failed: {proc.stderr}"
    return json.loads(proc.stdout or "[]")


def our_programs():
    """{id: name} of the loaded BPF programs named like retwatch's (any
    process's: other retwatch runs on the machine too)."""
    return {p["id"]: p.get("name") for p in bpf_objects("prog") if p.get("name") in OUR_PROGRAMS}


def held_bpf_ids(pid):
    """(program ids, link ids) that process pid holds open, from
    /proc/PID/fdinfo (a program's fd shows its prog_id; a link's fd its
    link_id and its program's prog_id)."""
    progs, links = set(), set()
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        return progs, links
    for fd in fds:
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key == "prog_id":
                progs.add(int(value))
            elif key == "link_id":
                links.add(int(value))
    return progs, links


def held_by_anyone():
    """Program ids some live process holds open."""
    progs = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            progs |= held_bpf_ids(pid)[0]
    return progs


@dataclass
class Result:
    argv: tuple
    retwatch: harness.Run  # exit status, stdout, stderr
    tracees: list  # TraceeProcess, in --pid order
    reports: list  # each tracee's JSON line (None for an untraced one not released)
    doc: dict = None  # retwatch's --json document
    attached_at: float = 0.0  # when the "tracing" line came (time.monotonic())
    stdout_lines: list = field(default_factory=list)  # retwatch's (time, line)
    stderr_lines: list = field(default_factory=list)
    programs_during: dict = field(default_factory=dict)  # {id: name} retwatch held while attached
    links_during: list = field(default_factory=list)  # bpftool's links retwatch held
    proc: subprocess.Popen = None  # retwatch, for release()
    out_stream: Stream = None  # retwatch's stdout and stderr as they come
    err_stream: Stream = None

    def describe(self):
        text = self.retwatch.describe()
        for t in self.tracees:
            text += "\n" + t.describe()
        return text

    @property
    def report(self):
        return self.reports[0]

    def functions(self):
        """retwatch's functions by name (each listed once)."""
        assert self.doc is not None, f"no JSON document\n{self.describe()}"
        return harness.functions_by_name(self.doc)

    def function(self, name):
        funcs = self.functions()
        assert name in funcs, f"{name} not in retwatch's output ({sorted(funcs)})\n{self.describe()}"
        return funcs[name]


def start_retwatch(pids, patterns, options=(), json_out=True):
    argv = (harness.RETWATCH, "trace", *(["--json"] if json_out else []), *options,
            *[a for pid in pids for a in ("--pid", str(pid))], *patterns)
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return argv, proc, Stream(proc.stdout), Stream(proc.stderr)


def trace_during(pids, patterns, workload, options=()):
    """`retwatch trace --json` on running processes (servers) while
    workload() runs: attached first, stopped with SIGINT after. Returns the
    Run and the functions by name."""
    argv, proc, out, err = start_retwatch(pids, patterns, options)
    try:
        line = err.wait_for(lambda l: l.startswith(TRACING_LINE), ATTACH_TIMEOUT)
        assert line, f"retwatch did not attach\n{err.text}"
        workload()
        # a server's reply reaches the workload before the server's thread
        # runs the RET of the call that wrote it
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        proc.wait(EXIT_TIMEOUT)
        out.join()
        err.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = harness.Run(argv, proc.returncode, out.text, err.text)
    run.assert_no_crash()
    assert proc.returncode == 0, run.describe()
    try:
        return run, harness.functions_by_name(json.loads(out.text))
    except json.JSONDecodeError as e:
        raise AssertionError(f"stdout is not one JSON object ({e})\n{run.describe()}") from None


def wait_exit(proc, timeout):
    """True when proc exited by itself within timeout; else stops it."""
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return False


def run(specs, patterns, options=(), json_out=True, traced=None, release=None,
        exit_timeout=EXIT_TIMEOUT, bpf_check=False, release_first=False):
    """Runs tracees and `retwatch trace` on them.

    specs: [(Tracee, scenario)], started in order. traced: indexes of the
    tracees given to retwatch (default all). release(result, tracees) lets the
    scenarios run (default: release all, then wait for all to finish).
    release_first: release the tracees before retwatch starts (it attaches
    to running calls); release() then only waits for what it needs.
    bpf_check: record retwatch's BPF programs and links while attached.
    Returns a Result once retwatch has exited (it must exit by itself within
    exit_timeout after the tracees are done; it is stopped with SIGINT and
    the test fails if not)."""
    started = []
    proc = None
    try:
        for tracee, scenario in specs:
            started.append(TraceeProcess(tracee, scenario))
        traced = list(range(len(started))) if traced is None else traced
        if release_first:
            for t in started:
                t.release()
        argv, proc, out, err = start_retwatch([started[i].pid for i in traced], patterns,
                                              options, json_out)
        result = Result(argv=argv, retwatch=None, tracees=started, reports=[None] * len(started),
                        proc=proc, out_stream=out, err_stream=err)

        def failed(msg):
            if proc.poll() is None:
                wait_exit(proc, 0)
            out.join()
            err.join()
            run_ = harness.Run(argv, proc.returncode, out.text, err.text)
            return AssertionError(f"{msg}\n{run_.describe()}")

        line = err.wait_for(lambda l: l.startswith(TRACING_LINE), ATTACH_TIMEOUT)
        if line is None:
            raise failed(f"retwatch did not print '{TRACING_LINE}...' within {ATTACH_TIMEOUT} s")
        result.attached_at = time.monotonic()
        if bpf_check:  # what this retwatch holds, not other runs on the machine
            prog_ids, link_ids = held_bpf_ids(proc.pid)
            result.programs_during = {i: n for i, n in our_programs().items() if i in prog_ids}
            result.links_during = [l for l in bpf_objects("link") if l["id"] in link_ids]
        if release:
            release(result, started)
        else:
            for t in started:
                t.release()
            for i, t in enumerate(started):
                result.reports[i] = t.finish()
        exited = wait_exit(proc, exit_timeout)
        out.join()
        err.join()
        result.retwatch = harness.Run(argv, proc.returncode, out.text, err.text)
        result.stdout_lines = list(out.lines)
        result.stderr_lines = list(err.lines)
        for i, t in enumerate(started):
            if t.proc.poll() is not None and result.reports[i] is None:
                result.reports[i] = t.report()
        if not exited:
            raise AssertionError(f"retwatch did not exit within {exit_timeout} s after its "
                                 f"processes ended (stopped with SIGINT)\n{result.describe()}")
        result.retwatch.assert_no_crash()
        if json_out and proc.returncode == 0:
            try:
                result.doc = json.loads(result.retwatch.stdout)
            except json.JSONDecodeError as e:
                raise AssertionError(f"stdout is not one JSON object ({e})\n{result.describe()}") from None
        return result
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for t in started:
            t.kill()


def run_ok(specs, patterns, **kwargs):
    """run(), and retwatch exited 0 and every traced tracee exited 0 with its
    report, which says what the tracee's untraced run says."""
    result = run(specs, patterns, **kwargs)
    assert result.retwatch.returncode == 0, f"retwatch failed\n{result.describe()}"
    for t, rep in zip(result.tracees, result.reports):
        if t.released_at is not None:
            assert t.proc.returncode == 0 and rep is not None, f"tracee failed\n{result.describe()}"
            assert_same_as_untraced(t, rep, result)
    return result


# Scenarios whose own call counts follow the clock (calls until a duration ends).
TIMED_COUNTS = {"hot", "warm"}


def computed(report):
    """What a tracee's scenario computed, as opposed to what it timed: every
    key of its report but the durations (*_ns, untraced_*), and the call
    counts of a scenario that calls until a duration ends. Each is the same
    in two untraced runs of every scenario of both tracees."""
    return {k: v for k, v in report.items()
            if not k.endswith("_ns") and not k.startswith("untraced_")
            and not (k == "calls" and report.get("scenario") in TIMED_COUNTS)}


@functools.lru_cache(maxsize=None)
def compared_tracees():
    """The native Go tracee and the C tracee, those of them this machine's
    fixtures have (a guest's may not)."""
    try:
        return frozenset((go_tracee("native", "default"), c_tracee()))
    except (AssertionError, OSError):
        return frozenset()


def assert_same_as_untraced(t, report, result):
    """A traced program computes what it computes untraced: the native Go
    tracee's and the C tracee's scenarios, traced by any test, against one
    untraced run of the same scenario (the other builds run the same code)."""
    if t.tracee not in compared_tracees():
        return
    want = computed(untraced(t.tracee, t.scenario).report())
    got = computed(report)
    assert got == want, (f"{t.tracee.id} {t.scenario} computed, traced, {got}; "
                         f"untraced, {want}\n{result.describe()}")


# --------------------------------------------------------------------------
# a run shared by several tests

_memo = {}


def once(key, make):
    """make() once per key for the whole session; an exception is kept and
    raised again, so a broken run costs its time once."""
    if key not in _memo:
        try:
            _memo[key] = (True, make())
        except Exception as e:  # noqa: BLE001 -- re-raised to every test that needs it
            _memo[key] = (False, e)
    ok, value = _memo[key]
    if not ok:
        raise value
    return value


def scenario(tracee, name, roles, options=()):
    """One traced run of a tracee's scenario with the functions of roles,
    shared by the tests that look at it."""
    patterns = tuple(tracee.fn(r) for r in roles)
    return once((tracee, name, patterns, tuple(options)),
                lambda: run_ok([(tracee, name)], patterns, options=options, bpf_check=True))


def untraced(tracee, name):
    """The tracee's scenario without retwatch: the TraceeProcess, finished."""
    def make():
        t = TraceeProcess(tracee, name)
        try:
            t.release()
            t.finish()
        finally:
            t.kill()
        return t
    return once((tracee, name, "untraced"), make)


# --------------------------------------------------------------------------
# assertions


def within(got, want, rel):
    return abs(got - want) <= rel * want


def check_schema(doc):
    """Errors of retwatch's --json document against the contract."""
    def is_int(x):
        return type(x) is int

    errors = []
    for key, ok in (("functions", lambda x: isinstance(x, list)), ("slow_calls", is_int),
                    ("lost_events", is_int), ("slow_limited", is_int),
                    ("children_unprobed", is_int)):
        if key not in doc or not ok(doc[key]):
            errors.append(f"document: bad {key}: {doc.get(key, '<missing>')!r}")
    kernel = doc.get("kernel")
    kinds = ("push", "nop", "nop5", "jump", "call")
    if not (isinstance(kernel, dict) and kernel.get("release") == os.uname().release
            and kernel.get("attach") in ("uprobe_multi", "perf_event")
            and kernel.get("uprobe_multi") in (True, False, None)
            and (kernel.get("emulated_entries") is None
                 or set(kernel["emulated_entries"]) <= set(kinds))):
        errors.append(f"document: bad kernel: {kernel!r}")
    for f in doc.get("functions", []):
        checks = {
            "name": lambda x: isinstance(x, str) and x,
            "mode": lambda x: x in ("entry+ret", "entry+ret+tailcall", "entry-only"),
            "calls": is_int,
            "min_ns": is_int,
            "p50_ns": is_int,
            "p95_ns": is_int,
            "p99_ns": is_int,
            "max_ns": is_int,
            "orphans": is_int,
            "lost": is_int,
            "slow_dropped": is_int,
            "reason": lambda x: x is None or isinstance(x, str),
            "entry": lambda x: x in ("stepped", "push", "nop", "nop5", "jump", "call"),
            "probe_bias_ns": is_int,
            "return": lambda x: x in ("ret", "trampoline"),
            "return_reason": lambda x: x is None or isinstance(x, str) and x,
        }
        for key, ok in checks.items():
            if key not in f or not ok(f[key]):
                errors.append(f"{f.get('name')}: bad {key}: {f.get(key, '<missing>')!r}")
        if f.get("mode") == "entry-only":
            if not f.get("reason"):
                errors.append(f"{f.get('name')}: entry-only without a reason")
            for key in ("min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns"):
                if f.get(key) != 0:
                    errors.append(f"{f.get('name')}: entry-only with {key} {f.get(key)!r}")
        elif f.get("calls"):
            order = [f.get(k) for k in ("min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns")]
            if all(map(is_int, order)) and order != sorted(order):
                errors.append(f"{f.get('name')}: min <= p50 <= p95 <= p99 <= max fails: {order}")
    return errors


def assert_calls(result, role, tracee, want_calls, want_orphans=0):
    """role's function of tracee counted want_calls calls and want_orphans orphans."""
    name = tracee.fn(role)
    f = result.function(name)
    assert f["calls"] == want_calls, \
        f"{tracee.id} {name}: calls {f['calls']} != {want_calls} (the tracee's)\n{result.describe()}"
    assert f["orphans"] == want_orphans, \
        f"{tracee.id} {name}: orphans {f['orphans']} != {want_orphans}\n{result.describe()}"
    return f


def assert_document(result):
    errors = check_schema(result.doc)
    assert not errors, "\n".join(errors) + "\n" + result.describe()
