/* SPDX-License-Identifier: MIT */
/*
 * A FunctionProbe as this node's agent tracks it: the spec of its current
 * generation, its lifetime, the processes it traces here and their results
 * table, this turn's errors, and when its status was last written.
 */
#ifndef RETWATCH_FPROBE_H
#define RETWATCH_FPROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "errlist.h"
#include "kobj.h"
#include "nodeprocs.h"
#include "probe.h"
#include "publisher.h"
#include "results.h"
#include "traceset.h"

struct fprobe {
	char *uid, *ns, *name;
	int64_t generation; /* of the spec below */
	time_t created;
	struct probe_spec spec;
	bool valid;   /* the spec parsed; else spec_err says why */
	bool expired; /* its lifetime ended: detached, results kept */
	bool limited; /* over the node's --max-probes: not traced */
	bool seen;    /* in the API server's list this turn */
	char spec_err[512];
	struct traceset_env *env;
	struct results *results;
	struct traceset *traces;
	struct errlist errors;
	/* status writes */
	char *status_path;
	uint64_t next_write, next_summary;
	char *last_entry, *last_summary;
	bool wrote;
	struct fprobe *next;
};

/* A probe first seen in obj (a FunctionProbe). NULL on ENOMEM or without uid. */
struct fprobe *fprobe__new(const cJSON *obj, struct traceset_env *env);
/* Detaches (why goes to the log); NULL is fine. */
void fprobe__free(struct fprobe *p, const char *why);
/* Takes obj's spec when its generation changed (node: this node, whose results
 * written before a fresh probe carries on from), and ends the lifetime. */
void fprobe__sync(struct fprobe *p, const cJSON *obj, const char *node, bool fresh);
/* Whether p wants any of the pods (valid, not expired, selected). */
bool fprobe__selects_any(const struct fprobe *p, const struct pod *pods, size_t npods);
/* Places p on the pods it selects: attaches new processes, retires gone ones. */
void fprobe__place(struct fprobe *p, const struct pod *pods, size_t npods, struct nodeprocs *np,
		   size_t max_probes);
/* Marks the probes over max (0: none) among those with pods here, newest first.
 * Returns how many are limited. */
size_t fprobes__limit(struct fprobe *list, const struct pod *pods, size_t npods, size_t max);

/* Writes this node's entry when its interval passed and it changed (now: clock__mono_ns()). */
void fprobe__write_node(struct fprobe *p, struct publisher *pub, const char *node,
			const char *manager, uint64_t now);
/* Writes the summary and conditions from obj (the probe as the server has it). */
void fprobe__write_summary(struct fprobe *p, struct publisher *pub, const cJSON *obj, uint64_t now);
/* A last report: detached, with every call counted until now. */
void fprobe__final_report(struct fprobe *p, struct publisher *pub, const char *node,
			  const char *manager);
/* Forgets what the publisher keeps for p (the probe was deleted). */
void fprobe__unpublish(struct fprobe *p, struct publisher *pub);

#endif
