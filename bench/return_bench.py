#!/usr/bin/env python3
"""Where a traced call ends, and what it costs (issue 52): per call over the
bare call, for a framed C leaf (its entry a PUSH, emulated in the trap) and
a frameless one (its entry a MOV, stepped out of line), each traced by
`retwatch trace --returns ret` (probes on the RETs), by `retwatch trace
--returns trampoline` (the kernel's return trampoline) and by bpftrace's
latency one-liner (a uprobe and a uretprobe keeping a histogram), ROUNDS
rounds of CALLS calls of each, interleaved, in one run. Prints the median ns
per call of each, the overheads and the ratios to bpftrace's, and checks
retwatch's call counts against the calls made. Asserts nothing else. Needs
root and gcc; bpftrace where installed (else its columns are left out).

Usage: python3 bench/return_bench.py     (as root, after make)
Env:   RETWATCH  the retwatch binary (default build/retwatch)
       CALLS     calls per round (default 100000)
       ROUNDS    rounds of each (default 3)"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETWATCH = os.environ.get("RETWATCH", os.path.join(ROOT, "build", "retwatch"))
CALLS = int(os.environ.get("CALLS", "100000"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
FUNCS = {"framed": "framed_leaf", "bare": "bare_leaf"}
ONE_LINER = ("uprobe:{bin}:{fn} {{ @s[tid] = nsecs; }} "
             "uretprobe:{bin}:{fn} /@s[tid]/ {{ @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }}")


class Workload:
    def __init__(self, path):
        self.proc = subprocess.Popen([path, "-n", str(CALLS)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = int(self.proc.stdout.readline().split()[1])

    def round(self, name):
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        _, _, calls, ns, _ = self.proc.stdout.readline().split()
        return float(ns)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def wait_line(proc, want, timeout=60):
    """Reads proc's stderr (retwatch) or stdout (bpftrace) until a line holds want."""
    stream = proc.stderr if proc.stderr else proc.stdout
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = stream.readline()
        if not line:
            raise RuntimeError(f"{proc.args[0]} ended before '{want}'")
        if want in line:
            return
    raise RuntimeError(f"no '{want}' from {proc.args[0]} in {timeout} s")


def traced(binary, fn, how):
    """Starts the tracer `how` on a new workload; (workload, tracer)."""
    w = Workload(binary)
    if how == "bpftrace":
        prog = ONE_LINER.format(bin=binary, fn=fn)
        t = subprocess.Popen(["bpftrace", "-p", str(w.pid), "-e", prog], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        wait_line(t, "Attaching")
        time.sleep(0.5)
    else:
        t = subprocess.Popen([RETWATCH, "trace", "--pid", str(w.pid), "--json", "--returns", how,
                              "--max-overhead", "0", fn], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        wait_line(t, "tracing ")
    return w, t


def main():
    if os.geteuid():
        sys.exit("return_bench: run as root")
    work = tempfile.mkdtemp(prefix="retwatch-return-bench-")
    try:
        binary = os.path.join(work, "leaves")
        subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror",
                        os.path.join(ROOT, "bench", "leaves.c"), "-o", binary], check=True)
        hows = ["ret", "trampoline"] + (["bpftrace"] if shutil.which("bpftrace") else [])
        print(f"kernel {os.uname().release}, {os.cpu_count()} CPUs, {CALLS} calls a round, "
              f"{ROUNDS} rounds; bpftrace: {'yes' if 'bpftrace' in hows else 'not installed'}")
        for name, fn in FUNCS.items():
            times = {h: [] for h in ["bare"] + hows}
            counts = {h: 0 for h in hows if h != "bpftrace"}
            for _ in range(ROUNDS):
                w = Workload(binary)
                times["bare"].append(w.round(name))
                w.close()
                for how in hows:
                    w, t = traced(binary, fn, how)
                    times[how].append(w.round(name))
                    w.close()
                    if how == "bpftrace":
                        t.terminate()
                        t.communicate(timeout=30)
                        continue
                    out, _ = t.communicate(timeout=60)
                    doc = json.loads(out)
                    counts[how] += sum(f["calls"] for f in doc["functions"])
            med = {h: statistics.median(v) for h, v in times.items()}
            over = {h: med[h] - med["bare"] for h in hows}
            print(f"{fn}: bare {med['bare']:.1f} ns/call")
            for how in hows:
                ratio = (f", {over[how] / over['bpftrace']:.2f}x bpftrace's"
                         if "bpftrace" in over and over["bpftrace"] > 0 else "")
                count = (f", {counts[how]} of {CALLS * ROUNDS} calls counted"
                         if how in counts else "")
                print(f"  {how:10s} +{over[how] / 1000:.2f} us a call{ratio}{count}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
