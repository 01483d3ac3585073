// SPDX-License-Identifier: MIT
/*
 * retwatch-agent --self-check: proves, without a cluster, that this kernel
 * and these privileges let the agent work: it loads the BPF programs,
 * probes a function of its own binary at its entry and RETs, calls it and
 * checks that every call was measured.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/latency.h"
#include "selfcheck.h"
#include "trace/tracer.h"

#define CALLS 1000

/* What the self-check probes: kept out of line and alive by `used`. */
__attribute__((noinline, used)) int retwatch_selfcheck_target(int x)
{
	/* the compiler may not fold the calls away */
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static int fail(const char *what, const char *why)
{
	printf("self-check: FAILED: %s: %s\n", what, why);
	return 1;
}

int selfcheck__run(enum tracer_attach_mode mode)
{
	static const char *const patterns[] = { "retwatch_selfcheck_target" };
	struct tracer_opts opts = { .attach_mode = mode };
	struct rw_error err = { "" };
	struct tracer_target *tt = NULL;
	struct tracer *t = NULL;
	struct latency l;
	char exe[64], p50[LATENCY_FMT_LEN];
	int sum = 0, ret = 1;

	if (access("/sys/kernel/btf/vmlinux", R_OK))
		return fail("kernel BTF",
			    "/sys/kernel/btf/vmlinux is not readable (a kernel built with "
			    "CONFIG_DEBUG_INFO_BTF=y and sysfs mounted are needed)");
	printf("self-check: ok: kernel BTF at /sys/kernel/btf/vmlinux\n");
	t = tracer__new(&opts, &err);
	if (!t)
		return fail("loading the BPF programs", err.msg);
	printf("self-check: ok: BPF programs loaded, uprobes attach as %s\n",
	       tracer__attach_mode(t));
	snprintf(exe, sizeof(exe), "/proc/%d/exe", getpid());
	tt = tracer__add(t, getpid(), exe, patterns, 1, 0, &err);
	if (!tt) {
		ret = fail("attaching uprobes to retwatch_selfcheck_target", err.msg);
		goto out;
	}
	printf("self-check: ok: uprobes on retwatch_selfcheck_target, at its entry and %zu "
	       "return sites\n",
	       tracer_target__func(tt, 0)->info->nreturns);
	for (int i = 0; i < CALLS; i++)
		sum += retwatch_selfcheck_target(i);
	if (tracer_target__read(t, tt, 0, &l)) {
		ret = fail("reading the latency histogram", strerror(errno));
		goto out;
	}
	if (latency__count(&l) != CALLS) {
		char why[256];

		/* the kernel side knows processes by their pid in the host's namespace */
		snprintf(why, sizeof(why), "%d calls made, %ju measured%s", CALLS,
			 (uintmax_t)latency__count(&l),
			 latency__count(&l) ? ""
					    : " (in a PID namespace of its own, the agent "
					      "cannot trace: it needs the host's, hostPID: true)");
		ret = fail("measuring calls", why);
		goto out;
	}
	printf("self-check: ok: %d calls made, %d measured, p50 %s\n", CALLS, CALLS,
	       latency__format_ns(latency__percentile(&l, 0.5), p50, sizeof(p50)));
	printf("self-check: ok\n");
	ret = sum ? 0 : 1; /* sum keeps the calls from being optimized out */
out:
	tracer__remove(t, tt);
	tracer__free(t);
	return ret;
}
