"""Results at cluster scale against the real kube-apiserver and etcd of
tests/k8s: many simulated nodes write one probe's results (64 functions,
2 pods per node; bench/scale_writer.c, the agent's own status.c bodies), in
today's layout (a FunctionProbeReport per node, merged by a real
retwatch-agent holding the summary Lease) or the layout before it (every
node's entry in the FunctionProbe's status). Prints, per node count: writes
refused, write latency p50/p99, the FunctionProbe's size, the bytes an
agent's FunctionProbe watch received per report interval, the summary's
staleness (a node's change until the summary shows it), the API server's
CPU seconds and RSS, and etcd's database size. Asserts nothing.

Usage: python3 bench/scale_bench.py WRITER AGENT MODE NODES...
  (bench/scale_bench.sh builds the writer and runs both modes)
"""

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "agent"))
from controlplane import ControlPlane, build_bindir  # noqa: E402

NS, PROBE = "bench", "scale"
WRITERS = 4
GROUP = "/apis/retwatch.io/v1alpha1"


def proc_usage(pid):
    """(CPU seconds, RSS MiB) of pid."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return cpu, rss / 1024


class Watch(threading.Thread):
    """A FunctionProbe watch as the agent opens one (its token): counts the
    bytes and events it receives."""

    def __init__(self, cp):
        super().__init__(daemon=True)
        self.cp, self.bytes, self.events, self.stop = cp, 0, 0, False

    def run(self):
        while not self.stop:
            req = urllib.request.Request(
                self.cp.url + GROUP + "/functionprobes?watch=1&timeoutSeconds=600",
                headers={"Authorization": f"Bearer {self.cp.agent_token}"})
            ctx = ssl.create_default_context(cafile=self.cp.ca_file)
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=900) as r:
                    for line in r:
                        self.bytes += len(line)
                        self.events += 1
                        if self.stop:
                            return
            except OSError:
                time.sleep(0.5)


def write_round(writer, kubeconfig, mode, uid, nodes, extra_node=-1, extra=0, first=0):
    """Each of nodes writes once (WRITERS processes at a time): the
    latencies (ms) of the writes that succeeded and the refusals."""
    per = (nodes + WRITERS - 1) // WRITERS
    procs = []
    for w in range(WRITERS):
        lo = first + w * per
        count = min(per, first + nodes - lo)
        if count <= 0:
            continue
        procs.append(subprocess.Popen(
            [writer, kubeconfig, mode, NS, PROBE, uid, str(lo), str(count), str(extra_node),
             str(extra)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    lat, refused, errors = [], 0, []
    for p in procs:
        out, err = p.communicate()
        for line in out.splitlines():
            status, ms, _ = line.split()
            if int(status) // 100 == 2:
                lat.append(float(ms))
            else:
                refused += 1
        errors += err.splitlines()
    return lat, refused, errors


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def get(cp, path):
    with cp.urlopen(path, timeout=120) as r:
        return r.read()


def summary_calls(cp):
    st = json.loads(get(cp, f"{GROUP}/namespaces/{NS}/functionprobes/{PROBE}")).get("status", {})
    s = st.get("summary") or {}
    fn = {f["name"]: f for f in s.get("functions", [])}.get("main.(*Server).function00", {})
    return s.get("nodes", 0), fn.get("calls", 0), st.get("reportInterval", "")


def wait(what, fn, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(0.2)
    raise TimeoutError(what)


def etcd_db_mib(cp):
    return json.loads(cp._etcdctl("endpoint", "status", "-w", "json"))[0]["Status"]["dbSize"] \
        / 2**20


def main():
    writer, agent_bin, mode = sys.argv[1:4]
    counts = [int(n) for n in sys.argv[4:]]
    work = tempfile.mkdtemp(prefix="retwatch-scale-")
    cp = ControlPlane(os.path.join(work, "cp"), build_bindir())
    agent = None
    try:
        cp.start()
        cp.kubectl("apply", "-f", os.path.join(REPO, "manifests", "install.yaml"))
        cp.kubectl("wait", "--for=condition=Established", "crd/functionprobes.retwatch.io",
                   "crd/functionprobereports.retwatch.io")
        cp.kubectl("create", "namespace", NS)
        probe = {"apiVersion": "retwatch.io/v1alpha1", "kind": "FunctionProbe",
                 "metadata": {"name": PROBE, "namespace": NS},
                 "spec": {"selector": {"matchLabels": {"app": "none"}}, "reportInterval": "10s",
                          "functions": [f"main.(*Server).function{f:02d}" for f in range(64)]}}
        cp.kubectl("apply", "-f", "-", input=json.dumps(probe))
        uid = json.loads(get(cp, f"{GROUP}/namespaces/{NS}/functionprobes/{PROBE}"))[
            "metadata"]["uid"]
        if mode == "report":
            log = open(os.path.join(work, "agent.log"), "w")
            agent = subprocess.Popen(
                [agent_bin, "--kubeconfig", cp.kubeconfig("agent"), "--node-name",
                 "summary-node", "--metrics-address", "none"], stdout=log, stderr=log)
        watch = Watch(cp)
        watch.start()
        api_pid = cp._apiserver.pid
        done = 0
        for n in counts:
            cpu0, _ = proc_usage(api_pid)
            b0, e0, t0 = watch.bytes, watch.events, time.monotonic()
            lat, refused, errors = write_round(writer, cp.kubeconfig("agent"), mode, uid, n)
            took = time.monotonic() - t0
            line = (f"{mode} nodes {n}: writes {len(lat) + refused} in {took:.1f} s, "
                    f"refused {refused}; write p50 {pct(lat, 0.5):.0f} ms, "
                    f"p99 {pct(lat, 0.99):.0f} ms")
            if errors:
                line += f" (first refusal: {errors[0][:160]})"
            if mode == "report":
                # the summary over every node, then one node's change shown
                wait("the summary of every node", lambda: summary_calls(cp)[0] >= n, 30 + n / 10)
                base = summary_calls(cp)[1]
                t1 = time.monotonic()
                write_round(writer, cp.kubeconfig("agent"), mode, uid, 1, 0, 1000 + done)
                wait("the change in the summary",
                     lambda: summary_calls(cp)[1] >= base + 1000, 60 + n / 10)
                stale = time.monotonic() - t1
                done += 1
                interval = summary_calls(cp)[2]
                line += f"; summary staleness {stale:.1f} s (interval {interval})"
            window = time.monotonic() - t0
            size = len(get(cp, f"{GROUP}/namespaces/{NS}/functionprobes/{PROBE}"))
            cpu1, rss = proc_usage(api_pid)
            line += (f"; FunctionProbe {size / 1024:.0f} KiB; agent watch received "
                     f"{(watch.bytes - b0) / 1024:.0f} KiB in {watch.events - e0} events over "
                     f"{window:.0f} s; apiserver {cpu1 - cpu0:.0f} CPU s, RSS {rss:.0f} MiB; "
                     f"etcd db {etcd_db_mib(cp):.0f} MiB")
            print(line, flush=True)
        watch.stop = True
    except BaseException:
        if agent:
            with open(os.path.join(work, "agent.log")) as f:
                print("the summary writer's log ends:\n" + "".join(f.readlines()[-15:]),
                      file=sys.stderr)
        raise
    finally:
        if agent:
            agent.terminate()
            agent.wait(30)
        cp.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
