// SPDX-License-Identifier: MIT
/*
 * The agent's tracer, or none where the kernel lacks what the BPF programs
 * need (an older node): then the agent stays up, serving /healthz and
 * /metrics and writing every probe's report, each process its probes select
 * on this node failing with what the kernel lacks, rather than exiting into
 * a crash loop that says nothing where users look.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "trace/tracer.h"
#include "agent/agent_impl.h"

int agent_kernel__tracer(struct agent *a, struct tracer_opts *topts, struct rw_error *err)
{
	struct rw_error lacks = { "" };

	a->tracer = a->env.tracer = tracer__new(topts, err);
	if (!a->tracer && tracer__kernel_lacks(&lacks)) {
		a->no_tracer = strdup(lacks.msg);
		if (!a->no_tracer)
			return rw_error_set(err, ENOMEM, "out of memory");
		a->env.no_tracer = a->no_tracer;
		log_error(
			"%s: this node traces nothing; the agent stays up to say so in the reports "
			"of the probes that select its pods",
			lacks.msg);
		return 0;
	}
	if (!a->tracer) {
		/* its fork program may be what this kernel refuses: again without */
		log_warn("%s: trying again without following processes from their fork (a "
			 "short-lived worker, such as a PostgreSQL backend, may then be missed)",
			 err->msg);
		topts->follow = false;
		a->tracer = a->env.tracer = tracer__new(topts, err);
	}
	return a->tracer ? 0 : -1;
}
