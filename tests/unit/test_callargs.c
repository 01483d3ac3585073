// SPDX-License-Identifier: MIT
/*
 * A call's arguments as shown (src/trace/callargs.c) from what the kernel
 * sent: the values as the registers hold them, and registers that lie (a
 * string length of 2^63, a pointer the kernel could not read, a C string
 * without its NUL) said, never read past what was sent.
 */
#include <errno.h>
#include <string.h>

#include "analysis/params.h"
#include "trace/callargs.h"
#include "trace/tracer.h"
#include "test.h"

static struct param param(const char *name, const char *type, enum param_kind kind, int size,
			  int r0, int r1, int string)
{
	struct param p = { .kind = (uint8_t)kind, .size = (uint8_t)size, .string = (int8_t)string };

	snprintf(p.name, sizeof(p.name), "%s", name);
	snprintf(p.type, sizeof(p.type), "%s", type);
	p.regs[0] = (uint8_t)r0;
	p.regs[1] = (uint8_t)r1;
	p.nregs = r1 >= 0 ? 2 : 1;
	return p;
}

/* Go's charge(customer string, cents int64, express bool) and a C lookup's key. */
static struct func_params charge_params(void)
{
	struct func_params fp = { .n = 5, .nstrings = 2 };

	fp.p[0] = param("customer", "string", PARAM_STRING, 0, PREG_RAX, PREG_RBX, 0);
	fp.p[1] = param("cents", "int64", PARAM_INT, 8, PREG_RCX, -1, -1);
	fp.p[2] = param("express", "bool", PARAM_BOOL, 1, PREG_RDI, -1, -1);
	fp.p[3] = param("key", "const char *", PARAM_CSTRING, 8, PREG_RSI, -1, 1);
	fp.p[4] = param("small", "int32", PARAM_INT, 4, PREG_R8, -1, -1);
	return fp;
}

/* ca's argument name; one with nothing when there is none (the checks fail). */
static const struct call_arg *arg(const struct call_args *ca, const char *name)
{
	static const struct call_arg none = { .length = -2 };

	for (size_t i = 0; i < ca->n; i++)
		if (!strcmp(ca->a[i].name, name))
			return &ca->a[i];
	fprintf(stderr, "  no argument %s\n", name);
	return &none;
}

TEST(callargs_values_as_passed)
{
	bool ok = true;
	struct func_params fp = charge_params();
	static const uint8_t customer[] = "slow-co", key[] = "k\x01\\y";
	struct tracer_args ta = { .params = &fp };
	struct call_args ca;
	char text[256];

	ta.regs[PREG_RAX] = 0x1000;
	ta.regs[PREG_RBX] = 7;
	ta.regs[PREG_RCX] = (uint64_t)-5017;
	ta.regs[PREG_RDI] = 0x7700; /* a bool is its low byte */
	ta.regs[PREG_RSI] = 0x2000;
	ta.regs[PREG_R8] = 0xffffffff80000000ULL; /* an int32 is its low half */
	ta.str[0] = customer;
	ta.str_len[0] = 7;
	ta.str[1] = key;
	ta.str_len[1] = sizeof(key); /* with its NUL */
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_EQ(ca.n, 5);
	ok &= ASSERT_STREQ(arg(&ca, "customer")->value, "slow-co");
	ok &= ASSERT_EQ(arg(&ca, "customer")->length, 7);
	ok &= ASSERT_FALSE(arg(&ca, "customer")->truncated);
	ok &= ASSERT_STREQ(arg(&ca, "cents")->value, "-5017");
	ok &= ASSERT_STREQ(arg(&ca, "express")->value, "false");
	ok &= ASSERT_STREQ(arg(&ca, "key")->value, "k\\x01\\\\y");
	ok &= ASSERT_EQ(arg(&ca, "key")->length, 4);
	ok &= ASSERT_STREQ(arg(&ca, "small")->value, "-2147483648");
	call_args__text(&ca, text, sizeof(text));
	ok &= ASSERT_STREQ(text,
			   "customer=\"slow-co\" cents=-5017 express=false key=\"k\\x01\\\\y\" "
			   "small=-2147483648");
	call_args__clear(&ca);
	return ok;
}

TEST(callargs_registers_that_lie_are_said)
{
	bool ok = true;
	struct func_params fp = charge_params();
	uint8_t long_key[64];
	struct tracer_args ta = { .params = &fp };
	struct call_args ca;

	memset(long_key, 'a', sizeof(long_key));
	ta.regs[PREG_RAX] = 0x1000;
	ta.regs[PREG_RBX] = 1ULL << 63; /* no string is this long */
	ta.regs[PREG_RSI] = 0x2000;
	ta.str[1] = long_key;
	ta.str_len[1] = 64; /* no NUL in the bytes read */
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_TRUE(arg(&ca, "customer")->value == NULL);
	ok &= ASSERT_STRCONTAINS(arg(&ca, "customer")->error, "not a string's");
	ok &= ASSERT_TRUE(arg(&ca, "key")->value && strlen(arg(&ca, "key")->value) == 64);
	ok &= ASSERT_TRUE(arg(&ca, "key")->truncated);
	ok &= ASSERT_EQ(arg(&ca, "key")->length, -1);
	call_args__clear(&ca);

	/* an unreadable pointer, a long Go string cut at what was read, NULL */
	ta.regs[PREG_RBX] = 1000;
	ta.str[0] = long_key;
	ta.str_len[0] = 64;
	ta.regs[PREG_RSI] = 0;
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_TRUE(arg(&ca, "customer")->value && strlen(arg(&ca, "customer")->value) == 64);
	ok &= ASSERT_TRUE(arg(&ca, "customer")->truncated);
	ok &= ASSERT_EQ(arg(&ca, "customer")->length, 1000);
	ok &= ASSERT_STREQ(arg(&ca, "key")->value, "NULL");
	call_args__clear(&ca);
	ta.regs[PREG_RSI] = 0x2000;
	ta.str_len[1] = -EFAULT;
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_STRCONTAINS(arg(&ca, "key")->error, "could not be read");
	call_args__clear(&ca);
	return ok;
}

TEST(callargs_raw_registers_and_none)
{
	bool ok = true;
	struct func_params fp;
	struct tracer_args ta = { .params = &fp };
	struct call_args ca;
	uint64_t packed;

	params__raw(&fp, true, false, "the file has no DWARF");
	ok &= ASSERT_EQ(fp.n, 9);
	ok &= ASSERT_STREQ(fp.p[1].name, "rbx");
	ta.regs[PREG_RBX] = 7;
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_STREQ(arg(&ca, "rbx")->value, "0x7");
	ok &= ASSERT_STREQ(ca.note, "the file has no DWARF");
	call_args__clear(&ca);
	params__raw(&fp, false, false, "x");
	ok &= ASSERT_STREQ(fp.p[0].name, "rdi");
	ok &= ASSERT_EQ(fp.n, 6);
	/* no strings: every slot of the kernel's word unused */
	ok &= ASSERT_TRUE(params__kernel_strings(&fp) == ~0ULL);
	fp = charge_params();
	packed = params__kernel_strings(&fp);
	ok &= ASSERT_EQ(packed & 0xff, PREG_RAX | PREG_RBX << 4);
	ok &= ASSERT_EQ((packed >> 8) & 0xff, PREG_RSI | 0xf << 4);
	ok &= ASSERT_EQ((packed >> 16) & 0xffff, 0xffff);
	/* nothing kept: nothing shown */
	ta.params = NULL;
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_EQ(ca.n, 0);
	return ok;
}

TEST(callargs_raw_registers_of_aarch64)
{
	bool ok = true;
	struct func_params fp;
	struct tracer_args ta = { .params = &fp };
	struct call_args ca;

	/* Go: X0-X9 of its X0-X15; C (AAPCS64): X0-X7; slot i holds Xi */
	params__raw(&fp, true, true, "the file has no DWARF");
	ok &= ASSERT_EQ(fp.n, 10);
	ok &= ASSERT_STREQ(fp.p[0].name, "x0") && ASSERT_STREQ(fp.p[9].name, "x9");
	ta.regs[3] = 40;
	ok &= ASSERT_EQ(call_args__render(&ta, &ca), 0);
	ok &= ASSERT_STREQ(arg(&ca, "x3")->value, "0x28");
	call_args__clear(&ca);
	params__raw(&fp, false, true, "x");
	ok &= ASSERT_EQ(fp.n, 8);
	ok &= ASSERT_EQ(fp.p[7].regs[0], 7);
	return ok;
}

TEST(callargs_redacted_by_name)
{
	static const char *const secret[] = { "password",      "PassWord",  "passwd",
					      "auth_token",    "apiKey",    "x-api-key",
					      "client.secret", "Cookie",    "sessionID",
					      "pin",	       "AUTH",	    "privateKey",
					      "tokens",	       "bearer_jwt" };
	static const char *const plain[] = { "user",  "host", "author",	  "pinned", "port",
					     "cents", "key",  "customer", "shard" };
	bool ok = true;

	for (size_t i = 0; ok && i < sizeof(secret) / sizeof(*secret); i++)
		ok = CHECK(call_args__redacted(secret[i]), "%s not redacted", secret[i]);
	for (size_t i = 0; ok && i < sizeof(plain) / sizeof(*plain); i++)
		ok = CHECK(!call_args__redacted(plain[i]), "%s redacted", plain[i]);
	ok = ok && ASSERT_OK(call_args__redact_add("Card_Holder")) &&
	     ASSERT_TRUE(call_args__redacted("cardholder_name")) &&
	     ASSERT_EQ(call_args__redact_add("_-."), -EINVAL);
	call_args__redact_defaults(false);
	ok = ok && ASSERT_FALSE(call_args__redacted("password"));
	call_args__redact_reset();
	ok = ok && ASSERT_TRUE(call_args__redacted("password")) &&
	     ASSERT_FALSE(call_args__redacted("cardholder"));
	return ok;
}
