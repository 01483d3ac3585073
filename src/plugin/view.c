// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kobj.h"
#include "base/termsafe.h"
#include "base/latency.h"
#include "plugin/view.h"

/*
 * The widest a name's column grows in a table before its names are cut with
 * "…" (base/termsafe.h); -o wide prints them whole, the columns as wide as
 * their longest. A row's last column is cut only past a bound of its own.
 */
#define FUNCTION_MAX_WIDTH 48
#define PROBE_MAX_WIDTH 40
#define NAMESPACE_MAX_WIDTH 32
#define SLOWEST_MAX_WIDTH 32
#define REASON_MAX_WIDTH 16
#define POD_MAX_WIDTH 63
#define REVISION_MAX_WIDTH 80
#define PATTERNS_MAX_WIDTH 64
#define LAST_MAX_WIDTH 200

/* A string field, or "-" when it is missing or not a string. */
static const char *str_or(const cJSON *o, const char *name)
{
	const char *s = kobj_str(o, name);

	return s && *s ? s : "-";
}

/* A duration field in ns for sorting: 0 when missing or malformed. */
static uint64_t dur_ns(const cJSON *o, const char *name)
{
	const char *s = kobj_str(o, name);
	uint64_t ns = 0;

	if (!s || latency__parse_duration(s, &ns))
		return 0;
	return ns;
}

static const cJSON *array_of(const cJSON *o, const char *name)
{
	const cJSON *a = kobj_get(o, name);

	return cJSON_IsArray(a) ? a : NULL;
}

int view__condition(const cJSON *probe, const char *type, const char **ret_status,
		    const char **ret_reason, const char **ret_message)
{
	const cJSON *c;

	*ret_status = *ret_reason = *ret_message = "";
	cJSON_ArrayForEach(c, array_of(kobj_get(probe, "status"), "conditions"))
	{
		const char *t = kobj_str(c, "type");

		if (!t || strcmp(t, type))
			continue;
		*ret_status = kobj_str(c, "status") ?: "";
		*ret_reason = kobj_str(c, "reason") ?: "";
		*ret_message = kobj_str(c, "message") ?: "";
		return 1;
	}
	return 0;
}

/* Column width w widened to hold s: up to max, or all of it when wide. */
static int widen(int w, const char *s, int max, bool wide)
{
	size_t n = termsafe__width(s);

	if (!wide && n > (size_t)max)
		n = (size_t)max;
	if (n > INT_MAX / 2)
		n = INT_MAX / 2;
	return (int)n > w ? (int)n : w;
}

/* A last column's name: cut past max, or whole when wide. */
static void last_cell(FILE *f, const char *s, int max, bool wide)
{
	termsafe__cell(f, s, wide ? -1 : max, true);
}

static int name_width(const cJSON *fns, bool wide)
{
	const cJSON *fn;
	int w = (int)strlen("FUNCTION");

	cJSON_ArrayForEach(fn, fns) w = widen(w, str_or(fn, "name"), FUNCTION_MAX_WIDTH, wide);
	return w;
}

/* "web-1 250.3ms, web-2 3.1ms": the function's slowest pods by p99. */
static void slowest_pods(FILE *f, const cJSON *fn, bool wide)
{
	const cJSON *p;
	int i = 0;

	cJSON_ArrayForEach(p, array_of(fn, "slowestPods"))
	{
		if (i++ == 3)
			break;
		fputs(i > 1 ? ", " : "", f);
		last_cell(f, str_or(p, "pod"), POD_MAX_WIDTH, wide);
		fprintf(f, " %s", str_or(p, "p99"));
	}
	if (!i)
		fputc('-', f);
}

/* A rollout's revisions side by side, under their function's row. */
static void revisions(FILE *f, const cJSON *fn, int w, bool wide)
{
	const cJSON *revs = array_of(fn, "revisions"), *r;

	if (cJSON_GetArraySize(revs) < 2)
		return;
	cJSON_ArrayForEach(r, revs)
	{
		fprintf(f, "%*s %10" PRId64 " %9s %9s   revision ", w, "", kobj_int(r, "calls", 0),
			str_or(r, "p50"), str_or(r, "p99"));
		last_cell(f, str_or(r, "revision"), REVISION_MAX_WIDTH, wide);
		fprintf(f, " (%" PRId64 " pods)\n", kobj_int(r, "pods", 0));
	}
}

static void function_row(FILE *f, const cJSON *fn, int w, bool wide)
{
	const cJSON *recent = kobj_get(fn, "recent");

	termsafe__cell(f, str_or(fn, "name"), w, false);
	fprintf(f, " %10" PRId64 " %9s %9s %12" PRId64 " %10s %10s  ", kobj_int(fn, "calls", 0),
		str_or(fn, "p50"), str_or(fn, "p99"), kobj_int(recent, "calls", 0),
		str_or(recent, "p50"), str_or(recent, "p99"));
	slowest_pods(f, fn, wide);
	fputc('\n', f);
	revisions(f, fn, w, wide);
}

/*
 * Calls entered, then left through a jump to code not probed (a hook in a
 * library): in CALLS, without a duration. Without this line the percentiles
 * of a function mostly left that way would seem to be of all its calls.
 */
static void tail_exits(FILE *f, const cJSON *fns, bool wide)
{
	const cJSON *fn;

	cJSON_ArrayForEach(fn, fns)
	{
		int64_t n = kobj_int(fn, "tailExits", 0);

		if (n <= 0)
			continue;
		last_cell(f, str_or(fn, "name"), LAST_MAX_WIDTH, wide);
		fprintf(f,
			": %" PRId64 " of its calls left through a jump to code not probed "
			"(tailExits): in CALLS, not timed\n",
			n);
	}
}

/* A ClusterFunctionProbe's row per namespace. */
static void namespace_rows(FILE *f, const cJSON *probe, bool wide)
{
	const cJSON *status = kobj_get(probe, "status"), *rows = array_of(status, "namespaces");
	const cJSON *row;
	int w = (int)strlen("NAMESPACE");

	if (!cJSON_GetArraySize(rows))
		return;
	cJSON_ArrayForEach(row, rows)
		w = widen(w, str_or(row, "namespace"), NAMESPACE_MAX_WIDTH, wide);
	fprintf(f, "%-*s %6s %10s %9s %9s  %s\n", w, "NAMESPACE", "PODS", "CALLS", "P50", "P99",
		"SLOWEST");
	cJSON_ArrayForEach(row, rows)
	{
		termsafe__cell(f, str_or(row, "namespace"), w, false);
		fprintf(f, " %6" PRId64 " %10" PRId64 " %9.20s %9.20s  ", kobj_int(row, "pods", 0),
			kobj_int(row, "calls", 0), str_or(row, "p50"), str_or(row, "p99"));
		last_cell(f, str_or(row, "slowest"), LAST_MAX_WIDTH, wide);
		fputc('\n', f);
	}
	if (kobj_int(status, "namespacesOmitted", 0) > 0)
		fprintf(f, "(%" PRId64 " more namespaces, in the summary above)\n",
			kobj_int(status, "namespacesOmitted", 0));
}

static void table(FILE *f, const cJSON *probe, bool wide)
{
	const cJSON *sum = kobj_get(kobj_get(probe, "status"), "summary");
	const cJSON *fns = array_of(sum, "functions"), *fn;
	const char *st, *reason, *msg;
	int w = name_width(fns, wide);

	view__condition(probe, "Attached", &st, &reason, &msg);
	fprintf(f,
		"%s: %" PRId64 " pods, %" PRId64 " processes on %" PRId64
		" nodes; updated %s; %s\n",
		str_or(kobj_get(probe, "metadata"), "name"), kobj_int(sum, "pods", 0),
		kobj_int(sum, "processes", 0), kobj_int(sum, "nodes", 0), str_or(sum, "lastUpdate"),
		*reason ? reason : "waiting for the agents");
	/* detached by the overhead guard, expired, not attached: why */
	if (*reason && strcmp(reason, "Attached") && *msg)
		fprintf(f, "%s: %.1024s\n", reason, msg);
	fprintf(f, "%-*s %10s %9s %9s %12s %10s %10s  %s\n", w, "FUNCTION", "CALLS", "P50", "P99",
		"RECENT-CALLS", "RECENT-P50", "RECENT-P99", "SLOWEST PODS (P99)");
	cJSON_ArrayForEach(fn, fns) function_row(f, fn, w, wide);
	if (!cJSON_GetArraySize(fns))
		fprintf(f, "(no calls yet)\n");
	/* calls not timed: the summary writer's words, else (an older one's
	 * status) each function's tail exits */
	view__condition(probe, "Timed", &st, &reason, &msg);
	if (!strcmp(st, "False") && *msg)
		fprintf(f, "%s: %.1024s\n", reason, msg);
	else if (!*st)
		tail_exits(f, fns, wide);
	if (kobj_int(sum, "functionsOmitted", 0) > 0)
		fprintf(f,
			"(%" PRId64 " more functions left out of the status to keep it within "
			"its size)\n",
			kobj_int(sum, "functionsOmitted", 0));
	namespace_rows(f, probe, wide);
	fflush(f);
}

void view__table(FILE *f, const cJSON *probe)
{
	table(f, probe, false);
}

void view__table_wide(FILE *f, const cJSON *probe)
{
	table(f, probe, true);
}

static uint64_t fnv(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull;
}

/* Who made a call and when: what tells one call from another. */
static uint64_t call_key(const char *fn, const cJSON *c)
{
	char nums[96];
	uint64_t h = fnv(0xcbf29ce484222325ull, fn);

	snprintf(nums, sizeof(nums), "%" PRId64 " %" PRId64 " %" PRId64, kobj_int(c, "pid", 0),
		 kobj_int(c, "tid", 0), kobj_int(c, "durationNs", 0));
	h = fnv(h, nums);
	h = fnv(h, kobj_str(c, "ended"));
	return fnv(h, kobj_str(c, "pod"));
}

static bool seen_add(struct view_seen *s, uint64_t key)
{
	size_t n = s->n < VIEW_SEEN_MAX ? s->n : VIEW_SEEN_MAX;

	for (size_t i = 0; i < n; i++)
		if (s->keys[i] == key)
			return false;
	s->keys[s->n++ % VIEW_SEEN_MAX] = key;
	return true;
}

/* A call's arguments (spec.captureArguments), as the agent wrote them, on a line. */
static void print_args(FILE *f, const cJSON *c)
{
	const cJSON *a;
	int n = 0;

	cJSON_ArrayForEach(a, array_of(c, "arguments"))
	{
		if (!kobj_str(a, "name") || n++ >= 16)
			continue;
		if (kobj_str(a, "value"))
			fprintf(f, "%s%.63s=%s%.300s%s%s", n == 1 ? "  arguments: " : " ",
				kobj_str(a, "name"), kobj_get(a, "length") ? "\"" : "",
				kobj_str(a, "value"), kobj_get(a, "length") ? "\"" : "",
				cJSON_IsTrue(kobj_get(a, "truncated")) ? "..." : "");
		else if (cJSON_IsTrue(kobj_get(a, "redacted")))
			fprintf(f, "%s%.63s=<redacted>", n == 1 ? "  arguments: " : " ",
				kobj_str(a, "name"));
		else
			fprintf(f, "%s%.63s=(%.200s)", n == 1 ? "  arguments: " : " ",
				kobj_str(a, "name"), str_or(a, "error"));
	}
	if (n)
		fputc('\n', f);
	/* why they are raw registers (no DWARF names) */
	if (kobj_str(c, "argumentsNote"))
		fprintf(f, "  (%.300s)\n", kobj_str(c, "argumentsNote"));
}

static void print_call(FILE *f, const char *fn, const cJSON *c)
{
	const cJSON *frame;
	int i = 0;

	fprintf(f,
		"slowest call: %.200s %s in pod %.63s (container %.63s, node %.63s, pid %" PRId64
		") ended %s",
		fn, str_or(c, "duration"), str_or(c, "pod"), str_or(c, "container"),
		str_or(c, "node"), kobj_int(c, "pid", 0), str_or(c, "ended"));
	cJSON_ArrayForEach(frame, array_of(c, "stack"))
	{
		if (!cJSON_IsString(frame))
			continue;
		if (i++ == 4) {
			fputs(" < ...", f);
			break;
		}
		fprintf(f, "%s%.160s", i == 1 ? ": " : " < ", frame->valuestring);
	}
	fputc('\n', f);
	print_args(f, c);
}

int view__slow_calls(FILE *f, const cJSON *probe, struct view_seen *seen)
{
	const cJSON *sum = kobj_get(kobj_get(probe, "status"), "summary"), *fn, *c;
	int n = 0;

	cJSON_ArrayForEach(fn, array_of(sum, "functions"))
	{
		const char *name = str_or(fn, "name");

		cJSON_ArrayForEach(c, array_of(fn, "slowestCalls"))
		{
			if (!seen_add(seen, call_key(name, c)))
				continue;
			print_call(f, name, c);
			n++;
		}
	}
	fflush(f);
	return n;
}

/* The probe's functions, one comma apart: a new string (free() it), or NULL. */
static char *functions_of(const cJSON *probe)
{
	const cJSON *fns = array_of(kobj_get(probe, "spec"), "functions"), *fn;
	size_t len = 1, off = 0;
	char *buf;

	cJSON_ArrayForEach(fn, fns) len += cJSON_IsString(fn) ? strlen(fn->valuestring) + 1 : 0;
	if (!(buf = malloc(len)))
		return NULL;
	buf[0] = '\0';
	cJSON_ArrayForEach(fn, fns)
	{
		if (cJSON_IsString(fn))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
						fn->valuestring);
	}
	return buf;
}

/* The Attached condition's reason, or "-". */
static const char *attached(const cJSON *probe)
{
	const char *st, *reason, *msg;

	view__condition(probe, "Attached", &st, &reason, &msg);
	return *reason ? reason : "-";
}

static void list_row(FILE *f, const cJSON *p, const int w[3], bool wide)
{
	const cJSON *sum = kobj_get(kobj_get(p, "status"), "summary");
	char *fns = functions_of(p);

	termsafe__cell(f, str_or(kobj_get(p, "metadata"), "name"), w[0], false);
	fprintf(f, " %5" PRId64 " %10" PRId64 " ", kobj_int(sum, "pods", 0),
		kobj_int(sum, "calls", 0));
	termsafe__cell(f, str_or(sum, "slowest"), w[1], false);
	fprintf(f, " %9s %9s %10s  ", str_or(sum, "p50"), str_or(sum, "p99"),
		str_or(sum, "recentP99"));
	termsafe__cell(f, attached(p), w[2], false);
	fputc(' ', f);
	last_cell(f, fns && *fns ? fns : "-", PATTERNS_MAX_WIDTH, wide);
	fputc('\n', f);
	free(fns);
}

static void list(FILE *f, const cJSON *list, bool wide)
{
	const cJSON *items = array_of(list, "items"), *p;
	int w[3] = { (int)strlen("NAME"), (int)strlen("SLOWEST"), (int)strlen("ATTACHED") };

	if (!cJSON_GetArraySize(items)) {
		fprintf(f, "No FunctionProbes found in the namespace.\n");
		return;
	}
	cJSON_ArrayForEach(p, items)
	{
		w[0] = widen(w[0], str_or(kobj_get(p, "metadata"), "name"), PROBE_MAX_WIDTH, wide);
		w[1] = widen(w[1], str_or(kobj_get(kobj_get(p, "status"), "summary"), "slowest"),
			     SLOWEST_MAX_WIDTH, wide);
		w[2] = widen(w[2], attached(p), REASON_MAX_WIDTH, wide);
	}
	fprintf(f, "%-*s %5s %10s %-*s %9s %9s %10s  %-*s %s\n", w[0], "NAME", "PODS", "CALLS",
		w[1], "SLOWEST", "P50", "P99", "RECENT-P99", w[2], "ATTACHED", "FUNCTIONS");
	cJSON_ArrayForEach(p, items) list_row(f, p, w, wide);
}

void view__list(FILE *f, const cJSON *l)
{
	list(f, l, false);
}

void view__list_wide(FILE *f, const cJSON *l)
{
	list(f, l, true);
}

struct top_row {
	const cJSON *probe, *fn;
	uint64_t p99;
};

static int by_p99(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;

	return x->p99 < y->p99 ? 1 : x->p99 > y->p99 ? -1 : 0;
}

/* The list's functions as rows (at most 64 per probe: the schema's bound). */
static struct top_row *top_rows(const cJSON *list, size_t *ret_n)
{
	const cJSON *p, *fn;
	size_t n = 0, cap = 0;
	struct top_row *rows = NULL;

	cJSON_ArrayForEach(p, array_of(list, "items")) cap += (size_t)cJSON_GetArraySize(
		array_of(kobj_get(kobj_get(p, "status"), "summary"), "functions"));
	if (cap && !(rows = calloc(cap, sizeof(*rows))))
		return NULL;
	cJSON_ArrayForEach(p, array_of(list, "items"))
	{
		cJSON_ArrayForEach(
			fn, array_of(kobj_get(kobj_get(p, "status"), "summary"), "functions"))
		{
			if (n < cap)
				rows[n++] = (struct top_row){ p, fn, dur_ns(fn, "p99") };
		}
	}
	if (n)
		qsort(rows, n, sizeof(*rows), by_p99);
	*ret_n = n;
	return rows;
}

static void top(FILE *f, const cJSON *list, bool wide)
{
	size_t n = 0;
	struct top_row *rows = top_rows(list, &n);
	int wp = (int)strlen("PROBE"), wf = (int)strlen("FUNCTION");

	if (!n) {
		fprintf(f, "No function has calls in the namespace's FunctionProbes.\n");
		free(rows);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		wp = widen(wp, str_or(kobj_get(rows[i].probe, "metadata"), "name"), PROBE_MAX_WIDTH,
			   wide);
		wf = widen(wf, str_or(rows[i].fn, "name"), FUNCTION_MAX_WIDTH, wide);
	}
	fprintf(f, "%-*s %-*s %10s %9s %9s %10s  %s\n", wp, "PROBE", wf, "FUNCTION", "CALLS", "P50",
		"P99", "RECENT-P99", "SLOWEST PODS (P99)");
	for (size_t i = 0; i < n; i++) {
		termsafe__cell(f, str_or(kobj_get(rows[i].probe, "metadata"), "name"), wp, false);
		fputc(' ', f);
		termsafe__cell(f, str_or(rows[i].fn, "name"), wf, false);
		fprintf(f, " %10" PRId64 " %9s %9s %10s  ", kobj_int(rows[i].fn, "calls", 0),
			str_or(rows[i].fn, "p50"), str_or(rows[i].fn, "p99"),
			str_or(kobj_get(rows[i].fn, "recent"), "p99"));
		slowest_pods(f, rows[i].fn, wide);
		fputc('\n', f);
	}
	free(rows);
}

void view__top(FILE *f, const cJSON *list)
{
	top(f, list, false);
}

void view__top_wide(FILE *f, const cJSON *list)
{
	top(f, list, true);
}

/* Whether s can be a plain YAML scalar that reads back as the same string. */
static bool plain(const char *s)
{
	static const char *const words[] = { "true", "false", "null", "yes", "no",
					     "on",   "off",   "y",    "n",   "~" };

	if (!*s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '/'))
		return false;
	for (const char *p = s; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-",
			    *p))
			return false;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (!strcasecmp(s, words[i]))
			return false;
	return true;
}

static void yaml_scalar(FILE *f, const cJSON *v)
{
	char *json, *safe;

	if (cJSON_IsString(v) && plain(v->valuestring)) {
		fputs(v->valuestring, f);
		return;
	}
	if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
		fputs(cJSON_IsObject(v) ? "{}" : "[]", f);
		return;
	}
	/* JSON's strings, numbers, booleans and null are YAML's too; its \u
	 * escapes are YAML's */
	json = cJSON_PrintUnformatted(v);
	safe = json ? termsafe__json(json) : NULL;
	fputs(safe ? safe : "null", f);
	free(safe);
	free(json);
}

static bool is_scalar(const cJSON *v)
{
	return !(cJSON_IsObject(v) || cJSON_IsArray(v)) || !v->child;
}

/* v at indent; first is false when its first line follows "- " already. */
static void yaml_node(FILE *f, const cJSON *v, int indent, bool first)
{
	const cJSON *c;

	cJSON_ArrayForEach(c, v)
	{
		if (!first)
			fprintf(f, "%*s", indent, "");
		first = false;
		if (cJSON_IsArray(v)) {
			fputs("- ", f);
			if (is_scalar(c)) {
				yaml_scalar(f, c);
				fputc('\n', f);
			} else {
				yaml_node(f, c, indent + 2, true);
			}
			continue;
		}
		cJSON k = { .type = cJSON_String, .valuestring = c->string ? c->string : "" };
		yaml_scalar(f, &k);
		fputc(':', f);
		if (is_scalar(c)) {
			fputc(' ', f);
			yaml_scalar(f, c);
			fputc('\n', f);
		} else {
			fputc('\n', f);
			yaml_node(f, c, indent + 2, false);
		}
	}
}

void view__yaml(FILE *f, const cJSON *obj)
{
	if (is_scalar(obj)) {
		yaml_scalar(f, obj);
		fputc('\n', f);
		return;
	}
	yaml_node(f, obj, 0, false);
}
