"""retwatch-agent probing big executables: Go binaries of the control plane
(kubectl, 62 MB; kube-apiserver, 119 MB) copied into a pod's own layer and
run there (kubectl as a proxy on a socket; kube-apiserver --help into a pipe
nobody reads, where it blocks). For each file and each pattern set, while
/metrics (which the agent's main loop renders) is asked every 0.05 s:

- the time from the apply to the attach (or to the error in the report),
  and the longest gap between two /metrics answers meanwhile (the main
  loop's stall);
- the same from the probe's deletion to the detach;
- the agent's peak RSS (VmHWM).

A podapp pod is probed all along by another probe (its reports must go on).
Env: RETWATCH_AGENT (default build/retwatch-agent), AGENT_ARGS (more agent
options, e.g. "--analysis-timeout 200ms"), BIG_FILES (which files, default
"kubectl kube-apiserver": the peak RSS of a later file includes what the
earlier ones left), BIG_CASES (which pattern sets, by number from 1, default
all: a later one finds the file read by an earlier one). Prints figures;
asserts nothing.
"""

import os
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

from harness import REPO, Bench, probe_doc, proc_status_kib, wait_for

import agentproc  # noqa: E402 (harness puts tests/agent on the path)
import pods  # noqa: E402

AGENT = os.environ.get("RETWATCH_AGENT", os.path.join(REPO, "build", "retwatch-agent"))
AGENT_ARGS = tuple(os.environ.get("AGENT_ARGS", "").split())
# what each file's process runs: it must stay alive without a network
RUNS = {"kubectl": "/tmp/kubectl --server=http://127.0.0.1:1 proxy --unix-socket=/tmp/p.sock",
        "kube-apiserver": "/tmp/kube-apiserver --help | sleep 100000"}
RUNS = {f: RUNS[f] for f in os.environ.get("BIG_FILES", " ".join(RUNS)).split()}
CASES = [("one function", ["main.main"]),
         ("a misspelt name (suggestions)", ["main.mian"]),
         ("16 globs", [f"k8s.io/client-go/tools/cache.(*{t}).*" for t in (
             "Reflector", "DeltaFIFO", "threadSafeMap", "sharedIndexInformer", "controller",
             "processorListener", "sharedProcessor", "cache", "Store", "ListWatch",
             "listener", "heap", "Heap", "ExpirationCache", "UndeltaStore", "FIFO")])]
CASES = [CASES[int(i) - 1] for i in os.environ.get("BIG_CASES", "1 2 3").split()]


def poll(agent, stop, out):
    while not stop.is_set():
        try:
            with urllib.request.urlopen(agent.metrics_url("/metrics"), timeout=60) as r:
                r.read()
                out.append(time.monotonic())
        except (urllib.error.URLError, OSError):
            pass
        stop.wait(0.05)


def longest_gap(times, start, end):
    times = [start] + [t for t in times if start <= t <= end] + [end]
    return max(b - a for a, b in zip(times, times[1:]))


def report(b, ns, name):
    items = b.get(f"/apis/retwatch.io/v1alpha1/namespaces/{ns}/functionprobereports")["items"]
    for r in items:
        if r.get("probe", {}).get("name") == name and r.get("node") == "node-a":
            return r.get("status")
    return None


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"agent: {AGENT} {' '.join(AGENT_ARGS)}", flush=True)
    with Bench(AGENT) as b:
        ns = b.namespace("big")
        b.pod(ns, "web-0", {"app": "web"}, "node-a")
        procs = {}
        for i, (name, cmd) in enumerate(RUNS.items()):
            p = pods.Pod(b.kubectl, ns, f"big-{i}", {"app": f"big-{i}"}, "node-a",
                         {"app": ("/bin/sh", "-c", f"while [ ! -x /tmp/{name} ]; do sleep 0.1; "
                                  f"done; {cmd}")}, b.image, b.workdir).create()
            root = p.containers["app"].rootfs
            shutil.copy(os.path.join(b.cp.bindir, name), os.path.join(root, "tmp", name + ".p"))
            os.rename(os.path.join(root, "tmp", name + ".p"), os.path.join(root, "tmp", name))
            procs[name] = i
        time.sleep(1)
        agent = agentproc.Agent(AGENT, b.cp.kubeconfig("agent"), "node-a", b.workdir,
                                ("--layer-root", b.workdir) + AGENT_ARGS)
        b.agents.append(agent)
        agent.start()
        b.apply([probe_doc(ns, "calm", {"app": "web"})])
        wait_for("the calm probe's calls", lambda: (r := report(b, ns, "calm")) and any(
            f.get("calls") for f in r.get("functions", [])), timeout=30)
        stop, beats = threading.Event(), []
        t = threading.Thread(target=poll, args=(agent, stop, beats), daemon=True)
        t.start()
        n = 0
        for name, i in procs.items():
            for what, funcs in CASES:
                n += 1
                doc = probe_doc(ns, f"p{n}", {"app": f"big-{i}"})
                doc["spec"].update(functions=funcs, executable=f"/tmp/{name}")
                start = time.monotonic()
                b.apply([doc])
                r = wait_for(f"p{n}'s report", lambda: (r := report(b, ns, f"p{n}")) and (
                    r.get("attached") or r.get("errors")) and r, timeout=120, interval=0.02)
                took = time.monotonic() - start
                time.sleep(1)
                end = time.monotonic()
                hwm, rss = proc_status_kib(agent.pid, "VmHWM", "VmRSS")
                outcome = (f"attached, {len(r.get('functions', []))} functions"
                           if r.get("attached") else f"error: {r['errors'][0][:60]}...")
                print(f"  {name} ({os.path.getsize(os.path.join(b.cp.bindir, name)) >> 20} MiB)"
                      f", {what}: {outcome}; {took:.2f} s after the apply; longest /metrics gap"
                      f" {longest_gap(beats, start, end):.2f} s; agent VmHWM {hwm >> 10} MiB"
                      f", VmRSS {rss >> 10} MiB",
                      flush=True)
                start = time.monotonic()
                b.delete_probe(ns, f"p{n}")
                if r.get("attached"):
                    wait_for(f"p{n}'s detach", lambda: agent.find(
                        msg_has="detached from process", probe=f"p{n}"), timeout=120,
                        interval=0.02)
                    took = time.monotonic() - start
                    time.sleep(1)
                    print(f"    deleted: detached {took:.2f} s after the delete; longest "
                          f"/metrics gap {longest_gap(beats, start, time.monotonic()):.2f} s",
                          flush=True)
        stop.set()
        t.join(60)
        calm = report(b, ns, "calm")
        print(f"  the calm probe's report was last written {calm.get('lastUpdate')}")


if __name__ == "__main__":
    main()
