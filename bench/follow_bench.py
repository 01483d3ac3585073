#!/usr/bin/env python3
"""What following a process from its fork adds to each hit in the kernel:
the BPF programs' own run time per hit (the kernel's run-time statistics,
enabled through BPF_ENABLE_STATS while this runs) for calls of one small
function made by the traced process itself and by a child it forks, which
is counted in its parent's histograms through the follow map. Prints the
figures; asserts nothing. Needs root, gcc and bpftool.

Usage: python3 bench/follow_bench.py     (as root, after make)
Env:   RETWATCH  the retwatch binary (default build/retwatch)"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETWATCH = os.environ.get("RETWATCH", os.path.join(ROOT, "build", "retwatch"))
CALLS, ROUNDS = 20000, 5
SOURCE = os.path.join(ROOT, "bench", "forkcost.c")


def enable_stats():
    """An fd that keeps the kernel's BPF run-time statistics on while open."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.create_string_buffer(16)  # union bpf_attr: enable_stats.type = 0 (run time)
    fd = libc.syscall(321, 32, attr, 16)    # SYS_bpf, BPF_ENABLE_STATS
    if fd < 0:
        sys.exit(f"BPF_ENABLE_STATS: {os.strerror(ctypes.get_errno())}")
    return fd


def prog_stats(names):
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    got = {}
    for p in json.loads(out):
        if p.get("name") in names:
            t, n = got.get(p["name"], (0, 0))
            got[p["name"]] = (t + p.get("run_time_ns", 0), n + p.get("run_cnt", 0))
    return got


def main():
    tmp = tempfile.mkdtemp()
    prog = os.path.join(tmp, "forkcost")
    subprocess.run(["gcc", "-O2", "-o", prog, SOURCE], check=True)
    fd = enable_stats()
    w = subprocess.Popen([prog, str(CALLS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    pid = int(w.stdout.readline().split()[1])
    err = open(os.path.join(tmp, "err"), "w+")
    rw = subprocess.Popen([RETWATCH, "trace", "--follow", "--pid", str(pid), "--max-overhead",
                           "0", "--json", "hit"], stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            err.seek(0)
            if "retwatch: tracing" in err.read():
                break
            time.sleep(0.1)
        names = ("rw_entry", "rw_ret")
        per = {"self": [], "child": []}
        for _ in range(ROUNDS):
            for kind in ("self", "child"):
                before = prog_stats(names)
                w.stdin.write(kind + "\n")
                w.stdin.flush()
                assert w.stdout.readline().strip() == "done"
                after = prog_stats(names)
                t = sum(after[n][0] - before[n][0] for n in names)
                c = sum(after[n][1] - before[n][1] for n in names)
                per[kind].append(t / c if c else float("nan"))
        for kind, label in (("self", "the traced process's own calls"),
                            ("child", "a forked child's, counted through the follow map")):
            v = sorted(per[kind])
            print(f"{label}: {v[len(v) // 2]:.0f} ns of BPF per hit (median of {ROUNDS} "
                  f"rounds of {CALLS} calls; {v[0]:.0f}-{v[-1]:.0f})")
    finally:
        rw.terminate()
        rw.wait(30)
        w.kill()
        w.wait()
        os.close(fd)


if __name__ == "__main__":
    main()
