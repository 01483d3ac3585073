// SPDX-License-Identifier: MIT
/* The overhead budget's syntax, spec.maxOverhead, and the probes' bias taken out of a report. */
#include <errno.h>

#include <cjson/cJSON.h>

#include "trace/calibrate.h"
#include "kube/kobj.h"
#include "agent/probe.h"
#include "agent/status.h"
#include "test.h"

TEST(calibrate_parse_overhead)
{
	static const struct {
		const char *s;
		double want; /* < 0: refused */
	} cases[] = {
		{ "2%", 0.02 }, { "0.5%", 0.005 }, { "0", 0 },	   { "0%", 0 },	  { "0.02", 0.02 },
		{ "100%", 1 },	{ "1", 1 },	   { "101%", -1 }, { "-1%", -1 }, { "two", -1 },
		{ "2%%", -1 },	{ "", -1 },	   { "2 %", -1 },  { "nan", -1 }, { "inf", -1 },
		{ "+2%", -1 },	{ "1.5", -1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double v = -1;
		int e = calibrate__parse_overhead(cases[i].s, &v);

		if (cases[i].want < 0) {
			if (!CHECK(e == -EINVAL, "'%s' taken as %g", cases[i].s, v))
				return false;
		} else if (!CHECK(!e && v > cases[i].want - 1e-12 && v < cases[i].want + 1e-12,
				  "'%s': %d, %g", cases[i].s, e, v)) {
			return false;
		}
	}
	return ASSERT_EQ(latency__less(10, 4), 6) && ASSERT_EQ(latency__less(3, 4), 0);
}

static int parse_spec(const char *extra, struct probe_spec *s, struct rw_error *err)
{
	char json[512];
	cJSON *doc;
	int e;

	snprintf(json, sizeof(json), "{\"selector\":{},\"functions\":[\"a\"]%s}", extra);
	doc = cJSON_Parse(json);
	e = probe_spec__parse(doc, s, err);
	cJSON_Delete(doc);
	return e;
}

TEST(probe_spec_max_overhead)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(parse_spec("", &s, &err)))
		return false;
	ok = ASSERT_TRUE(s.max_overhead == CALIBRATE_DEFAULT_MAX_OVERHEAD);
	probe_spec__free(&s);
	if (!ok || !ASSERT_OK(parse_spec(",\"maxOverhead\":\"10%\"", &s, &err)))
		return false;
	ok = ASSERT_TRUE(s.max_overhead > 0.0999 && s.max_overhead < 0.1001);
	probe_spec__free(&s);
	if (!ok || !ASSERT_OK(parse_spec(",\"maxOverhead\":\"0\"", &s, &err)))
		return false;
	ok = ASSERT_TRUE(s.max_overhead == 0);
	probe_spec__free(&s);
	return ok && ASSERT_EQ(parse_spec(",\"maxOverhead\":\"lots\"", &s, &err), -EINVAL) &&
	       CHECK(strstr(err.msg, "spec.maxOverhead") && strstr(err.msg, "2%"), "%s", err.msg) &&
	       ASSERT_EQ(parse_spec(",\"maxOverhead\":true", &s, &err), -EINVAL);
}

/* AArch64's kinds (little-endian words). */
TEST(calibrate_entry_kind_a64)
{
	static const struct {
		uint32_t w;
		enum probe_entry want;
	} cases[] = {
		{ 0xa9bf7bfd, PROBE_ENTRY_PUSH },    /* stp x29, x30, [sp, #-16]! */
		{ 0xa9b67bfd, PROBE_ENTRY_PUSH },    /* stp x29, x30, [sp, #-160]! */
		{ 0xa9017bfd, PROBE_ENTRY_STEPPED }, /* stp x29, x30, [sp, #16]: no writeback */
		{ 0xd503201f, PROBE_ENTRY_NOP },     /* nop */
		{ 0xd503245f, PROBE_ENTRY_NOP5 },    /* bti c */
		{ 0xd503233f, PROBE_ENTRY_NOP5 },    /* paciasp */
		{ 0x14000002, PROBE_ENTRY_JUMP },    /* b .+8 */
		{ 0x54000044, PROBE_ENTRY_JUMP },    /* b.mi .+8 */
		{ 0xb4000040, PROBE_ENTRY_JUMP },    /* cbz x0, .+8 */
		{ 0x94000010, PROBE_ENTRY_CALL },    /* bl .+64 */
		{ 0xf9400b90, PROBE_ENTRY_STEPPED }, /* ldr x16, [x28, #16]: Go's stack check */
		{ 0xd65f03c0, PROBE_ENTRY_STEPPED }, /* ret */
		{ 0x11000400, PROBE_ENTRY_STEPPED }, /* add w0, w0, #1 */
	};
	bool ok = true;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t code[4] = { cases[i].w, cases[i].w >> 8, cases[i].w >> 16,
				    cases[i].w >> 24 };
		enum probe_entry got = calibrate__entry_kind(DISASM_AARCH64, code, sizeof(code));

		ok &= CHECK(got == cases[i].want, "case %zu (%08x): %s, want %s", i, cases[i].w,
			    probe_entry__str(got), probe_entry__str(cases[i].want));
	}
	ok &= ASSERT_EQ(calibrate__entry_kind(DISASM_AARCH64, (const uint8_t *)"\x1f\x20\x03", 3),
			PROBE_ENTRY_STEPPED); /* cut short */
	return ok;
}

/* The kind of a function's first instruction, as the kernel's entry probe sees it. */
TEST(calibrate_entry_kind)
{
	static const struct {
		uint8_t code[8];
		size_t len;
		enum probe_entry want;
	} cases[] = {
		{ { 0x55, 0x48, 0x89, 0xe5 }, 4, PROBE_ENTRY_PUSH },	      /* push %rbp */
		{ { 0x41, 0x57, 0x41, 0x56 }, 4, PROBE_ENTRY_PUSH },	      /* push %r15 */
		{ { 0x53 }, 1, PROBE_ENTRY_PUSH },			      /* push %rbx */
		{ { 0x90, 0x55 }, 2, PROBE_ENTRY_NOP },			      /* nop */
		{ { 0x66, 0x90 }, 2, PROBE_ENTRY_NOP },			      /* xchg %ax,%ax */
		{ { 0x0f, 0x1f, 0x40, 0x00 }, 4, PROBE_ENTRY_NOP },	      /* nopl 0(%rax) */
		{ { 0x0f, 0x1f, 0x44, 0x00, 0x00 }, 5, PROBE_ENTRY_NOP5 },    /* nop5 */
		{ { 0x0f, 0x1f, 0x44, 0x00 }, 4, PROBE_ENTRY_NOP },	      /* cut short */
		{ { 0xf3, 0x0f, 0x1e, 0xfa, 0x55 }, 5, PROBE_ENTRY_STEPPED }, /* endbr64 */
		{ { 0x49, 0x3b, 0x66, 0x10 }, 4, PROBE_ENTRY_STEPPED },	      /* Go's stack check */
		{ { 0x48, 0x83, 0xec, 0x08 }, 4, PROBE_ENTRY_STEPPED },	      /* sub $8,%rsp */
		{ { 0x41, 0x58 }, 2, PROBE_ENTRY_STEPPED },		      /* pop %r8 */
		{ { 0x0f, 0x1f, 0xc8 }, 3, PROBE_ENTRY_STEPPED },    /* 0f 1f /1: not a NOP */
		{ { 0x55 }, 0, PROBE_ENTRY_STEPPED },		     /* nothing read */
		{ { 0x7c, 0x10 }, 2, PROBE_ENTRY_JUMP },	     /* jl */
		{ { 0xeb, 0xfe }, 2, PROBE_ENTRY_JUMP },	     /* jmp . */
		{ { 0x0f, 0x84, 0, 0, 0 }, 5, PROBE_ENTRY_STEPPED }, /* je rel32, cut short */
		{ { 0xe8, 0x10, 0, 0, 0 }, 5, PROBE_ENTRY_CALL },    /* call rel32 */
		{ { 0x66, 0xe8, 0x10, 0 }, 4, PROBE_ENTRY_STEPPED }, /* callw: refused */
	};
	bool ok = true;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ok &= CHECK(calibrate__entry_kind(DISASM_X86_64, cases[i].code, cases[i].len) ==
				    cases[i].want,
			    "case %zu: %s, want %s", i,
			    probe_entry__str(calibrate__entry_kind(DISASM_X86_64, cases[i].code,
								   cases[i].len)),
			    probe_entry__str(cases[i].want));
	for (int k = 0; k < PROBE_ENTRY__N; k++)
		ok &= ASSERT_EQ(probe_entry__parse(probe_entry__str(k)), k);
	return ok && ASSERT_EQ(probe_entry__parse("bogus"), PROBE_ENTRY_STEPPED) &&
	       ASSERT_EQ(probe_entry__parse(NULL), PROBE_ENTRY_STEPPED);
}

/* p50, p95, p99 and max less the bias, never below zero; the measured ones under raw. */
TEST(status_bias_taken_out)
{
	struct calibration cal = { .bias_ns = 4000, .call_cost_ns = 9000 };
	struct latency l = { 0 }, back;
	cJSON *entry = cJSON_CreateObject(), *fns = cJSON_AddArrayToObject(entry, "functions");
	cJSON *fn = cJSON_CreateObject(), *pods, *pod = cJSON_CreateObject();
	bool ok = false;

	for (int i = 0; i < 100; i++)
		latency__record(&l, 24000); /* a 20 us function with 4 us of bias */
	latency__record(&l, 3000);	    /* shorter than the bias: shown as 0 */
	cJSON_AddItemToArray(fns, fn);
	cJSON_AddStringToObject(fn, "name", "f");
	status_latency__to_json(&l, fn);
	pods = cJSON_AddArrayToObject(fn, "pods");
	cJSON_AddItemToArray(pods, pod);
	status_latency__to_json(&l, pod);
	status__add_bias(entry, &cal);
	if (!ASSERT_STREQ(kobj_str(entry, "probeBias"), "4.000us") ||
	    !ASSERT_EQ(kobj_int(entry, "probeBiasNs", -1), 4000) ||
	    !ASSERT_EQ(kobj_int(entry, "callCostNs", -1), 9000) ||
	    !ASSERT_STREQ(kobj_str(fn, "p50"), "20.00us") ||
	    !ASSERT_STREQ(kobj_str(fn, "max"), "20.00us") ||
	    !ASSERT_STREQ(kobj_str(kobj_get(fn, "raw"), "p50"), "24.00us") ||
	    !ASSERT_STREQ(kobj_str(kobj_get(fn, "raw"), "max"), "24.00us") ||
	    !ASSERT_STREQ(kobj_str(pod, "p99"), "20.00us") ||
	    !ASSERT_STREQ(kobj_str(kobj_get(pod, "raw"), "p99"), "24.00us") ||
	    /* the exact figures stay as measured: the summary merges them */
	    !ASSERT_EQ(kobj_int(fn, "minNs", -1), 3000) ||
	    !ASSERT_OK(status_latency__from_json(fn, &back)) || !ASSERT_EQ(back.sum_ns, l.sum_ns))
		goto out;
	/* a function's shortest call, less the bias, is 0 at most */
	{
		struct latency tiny = { 0 };
		cJSON *e2 = cJSON_CreateObject(), *f2 = cJSON_CreateObject();

		latency__record(&tiny, 3000);
		cJSON_AddItemToArray(cJSON_AddArrayToObject(e2, "functions"), f2);
		status_latency__to_json(&tiny, f2);
		status__add_bias(e2, &cal);
		ok = ASSERT_STREQ(kobj_str(f2, "p50"), "0ns") &&
		     ASSERT_STREQ(kobj_str(kobj_get(f2, "raw"), "p50"), "3.000us");
		cJSON_Delete(e2);
	}
	/* a function entered at a PUSH: its own kind's bias, and it says which */
	{
		struct calibration by = cal;
		cJSON *e3 = cJSON_CreateObject(), *f3 = cJSON_CreateObject();

		by.entry_bias_ns[PROBE_ENTRY_STEPPED] = 4000;
		by.entry_bias_ns[PROBE_ENTRY_PUSH] = 800;
		cJSON_AddItemToArray(cJSON_AddArrayToObject(e3, "functions"), f3);
		cJSON_AddStringToObject(f3, "probeEntry", "push");
		status_latency__to_json(&l, f3);
		status__add_bias(e3, &by);
		ok = ok && ASSERT_STREQ(kobj_str(f3, "p50"), "23.20us") &&
		     ASSERT_EQ(kobj_int(f3, "probeBiasNs", -1), 800) &&
		     ASSERT_EQ(kobj_int(e3, "probeBiasNs", -1), 4000);
		cJSON_Delete(e3);
	}
out:
	cJSON_Delete(entry);
	return ok;
}

/* A calibration ends early only when every figure moved less than 50 ns
 * plus 1/32 of it over the last rounds. */
TEST(calibrate_settled_figures)
{
	uint64_t then[3] = { 5000, 600, 15000 };
	uint64_t same[3] = { 5000, 600, 15000 };
	uint64_t near[3] = { 5200, 670, 15500 };  /* 200, 70, 500 off; 212, 70, 534 allowed */
	uint64_t drift[3] = { 5000, 671, 15000 }; /* one figure 71 ns off */
	uint64_t load[3] = { 5000, 600, 20000 };

	return ASSERT_TRUE(calibrate__settled(same, then, 3)) &&
	       ASSERT_TRUE(calibrate__settled(near, then, 3)) &&
	       ASSERT_TRUE(calibrate__settled(then, near, 3)) &&
	       ASSERT_FALSE(calibrate__settled(drift, then, 3)) &&
	       ASSERT_FALSE(calibrate__settled(then, drift, 3)) &&
	       ASSERT_FALSE(calibrate__settled(load, then, 3)) &&
	       ASSERT_TRUE(calibrate__settled(load, then, 2));
}

/* Entry probes go only on the kinds measured to cost one trap: at most three
 * quarters of the stepped kind's bias; nothing measured, nothing allowed. */
TEST(calibrate_emulated_kinds_are_the_measured_ones)
{
	struct calibration cal = { .bias_ns = 4000 };
	bool ok = true;

	ok &= ASSERT_EQ(calibrate__emulated(&cal), 0);
	cal.entry_bias_ns[PROBE_ENTRY_STEPPED] = 4000;
	cal.entry_bias_ns[PROBE_ENTRY_PUSH] = 800;
	cal.entry_bias_ns[PROBE_ENTRY_NOP] = 3900; /* stepped on this kernel */
	cal.entry_bias_ns[PROBE_ENTRY_NOP5] = 3000;
	cal.entry_bias_ns[PROBE_ENTRY_JUMP] = 3001;
	cal.entry_bias_ns[PROBE_ENTRY_CALL] = 0; /* not measured */
	ok &= ASSERT_EQ(calibrate__emulated(&cal), 1U << PROBE_ENTRY_PUSH | 1U << PROBE_ENTRY_NOP5);
	cal.bias_ns = 0;
	ok &= ASSERT_EQ(calibrate__emulated(&cal), 0);
	return ok;
}
