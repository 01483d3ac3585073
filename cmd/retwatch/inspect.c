// SPDX-License-Identifier: MIT
/* retwatch inspect: where the functions of a binary are and how they return. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "binary.h"
#include "cmd.h"

/* cJSON keeps numbers as doubles; raw text keeps 64-bit values exact. */
static cJSON *json_int(int64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRId64, v);
	return cJSON_CreateRaw(buf);
}

static cJSON *json_str_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *json_offsets(const int64_t *v, size_t n)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < n; i++)
		cJSON_AddItemToArray(arr, json_int(v[i]));
	return arr;
}

static cJSON *json_func(const struct func_info *f)
{
	cJSON *o = cJSON_CreateObject(), *ranges = cJSON_CreateArray();

	cJSON_AddStringToObject(o, "name", f->name);
	cJSON_AddItemToObject(o, "demangled", json_str_or_null(f->demangled));
	cJSON_AddItemToObject(o, "address", json_int(f->address));
	cJSON_AddItemToObject(o, "file_offset", json_int(f->file_offset));
	cJSON_AddItemToObject(o, "size", json_int(f->size));
	cJSON_AddStringToObject(o, "source", func_source__str(f->source));
	cJSON_AddStringToObject(o, "mode", func_mode__str(f->mode));
	cJSON_AddItemToObject(o, "reason", json_str_or_null(f->reason));
	cJSON_AddItemToObject(o, "returns", json_offsets(f->returns, f->nreturns));
	cJSON_AddItemToObject(o, "tail_calls", json_offsets(f->tail_calls, f->ntail_calls));
	/* the RETs that end a call after a tail call, as offsets in the file from file_offset */
	cJSON_AddItemToObject(o, "tail_returns", json_offsets(f->tail_returns, f->ntail_returns));
	cJSON_AddItemToObject(o, "tail_calls_followed", json_int(f->ntail_followed));
	cJSON_AddItemToObject(o, "tail_untimed", json_int(f->ntail_untimed));
	cJSON_AddItemToObject(o, "indirect_jumps", json_int(f->nindirect_jumps));
	for (size_t i = 0; i < f->nranges; i++) {
		cJSON *r = cJSON_CreateObject();

		cJSON_AddItemToObject(r, "address", json_int(f->ranges[i].lo));
		cJSON_AddItemToObject(r, "size", json_int(f->ranges[i].hi - f->ranges[i].lo));
		cJSON_AddItemToArray(ranges, r);
	}
	cJSON_AddItemToObject(o, "ranges", ranges);
	return o;
}

static int print_json(const struct binary *b, const struct binary_match *m)
{
	cJSON *root = cJSON_CreateObject(), *funcs = cJSON_CreateArray();
	char *text;

	cJSON_AddStringToObject(root, "binary", binary__path(b));
	cJSON_AddItemToObject(root, "go_version", json_str_or_null(binary__go_version(b)));
	cJSON_AddItemToObject(root, "build_id", json_str_or_null(binary__build_id(b)));
	cJSON_AddBoolToObject(root, "stripped", binary__stripped(b));
	for (size_t i = 0; i < m->nfuncs; i++)
		cJSON_AddItemToArray(funcs, json_func(m->funcs[i]));
	cJSON_AddItemToObject(root, "functions", funcs);
	text = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	if (!text)
		return -ENOMEM;
	puts(text);
	free(text);
	return 0;
}

static void print_offsets(const char *label, const int64_t *v, size_t n)
{
	printf("    %-11s", label);
	if (!n)
		printf(" none");
	for (size_t i = 0; i < n; i++)
		printf(" %s0x%" PRIx64, v[i] < 0 ? "-" : "+",
		       v[i] < 0 ? (uint64_t)-v[i] : (uint64_t)v[i]);
	printf("\n");
}

static void print_text(const struct binary *b, const struct binary_match *m)
{
	const char *gv = binary__go_version(b), *bid = binary__build_id(b);

	printf("%s: %s%s, build id %s, %s\n", binary__path(b), gv ? "Go " : "native", gv ? gv : "",
	       bid ? bid : "none", binary__stripped(b) ? "stripped" : "not stripped");
	for (size_t i = 0; i < m->nfuncs; i++) {
		const struct func_info *f = m->funcs[i];

		printf("\n%s\n", f->name);
		if (f->demangled)
			printf("    demangled   %s\n", f->demangled);
		printf("    address     0x%" PRIx64 "\n", f->address);
		printf("    file offset 0x%" PRIx64 "\n", f->file_offset);
		printf("    size        %" PRIu64 "\n", f->size);
		printf("    source      %s\n", func_source__str(f->source));
		printf("    mode        %s\n", func_mode__str(f->mode));
		if (f->reason)
			printf("    reason      %s\n", f->reason);
		print_offsets("returns", f->returns, f->nreturns);
		if (f->ntail_calls)
			print_offsets("tail calls", f->tail_calls, f->ntail_calls);
		if (f->ntail_returns)
			printf("    tail timed  %zu of %zu tail calls: ended at %zu RETs of the "
			       "functions they jump to\n",
			       f->ntail_followed, f->ntail_calls, f->ntail_returns);
		if (f->ntail_untimed || f->nindirect_jumps)
			printf("    tail exits  %zu jumps cannot be followed, %zu go through a "
			       "register: calls that leave by them are tail exits, not timed\n",
			       f->ntail_untimed, f->nindirect_jumps);
		for (size_t r = 1; r < f->nranges; r++)
			printf("    also range  0x%" PRIx64 "-0x%" PRIx64 "\n", f->ranges[r].lo,
			       f->ranges[r].hi);
	}
}

static void report_unmatched(const struct binary *b, const struct binary_match *m)
{
	for (size_t i = 0; i < m->nunmatched; i++) {
		const struct binary_unmatched *u = &m->unmatched[i];

		fprintf(stderr, "retwatch: no function matches '%s' in %s", u->pattern,
			binary__path(b));
		if (!u->nsuggestions) {
			fprintf(stderr, " (%zu functions searched)\n", binary__nfuncs(b));
			continue;
		}
		fprintf(stderr, "; similar names:");
		for (size_t j = 0; j < u->nsuggestions; j++)
			fprintf(stderr, "%s %s", j ? "," : "", u->suggestions[j]);
		fprintf(stderr, "\n");
	}
}

/*
 * "LIB:FUNC" patterns (as trace takes them) name this file or another: keep
 * FUNC of those naming this file's name (or path), refuse the others.
 */
static int library_parts(const char *path, char **patterns, size_t n)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;

	for (size_t i = 0; i < n; i++) {
		char lib[256];
		const char *func;

		if (!binary_pattern__library(patterns[i], lib, sizeof(lib), &func))
			continue;
		if (!glob_match(lib, strchr(lib, '/') ? path : base)) {
			fprintf(stderr,
				"retwatch: '%s' names library '%s', not %s: inspect that library's "
				"file, or leave out '%s:'\n",
				patterns[i], lib, base, lib);
			return -EINVAL;
		}
		patterns[i] = (char *)func;
	}
	return 0;
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "limit", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct binary_match m = {};
	struct rw_error err = {};
	struct binary *b = NULL;
	bool json = false;
	size_t limit = BINARY_DEFAULT_LIMIT;
	int c, ret = 1;

	/* options anywhere: `inspect BIN --json PAT` too (no function name starts with '-') */
	while ((c = getopt_long(argc, argv, "jl:h", opts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'j': json = true; break;
		case 'l':
			errno = 0;
			limit = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || optarg[0] == '-' || !limit) {
				fprintf(stderr,
					"retwatch: invalid --limit '%s': give a positive number\n",
					optarg);
				return 2;
			}
			break;
		case 'h': cmd_usage(stdout); return 0;
		default: cmd_usage(stderr); return 2;
		}
	}
	if (argc - optind < 2) {
		fprintf(stderr,
			"retwatch: inspect needs a binary and at least one function name or glob\n");
		cmd_usage(stderr);
		return 2;
	}
	b = binary__open(NULL, argv[optind], &err);
	if (!b) {
		fprintf(stderr, "retwatch: %s\n", err.msg);
		return 1;
	}
	if (library_parts(argv[optind], argv + optind + 1, argc - optind - 1))
		goto cleanup;
	if (binary__match(b, (const char *const *)argv + optind + 1, argc - optind - 1, limit, &m,
			  &err)) {
		fprintf(stderr, "retwatch: %s\n", err.msg);
		goto cleanup;
	}
	report_unmatched(b, &m);
	if (m.nfuncs) {
		if (json ? print_json(b, &m) : (print_text(b, &m), 0)) {
			fprintf(stderr, "retwatch: out of memory\n");
			goto cleanup;
		}
	}
	ret = m.nunmatched || !m.nfuncs ? 1 : 0;
cleanup:
	binary_match__clear(&m);
	binary__put(b);
	return ret;
}
