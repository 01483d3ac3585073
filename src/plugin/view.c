// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kobj.h"
#include "base/termsafe.h"
#include "base/latency.h"
#include "plugin/view.h"

#define NAME_MAX_WIDTH 48

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

static int name_width(const cJSON *fns)
{
	const cJSON *fn;
	int w = 8;

	cJSON_ArrayForEach(fn, fns)
	{
		int n = (int)strlen(str_or(fn, "name"));

		w = n > w ? n : w;
	}
	return w > NAME_MAX_WIDTH ? NAME_MAX_WIDTH : w;
}

/* "web-1 250.3ms, web-2 3.1ms": the function's slowest pods by p99. */
static void slowest_pods(FILE *f, const cJSON *fn)
{
	const cJSON *p;
	int i = 0;

	cJSON_ArrayForEach(p, array_of(fn, "slowestPods"))
	{
		if (i++ == 3)
			break;
		fprintf(f, "%s%.63s %s", i > 1 ? ", " : "", str_or(p, "pod"), str_or(p, "p99"));
	}
	if (!i)
		fputc('-', f);
}

/* A rollout's revisions side by side, under their function's row. */
static void revisions(FILE *f, const cJSON *fn, int w)
{
	const cJSON *revs = array_of(fn, "revisions"), *r;

	if (cJSON_GetArraySize(revs) < 2)
		return;
	cJSON_ArrayForEach(r, revs)
		fprintf(f, "  %-*.*s %10" PRId64 " %9s %9s   revision %.80s (%" PRId64 " pods)\n",
			w - 2, w - 2, "", kobj_int(r, "calls", 0), str_or(r, "p50"),
			str_or(r, "p99"), str_or(r, "revision"), kobj_int(r, "pods", 0));
}

static void function_row(FILE *f, const cJSON *fn, int w)
{
	const cJSON *recent = kobj_get(fn, "recent");

	/* a longer name shifts its row rather than lose its end */
	fprintf(f, "%-*.1024s %10" PRId64 " %9s %9s %12" PRId64 " %10s %10s  ", w,
		str_or(fn, "name"), kobj_int(fn, "calls", 0), str_or(fn, "p50"), str_or(fn, "p99"),
		kobj_int(recent, "calls", 0), str_or(recent, "p50"), str_or(recent, "p99"));
	slowest_pods(f, fn);
	fputc('\n', f);
	revisions(f, fn, w);
}

/*
 * Calls no row counts: entered, then left through a jump to code not probed
 * (a hook in a library), so neither timed nor in CALLS. Without this line a
 * function reached only that way reads 0 calls.
 */
static void tail_exits(FILE *f, const cJSON *fns)
{
	const cJSON *fn;

	cJSON_ArrayForEach(fn, fns)
	{
		int64_t n = kobj_int(fn, "tailExits", 0);

		if (n > 0)
			fprintf(f,
				"%.200s: %" PRId64 " more calls left through a jump to code not "
				"probed (tailExits): not timed, not in CALLS\n",
				str_or(fn, "name"), n);
	}
}

/* A ClusterFunctionProbe's row per namespace. */
static void namespace_rows(FILE *f, const cJSON *probe)
{
	const cJSON *status = kobj_get(probe, "status"), *rows = array_of(status, "namespaces");
	const cJSON *row;

	if (!cJSON_GetArraySize(rows))
		return;
	fprintf(f, "%-32s %6s %10s %9s %9s  %s\n", "NAMESPACE", "PODS", "CALLS", "P50", "P99",
		"SLOWEST");
	cJSON_ArrayForEach(row, rows)
	{
		fprintf(f, "%-32.63s %6" PRId64 " %10" PRId64 " %9.20s %9.20s  %.200s\n",
			str_or(row, "namespace"), kobj_int(row, "pods", 0),
			kobj_int(row, "calls", 0), str_or(row, "p50"), str_or(row, "p99"),
			str_or(row, "slowest"));
	}
	if (kobj_int(status, "namespacesOmitted", 0) > 0)
		fprintf(f, "(%" PRId64 " more namespaces, in the summary above)\n",
			kobj_int(status, "namespacesOmitted", 0));
}

void view__table(FILE *f, const cJSON *probe)
{
	const cJSON *sum = kobj_get(kobj_get(probe, "status"), "summary");
	const cJSON *fns = array_of(sum, "functions"), *fn;
	const char *st, *reason, *msg;
	int w = name_width(fns);

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
	cJSON_ArrayForEach(fn, fns) function_row(f, fn, w);
	if (!cJSON_GetArraySize(fns))
		fprintf(f, "(no calls yet)\n");
	tail_exits(f, fns);
	if (kobj_int(sum, "functionsOmitted", 0) > 0)
		fprintf(f,
			"(%" PRId64 " more functions left out of the status to keep it within "
			"its size)\n",
			kobj_int(sum, "functionsOmitted", 0));
	namespace_rows(f, probe);
	fflush(f);
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

/* The probe's functions, one comma apart, cut to fit len. */
static const char *functions_of(const cJSON *probe, char *buf, size_t len)
{
	const cJSON *fn;
	size_t off = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(fn, array_of(kobj_get(probe, "spec"), "functions"))
	{
		int n;

		if (!cJSON_IsString(fn) || off >= len)
			continue;
		n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", fn->valuestring);
		off += n > 0 ? (size_t)n : 0;
	}
	return *buf ? buf : "-";
}

void view__list(FILE *f, const cJSON *list)
{
	const cJSON *items = array_of(list, "items"), *p;
	char fns[64];

	if (!cJSON_GetArraySize(items)) {
		fprintf(f, "No FunctionProbes found in the namespace.\n");
		return;
	}
	fprintf(f, "%-40s %5s %10s %-32s %9s %9s %10s  %-16s %s\n", "NAME", "PODS", "CALLS",
		"SLOWEST", "P50", "P99", "RECENT-P99", "ATTACHED", "FUNCTIONS");
	cJSON_ArrayForEach(p, items)
	{
		const cJSON *sum = kobj_get(kobj_get(p, "status"), "summary");
		const char *st, *reason, *msg;

		view__condition(p, "Attached", &st, &reason, &msg);
		fprintf(f, "%-40.63s %5" PRId64 " %10" PRId64 " %-32.48s %9s %9s %10s  %-16s %s\n",
			str_or(kobj_get(p, "metadata"), "name"), kobj_int(sum, "pods", 0),
			kobj_int(sum, "calls", 0), str_or(sum, "slowest"), str_or(sum, "p50"),
			str_or(sum, "p99"), str_or(sum, "recentP99"), *reason ? reason : "-",
			functions_of(p, fns, sizeof(fns)));
	}
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

void view__top(FILE *f, const cJSON *list)
{
	size_t n = 0;
	struct top_row *rows = top_rows(list, &n);

	if (!n) {
		fprintf(f, "No function has calls in the namespace's FunctionProbes.\n");
		free(rows);
		return;
	}
	fprintf(f, "%-32s %-40s %10s %9s %9s %10s  %s\n", "PROBE", "FUNCTION", "CALLS", "P50",
		"P99", "RECENT-P99", "SLOWEST PODS (P99)");
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%-32.63s %-40.200s %10" PRId64 " %9s %9s %10s  ",
			str_or(kobj_get(rows[i].probe, "metadata"), "name"),
			str_or(rows[i].fn, "name"), kobj_int(rows[i].fn, "calls", 0),
			str_or(rows[i].fn, "p50"), str_or(rows[i].fn, "p99"),
			str_or(kobj_get(rows[i].fn, "recent"), "p99"));
		slowest_pods(f, rows[i].fn);
		fputc('\n', f);
	}
	free(rows);
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
