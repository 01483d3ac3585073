/* SPDX-License-Identifier: MIT */
/*
 * The summary writer's work, on a thread of its own: for each probe asked
 * for, lists the probe's reports page by page (only the summary writer
 * reads them; memory holds one page, whatever the node count), merges them
 * into the summary and conditions, and hands the status to the publisher
 * when it changed. A slow or absent API server never delays probing.
 */
#ifndef RETWATCH_SUMMARIZER_H
#define RETWATCH_SUMMARIZER_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "kube/kube.h"
#include "agent/publisher.h"
#include "report/summary.h"

struct summarizer;

struct summarizer_counters {
	uint64_t summaries; /* summaries made */
	uint64_t writes;    /* summaries that changed, handed to the publisher */
	uint64_t pages;	    /* report pages listed */
	uint64_t reports;   /* reports read from them */
	uint64_t failures;  /* lists that failed (no summary written) */
	uint64_t ignored;   /* reports not summed: their node is no node of the cluster */
};

/* writes_per_s: the reports of one probe take at most this many writes a
 * second across the cluster (0: no limit); nodes stretch their interval.
 * budget: the bytes of a probe's status (0: REPORTFIT_DEFAULT_BUDGET). */
struct summarizer *summarizer__start(struct kube *k, struct publisher *pub, double writes_per_s,
				     size_t budget);
/* Finishes the summary under way, then stops; NULL is fine. */
void summarizer__stop(struct summarizer *s);

/*
 * Asks for probe p's summary, from its status as the server has it (old)
 * and interval_ns, the spec's report interval. Replaces p's request still
 * waiting. Copies what it needs. -ENOMEM.
 */
int summarizer__request(struct summarizer *s, const struct status_probe *p,
			const struct status_state *st, const cJSON *old, uint64_t interval_ns);
/* Forgets probe uid (deleted). */
void summarizer__forget(struct summarizer *s, const char *uid);
void summarizer__counters(struct summarizer *s, struct summarizer_counters *ret);
/* Whether the last summary made for probe uid showed calls. */
bool summarizer__counted(struct summarizer *s, const char *uid);

#endif
