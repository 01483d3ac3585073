/* SPDX-License-Identifier: MIT */
#ifndef RETWATCH_AGENT_SELFCHECK_H
#define RETWATCH_AGENT_SELFCHECK_H

#include "trace/tracer.h"

/* Probes a function of the agent's own binary and calls it; prints what it
 * found. 0 when every call was measured, 1 otherwise. */
int selfcheck__run(enum tracer_attach_mode mode);

#endif
