"""retwatch-agent under a slow-call flood: spec.slowThreshold 1ns on a
function called as fast as podapp can (no sleeps, WORKERS goroutines), so
every call is a slow call. For SECONDS, asks /healthz and /metrics (which
the agent's main loop renders) every 0.1 s and prints:

- the calls a second of the function, as the agent's report counts them;
- the longest gap between two /healthz answers and between two /metrics
  answers, and the slowest /metrics answer (the main loop's stall);
- the slow calls logged, dropped in the kernel (slowDropped) and the agent's
  CPU time and peak RSS.

Env: RETWATCH_AGENT (default build/retwatch-agent), FLOOD_SECONDS (20), WORKERS
(2), AGENT_ARGS (more agent options, e.g. "--slow-calls-per-second 0").
Prints figures; asserts nothing.
"""

import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

from harness import REPO, Bench, cpu_seconds, probe_doc, proc_status_kib, wait_for

import agentproc  # noqa: E402 (harness puts tests/agent on the path)
import pods  # noqa: E402

AGENT = os.environ.get("RETWATCH_AGENT", os.path.join(REPO, "build", "retwatch-agent"))
SECONDS = float(os.environ.get("FLOOD_SECONDS", "20"))
WORKERS = os.environ.get("WORKERS", "2")
AGENT_ARGS = tuple(os.environ.get("AGENT_ARGS", "").split())
FUNC = "main.lookupUser"
# podapp calling FUNC as fast as it can (bench/agent/hostile.py runs it too)
ARGS = ("/app/podapp", "-workers", WORKERS, "-latency", "0", "-lookup", "0", "-gap", "0")


def poll(agent, path, stop, out):
    """(sent, answered, status) of each GET of path, every 0.1 s until stop."""
    while not stop.is_set():
        sent = time.monotonic()
        try:
            with urllib.request.urlopen(agent.metrics_url(path), timeout=60) as r:
                r.read()
                code = r.status
        except urllib.error.HTTPError as e:
            code = e.code
        except OSError as e:
            code = type(e).__name__
        out.append((sent, time.monotonic(), code))
        stop.wait(0.1)


def longest_gap(answers, start, end):
    """The longest time without a 200 answer between start and end."""
    times = [start] + [a for _, a, code in answers if code == 200] + [end]
    return max(b - a for a, b in zip(times, times[1:]))


def function_of(entry):
    for f in (entry or {}).get("functions", []):
        if f["name"] == FUNC:
            return f
    return {}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"agent: {AGENT} {' '.join(AGENT_ARGS)}; {WORKERS} workers; {SECONDS:.0f} s",
          flush=True)
    with Bench(AGENT) as b:
        ns = b.namespace("flood")
        pods.Pod(b.kubectl, ns, "hot-1", {"app": "hot"}, "node-a", {"app": ARGS}, b.image,
                 b.workdir).create()
        agent = agentproc.Agent(AGENT, b.cp.kubeconfig("agent"), "node-a", b.workdir,
                                ("--layer-root", b.workdir) + AGENT_ARGS)
        b.agents.append(agent)
        agent.start()
        doc = probe_doc(ns, "flood", {"app": "hot"})
        doc["spec"].update(functions=[FUNC], slowThreshold="1ns")
        stop, health, metrics = threading.Event(), [], []
        threads = [threading.Thread(target=poll, args=(agent, p, stop, out), daemon=True)
                   for p, out in (("/healthz", health), ("/metrics", metrics))]
        for t in threads:
            t.start()
        cpu0, start = cpu_seconds(agent.pid), time.monotonic()
        b.apply([doc])
        first = wait_for("the first report with calls",
                         lambda: function_of(b_report(b, ns)).get("calls"), timeout=60)
        t0, calls0 = time.monotonic(), first
        time.sleep(SECONDS)
        f = function_of(b_report(b, ns))
        t1 = time.monotonic()
        stop.set()
        for t in threads:
            t.join(90)
        end = time.monotonic()
        cpu = cpu_seconds(agent.pid) - cpu0
        (hwm,) = proc_status_kib(agent.pid, "VmHWM")
        logged = len(agent.find(event="slow_call", count=0) or [])
        slowest = max((a - s for s, a, code in metrics), default=float("nan"))
        bad = [code for _, _, code in health + metrics if code != 200]
        print(f"  calls of {FUNC}: {f.get('calls', 0)} ({(f.get('calls', 0) - calls0) / (t1 - t0):.0f}"
              f" a second, from the reports)")
        print(f"  longest gap between /healthz answers: {longest_gap(health, start, end):.2f} s")
        print(f"  longest gap between /metrics answers: {longest_gap(metrics, start, end):.2f} s;"
              f" slowest /metrics answer {slowest:.2f} s; answers not 200: {len(bad)} {bad[:5]}")
        print(f"  slow calls logged {logged}, dropped in the kernel {f.get('slowDropped', 0)}")
        print(f"  agent CPU {cpu:.1f} s in {end - start:.0f} s, VmHWM {hwm / 1024:.0f} MiB",
              flush=True)


def b_report(b, ns):
    """This node's report of the flood probe (its status), or None."""
    items = b.get(f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobereports")["items"]
    for r in items:
        if r.get("node") == "node-a":
            return r.get("status")
    return None


if __name__ == "__main__":
    main()
