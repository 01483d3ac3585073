"""One retwatch-agent against many pods and functions on its node (issue 24,
item 5): for each case of P podapp pods x F functions (one FunctionProbe of
F functions selecting the P pods, maxOverhead 0 so that the overhead guard
detaches nothing), a fresh agent is started and, while a thread asks its
/healthz every 0.1 s (1 s timeout), the bench measures:

- apply -> the first calls in this node's FunctionProbeReport, and -> every
  one of the P pods in it with calls;
- HOLD_S later: the BPF links the agent holds (its fds whose fdinfo has a
  link_id line), its open files, VmRSS and VmHWM, and the kernel memory of
  its BPF maps and programs (the memlock of their fdinfo, each id once);
- probe delete -> no link of the probe held by the agent any more;
- the probe applied again (another name) -> as many links as before; then
  SIGTERM -> the agent's process gone (reaped), and whether any of its
  threads was seen in D state meanwhile, and for how long;
- over the whole case (apply to SIGTERM), the longest time without a 200
  answer of /healthz and the number of its failures (errors, timeouts).

Cases run one at a time, in the order of PODS then FUNCS; the pods are
created before the first case that needs them and kept for the next ones
(labelled upto-P for each P they belong to), so the agent also sees the
pods of the smaller cases. The pods run podapp with POD_ARGS (by default
one worker, no sleep inside its calls, 250 ms between them, so that 100
pods fit on a small machine: with podapp's own defaults 10 pods keep more
than a CPU busy untraced, and a traced call costs tens of microseconds on
a virtual machine). The functions are the first F of FUNCTIONS: the eight first
are called on every request; of the rest, some are called on every request,
some every few seconds, some never (the scheduler's functions run on the
system stack, where the probes do not measure).

Env: RETWATCH_AGENT (default build/retwatch-agent), PODS ("10 40 100"),
FUNCS ("8 64"), CASE_TIMEOUT (seconds from the apply to the SIGTERM,
default 900; past it the case's remaining figures are "-" and the agent is
stopped), REPORT_TIMEOUT (seconds the P pods are waited for in the report,
default 300; the report may never hold them all: the figures after it are
taken anyway), TERM_TIMEOUT (seconds the agent is given after SIGTERM before
SIGKILL, default 600; either way the bench waits until it is gone),
HOLD_S (5), POD_ARGS, AGENT_ARGS (more agent options). Prints figures;
asserts nothing.
"""

import collections
import os
import re
import resource
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

from harness import REPO, Bench, proc_status_kib, probe_doc

import agentproc  # noqa: E402 (harness puts tests/agent on the path)
import pods  # noqa: E402

AGENT = os.environ.get("RETWATCH_AGENT", os.path.join(REPO, "build", "retwatch-agent"))
PODS = [int(p) for p in os.environ.get("PODS", "10 40 100").split()]
FUNCS = [int(f) for f in os.environ.get("FUNCS", "8 64").split()]
CASE_TIMEOUT = float(os.environ.get("CASE_TIMEOUT", "900"))
REPORT_TIMEOUT = float(os.environ.get("REPORT_TIMEOUT", "300"))
TERM_TIMEOUT = float(os.environ.get("TERM_TIMEOUT", "600"))
HOLD_S = float(os.environ.get("HOLD_S", "5"))
POD_ARGS = tuple(os.environ.get(
    "POD_ARGS", "-workers 1 -latency 0 -lookup 0 -gap 250ms -report 5s").split())
# no limit on the namespace's share of functions: P x F is up to 6,400
AGENT_ARGS = ("--max-functions-per-namespace", "0") + tuple(
    os.environ.get("AGENT_ARGS", "").split())
NODE = "node-a"
NS = "scale"
REPORTS = "/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobereports"
HEALTH_EVERY_S, HEALTH_TIMEOUT_S = 0.1, 1.0

# podapp's functions as `build/retwatch inspect` names them, all entry+ret.
# Calls a request (one every 250 ms with the default POD_ARGS): the first
# eight 1 or 2; time.Time.Add to runtime.(*timer).modify about 1;
# runtime.newobject to encoding/json.Marshal fewer (allocation, the stats
# written every 5 s); the last 23 none (never called, or on the system stack).
FUNCTIONS = [
    "main.handleRequest", "main.lookupUser", "main.sleepFor", "main.(*histogram).record",
    "time.Since", "time.Sleep", "runtime.gopark", "runtime.mallocgc",
    "time.Time.Add", "runtime.futexsleep", "runtime.runqput", "runtime.ready",
    "runtime.(*timer).unlockAndRun", "runtime.startm", "runtime.notewakeup", "runtime.stopm",
    "runtime.notesleep", "runtime.futexwakeup", "runtime.findRunnable",
    "runtime.resetForSleep", "runtime.(*timer).modify",
    "runtime.newobject", "runtime.typedmemmove", "runtime.entersyscall", "runtime.exitsyscall",
    "runtime.reentersyscall", "runtime.mapassign_faststr", "syscall.Syscall",
    "runtime.makeslice", "runtime.growslice", "main.(*histogram).quantile",
    "runtime.acquireSudog", "runtime.releaseSudog", "runtime.(*mcache).refill",
    "runtime.(*mheap).alloc", "main.(*histogram).summary", "main.writeStats",
    "os.(*File).Write", "os.CreateTemp", "os.Remove", "encoding/json.Marshal",
    "main.sleepFor.func1", "main.nanosleep", "time.Until", "syscall.Nanosleep",
    "runtime.newproc", "runtime.newproc1", "runtime.goexit0", "runtime.gfget", "runtime.gfput",
    "runtime.makechan", "runtime.closechan", "runtime.chanrecv1", "runtime.chanrecv",
    "runtime.chansend1", "runtime.schedule", "runtime.park_m", "runtime.gosched_m",
    "runtime.goschedImpl", "runtime.Gosched", "runtime.execute", "runtime.newstack",
    "sync.(*Mutex).Unlock", "internal/sync.(*Mutex).lockSlow",
]
assert len(FUNCTIONS) == len(set(FUNCTIONS)) == 64


# -- the agent from outside ------------------------------------------------------

def bpf_fds(pid):
    """What process pid holds of BPF, from /proc/PID/fdinfo: {"fds": open
    files, "links": {link id: type}, "memlock": bytes of its maps and
    programs, each id counted once}."""
    links, maps, progs, nfds = {}, {}, {}, 0
    fdinfo = f"/proc/{pid}/fdinfo"
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        return {"fds": 0, "links": {}, "memlock": 0}
    for fd in fds:
        try:
            with open(os.path.join(fdinfo, fd)) as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue  # closed meanwhile
        nfds += 1
        fields = {k: v.strip() for k, v in fields.items()}
        if "link_id" in fields:
            links[int(fields["link_id"])] = fields.get("link_type", "?")
        elif "map_id" in fields:
            maps[fields["map_id"]] = int(fields.get("memlock", 0))
        elif "prog_id" in fields:
            progs[fields["prog_id"]] = int(fields.get("memlock", 0))
    return {"fds": nfds, "links": links, "memlock": sum(maps.values()) + sum(progs.values())}


def held_links(pid):
    return set(agentproc.held_link_ids(pid))


def tasks_in_d(pid):
    """How many threads of process pid are in uninterruptible sleep (D)."""
    n = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                n += f.read().rsplit(")", 1)[1].split()[0] == "D"
        except OSError:
            pass
    return n


class Health:
    """A thread asking url every HEALTH_EVERY_S, HEALTH_TIMEOUT_S at most
    each; keeps (time answered or failed, ok) of every request."""

    def __init__(self, url):
        self.url = url
        self.stop = threading.Event()
        self.answers = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=HEALTH_TIMEOUT_S) as r:
                    r.read()
                    ok = r.status == 200
            except (urllib.error.URLError, OSError, ValueError):
                ok = False  # HTTPError, refused, reset, timeout
            self.answers.append((time.monotonic(), ok))
            self.stop.wait(HEALTH_EVERY_S)

    def close(self):
        self.stop.set()
        self.thread.join(HEALTH_TIMEOUT_S + 5)

    def figures(self, start, end):
        """(longest time without a 200 answer, failed requests) in [start, end]."""
        within = [(t, ok) for t, ok in self.answers if start <= t <= end]
        times = [start] + [t for t, ok in within if ok] + [end]
        return (max(b - a for a, b in zip(times, times[1:])),
                sum(not ok for _, ok in within))


# -- the API side -----------------------------------------------------------------

def probe_spec(name, nfuncs, npods):
    doc = probe_doc(NS, name, {f"upto-{npods}": "yes"})
    doc["spec"].update(functions=FUNCTIONS[:nfuncs], maxOverhead="0")
    return doc


def report(b, uid):
    """This node's report of the probe with uid (its status), or None."""
    path = REPORTS.format(ns=NS) + f"?labelSelector=retwatch.io/probe-uid%3D{uid}"
    try:
        items = b.get(path)["items"]
    except OSError:
        return None  # a slow or failed read: the next poll tries again
    for r in items:
        if r.get("node") == NODE:
            return r.get("status")
    return None


def pods_with_calls(status):
    """The pods with calls in a report's status, and whether it has calls."""
    seen, calls = set(), 0
    for f in (status or {}).get("functions", []):
        calls += f.get("calls", 0)
        seen.update(p["name"] for p in f.get("pods", []) if p.get("calls"))
    return seen, calls > 0


def apply(b, name, nfuncs, npods):
    """Applies the case's probe; returns its uid and the monotonic time of
    the apply."""
    t = time.monotonic()
    b.apply([probe_spec(name, nfuncs, npods)])
    return b.probe(NS, name)["metadata"]["uid"], t


# -- one case ----------------------------------------------------------------------

class CaseTimeout(Exception):
    pass


def wait_until(what, fn, deadline, interval):
    """Polls fn until it returns something true; returns it, or raises
    CaseTimeout naming what once deadline (monotonic) has passed."""
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise CaseTimeout(what)
        time.sleep(interval)


def measure_attach(b, agent, row, npods, nfuncs, deadline):
    uid, t0 = apply(b, f"p{npods}-f{nfuncs}", nfuncs, npods)
    row["uid"], seen = uid, set()

    def all_pods():
        nonlocal seen
        status = report(b, uid)
        seen, has_calls = pods_with_calls(status)
        if has_calls and row["first"] is None:
            row["first"] = time.monotonic() - t0
        return len(seen) >= npods

    try:
        # the report may never hold them all (too large to write): the
        # figures after it are measured all the same
        wait_until(f"{npods} pods with calls", all_pods, min(deadline, t0 + REPORT_TIMEOUT),
                   0.25)
        row["all"] = time.monotonic() - t0
    except CaseTimeout:
        row["note"] = (f"{len(seen)} of {npods} pods with calls in the report after"
                       f" {REPORT_TIMEOUT:.0f} s")
    time.sleep(HOLD_S)
    held = bpf_fds(agent.pid)
    row["links"], row["fds"] = len(held["links"]), held["fds"]
    row["types"] = sorted({t for t in held["links"].values()})
    row["memlock"] = held["memlock"]
    row["rss"], row["hwm"] = proc_status_kib(agent.pid, "VmRSS", "VmHWM")
    return set(held["links"])


def measure_detach(b, agent, row, npods, nfuncs, links, deadline):
    t0 = time.monotonic()
    b.delete_probe(NS, f"p{npods}-f{nfuncs}")
    wait_until("the deleted probe's links closed", lambda: not (held_links(agent.pid) & links),
               deadline, 0.2)
    row["delete"] = time.monotonic() - t0
    # the probe again, so that the agent holds as many links at its SIGTERM
    _, t0 = apply(b, f"p{npods}-f{nfuncs}-again", nfuncs, npods)
    wait_until("the links back", lambda: len(held_links(agent.pid)) >= len(links), deadline, 0.5)
    row["again"] = time.monotonic() - t0


def measure_term(agent, row):
    """SIGTERM -> the agent reaped; SIGKILL after TERM_TIMEOUT, and then
    waits for as long as it takes (a process in D state cannot be hurried)."""
    row["term_links"] = len(held_links(agent.pid))
    t0 = said = time.monotonic()
    d_since, d_total = None, 0.0
    agent.proc.send_signal(signal.SIGTERM)
    killed = False
    while agent.proc.poll() is None:
        now = time.monotonic()
        if tasks_in_d(agent.pid):
            d_since = d_since or now
        elif d_since is not None:
            d_total, d_since = d_total + now - d_since, None
        if not killed and now - t0 > TERM_TIMEOUT:
            agent.proc.kill()
            killed = True
        if now - said > 60:
            print(f"  (waiting for agent {agent.pid} to exit: {now - t0:.0f} s,"
                  f" {tasks_in_d(agent.pid)} threads in D state)", file=sys.stderr, flush=True)
            said = now
        time.sleep(0.05)
    now = time.monotonic()
    if d_since is not None:
        d_total += now - d_since
    row["term"], row["d"], row["rc"] = now - t0, d_total, agent.proc.returncode
    row["killed"] = killed


def run_case(b, npods, nfuncs):
    row = {"P": npods, "F": nfuncs, "first": None, "all": None, "links": None,
           "fds": None, "rss": None, "hwm": None, "memlock": None, "delete": None,
           "again": None, "term": None, "d": None, "note": "",
           "load": os.getloadavg()[0]}
    began = time.monotonic()
    agent = agentproc.Agent(AGENT, b.cp.kubeconfig("agent"), NODE, b.workdir,
                            ("--layer-root", b.workdir) + AGENT_ARGS)
    b.agents.append(agent)
    agent.start()
    health = Health(agent.metrics_url("/healthz"))
    start = time.monotonic()
    deadline = start + CASE_TIMEOUT
    try:
        links = measure_attach(b, agent, row, npods, nfuncs, deadline)
        measure_detach(b, agent, row, npods, nfuncs, links, deadline)
    except CaseTimeout as e:
        row["note"] += f" timed out after {CASE_TIMEOUT:.0f} s waiting for {e}"
    finally:
        end = time.monotonic()
        health.close()
        row["gap"], row["fails"] = health.figures(start, end)
        if agent.proc.poll() is None:
            row["peak"] = proc_status_kib(agent.pid, "VmHWM")[0]
            measure_term(agent, row)
        else:
            row["note"] += f" [agent exited {agent.proc.returncode} during the case]"
        row["took"] = time.monotonic() - began
        row["errors"] = collections.Counter(
            re.sub(r"\d+", "N", ev.get("msg", ""))[:150] for ev in agent.lines()
            if ev.get("level") in ("error", "warn")).most_common()
        if agent.proc.poll() is not None:
            b.agents.remove(agent)
            agent.log.close()
        # the reports stay (no garbage collector here): remove them
        b.kubectl("delete", "functionprobe,functionprobereport", "--all", "-n", NS,
                  "--wait=false", check=False, timeout=300)
    return row


# -- pods and output ----------------------------------------------------------------

def grow_pods(b, have, npods):
    """Creates pods have..npods-1; returns how long it took."""
    t0 = time.monotonic()
    for i in range(have, npods):
        labels = {"app": "podapp", **{f"upto-{p}": "yes" for p in PODS if i < p}}
        pods.Pod(b.kubectl, NS, f"app-{i:03d}", labels, NODE, {"app": ("/app/podapp",) + POD_ARGS}, b.image,
                 b.workdir).create()
    return time.monotonic() - t0


def fmt(v, spec=".1f", unit=""):
    return "-" if v is None else f"{v:{spec}}{unit}"


HEADER = (f"{'P':>4} {'F':>3} {'first':>7} {'all P':>7} {'links':>6} {'fds':>6} {'RSS':>5}"
          f" {'HWM':>5} {'BPF':>6} {'healthz':>8} {'fails':>6} {'delete':>7} {'again':>7}"
          f" {'TERM':>7} {'D':>6} {'took':>6}")
LEGEND = ("first, all P: s from the apply to the first calls in the node's report and to"
          " all P pods in it with calls; links, fds: BPF links and open files the agent"
          f" holds {HOLD_S:.0f} s later; RSS, HWM: its VmRSS and VmHWM then, MiB (HWM at"
          " the SIGTERM in the note); BPF: memlock of its maps and programs, MiB; healthz:"
          " longest time without a 200 answer, apply to SIGTERM, s; fails: /healthz"
          f" requests failed (asked every {HEALTH_EVERY_S} s, {HEALTH_TIMEOUT_S:.0f} s"
          " timeout); delete: s from the probe's delete to none of its links held; again:"
          " s from a second apply to as many links; TERM: s from SIGTERM to the process"
          " gone; D: s seen in D state meanwhile; took: the case, agent start to gone, s")


def print_row(row):
    print(f"{row['P']:>4} {row['F']:>3} {fmt(row['first']):>7} {fmt(row['all']):>7}"
          f" {fmt(row['links'], 'd'):>6} {fmt(row['fds'], 'd'):>6}"
          f" {fmt(row['rss'] and row['rss'] / 1024, '.0f'):>5}"
          f" {fmt(row['hwm'] and row['hwm'] / 1024, '.0f'):>5}"
          f" {fmt(row['memlock'] and row['memlock'] / 2**20, '.1f'):>6}"
          f" {row['gap']:>8.1f} {row['fails']:>6} {fmt(row['delete']):>7} {fmt(row['again']):>7}"
          f" {fmt(row['term']):>7} {fmt(row['d']):>6} {row['took']:>6.0f}", flush=True)
    notes = [f"load {row['load']:.1f} at start"]
    if row.get("types"):
        notes.append("link types " + ",".join(row["types"]))
    if row.get("peak"):
        notes.append(f"HWM at SIGTERM {row['peak'] / 1024:.0f} MiB")
    if row.get("term") is not None:
        notes.append(f"{row['term_links']} links at SIGTERM, exit {row['rc']}"
                     + (", SIGKILLed" if row["killed"] else ""))
    if row["note"]:
        notes.append(row["note"].strip())
    print(f"{'':>9}{'; '.join(notes)}", flush=True)
    for msg, n in row["errors"][:4]:
        print(f"{'':>9}agent {n}x: {msg}", flush=True)
    if len(row["errors"]) > 4:
        print(f"{'':>9}agent: {len(row['errors']) - 4} more kinds of warnings and errors",
              flush=True)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.monotonic()
    print(f"agent: {AGENT} --layer-root WORKDIR {' '.join(AGENT_ARGS)}; pods: podapp"
          f" {' '.join(POD_ARGS)}; cases: P {PODS} x F {FUNCS}; open files limit"
          f" {resource.getrlimit(resource.RLIMIT_NOFILE)[1]} (the agent raises its own to it)",
          flush=True)
    with Bench(AGENT) as b:
        b.namespace(NS)
        have = 0
        print(LEGEND, flush=True)
        print(HEADER, flush=True)
        for npods in sorted(PODS):
            if npods > have:
                took = grow_pods(b, have, npods)
                print(f"{'':>9}({npods - have} pods started in {took:.0f} s)", flush=True)
                have = npods
            for nfuncs in sorted(FUNCS):
                print_row(run_case(b, npods, nfuncs))
    print(f"bench took {time.monotonic() - began:.0f} s", flush=True)


if __name__ == "__main__":
    main()
