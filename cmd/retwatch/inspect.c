// SPDX-License-Identifier: MIT
/* retwatch inspect: where the functions of a binary are and how they return. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "analysis/binary.h"
#include "analysis/goinline.h"
#include "analysis/inlsites.h"
#include "base/termsafe.h"
#include "trace/calibrate.h"
#include "cmd.h"

/*
 * inspect prints one function per few lines, and '*' of a big Go binary is
 * 165,000 functions (60 MB of JSON): one buffer, formatted by hand, written
 * to stdout when full. A document tree of the whole output took 480 MB
 * more at the peak for those 60 MB.
 */
struct out {
	FILE *f;
	int err; /* the first write error, as -errno */
	size_t len;
	char buf[1 << 16];
};

static void out_flush(struct out *o)
{
	/* through stdout, which shows what a terminal would take as a control
	 * (base/termsafe.h): names come from the file */
	if (o->len && !o->err && fwrite(o->buf, 1, o->len, o->f) != o->len)
		o->err = errno ? -errno : -EIO;
	o->len = 0;
}

static void out_mem(struct out *o, const char *s, size_t n)
{
	while (n) {
		size_t room = sizeof(o->buf) - o->len, k = n < room ? n : room;

		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
		if (o->len == sizeof(o->buf))
			out_flush(o);
	}
}

static void out_str(struct out *o, const char *s)
{
	out_mem(o, s, strlen(s));
}

static void out_char(struct out *o, char c)
{
	if (o->len == sizeof(o->buf))
		out_flush(o);
	o->buf[o->len++] = c;
}

/* v in base 10 or 16 (lowercase), as printf's PRIu64 and PRIx64 print it */
static void out_uint(struct out *o, uint64_t v, unsigned int base)
{
	char tmp[24], *p = tmp + sizeof(tmp);

	do {
		*--p = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	out_mem(o, p, tmp + sizeof(tmp) - p);
}

static void out_int(struct out *o, int64_t v)
{
	if (v < 0)
		out_char(o, '-');
	out_uint(o, v < 0 ? -(uint64_t)v : (uint64_t)v, 10);
}

/* s as a JSON string: the escapes cJSON prints; DEL, C1 controls and bytes
 * of no UTF-8 character as termsafe__json() escapes them */
static void out_json_str(struct out *o, const char *s)
{
	cJSON *v;
	char *q, *safe;

	if (termsafe__needs(s, strlen(s))) {
		v = cJSON_CreateString(s);
		q = v ? cJSON_PrintUnformatted(v) : NULL;
		safe = q ? termsafe__json(q) : NULL;
		out_str(o, safe ? safe : "\"\"");
		free(safe);
		free(q);
		cJSON_Delete(v);
		return;
	}
	out_char(o, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\' || *p == '\t' || *p == '\n')
			out_char(o, '\\');
		out_char(o, *p == '\t' ? 't' : *p == '\n' ? 'n' : (char)*p);
	}
	out_char(o, '"');
}

static void out_json_str_or_null(struct out *o, const char *s)
{
	if (s)
		out_json_str(o, s);
	else
		out_str(o, "null");
}

/* ,"key": (the comma unless first) */
static void out_key(struct out *o, const char *key, bool first)
{
	if (!first)
		out_char(o, ',');
	out_json_str(o, key);
	out_char(o, ':');
}

static void out_json_offsets(struct out *o, const char *key, const int64_t *v, size_t n)
{
	out_key(o, key, false);
	out_char(o, '[');
	for (size_t i = 0; i < n; i++) {
		if (i)
			out_char(o, ',');
		out_int(o, v[i]);
	}
	out_char(o, ']');
}

/* 64-bit values are printed exact (numbers, not doubles) */
static void out_json_uint(struct out *o, const char *key, uint64_t v)
{
	out_key(o, key, false);
	out_int(o, (int64_t)v);
}

/* The kind of instruction at addr (calibrate.h). */
static enum probe_entry site_kind(const struct binary *b, uint64_t addr)
{
	uint8_t code[8];

	if (binary__read(b, addr, code, sizeof(code)))
		return PROBE_ENTRY_STEPPED;
	return calibrate__entry_kind(binary__arch(b), code, sizeof(code));
}

/* The kind of instruction f's entry probe sits on. */
static enum probe_entry entry_kind(const struct binary *b, const struct func_info *f)
{
	return site_kind(b, f->address + (uint64_t)f->entry_site);
}

/*
 * Why f's calls would not end at the kernel's return trampoline with
 * --returns trampoline on this kernel, or NULL when they would: the
 * function's own reason first, so that the kernel (its BTF read once) is
 * asked only for the functions that could.
 */
static const char *trampoline_refusal(const struct binary *b, const struct func_info *f)
{
	const char *why = tracer__func_trampoline_refusal(b, f, f->entry_site);

	return why ? why : tracer__kernel_trampoline_refusal();
}

/* How many of m's functions have their entry probe on an instruction the kernel emulates. */
static size_t entries_emulated(const struct binary *b, const struct binary_match *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nfuncs; i++)
		n += entry_kind(b, m->funcs[i]) != PROBE_ENTRY_STEPPED;
	return n;
}

/* The file a function's name (and DWARF) came from: a stripped file's debug file, or itself. */
static const char *names_from(const struct binary *b, const struct func_info *f)
{
	const char *dbg = binary__debug_file(b);

	return dbg && f->source != FUNC_SOURCE_PCLNTAB ? dbg : binary__path(b);
}

/*
 * The registers the instructions before f's entry site write, by name;
 * nothing when none. Bit n is x86-64's register of hardware number n, or
 * AArch64's Xn.
 */
static void out_json_clobbers(struct out *o, enum disasm_arch arch, uint32_t clobbers)
{
	static const char *const x86[] = { "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
					   "r8",  "r9",	 "r10", "r11", "r12", "r13", "r14", "r15" };
	bool first = true;
	char name[8];

	if (!clobbers)
		return;
	out_key(o, "entry_clobbers", false);
	out_char(o, '[');
	for (unsigned i = 0; i < 32; i++) {
		if (!(clobbers & (1u << i)) || (arch != DISASM_AARCH64 && i >= 16))
			continue;
		if (arch == DISASM_AARCH64)
			snprintf(name, sizeof(name), "x%u", i);
		if (!first)
			out_char(o, ',');
		out_json_str(o, arch == DISASM_AARCH64 ? name : x86[i]);
		first = false;
	}
	out_char(o, ']');
}

static void json_func(struct out *o, const struct binary *b, const struct func_info *f)
{
	out_char(o, '{');
	out_key(o, "name", true);
	out_json_str(o, f->name);
	out_key(o, "demangled", false);
	out_json_str_or_null(o, f->demangled);
	out_json_uint(o, "address", f->address);
	out_json_uint(o, "file_offset", f->file_offset);
	out_json_uint(o, "size", f->size);
	out_key(o, "entry_site", false);
	out_int(o, f->entry_site);
	out_key(o, "entry_kind", false);
	out_json_str(o, probe_entry__str(entry_kind(b, f)));
	out_json_clobbers(o, binary__arch(b), f->entry_clobbers);
	/* how far below the entry's the stack pointer is at the entry site */
	out_json_uint(o, "entry_sp", f->entry_sp);
	/* how its calls end with --returns trampoline, and why not at the trampoline */
	out_key(o, "return", false);
	out_json_str(o, trampoline_refusal(b, f) ? "ret" : "trampoline");
	out_key(o, "return_reason", false);
	out_json_str_or_null(o, trampoline_refusal(b, f));
	out_key(o, "source", false);
	out_json_str(o, func_source__str(f->source));
	out_key(o, "names_from", false);
	out_json_str(o, names_from(b, f));
	out_key(o, "mode", false);
	out_json_str(o, func_mode__str(f->mode));
	out_key(o, "reason", false);
	out_json_str_or_null(o, f->reason);
	out_json_offsets(o, "returns", f->returns, f->nreturns);
	out_json_offsets(o, "tail_calls", f->tail_calls, f->ntail_calls);
	/* the RETs that end a call after a tail call, as offsets in the file from file_offset */
	out_json_offsets(o, "tail_returns", f->tail_returns, f->ntail_returns);
	out_json_uint(o, "tail_calls_followed", f->ntail_followed);
	out_json_uint(o, "tail_untimed", f->ntail_untimed);
	out_json_uint(o, "indirect_jumps", f->nindirect_jumps);
	/* of its own jumps through a pointer, those whose target is read where they run */
	out_json_uint(o, "hook_jumps", f->nhooks);
	out_key(o, "ranges", false);
	out_char(o, '[');
	for (size_t i = 0; i < f->nranges; i++) {
		out_str(o, i ? ",{" : "{");
		out_key(o, "address", true);
		out_int(o, (int64_t)f->ranges[i].lo);
		out_json_uint(o, "size", f->ranges[i].hi - f->ranges[i].lo);
		out_char(o, '}');
	}
	out_str(o, "]}");
}

/* Whether trace times copy c: its entries and exits are known (inlsites.h). */
static bool copy_timed(const struct inl_copy *c)
{
	return c->sites && c->sites->mode == INLSITES_TIMED;
}

/* Whether trace counts copy c at its entries only: its exits are not known. */
static bool copy_counted(const struct inl_copy *c)
{
	return c->sites && c->sites->mode == INLSITES_ENTRY_ONLY;
}

static void json_sites(struct out *o, const struct binary *b, const char *key, const uint64_t *addr,
		       size_t n)
{
	out_key(o, key, false);
	out_char(o, '[');
	for (size_t i = 0; i < n; i++) {
		out_str(o, i ? ",{" : "{");
		out_key(o, "address", true);
		out_int(o, (int64_t)addr[i]);
		out_key(o, "kind", false);
		out_json_str(o, probe_entry__str(site_kind(b, addr[i])));
		out_char(o, '}');
	}
	out_char(o, ']');
}

static void json_ranges(struct out *o, const struct addr_range *r, size_t n)
{
	out_key(o, "ranges", false);
	out_char(o, '[');
	for (size_t i = 0; i < n; i++) {
		out_str(o, i ? ",{" : "{");
		out_key(o, "address", true);
		out_int(o, (int64_t)r[i].lo);
		out_json_uint(o, "size", r[i].hi - r[i].lo);
		out_char(o, '}');
	}
	out_char(o, ']');
}

/* "inlined": every copy, "inlined_total": how many there are (more past INL_MAX_COPIES) */
static void json_inlined(struct out *o, const struct binary *b, const struct inl_list *l)
{
	out_key(o, "inlined", false);
	out_char(o, '[');
	for (size_t i = 0; l && i < l->ncopies; i++) {
		const struct inl_copy *c = &l->copies[i];

		out_str(o, i ? ",{" : "{");
		out_key(o, "name", true);
		out_json_str(o, c->name);
		out_key(o, "caller", false);
		out_json_str(o, c->caller);
		out_key(o, "function", false);
		out_json_str(o, c->outer);
		out_json_uint(o, "function_address", c->outer_entry);
		out_json_uint(o, "depth", c->depth);
		json_ranges(o, c->ranges, c->nranges);
		out_key(o, "timed", false);
		out_str(o, copy_timed(c) ? "true" : "false");
		if (copy_timed(c) || copy_counted(c)) {
			json_sites(o, b, "entries", c->sites->entries, c->sites->nentries);
			json_sites(o, b, "exits", c->sites->exits, c->sites->nexits);
		}
		if (copy_counted(c)) {
			out_key(o, "counted", false);
			out_str(o, "true");
		}
		if (!copy_timed(c)) {
			out_key(o, "reason", false);
			out_json_str(o, c->sites ? c->sites->reason : "its sites were not read");
		}
		out_char(o, '}');
	}
	out_char(o, ']');
	out_json_uint(o, "inlined_total", l ? l->nmatched : 0);
}

static void print_json(struct out *o, const struct binary *b, const struct binary_match *m,
		       const struct inl_list *inl)
{
	out_char(o, '{');
	out_key(o, "binary", true);
	out_json_str(o, binary__path(b));
	out_key(o, "machine", false);
	out_json_str(o, binary__machine(b));
	out_key(o, "go_version", false);
	out_json_str_or_null(o, binary__go_version(b));
	out_key(o, "build_id", false);
	out_json_str_or_null(o, binary__build_id(b));
	out_key(o, "stripped", false);
	out_str(o, binary__stripped(b) ? "true" : "false");
	out_key(o, "debug_file", false);
	out_json_str_or_null(o, binary__debug_file(b));
	out_key(o, "debug_file_ignored", false);
	out_json_str_or_null(o, binary__debug_note(b));
	out_json_uint(o, "entries_emulated", entries_emulated(b, m));
	out_key(o, "functions", false);
	out_char(o, '[');
	for (size_t i = 0; i < m->nfuncs; i++) {
		if (i)
			out_char(o, ',');
		json_func(o, b, m->funcs[i]);
	}
	out_char(o, ']');
	json_inlined(o, b, inl);
	out_str(o, "}\n");
}

/* "    label      " then each offset as +0x.. or -0x.., or " none" */
static void print_offsets(struct out *o, const char *label, const int64_t *v, size_t n)
{
	size_t len = strlen(label);

	out_str(o, "    ");
	out_str(o, label);
	for (; len < 11; len++)
		out_char(o, ' ');
	if (!n)
		out_str(o, " none");
	for (size_t i = 0; i < n; i++) {
		out_str(o, v[i] < 0 ? " -0x" : " +0x");
		out_uint(o, v[i] < 0 ? -(uint64_t)v[i] : (uint64_t)v[i], 16);
	}
	out_char(o, '\n');
}

/* label, then v in base 10 or 16 (with 0x) */
static void print_num(struct out *o, const char *label, uint64_t v, unsigned int base)
{
	out_str(o, label);
	if (base == 16)
		out_str(o, "0x");
	out_uint(o, v, base);
}

static void print_func(struct out *o, const struct binary *b, const struct func_info *f)
{
	out_char(o, '\n');
	out_str(o, f->name);
	out_char(o, '\n');
	if (f->demangled) {
		out_str(o, "    demangled   ");
		out_str(o, f->demangled);
		out_char(o, '\n');
	}
	print_num(o, "    address     ", f->address, 16);
	print_num(o, "\n    file offset ", f->file_offset, 16);
	print_num(o, "\n    size        ", f->size, 10);
	print_num(o, "\n    entry probe +", (uint64_t)f->entry_site, 16);
	out_str(o, " (");
	out_str(o, probe_entry__str(entry_kind(b, f)));
	if (f->entry_sp) {
		print_num(o, ", past a frame of ", f->entry_sp, 10);
		out_str(o, " bytes");
	}
	out_str(o, ")\n");
	out_str(o, "    return      ");
	if (trampoline_refusal(b, f)) {
		out_str(o, "at its RETs (not the kernel's trampoline: ");
		out_str(o, trampoline_refusal(b, f));
		out_str(o, ")\n");
	} else {
		out_str(o, "the kernel's trampoline\n");
	}
	out_str(o, "    source      ");
	out_str(o, func_source__str(f->source));
	if (names_from(b, f) != binary__path(b)) {
		out_str(o, " of ");
		out_str(o, names_from(b, f));
	}
	out_str(o, "\n    mode        ");
	out_str(o, func_mode__str(f->mode));
	out_char(o, '\n');
	if (f->reason) {
		out_str(o, "    reason      ");
		out_str(o, f->reason);
		out_char(o, '\n');
	}
	print_offsets(o, "returns", f->returns, f->nreturns);
	if (f->ntail_calls)
		print_offsets(o, "tail calls", f->tail_calls, f->ntail_calls);
	if (f->ntail_returns) {
		print_num(o, "    tail timed  ", f->ntail_followed, 10);
		print_num(o, " of ", f->ntail_calls, 10);
		print_num(o, " tail calls: ended at ", f->ntail_returns, 10);
		out_str(o, " RETs of the functions they jump to\n");
	}
	if (f->ntail_untimed || f->nindirect_jumps) {
		char line[256];

		snprintf(line, sizeof(line),
			 "    tail exits  %zu jumps cannot be followed, %zu go through a "
			 "register: calls that leave by them are tail exits, not timed\n",
			 f->ntail_untimed, f->nindirect_jumps);
		out_str(o, line);
	}
	for (size_t r = 1; r < f->nranges; r++) {
		print_num(o, "    also range  ", f->ranges[r].lo, 16);
		print_num(o, "-", f->ranges[r].hi, 16);
		out_char(o, '\n');
	}
}

static void print_sites(struct out *o, const struct binary *b, const char *what,
			const uint64_t *addr, size_t n)
{
	out_str(o, what);
	for (size_t i = 0; i < n; i++) {
		print_num(o, " ", addr[i], 16);
		out_str(o, " (");
		out_str(o, probe_entry__str(site_kind(b, addr[i])));
		out_char(o, ')');
	}
}

static void print_copy(struct out *o, const struct binary *b, const struct inl_copy *c)
{
	out_char(o, '\n');
	out_str(o, c->name);
	out_str(o, " (inlined)\n    caller      ");
	out_str(o, c->caller);
	out_str(o, "\n    in function ");
	out_str(o, c->outer);
	print_num(o, " at ", c->outer_entry, 16);
	/* depth 1: inlined into a copy that is inlined into the function */
	if (c->depth)
		print_num(o, ", depth ", c->depth, 10);
	out_str(o, "\n    ranges     ");
	if (!c->nranges)
		out_str(o, " none (no instructions left)");
	for (size_t i = 0; i < c->nranges; i++) {
		print_num(o, " ", c->ranges[i].lo, 16);
		print_num(o, "-", c->ranges[i].hi, 16);
	}
	if (copy_timed(c) || copy_counted(c))
		print_sites(o, b, "\n    entries    ", c->sites->entries, c->sites->nentries);
	if (copy_timed(c))
		print_sites(o, b, "\n    exits      ", c->sites->exits, c->sites->nexits);
	else {
		out_str(o, copy_counted(c) ? "\n    counted     " : "\n    not timed   ");
		out_str(o, c->sites ? c->sites->reason : "its sites were not read");
	}
	out_char(o, '\n');
}

static void print_inlined(struct out *o, const struct binary *b, const struct inl_list *l)
{
	size_t probed = 0, counted = 0;

	if (!l || !l->nmatched)
		return;
	for (size_t i = 0; i < l->ncopies; i++) {
		print_copy(o, b, &l->copies[i]);
		probed += copy_timed(&l->copies[i]);
		counted += copy_counted(&l->copies[i]);
	}
	print_num(o, "\ninlined copies: ", l->nmatched, 10);
	if (l->nmatched > l->ncopies)
		print_num(o, " (the first ", l->ncopies, 10);
	out_str(o, l->nmatched > l->ncopies ? " listed)" : "");
	print_num(o, ", in ", inl_list__ncallers(l), 10);
	print_num(o, " callers; timed: ", probed, 10);
	if (counted)
		print_num(o, ", counted at their entries: ", counted, 10);
	out_str(o, " (each entry and exit a uprobe; a stepped one costs a second trap)\n");
}

static void print_text(struct out *o, const struct binary *b, const struct binary_match *m,
		       const struct inl_list *inl)
{
	const char *gv = binary__go_version(b), *bid = binary__build_id(b);

	out_str(o, binary__path(b));
	out_str(o, gv ? ": Go " : ": native");
	out_str(o, gv ? gv : "");
	out_str(o, ", build id ");
	out_str(o, bid ? bid : "none");
	out_str(o, binary__stripped(b) ? ", stripped\n" : ", not stripped\n");
	if (binary__debug_file(b)) {
		out_str(o, "symbols from ");
		out_str(o, binary__debug_file(b));
		out_char(o, '\n');
	}
	if (binary__debug_note(b)) {
		out_str(o, binary__debug_note(b));
		out_char(o, '\n');
	}
	for (size_t i = 0; i < m->nfuncs; i++)
		print_func(o, b, m->funcs[i]);
	if (m->nfuncs) {
		print_num(
			o,
			"\nentry probes on an instruction the kernel emulates (push, nop, jump, call): ",
			entries_emulated(b, m), 10);
		print_num(o, " of ", m->nfuncs, 10);
		out_str(o, " functions\n");
	}
	print_inlined(o, b, inl);
}

/* Whether one of l's copies is of a function pattern names. */
static bool inlined_has(const struct inl_list *l, const char *pattern)
{
	for (size_t i = 0; l && i < l->ncopies; i++)
		if (binary__inlined_match(pattern, l->copies[i].name))
			return true;
	return false;
}

/* The patterns that match nothing, not even an inlined copy; how many. */
static size_t report_unmatched(const struct binary *b, const struct binary_match *m,
			       const struct inl_list *inl)
{
	size_t n = 0;
	char note[1024];

	for (size_t i = 0; i < m->nunmatched; i++) {
		const struct binary_unmatched *u = &m->unmatched[i];

		if (inlined_has(inl, u->pattern))
			continue;
		n++;
		fprintf(stderr, "retwatch: no function matches '%s' in %s", u->pattern,
			binary__path(b));
		if (!u->nsuggestions && binary__stripped_note(b, note, sizeof(note))) {
			fprintf(stderr, ": %s\n", note);
			continue;
		}
		if (!u->nsuggestions) {
			fprintf(stderr, " (%zu functions searched)\n", binary__nfuncs(b));
			continue;
		}
		fprintf(stderr, "; similar names:");
		for (size_t j = 0; j < u->nsuggestions; j++)
			fprintf(stderr, "%s %s", j ? "," : "", u->suggestions[j]);
		fprintf(stderr, "\n");
	}
	return n;
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

static int parse_limit(const char *arg, size_t *ret_limit)
{
	char *end;

	errno = 0;
	*ret_limit = strtoul(arg, &end, 10);
	if (errno || *end || !*arg || arg[0] == '-' || !*ret_limit) {
		fprintf(stderr, "retwatch: invalid --limit '%s': give a positive number\n", arg);
		return -EINVAL;
	}
	return 0;
}

/* Prints the functions and copies found to stdout; 0 or -errno (said on stderr). */
static int write_results(const struct binary *b, const struct binary_match *m,
			 const struct inl_list *inl, bool json)
{
	struct out *out = calloc(1, sizeof(*out));
	int ret;

	if (!out) {
		fprintf(stderr, "retwatch: out of memory\n");
		return -ENOMEM;
	}
	out->f = stdout;
	errno = 0;
	if (json)
		print_json(out, b, m, inl);
	else
		print_text(out, b, m, inl);
	out_flush(out);
	if (!out->err && fflush(stdout))
		out->err = errno ? -errno : -EIO;
	ret = out->err;
	if (ret)
		fprintf(stderr, "retwatch: failed to write the output: %s\n", strerror(-ret));
	free(out);
	return ret;
}

int cmd_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "limit", required_argument, NULL, 'l' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct binary_match m = {};
	struct inl_list *inl = NULL;
	struct rw_error err = {};
	struct binary *b = NULL;
	bool json = false;
	size_t limit = BINARY_DEFAULT_LIMIT, nmissing;
	int c, ret = 1;

	/* options anywhere: `inspect BIN --json PAT` too (no function name starts with '-') */
	while ((c = getopt_long(argc, argv, "jl:D:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		case 'l':
			if (parse_limit(optarg, &limit))
				return 2;
			break;
		case 'D':
			if (cmd_debug_dir(optarg))
				return 2;
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
	/* a Go function may exist inlined only: its copies, from the inline tree
	 * (why they could not be read matters to a name that matched nothing) */
	if (binary__inlined(b, (const char *const *)argv + optind + 1, argc - optind - 1, &inl,
			    &err) &&
	    m.nunmatched)
		fprintf(stderr, "retwatch: cannot list the inlined copies in %s: %s\n",
			binary__path(b), err.msg);
	if (binary__inlined_probe(b, inl)) {
		fprintf(stderr, "retwatch: out of memory\n");
		goto cleanup;
	}
	nmissing = report_unmatched(b, &m, inl);
	if ((m.nfuncs || (inl && inl->nmatched)) && write_results(b, &m, inl, json))
		goto cleanup;
	ret = nmissing || (!m.nfuncs && !(inl && inl->nmatched)) ? 1 : 0;
cleanup:
	inl_list__free(inl);
	binary_match__clear(&m);
	binary__put(b);
	return ret;
}
