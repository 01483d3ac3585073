// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/http/metrics.h"
#include "agent/http/metricspage.h"

/* The per-function families, each written to its own stream: a family's
 * samples must follow each other. */
struct render {
	FILE *hist, *calls, *orphans, *dropped_slow;
	size_t nseries, dropped, max_series;
	const struct fprobe *p;
};

static void render_series(const char *pod, const char *container, void *ctx)
{
	struct render *r = ctx;
	const struct fprobe *p = r->p;

	for (size_t k = 0; k < results__nrows(p->results); k++) {
		const struct results_row *row = results__row(p->results, k);
		const char *kv[] = { "namespace", p->ns,       "probe",	  p->name,    "pod",
				     pod,	  "container", container, "function", row->name };
		char labels[4096];
		struct latency l;

		if ((r->max_series && r->nseries >= r->max_series) ||
		    prom_labels(labels, sizeof(labels), kv, 5)) {
			r->dropped++;
			continue;
		}
		r->nseries++;
		results__read(p->results, k, pod, container, &l);
		if (row->mode != FUNC_MODE_ENTRY_ONLY)
			prom_histogram(r->hist, "retwatch_function_duration_seconds", labels, &l);
		prom_sample(r->calls, "retwatch_function_calls_total", labels, l.calls);
		prom_sample(r->orphans, "retwatch_function_orphans_total", labels, l.orphans);
		prom_sample(r->dropped_slow, "retwatch_function_slow_calls_dropped_total", labels,
			    l.slow_dropped);
	}
}

static void append_stream(FILE *f, char *buf, size_t len)
{
	if (buf)
		fwrite(buf, 1, len, f);
	free(buf);
}

static void render_return_sites(FILE *f, const struct fprobe *probes)
{
	prom_family(f, "retwatch_function_return_sites", "gauge",
		    "RET instructions probed in each function (0: entry-only).");
	for (const struct fprobe *p = probes; p; p = p->next) {
		for (size_t k = 0; k < results__nrows(p->results); k++) {
			const struct results_row *row = results__row(p->results, k);
			const char *kv[] = { "namespace", p->ns,      "probe",
					     p->name,	  "function", row->name };
			char fl[4096];

			if (!prom_labels(fl, sizeof(fl), kv, 3))
				prom_sample(f, "retwatch_function_return_sites", fl, row->nreturns);
		}
	}
}

/* Slow calls the kernel sent that the agent did not log: over a probe's log budget. */
static void render_unlogged(FILE *f, const struct fprobe *probes)
{
	prom_family(f, "retwatch_slow_calls_unlogged_total", "counter",
		    "Slow calls received but not logged: over the probe's --slow-calls-per-second "
		    "log lines a second.");
	for (const struct fprobe *p = probes; p; p = p->next) {
		const char *kv[] = { "namespace", p->ns, "probe", p->name };
		char pl[1024];

		if (!prom_labels(pl, sizeof(pl), kv, 2))
			prom_sample(f, "retwatch_slow_calls_unlogged_total", pl, p->slow_unlogged);
	}
}

/* A gauge per probe and function of the overhead guard's figures: the
 * overhead, or the processes the function is detached from. */
static void overhead_family(FILE *f, const struct fprobe *probes, const char *name,
			    const char *help, bool detached)
{
	prom_family(f, name, "gauge", help);
	for (const struct fprobe *p = probes; p; p = p->next) {
		for (size_t k = 0; k < results__nrows(p->results); k++) {
			const char *kv[] = { "namespace", p->ns,
					     "probe",	  p->name,
					     "function",  results__row(p->results, k)->name };
			struct results_overhead ov;
			char fl[4096];

			results__overhead(p->results, k, &ov);
			if (prom_labels(fl, sizeof(fl), kv, 3))
				continue;
			if (detached)
				prom_sample(f, name, fl, ov.ndetached);
			else
				prom_sample_real(f, name, fl, ov.overhead);
		}
	}
}

/* The probes' calibrated bias and cost, and the overhead guard per function. */
static void render_guard(FILE *f, const struct metrics_page *mp, const struct fprobe *probes)
{
	prom_family(f, "retwatch_probe_calibrations_total", "counter",
		    "Calibrations of the probes' bias and cost completed: at start, then every "
		    "--calibrate-every.");
	prom_sample(f, "retwatch_probe_calibrations_total", NULL, mp->calibrations);
	prom_family(f, "retwatch_probe_bias_seconds", "gauge",
		    "Part of the entry and RET traps inside a measured duration, as last "
		    "calibrated; taken out of the durations in reports (not of this histogram).");
	prom_sample_seconds(f, "retwatch_probe_bias_seconds", NULL, mp->cal ? mp->cal->bias_ns : 0);
	prom_family(f, "retwatch_probe_bias_by_entry_seconds", "gauge",
		    "The same for a function entered at each kind of instruction: the kernel "
		    "emulates a PUSH, a NOP, a relative jump or a direct call in the trap and "
		    "single-steps the others "
		    "(stepped: retwatch_probe_bias_seconds).");
	for (int k = 0; k < PROBE_ENTRY__N; k++) {
		char label[32];

		snprintf(label, sizeof(label), "entry=\"%s\"", probe_entry__str(k));
		prom_sample_seconds(f, "retwatch_probe_bias_by_entry_seconds", label,
				    mp->cal ? mp->cal->entry_bias_ns[k] : 0);
	}
	prom_family(f, "retwatch_probe_call_cost_seconds", "gauge",
		    "What one traced call costs its thread (both traps and the BPF programs), "
		    "as last calibrated: the overhead guard's unit.");
	prom_sample_seconds(f, "retwatch_probe_call_cost_seconds", NULL,
			    mp->cal ? mp->cal->call_cost_ns : 0);
	prom_family(f, "retwatch_probe_entry_only_call_cost_seconds", "gauge",
		    "The same for a function probed at its entry alone (no RET probe: one trap).");
	prom_sample_seconds(f, "retwatch_probe_entry_only_call_cost_seconds", NULL,
			    mp->cal ? mp->cal->entry_only_cost_ns : 0);
	overhead_family(f, probes, "retwatch_function_overhead",
			"Share of one CPU the probes of each function cost its costliest traced "
			"process (calls per second x the cost of a traced call), last interval.",
			false);
	overhead_family(f, probes, "retwatch_function_detached_processes",
			"Processes a function is detached from: its probes cost more than "
			"spec.maxOverhead for two intervals in a row.",
			true);
}

static void render_errors(FILE *f, const struct agent_counters *c)
{
	char labels[128];

	prom_family(f, "retwatch_errors_total", "counter",
		    "Errors by type: failed attaches, API requests and status patches, and "
		    "calls the kernel side could not measure.");
	prom_sample(f, "retwatch_errors_total", "type=\"attach\"", c->attach_failures);
	prom_sample(f, "retwatch_errors_total", "type=\"api_request\"",
		    c->probes.failures + c->pods.failures);
	prom_sample(f, "retwatch_errors_total", "type=\"status_patch\"", c->pub.failures);
	for (size_t i = 0; i < c->tracer.nunmeasured; i++) {
		snprintf(labels, sizeof(labels), "type=\"%s\"", c->tracer.unmeasured[i].name);
		prom_sample(f, "retwatch_errors_total", labels, c->tracer.unmeasured[i].n);
	}
}

static void gauge(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	prom_family(f, name, type, help);
	prom_sample(f, name, NULL, v);
}

/* The summary writer's work (zero on an agent that never held the Lease). */
static void render_summaries(FILE *f, const struct summarizer_counters *s)
{
	gauge(f, "retwatch_summaries_total", "counter",
	      "Probe summaries this agent made from the probes' FunctionProbeReports.",
	      s->summaries);
	gauge(f, "retwatch_summaries_written_total", "counter",
	      "Summaries that changed and were written to the FunctionProbe's status.", s->writes);
	gauge(f, "retwatch_summaries_failed_total", "counter",
	      "Summaries not written because listing the probe's reports failed.", s->failures);
	gauge(f, "retwatch_report_pages_listed_total", "counter",
	      "Pages of FunctionProbeReports listed for summaries.", s->pages);
	gauge(f, "retwatch_reports_read_total", "counter",
	      "FunctionProbeReports read for summaries.", s->reports);
}

static void render_counters(FILE *f, const struct agent_counters *c)
{
	render_errors(f, c);
	gauge(f, "retwatch_inflight_calls", "gauge",
	      "Calls entered and not yet returned, as the kernel holds them.",
	      c->inflight > 0 ? (uint64_t)c->inflight : 0);
	prom_family(f, "retwatch_orphans_purged_total", "counter",
		    "In-flight calls dropped as never to return: by the kernel side when a newer "
		    "call proved them dead, by the sweeper when they grew old or their process "
		    "exited.");
	prom_sample(f, "retwatch_orphans_purged_total", "by=\"kernel\"", c->tracer.purged);
	prom_sample(f, "retwatch_orphans_purged_total", "by=\"sweeper\"", c->tracer.swept);
	gauge(f, "retwatch_lost_events_total", "counter",
	      "Slow-call events lost because the ring buffer was full.", c->tracer.lost_events);
	gauge(f, "retwatch_slow_calls_limited_total", "counter",
	      "Slow calls the kernel did not send: over --slow-calls-per-second for their "
	      "function and process.",
	      c->tracer.slow_limited);
	gauge(f, "retwatch_namespace_share_lost_calls_total", "counter",
	      "Calls not measured: their namespace's goroutines and threads with calls in "
	      "flight were at its --max-inflight-per-namespace.",
	      c->tracer.share_lost);
	gauge(f, "retwatch_namespace_share_slow_calls_limited_total", "counter",
	      "Slow calls the kernel did not send: over their namespace's "
	      "--slow-calls-per-namespace.",
	      c->tracer.share_limited);
	gauge(f, "retwatch_probes", "gauge", "FunctionProbes this agent knows of.", c->nprobes);
	gauge(f, "retwatch_probes_limited", "gauge",
	      "FunctionProbes with pods on this node not traced: over --max-probes.", c->nlimited);
	gauge(f, "retwatch_traced_processes", "gauge", "Processes traced, counted once per probe.",
	      c->ntraces);
	gauge(f, "retwatch_attach_pending", "gauge",
	      "Processes found and not attached yet, counted once per probe: waiting for a turn "
	      "of the agent's loop with time to attach them, or for their executable's reading.",
	      c->attach_pending);
	gauge(f, "retwatch_detach_pending", "gauge",
	      "Processes to detach (their pod, probe or spec is gone) left attached for a later "
	      "turn of the agent's loop, counted once per probe.",
	      c->detach_pending);
	gauge(f, "retwatch_namespace_share_refusals_total", "counter",
	      "Attaches refused: the process's functions would pass its namespace's "
	      "--max-functions-per-namespace.",
	      c->ns_refused);
	gauge(f, "retwatch_analyses_total", "counter",
	      "Executables read off the main loop (symbols, tables, the functions probed).",
	      c->analyzer.analyses);
	gauge(f, "retwatch_analysis_timeouts_total", "counter",
	      "Executables whose reading took longer than --analysis-timeout: not traced.",
	      c->analyzer.timeouts);
	gauge(f, "retwatch_analysis_cache_bytes", "gauge",
	      "Memory the executables' analyses hold (their index, symbols and debug sections): "
	      "at most --analysis-max-bytes but for one being read.",
	      c->analyses.bytes);
	gauge(f, "retwatch_analysis_cache_unused_bytes", "gauge",
	      "Of it, analyses no traced process uses, kept for the next: at most "
	      "--analysis-cache-bytes.",
	      c->analyses.unused_bytes);
	gauge(f, "retwatch_analysis_cache_evictions_total", "counter",
	      "Analyses no process used dropped for the cache's bounds (read again when needed).",
	      c->analyses.evicted);
	gauge(f, "retwatch_analysis_refusals_total", "counter",
	      "Files not analysed, or their analysis not used: it would take the analyses "
	      "in use over --analysis-max-bytes (the process is not traced, with an error).",
	      c->analyses.refused);
	gauge(f, "retwatch_api_requests_total", "counter", "Requests to the Kubernetes API server.",
	      c->api_requests);
	gauge(f, "retwatch_status_patches_total", "counter", "FunctionProbe status patches sent.",
	      c->pub.patches);
	gauge(f, "retwatch_lease_holder", "gauge",
	      "1 while this agent holds the Lease that makes it write every probe's summary.",
	      c->leader);
	render_summaries(f, &c->sum);
	gauge(f, "retwatch_bpf_links", "gauge",
	      "Descriptors of the BPF links this agent holds open: its uprobes' (and perf "
	      "events), and the fork program's while it traces a process.",
	      c->bpf_links);
	gauge(f, "retwatch_open_files", "gauge", "Descriptors this agent holds open.",
	      c->files.open);
	gauge(f, "retwatch_open_files_limit", "gauge",
	      "This agent's limit of open descriptors (RLIMIT_NOFILE, soft).", c->files.soft);
}

/* The per-function families of every probe, into four streams. */
static int render_functions(struct render *r, const struct fprobe *probes, char **buf, size_t *len)
{
	int err = 0;

	r->hist = open_memstream(&buf[0], &len[0]);
	r->calls = open_memstream(&buf[1], &len[1]);
	r->orphans = open_memstream(&buf[2], &len[2]);
	r->dropped_slow = open_memstream(&buf[3], &len[3]);
	if (!r->hist || !r->calls || !r->orphans || !r->dropped_slow)
		err = -1;
	for (r->p = probes; !err && r->p; r->p = r->p->next)
		results__foreach_group(r->p->results, render_series, r);
	if (r->hist)
		fclose(r->hist);
	if (r->calls)
		fclose(r->calls);
	if (r->orphans)
		fclose(r->orphans);
	if (r->dropped_slow)
		fclose(r->dropped_slow);
	return err;
}

char *metrics_page__render(struct metrics_page *mp, const struct fprobe *probes,
			   const struct agent_counters *c, size_t *ret_len)
{
	struct render r = { .max_series = mp->max_series };
	char *buf[4] = { 0 }, *out = NULL, labels[256];
	size_t len[4] = { 0 }, out_len = 0;
	FILE *f = NULL;

	if (render_functions(&r, probes, buf, len) || !(f = open_memstream(&out, &out_len)))
		goto out;
	prom_family(f, "retwatch_build_info", "gauge",
		    "The agent's version and how it attaches uprobes; always 1.");
	snprintf(labels, sizeof(labels), "version=\"%s\",attach_mode=\"%s\"", mp->version,
		 mp->attach_mode);
	prom_sample(f, "retwatch_build_info", labels, 1);
	prom_family(f, "retwatch_function_duration_seconds", "histogram",
		    "Duration of the calls of each probed function, per pod and container.");
	append_stream(f, buf[0], len[0]);
	prom_family(f, "retwatch_function_calls_total", "counter",
		    "Calls of each probed function (entries, for an entry-only function).");
	append_stream(f, buf[1], len[1]);
	prom_family(f, "retwatch_function_orphans_total", "counter",
		    "Calls of each probed function that never returned.");
	append_stream(f, buf[2], len[2]);
	prom_family(f, "retwatch_function_slow_calls_dropped_total", "counter",
		    "Slow calls of each probed function not logged: over --slow-calls-per-second "
		    "in the kernel, or the ring buffer was full.");
	append_stream(f, buf[3], len[3]);
	buf[0] = buf[1] = buf[2] = buf[3] = NULL;
	render_return_sites(f, probes);
	render_unlogged(f, probes);
	render_guard(f, mp, probes);
	render_counters(f, c);
	gauge(f, "retwatch_metrics_series", "gauge",
	      "Per-function series exported (each of the retwatch_function_* families).",
	      r.nseries);
	gauge(f, "retwatch_metrics_series_dropped", "gauge",
	      "Per-function series left out of this scrape by --metrics-max-series.", r.dropped);
	mp->nseries = r.nseries;
	mp->dropped = r.dropped;
out:
	for (int i = 0; i < 4; i++)
		free(buf[i]);
	if (!f || fclose(f)) {
		free(out);
		return NULL;
	}
	*ret_len = out_len;
	return out;
}
