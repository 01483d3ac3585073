#!/usr/bin/env python3
"""What counting a program started anew beside a traced run of it costs in
the kernel (tracer_opts.follow_started, `retwatch trace --cgroup`): the exec
program's own run time per exec (the kernel's run-time statistics, enabled
through BPF_ENABLE_STATS while this runs) for a run of the traced executable
in the traced process's cgroup (lent its histograms), a run of another
program there, and a run outside it; and the task iterator's per traced
process. Prints the figures; asserts nothing. Needs root, gcc and bpftool,
and the fixtures (make fixtures).

Usage: python3 bench/exec_bench.py     (as root, after make and make fixtures)
Env:   RETWATCH           the retwatch binary (default build/retwatch)
       RETWATCH_FIXTURES  the fixtures (default build/fixtures)"""

import os
import subprocess
import sys
import time

from follow_bench import enable_stats, prog_stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RETWATCH = os.environ.get("RETWATCH", os.path.join(ROOT, "build", "retwatch"))
FIXTURES = os.environ.get("RETWATCH_FIXTURES", os.path.join(ROOT, "build", "fixtures"))
RUNS = 300


def unified():
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return "/sys/fs/cgroup"
    return "/sys/fs/cgroup/unified"


def per_exec(argv, join):
    before = prog_stats({"rw_exec"}).get("rw_exec", (0, 0))
    for _ in range(RUNS):
        subprocess.run(argv, stdout=subprocess.DEVNULL, preexec_fn=join, check=True)
    after = prog_stats({"rw_exec"}).get("rw_exec", (0, 0))
    n = after[1] - before[1]
    return (after[0] - before[0]) / n if n else 0.0, n


def main():
    prefork = os.path.join(FIXTURES, "c", "prefork", "prefork")
    cg = os.path.join(unified(), f"retwatch-bench-{os.getpid()}")
    os.mkdir(cg)

    def join():
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write("0")
    fd = enable_stats()
    server = subprocess.Popen([prefork, "follow"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, preexec_fn=join)
    rw = None
    try:
        server.stdout.readline()
        with open(f"/proc/{server.pid}/cgroup") as f:
            where = next(l[3:].strip() for l in f if l.startswith("0::"))
        rw = subprocess.Popen([RETWATCH, "trace", "--cgroup", where, "--max-overhead", "0",
                               "work"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        while "retwatch: tracing" not in rw.stderr.readline():
            if rw.poll() is not None:
                sys.exit("retwatch ended before tracing")
        lent = per_exec([prefork, "once"], join)
        other = per_exec(["/bin/true"], join)
        outside = per_exec(["/bin/true"], None)
        it = prog_stats({"rw_task_key"}).get("rw_task_key", (0, 0))
    finally:
        for p in (rw, server):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        os.close(fd)
        while True:
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
    print(f"exec program, per exec ({RUNS} runs each):")
    print(f"  the traced executable in the traced cgroup (lent): {lent[0]:8.0f} ns ({lent[1]} execs)")
    print(f"  another program in the traced cgroup:              {other[0]:8.0f} ns ({other[1]} execs)")
    print(f"  a program outside it:                               {outside[0]:8.0f} ns ({outside[1]} execs)")
    if it[1]:
        print(f"task iterator, per thread visited: {it[0] / it[1]:.0f} ns ({it[1]} visits)")


if __name__ == "__main__":
    main()
