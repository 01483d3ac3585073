"""The probes' bias: `retwatch trace` calibrates, at start, how much of a
measured duration is the probes' own (the return from the entry trap and
the way into the RET trap), reports it and takes it out of the durations it
shows (`--raw` leaves it in).

[REF] the Go tracee's spin scenario: main.spin2us, spin5us, spin20us and
spin1ms busy-wait that long; the tracee times each of them itself before
retwatch attaches (its own median, untraced), then calls them again traced.
Goal: the compensated p50 within 10% of the untraced median at 20 us and
within 5% at 1 ms. 2 us and 5 us are measured by bench/bias_bench.sh.
"""

import json
import subprocess
import time

import pytest

import tracing
from tracing import go_tracee

NATIVE = go_tracee("native", "default")
SPIN = ("main.spin2us", "main.spin5us", "main.spin20us", "main.spin1ms")
GOALS = {"main.spin20us": 0.10, "main.spin1ms": 0.05}


def spin_run(options=()):
    return tracing.once(("bias", options),
                        lambda: tracing.run_ok([(NATIVE, "spin")], SPIN, options=options))


def test_bias_is_reported():
    r = spin_run()
    doc = r.doc
    tracing.assert_document(r)
    assert doc["raw"] is False, doc
    assert 0 < doc["probe_bias_lo_ns"] <= doc["probe_bias_ns"] <= doc["probe_bias_hi_ns"], doc
    # a traced call costs at least the part of its traps inside its duration
    assert doc["call_cost_ns"] >= doc["probe_bias_ns"], doc
    # probed at its entry alone, a call pays one trap and one program of the two
    assert 0 < doc["entry_only_call_cost_ns"] < doc["call_cost_ns"], doc
    assert "retwatch: probe bias " in r.retwatch.stderr, r.describe()


def test_durations_shown_less_the_bias():
    r = spin_run()
    for name in SPIN:
        f = r.function(name)
        # each function's is the bias of the kind of instruction at its entry
        bias = r.doc["probe_bias_by_entry"][f["entry"]]
        assert f["probe_bias_ns"] == bias, (f, r.doc["probe_bias_by_entry"])
        assert f["p50_ns"] == max(f["raw_p50_ns"] - bias, 0), (f, bias)


# A C program whose two 20 us functions differ only in their first
# instruction: a PUSH, which the kernel emulates in the entry trap, and a
# SUB, which it single-steps out of line (about 3 us more inside the
# duration, here). It times each untraced, then, once told, calls them
# traced.
ENTRIES_C = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CALLS 1500
#define SPIN_NS 20000

static uint64_t now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1000000000ull + t.tv_nsec;
}

__attribute__((noinline, used)) void spin_body(uint64_t ns)
{
        uint64_t end = now() + ns;

        while (now() < end)
                ;
}

void spin_push(uint64_t ns);
void spin_stepped(uint64_t ns);
/* spin_stepped's first instruction writes its return address's slot (the
 * same value): its entry probe stays there, stepped */
__asm__(".text\n.globl spin_push\n.type spin_push,@function\nspin_push:\n"
        "push %rbp\nmov %rsp,%rbp\ncall spin_body\npop %rbp\nret\n.size spin_push,.-spin_push\n"
        ".globl spin_stepped\n.type spin_stepped,@function\nspin_stepped:\n"
        "addq $0,(%rsp)\nsub $8,%rsp\ncall spin_body\nadd $8,%rsp\nret\n"
        ".size spin_stepped,.-spin_stepped\n");

static int cmp(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return (x > y) - (x < y);
}

static uint64_t median(void (*fn)(uint64_t))
{
        static uint64_t d[CALLS];

        for (int i = 0; i < CALLS; i++) {
                uint64_t t0 = now();

                fn(SPIN_NS);
                d[i] = now() - t0;
        }
        qsort(d, CALLS, sizeof(d[0]), cmp);
        return d[CALLS / 2];
}

int main(int argc, char **argv)
{
        printf("{\"spin_push\": %llu, \"spin_stepped\": %llu}\n",
               (unsigned long long)median(spin_push), (unsigned long long)median(spin_stepped));
        fflush(stdout);
        while (access(argv[1], F_OK))
                usleep(10000);
        for (int i = 0; i < CALLS; i++) {
                spin_push(SPIN_NS);
                spin_stepped(SPIN_NS);
        }
        fclose(fopen(argv[2], "w"));
        pause();
        return argc;
}
"""


def test_compensated_p50_by_entry_kind(tmp_path):
    """Each function less its own entry's bias: both at most 10% under their
    untraced medians (one bias for all took 3 us too much from the PUSH
    one: 16% under), and at most 30% over: a stepped entry's traps cost
    more under load than the bias calibrated at the start (22.6 us, and
    24.8 us, for a 20.1 us body in the whole suite's CI runs), while a
    duration with no bias taken out is 45% over or more (a 9 us bias)."""
    src, exe = tmp_path / "entries.c", tmp_path / "entries"
    src.write_text(ENTRIES_C)
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src)], check=True, capture_output=True)
    go, done = tmp_path / "go", tmp_path / "done"
    proc = subprocess.Popen([str(exe), str(go), str(done)], stdout=subprocess.PIPE, text=True)
    try:
        untraced = json.loads(proc.stdout.readline())

        def workload():
            go.write_text("go\n")
            deadline = time.monotonic() + 30
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert done.exists(), "the traced calls did not end"

        run, fns = tracing.trace_during([proc.pid], ["spin_push", "spin_stepped"], workload,
                                        options=("--max-overhead", "0"))
    finally:
        proc.kill()
        proc.wait()
    assert fns["spin_push"]["entry"] == "push" and fns["spin_stepped"]["entry"] == "stepped", fns
    for name, f in fns.items():
        assert f["calls"] == 1500, (name, f)
        assert 0.90 * untraced[name] <= f["p50_ns"] <= 1.30 * untraced[name], (
            f"{name}: p50 {f['p50_ns']} ns (raw {f['raw_p50_ns']} ns, bias "
            f"{f['probe_bias_ns']} ns) against {untraced[name]} ns untraced\n{run.describe()}")


@pytest.mark.parametrize("name", sorted(GOALS))
def test_compensated_p50_near_untraced_median(name):
    r = spin_run()
    untraced = r.report["untraced_median_ns"][name]
    f = r.function(name)
    assert f["calls"] == r.report["calls"][name], r.describe()
    assert tracing.within(f["p50_ns"], untraced, GOALS[name]), (
        f"{name}: p50 {f['p50_ns']} ns (raw {f['raw_p50_ns']} ns, bias "
        f"{r.doc['probe_bias_ns']} ns) against {untraced} ns untraced\n{r.describe()}")


def test_raw_leaves_the_bias_in():
    r = spin_run(("--raw",))
    assert r.doc["raw"] is True and r.doc["probe_bias_ns"] > 0, r.doc
    for name in SPIN:
        f = r.function(name)
        assert f["p50_ns"] == f["raw_p50_ns"], f
    # as measured, the 20 us function reads no shorter than it runs
    # untraced: longer by about the bias (0.8 us), which is less than the
    # width of the histogram's buckets there (1,024 ns from 16,384 to
    # 32,768: 16 a power of two), so only the bucket of the untraced median
    # is asked for (one CI run read 21,006 ns against 20,649 untraced)
    f = r.function("main.spin20us")
    untraced = r.report["untraced_median_ns"]["main.spin20us"]
    width = 1 << (untraced.bit_length() - 1 - 4)
    assert f["p50_ns"] >= untraced - untraced % width, (f, untraced, f["probe_bias_ns"])
