"""retwatch-agent end to end, timed: one control plane, real pods, real uprobes.

1. kubectl apply -> status: a new FunctionProbe over one pod, until a read of
   it shows this node's entry with attached true and a process (RUNS runs,
   after an untimed one); split at the agent's "attached" log line.
2. container start -> probe live: a new pod under a live probe, from before
   Pod.create (its runc container start) and from its status patch (the pod
   shows the containerID) to the agent's "attached to process PID" line
   (STARTS pods).
3. memory: 20 pods, 100 probes (probe i selects the pod labelled
   shard=i%20: 5 probes a pod, 1 pod a probe), VmRSS and VmHWM 30 s after
   every probe's node entry is written (live, or with the errors it shows);
   then, after 4, how many probes count calls (a sanity check).
4. API requests a minute at steady state, from two SIGUSR1 stats lines
   STEADY_S apart, for 1 probe/1 pod and for the setup of 3; then how old
   the Lease's renewal and the probes' status writes are.

Env: RETWATCH_AGENT (default build/retwatch-agent), RUNS (20), STARTS (10),
STEADY_S (60). Prints each goal and whether it was met; exits 0 once it ran.
"""

import os
import signal
import sys
import time

from harness import (LEASE_PATH, REPO, Bench, age_s, attached_event, cpu_seconds, live_entry,
                     log_time, now, percentile, probe_doc, proc_status_kib, stats_event,
                     wait_for)

AGENT = os.environ.get("RETWATCH_AGENT", os.path.join(REPO, "build", "retwatch-agent"))
RUNS = int(os.environ.get("RUNS", "20"))
STARTS = int(os.environ.get("STARTS", "10"))
STEADY_S = float(os.environ.get("STEADY_S", "60"))
SETTLE_S = 20
MEMORY_AFTER_S = 30
NPODS, NPROBES = 20, 100
SCRAPES = 20
GOAL_S = 2.0
GOAL_RSS_MIB = 50
COUNTERS = ("api_requests", "status_patches", "lease_requests", "watches", "lists",
            "watch_events", "request_failures", "status_patch_failures")


class Report:
    """Figures as they come (printed at once) and as a table at the end."""

    HEADER = ("figure", "value", "goal", "")

    def __init__(self):
        self.rows = []

    def add(self, figure, value, goal=None, met=None):
        self.rows.append((figure, value, goal or "", "" if met is None else
                          ("met" if met else "NOT MET")))
        print(f"  {figure}: {value}" + (f"   [goal {goal}: {self.rows[-1][3]}]" if goal else ""),
              flush=True)

    def table(self):
        rows = [self.HEADER] + self.rows
        widths = [max(len(r[i]) for r in rows) for i in range(4)]
        for i, row in enumerate(rows):
            print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
            if i == 0:
                print("  ".join("-" * w for w in widths))


def memory_mib(agent):
    """The agent's VmRSS and VmHWM in MiB."""
    return tuple(kib / 1024 for kib in proc_status_kib(agent.pid, "VmRSS", "VmHWM"))


def ms(seconds):
    return f"{seconds * 1000:.0f} ms"


def section(title):
    print(f"\n== {title}", flush=True)


# -- 1. kubectl apply -> status ----------------------------------------------

def timed_apply(b, agent, ns, node, name):
    """Seconds from before kubectl apply of probe name to: its live status
    entry read back, the agent's attach line, kubectl apply's return. The
    probe is deleted (and detached) after."""
    start = now()
    b.apply([probe_doc(ns, name, {"app": "web"})])
    applied = now() - start
    wait_for(f"{name}'s live node entry", lambda: live_entry(b.probe(ns, name), node),
             timeout=10, interval=0.05)
    live = now() - start
    attached = log_time(attached_event(agent, 5, namespace=ns, probe=name)) - start
    b.delete_probe(ns, name)
    wait_for(f"{name}'s detach", lambda: agent.find(msg_has="detached from", probe=name),
             timeout=5)
    return live, attached, applied


def apply_to_status(b, agent, ns, node, runs):
    """timed_apply() runs times, after an untimed one (kubectl's discovery
    cache and the API server's first request for the CRD are cold)."""
    timed_apply(b, agent, ns, node, "warmup")
    return [timed_apply(b, agent, ns, node, f"lat-{i}") for i in range(runs)]


def report_apply(report, times):
    live, attach, applied = zip(*times)
    write = [t - a for t, a, _ in times]
    n = len(times)
    report.add(f"apply->status live p50 ({n} runs)", ms(percentile(live, 0.5)))
    report.add(f"apply->status live p99 ({n} runs)", ms(percentile(live, 0.99)),
               f"< {GOAL_S:g} s", percentile(live, 0.99) < GOAL_S)
    report.add("  of it: apply->agent attached p50 / p99",
               f"{ms(percentile(attach, 0.5))} / {ms(percentile(attach, 0.99))}")
    report.add("  of it: attached->status read p50 / p99",
               f"{ms(percentile(write, 0.5))} / {ms(percentile(write, 0.99))}")
    report.add("  (kubectl apply returned, p50)", ms(percentile(applied, 0.5)))


# -- 2. container start -> probe live -----------------------------------------

def start_to_attach(b, agent, ns, node, starts):
    """Per pod: (seconds from before Pod.create, from its status patch) to the
    agent's attach line, and runc run's own time."""
    times = []
    for i in range(starts):
        start = now()
        pod = b.pod(ns, f"start-{i}", {"app": "web"}, node)
        patched = now()  # Pod.create ends with the status patch
        c = pod.containers["app"]
        attached = log_time(attached_event(agent, 10, msg_has=f"attached to process {c.pid}:"))
        times.append((attached - start, attached - patched, c.start_seconds))
        pod.delete()
        wait_for(f"the detach from {c.pid}",
                 lambda: agent.find(msg_has=f"detached from process {c.pid}:"), timeout=5)
    return times


def report_starts(report, times):
    n = len(times)
    from_start, from_patch, runc = zip(*times)
    report.add(f"container start->attached p50 ({n} pods)", ms(percentile(from_start, 0.5)))
    report.add(f"container start->attached max ({n} pods)", ms(max(from_start)),
               f"< {GOAL_S:g} s", max(from_start) < GOAL_S)
    report.add("status patched->attached p50 / max",
               f"{ms(percentile(from_patch, 0.5))} / {ms(max(from_patch))}",
               f"< {GOAL_S:g} s", max(from_patch) < GOAL_S)
    report.add("  (runc run -d alone, p50)", ms(percentile(runc, 0.5)))


# -- 4. steady state ------------------------------------------------------------

def steady_rates(agent, window_s):
    """Counter increases a minute between two stats lines window_s apart, the
    agent's CPU use in that window (%), and the last stats line."""
    first, cpu0 = stats_event(agent), cpu_seconds(agent.pid)
    time.sleep(window_s)
    last, cpu1 = stats_event(agent), cpu_seconds(agent.pid)
    elapsed = log_time(last) - log_time(first)
    rates = {k: (last[k] - first[k]) * 60 / elapsed for k in COUNTERS}
    return rates, 100 * (cpu1 - cpu0) / elapsed, last


def report_steady(report, label, rates, cpu, last):
    report.add(f"{label}: API requests/min/node", f"{rates['api_requests']:.1f}")
    report.add(f"{label}:   status patches/min", f"{rates['status_patches']:.1f}")
    report.add(f"{label}:   Lease rounds/min (a GET + a PUT each)",
               f"{rates['lease_requests']:.1f}")
    report.add(f"{label}:   watches started/min (lists/min)",
               f"{rates['watches']:.1f} ({rates['lists']:.1f})")
    other = rates["api_requests"] - sum(rates[k] for k in
                                        ("status_patches", "lease_requests", "watches", "lists"))
    report.add(f"{label}:   requests not counted above/min", f"{other:.1f}")
    report.add(f"{label}:   watch events/min", f"{rates['watch_events']:.1f}")
    failures = rates["request_failures"] + rates["status_patch_failures"]
    report.add(f"{label}:   failed requests/min", f"{failures:.1f}")
    report.add(f"{label}:   agent CPU (% of a core)", f"{cpu:.1f}")
    report.add(f"{label}:   summary writer (Lease holder)", str(last.get("summary_writer")))


def report_freshness(report, label, b, ns, node):
    """How old the Lease's renewal and the probes' status writes are."""
    lease = b.get(LEASE_PATH)["spec"]
    renewed, limit = age_s(lease["renewTime"]), lease["leaseDurationSeconds"]
    report.add(f"{label}:   Lease last renewed", f"{renewed:.1f} s ago",
               f"< {limit} s (its duration)", renewed < limit)
    probes = b.probes(ns)
    entries = [age_s(e["lastUpdate"]) for p in probes for e in p["status"].get("nodes", [])
               if e["node"] == node]
    summaries = [age_s(p["status"]["summary"]["lastUpdate"]) for p in probes
                 if "summary" in p["status"]]
    report.add(f"{label}:   oldest node entry / summary",
               f"{max(entries):.1f} s / {max(summaries, default=float('inf')):.1f} s ago")
    report.add(f"{label}:   probes with a summary", f"{len(summaries)}/{len(probes)}")


def steady(b, report, label, agent, ns, node):
    """Figure 4 for the setup in place, then how fresh its writes are."""
    rates, cpu, last = steady_rates(agent, STEADY_S)
    report_steady(report, label, rates, cpu, last)
    report_freshness(report, label, b, ns, node)
    return last


# -- setups ---------------------------------------------------------------------

def one_pod(b, report):
    """Figures 1, 2 and 4 (1 probe/1 pod) on node bench-one."""
    node, ns = "bench-one", b.namespace("one")
    web = b.pod(ns, "web-0", {"app": "web"}, node)
    agent = b.agent(node)

    section(f"1. kubectl apply -> status live (1 pod, {RUNS} runs)")
    report_apply(report, apply_to_status(b, agent, ns, node, RUNS))

    section(f"4a. steady state, 1 probe / 1 pod ({SETTLE_S} s settle, {STEADY_S:g} s window)")
    b.apply([probe_doc(ns, "steady", {"app": "web"})])
    wait_for("the steady probe live", lambda: live_entry(b.probe(ns, "steady"), node), timeout=10)
    time.sleep(SETTLE_S)
    steady(b, report, "1 probe/1 pod", agent, ns, node)
    report.add("agent VmRSS / VmHWM, 1 probe/1 pod", "%.1f / %.1f MiB" % memory_mib(agent))

    section(f"2. container start -> attached (probe app=web, {STARTS} pods)")
    report_starts(report, start_to_attach(b, agent, ns, node, STARTS))

    b.delete_probe(ns, "steady")
    web.delete()
    b.stop_agent(agent)


def settled_entries(b, ns, node, nprobes):
    """Every probe's node entry once each is written, with attached true or
    with errors; None before."""
    entries = [e for p in b.probes(ns) for e in p.get("status", {}).get("nodes", [])
               if e["node"] == node and (e.get("attached") or e.get("errors"))]
    return entries if len(entries) == nprobes else None


def report_entries(report, entries):
    live = [e for e in entries if e["attached"] and e["processes"] >= 1]
    errors = sorted({err for e in entries for err in e["errors"]})
    report.add("probes live on this node", f"{len(live)}/{len(entries)}",
               f"{len(entries)}/{len(entries)}", len(live) == len(entries))
    for err in errors:
        report.add("  error in status", err)


def report_calls(report, entries):
    counting = [e for e in entries if e["functions"] and all(f["calls"] for f in e["functions"])]
    calls = sum(f["calls"] for e in entries for f in e["functions"])
    orphans = sum(f.get("orphans", 0) for e in entries for f in e["functions"])
    report.add("probes counting calls (sanity)", f"{len(counting)}/{len(entries)}",
               f"{len(entries)}/{len(entries)}", len(counting) == len(entries))
    report.add("  calls / orphans in the node entries", f"{calls} / {orphans}")


def many_probes(b, report):
    """Figures 3 and 4 (100 probes/20 pods) on node bench-many, a fresh agent."""
    node, ns = "bench-many", b.namespace("many")
    agent = b.agent(node)
    for j in range(NPODS):
        b.pod(ns, f"app-{j}", {"app": "web", "shard": str(j)}, node)

    section(f"3. memory: {NPROBES} probes over {NPODS} pods (probe i selects shard=i%{NPODS})")
    start = now()
    b.apply([probe_doc(ns, f"p-{i:03d}", {"shard": str(i % NPODS)}) for i in range(NPROBES)])
    entries = wait_for("every probe's node entry, live or with errors",
                       lambda: settled_entries(b, ns, node, NPROBES), timeout=60, interval=0.5)
    report.add(f"apply {NPROBES} probes->all node entries written", ms(now() - start))
    report_entries(report, entries)
    time.sleep(MEMORY_AFTER_S)
    rss, hwm = memory_mib(agent)
    report.add(f"agent VmRSS {MEMORY_AFTER_S} s later", f"{rss:.1f} MiB",
               f"< {GOAL_RSS_MIB} MiB", rss < GOAL_RSS_MIB)
    report.add("agent VmHWM", f"{hwm:.1f} MiB")
    report.add("uprobe links held by the agent", str(len(agent.links())))

    section(f"4b. steady state, {NPROBES} probes / {NPODS} pods ({STEADY_S:g} s window)")
    last = steady(b, report, f"{NPROBES} probes/{NPODS} pods", agent, ns, node)
    report.add("traced processes (probe x process)", str(last["traced_processes"]))
    report.add("agent VmRSS / VmHWM after the window", "%.1f / %.1f MiB" % memory_mib(agent))
    report_calls(report, wait_for("the node entries", lambda: settled_entries(b, ns, node, NPROBES),
                                  timeout=10))

    section(f"4c. /metrics scrapes, {NPROBES} probes / {NPODS} pods ({SCRAPES} scrapes)")
    report_scrapes(report, agent)


def report_scrapes(report, agent):
    """How long a Prometheus scrape takes and how big it is: the agent renders
    every series on its main loop for each scrape."""
    times, size, series = [], 0, 0
    for _ in range(SCRAPES):
        start = now()
        code, text = agent.get("/metrics")
        times.append(now() - start)
        assert code == 200, text[:200]
        size = len(text)
        series = next(int(line.split()[1]) for line in text.splitlines()
                      if line.startswith("retwatch_metrics_series "))
    times.sort()
    report.add("/metrics scrape p50 / max",
               "%.1f / %.1f ms" % (times[len(times) // 2] * 1000, times[-1] * 1000))
    report.add("/metrics size, per-function series", f"{size / 1024:.0f} KiB, {series}")


def main():
    # SIGTERM unwinds like Ctrl-C, through every cleanup
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not os.access(AGENT, os.X_OK):
        sys.exit(f"agent_bench: {AGENT} not found (run make, or set RETWATCH_AGENT)")
    report = Report()
    print(f"agent: {AGENT}", flush=True)
    started = time.monotonic()
    try:
        with Bench(AGENT) as b:
            one_pod(b, report)
            many_probes(b, report)
    finally:
        print(f"\n== results ({time.monotonic() - started:.0f} s)")
        report.table()


if __name__ == "__main__":
    main()
