// SPDX-License-Identifier: MIT
/*
 * Slow calls: each probe's slowest calls kept for its reports, and its
 * calls over its threshold logged with their symbolized stacks.
 */
#include <stdio.h>

#include "agent/fprobe.h"
#include "base/clock.h"
#include "base/latency.h"
#include "base/log.h"
#include "trace/callargs.h"
#include "trace/results.h"
#include "trace/symbolize.h"
#include "agent/agent_impl.h"

/*
 * The arguments' names and types, never their values: a log line goes to
 * whoever may read the agent's pod logs (the built-in view role) and to
 * every log pipeline, and stays there after the probe is gone. The values
 * are in the probe's status and its reports, which only those who may read
 * the probe see.
 */
static void add_argument_names(cJSON *log, const struct call_args *args)
{
	cJSON *arr = cJSON_AddArrayToObject(log, "arguments");

	for (size_t i = 0; arr && i < args->n; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", args->a[i].name ? args->a[i].name : "");
		cJSON_AddStringToObject(o, "type", args->a[i].type ? args->a[i].type : "");
		cJSON_AddItemToArray(arr, o);
	}
	cJSON_AddStringToObject(log, "arguments_values",
				"in the probe's status and its FunctionProbeReports "
				"(slowestCalls), never in the log");
}

static void log_slow_call(struct agent *a, const struct fprobe *p, const struct results_call *rc,
			  const struct tracer_event *ev)
{
	char dur[LATENCY_FMT_LEN], frame[512];
	uint64_t pcs[UNWIND_MAX_FRAMES];
	struct call_args args;
	cJSON *log, *stack;
	size_t n;

	latency__format_ns(ev->duration_ns, dur, sizeof(dur));
	log = log_event(LOG_INFO, "slow call of %s: %s", rc->function, dur);
	if (!log)
		return;
	cJSON_AddStringToObject(log, "event", "slow_call");
	cJSON_AddStringToObject(log, "namespace", p->ns);
	cJSON_AddStringToObject(log, "probe", p->name);
	cJSON_AddStringToObject(log, "pod", rc->pod);
	cJSON_AddStringToObject(log, "container", rc->container);
	cJSON_AddStringToObject(log, "function", rc->function);
	cJSON_AddStringToObject(log, "duration", dur);
	cJSON_AddNumberToObject(log, "duration_ns", (double)ev->duration_ns);
	cJSON_AddNumberToObject(log, "pid", ev->pid);
	cJSON_AddNumberToObject(log, "tid", ev->tid);
	if (ev->goid)
		cJSON_AddNumberToObject(log, "goroutine", (double)ev->goid);
	if (fprobe__captures(p) && !call_args__render(&ev->args, &args) && args.n) {
		add_argument_names(log, &args);
		if (args.note)
			cJSON_AddStringToObject(log, "arguments_note", args.note);
		call_args__clear(&args);
	}
	stack = cJSON_AddArrayToObject(log, "stack");
	n = symbolizer__event_stack(a->env.sym, ev, pcs, UNWIND_MAX_FRAMES);
	for (size_t k = 0; k < n; k++) {
		symbolizer__resolve(a->env.sym, ev->pid, pcs[k], k == 0, frame, sizeof(frame));
		cJSON_AddItemToArray(stack, cJSON_CreateString(frame));
	}
	log_emit(log);
}

/* Every probe of this process and function: the call among its slowest
 * kept, and logged where it passed the probe's threshold. */
void agent_slow__on_call(const struct tracer_event *ev, void *ctx)
{
	uint64_t now = clock__mono_ns();
	struct agent *a = ctx;
	struct results_call rc;

	for (struct fprobe *p = a->probes; p; p = p->next)
		if (p->valid)
			results__offer(p->results, ev, now);
	for (struct fprobe *p = a->probes; p; p = p->next)
		if (p->spec.threshold_ns && ev->duration_ns >= p->spec.threshold_ns &&
		    results__find_call(p->results, ev, &rc) &&
		    fprobe__may_log_slow_call(p, now, a->o.slow_calls_per_sec))
			log_slow_call(a, p, &rc, ev);
}
