#!/usr/bin/env bash
# Benchmarks of the probes' bias and of the overhead guard. Prints figures;
# asserts nothing.
#
# 1. Bias: RUNS runs of `retwatch trace --json` on the Go tracee's spin
#    scenario (main.spin2us, spin5us, spin20us, spin1ms busy-wait that long;
#    the tracee times each itself untraced before retwatch attaches). Per run
#    and function: the untraced median, retwatch's raw and compensated p50
#    and the compensated p50's error; per run the calibrated bias, the lowest
#    and highest round's median, and the cost of a traced call. Then, over
#    the runs, the median and range of the errors, and of the bias.
# 2. Guard: RUNS runs of the hot scenario (main.hotAdd in a tight loop next
#    to main.sleepFor(10ms)) with --interval INTERVAL --max-overhead 2%: the
#    time from retwatch's "tracing" line to its "detached" line, and the rate
#    and cost it saw.
#
# Usage: bash bench/bias_bench.sh    (as root, after make and the fixtures)
# Env:   RUNS       runs of each part (default 5)
#        INTERVAL   the guard's interval in seconds (default 1)
#        RETWATCH   the retwatch binary (default build/retwatch)
#        RETWATCH_FIXTURES  the fixtures (default build/fixtures)
#        PARTS      which parts (default 12)
set -euo pipefail
cd "$(dirname "$0")/.."

export RUNS=${RUNS:-5} INTERVAL=${INTERVAL:-1} PARTS=${PARTS:-12}
export RETWATCH=${RETWATCH:-build/retwatch}
export RETWATCH_FIXTURES=${RETWATCH_FIXTURES:-build/fixtures}
if [[ ! -x $RETWATCH ]]; then
	echo "bias_bench: $RETWATCH not found (run make first)" >&2
	exit 1
fi
exec python3 - <<'PY'
import json, os, statistics, subprocess, sys, time

RETWATCH = os.environ["RETWATCH"]
TRACEE = os.path.join(os.environ["RETWATCH_FIXTURES"], "tracee", "native", "default", "tracee")
RUNS, INTERVAL, PARTS = int(os.environ["RUNS"]), os.environ["INTERVAL"], os.environ["PARTS"]
SPIN = ["main.spin2us", "main.spin5us", "main.spin20us", "main.spin1ms"]


def run(scenario, patterns, options):
    """(tracee report, retwatch doc, [(seconds since start, stderr line)])."""
    t = subprocess.Popen([TRACEE, scenario], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = t.stdout.readline().split()[1]
    start = time.monotonic()
    r = subprocess.Popen([RETWATCH, "trace", "--json", "--pid", pid, *options, *patterns],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in r.stderr:
        lines.append((time.monotonic() - start, line.rstrip("\n")))
        if line.startswith("retwatch: tracing "):
            break
    else:
        sys.exit(f"bias_bench: retwatch did not attach: {lines}")
    t.stdin.write("go\n")
    t.stdin.flush()
    import threading

    def drain():
        for line in r.stderr:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
    th = threading.Thread(target=drain)
    th.start()
    report = json.loads(t.stdout.readline())
    t.wait()
    doc = json.loads(r.stdout.read())
    r.wait()
    th.join()
    return report, doc, lines


if "1" in PARTS:
    print(f"== bias: {RUNS} runs of the spin scenario ({RETWATCH})")
    errs = {f: [] for f in SPIN}
    bias, spread, cost = [], [], []
    for i in range(RUNS):
        rep, doc, _ = run("spin", SPIN, [])
        funcs = {f["name"]: f for f in doc["functions"]}
        bias.append(doc["probe_bias_ns"])
        spread.append(doc["probe_bias_hi_ns"] - doc["probe_bias_lo_ns"])
        cost.append(doc["call_cost_ns"])
        print(f"run {i + 1}: bias {doc['probe_bias_ns']} ns (rounds {doc['probe_bias_lo_ns']}"
              f"-{doc['probe_bias_hi_ns']} ns), traced call {doc['call_cost_ns']} ns")
        for f in SPIN:
            u, g = rep["untraced_median_ns"][f], funcs[f]
            e = 100.0 * (g["p50_ns"] - u) / u
            errs[f].append(e)
            print(f"  {f:15s} untraced {u:>9} ns  raw p50 {g['raw_p50_ns']:>9} ns"
                  f" ({100.0 * (g['raw_p50_ns'] - u) / u:+7.2f}%)  p50 {g['p50_ns']:>9} ns ({e:+6.2f}%)")
    print("over the runs:")
    print(f"  bias median {statistics.median(bias):.0f} ns, range {min(bias)}-{max(bias)} ns;"
          f" round spread within a run median {statistics.median(spread):.0f} ns;"
          f" traced call median {statistics.median(cost):.0f} ns")
    for f in SPIN:
        e = errs[f]
        print(f"  {f:15s} compensated p50 error: median {statistics.median(e):+.2f}%,"
              f" range {min(e):+.2f}% .. {max(e):+.2f}%, worst |error| {max(map(abs, e)):.2f}%")

if "2" in PARTS:
    print(f"== guard: {RUNS} runs of the hot scenario, --interval {INTERVAL} --max-overhead 2%")
    took = []
    for i in range(RUNS):
        rep, doc, lines = run("hot", ["main.hotAdd", "main.sleepFor"],
                              ["--interval", INTERVAL, "--max-overhead", "2%"])
        attached = next(t for t, l in lines if l.startswith("retwatch: tracing "))
        det = [(t, l) for t, l in lines if "main.hotAdd detached" in l]
        funcs = {f["name"]: f for f in doc["functions"]}
        if not det:
            print(f"run {i + 1}: not detached; {funcs['main.hotAdd']['calls']} calls")
            continue
        took.append(det[0][0] - attached)
        print(f"run {i + 1}: detached {took[-1]:.2f} s after attaching: {det[0][1].split(': ', 1)[1][:90]}")
        print(f"  main.hotAdd {funcs['main.hotAdd']['calls']} calls counted of {rep['calls']['main.hotAdd']};"
              f" main.sleepFor {funcs['main.sleepFor']['calls']} of {rep['calls']['main.sleepFor']},"
              f" orphans {funcs['main.sleepFor']['orphans']}")
    if took:
        print(f"  reaction: median {statistics.median(took):.2f} s, range {min(took):.2f}-{max(took):.2f} s"
              f" ({float(INTERVAL) * 2:.1f} s = two intervals)")
PY
