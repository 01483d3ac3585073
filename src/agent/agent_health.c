// SPDX-License-Identifier: MIT
/*
 * What the agent says of itself: its counters, readiness and /metrics,
 * and the counters in its log.
 */
#include <stdio.h>
#include <string.h>

#include "agent/fprobe.h"
#include "kube/informer.h"
#include "agent/http/metrics.h"
#include "agent/publisher.h"
#include "agent/summarizer.h"
#include "base/log.h"
#include "base/openfiles.h"
#include "trace/uprobe.h"
#include "agent/agent_impl.h"

void agent_health__counters(struct agent *a, struct agent_counters *ret)
{
	memset(ret, 0, sizeof(*ret));
	informer__counters(a->probes_inf, &ret->probes);
	informer__counters(a->pods_inf, &ret->pods);
	publisher__counters(a->pub, &ret->pub);
	if (a->sum)
		summarizer__counters(a->sum, &ret->sum);
	if (a->tracer) {
		tracer__counters(a->tracer, &ret->tracer);
		ret->inflight = tracer__inflight(a->tracer);
	}
	ret->api_requests = kube__requests(a->k);
	ret->attach_failures = a->env.attach_failures;
	ret->nlimited = a->nlimited;
	ret->ns_refused = a->env.ns_refused;
	ret->attach_pending = a->env.attach_waiting + a->env.attach_reading;
	ret->detach_pending = a->env.detach_waiting;
	analyzer__counters(a->env.analyzer, &ret->analyzer);
	binary_cache__use(a->cache, &ret->analyses);
	ret->leader = publisher__leader(a->pub);
	ret->bpf_links = uprobe_links__open() + (a->tracer ? tracer__other_links(a->tracer) : 0);
	open_files__read(&ret->files);
	for (struct fprobe *p = a->probes; p; p = p->next) {
		ret->nprobes++;
		ret->ntraces += traceset__count(p->traces);
	}
}

/*
 * Ready: it has listed the probes and pods, and attached the processes it
 * found then (or tried as many attaches: pods that come meanwhile do not
 * hold it back). Attaching later changes nothing: liveness is the loop's.
 */
static bool ready(const struct agent *a, char *why_not, size_t len)
{
	why_not[0] = '\0'; /* ready: no reason (the caller prints it either way) */
	if (!informer__synced(a->probes_inf) || !informer__synced(a->pods_inf)) {
		snprintf(
			why_not, len,
			"waiting for the first list of FunctionProbes and pods from the API server");
		return false;
	}
	if (a->reconciled && !a->start_left)
		return true;
	if (!a->reconciled)
		snprintf(why_not, len, "placing the probes on this node's pods");
	else
		snprintf(why_not, len, "attaching %zu processes found at start", a->start_left);
	return false;
}

void agent_health__serve(struct agent *a)
{
	struct metrics_server *ms = a->o.metrics;
	struct agent_counters c;
	char why_not[128];
	size_t len = 0;
	bool is_ready;
	char *text;

	if (!ms)
		return;
	is_ready = ready(a, why_not, sizeof(why_not));
	/* said once each way: a /readyz answered 503 can be read against it */
	if (is_ready && !a->was_ready)
		log_info("ready: the probes are placed and the processes found at start attached");
	else if (!is_ready && a->was_ready)
		log_info("not ready: %s", why_not);
	a->was_ready = is_ready;
	metrics_server__beat(ms, is_ready, why_not);
	if (!metrics_server__wanted(ms))
		return;
	agent_health__counters(a, &c);
	text = metrics_page__render(&a->page, a->probes, &c, &len);
	if (text && a->page.dropped && !a->series_warned)
		log_warn("metrics: %zu series left out: more than %zu (raise --metrics-max-series)",
			 a->page.dropped, a->o.max_series);
	a->series_warned = text ? a->page.dropped > 0 : a->series_warned;
	metrics_server__publish(ms, text, len);
}

void agent__log_stats(struct agent *a)
{
	struct agent_counters c;
	cJSON *ev, *kernel;

	agent_health__counters(a, &c);
	ev = log_event(LOG_INFO, "counters");
	if (!ev)
		return;
	cJSON_AddStringToObject(ev, "event", "stats");
	cJSON_AddNumberToObject(ev, "api_requests", (double)c.api_requests);
	cJSON_AddNumberToObject(ev, "lists", (double)(c.probes.lists + c.pods.lists));
	cJSON_AddNumberToObject(ev, "list_pages", (double)(c.probes.pages + c.pods.pages));
	cJSON_AddNumberToObject(ev, "cache_copies", (double)(c.probes.copies + c.pods.copies));
	cJSON_AddNumberToObject(ev, "watches", (double)(c.probes.watches + c.pods.watches));
	cJSON_AddNumberToObject(ev, "watch_events", (double)(c.probes.events + c.pods.events));
	cJSON_AddNumberToObject(ev, "gone", (double)(c.probes.gone + c.pods.gone));
	cJSON_AddNumberToObject(ev, "request_failures",
				(double)(c.probes.failures + c.pods.failures));
	cJSON_AddNumberToObject(ev, "status_patches", (double)c.pub.patches);
	cJSON_AddNumberToObject(ev, "status_patch_failures", (double)c.pub.failures);
	cJSON_AddNumberToObject(ev, "lease_requests", (double)c.pub.lease_requests);
	cJSON_AddNumberToObject(ev, "probes", (double)c.nprobes);
	cJSON_AddNumberToObject(ev, "traced_processes", (double)c.ntraces);
	cJSON_AddBoolToObject(ev, "summary_writer", c.leader);
	cJSON_AddNumberToObject(ev, "analyses", (double)c.analyzer.analyses);
	cJSON_AddNumberToObject(ev, "analysis_timeouts", (double)c.analyzer.timeouts);
	cJSON_AddNumberToObject(ev, "analyses_abandoned_running", (double)c.analyzer.abandoned);
	cJSON_AddNumberToObject(ev, "bpf_links", (double)c.bpf_links);
	cJSON_AddNumberToObject(ev, "open_files", (double)c.files.open);
	cJSON_AddNumberToObject(ev, "open_files_limit", (double)c.files.soft);
	cJSON_AddNumberToObject(ev, "share_changes", (double)c.tracer.share_changes);
	/* the kernel programs' counters that are not 0: why a call was not counted */
	kernel = cJSON_AddObjectToObject(ev, "kernel");
	for (size_t i = 0; kernel && i < c.tracer.nall; i++)
		if (c.tracer.all[i].n)
			cJSON_AddNumberToObject(kernel, c.tracer.all[i].name,
						(double)c.tracer.all[i].n);
	log_emit(ev);
}
