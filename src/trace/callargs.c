// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/params.h"
#include "trace/callargs.h"
#include "trace/tracer.h"

/* A Go length past this is no string's: the register held something else. */
#define MAX_STRING_LEN (1ULL << 40)

/* bytes, printable ASCII as they are, the rest as \xNN (and \\), NUL-terminated. */
static char *escape(const uint8_t *b, size_t n)
{
	char *s = malloc(n * 4 + 1), *p = s;

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '\\') {
			*p++ = '\\';
			*p++ = '\\';
		} else if (b[i] >= 0x20 && b[i] < 0x7f) {
			*p++ = (char)b[i];
		} else {
			p += sprintf(p, "\\x%02x", b[i]);
		}
	}
	*p = 0;
	return s;
}

static char *fmt(const char *f, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), f, v);
	return strdup(buf);
}

static int64_t sign_extend(uint64_t v, unsigned int size)
{
	unsigned int shift = size >= 8 ? 0 : 64 - 8 * size;

	return (int64_t)(v << shift) >> shift;
}

static uint64_t zero_extend(uint64_t v, unsigned int size)
{
	return size >= 8 ? v : v & ((1ULL << (8 * size)) - 1);
}

/* The string of p (its slot's bytes), into a. */
static void render_string(const struct param *p, const struct tracer_args *ta, struct call_arg *a)
{
	uint64_t len = p->kind == PARAM_CSTRING ? 0 : ta->regs[p->regs[1]];
	uint64_t ptr = ta->regs[p->regs[0]];
	char why[96];
	int got;

	a->length = -1;
	if (p->kind != PARAM_CSTRING && len > MAX_STRING_LEN) {
		snprintf(why, sizeof(why), "a length of %" PRIu64 " is not a string's", len);
		a->error = strdup(why);
		return;
	}
	if (p->kind == PARAM_CSTRING && !ptr) {
		a->value = strdup("NULL");
		return;
	}
	if (p->string < 0 || p->string >= TRACER_STR_ARGS) {
		a->length = (int64_t)len;
		a->error = strdup("not read: the probe reads the first 4 strings of a call");
		return;
	}
	got = ta->str_len[p->string];
	if (got < 0) {
		snprintf(why, sizeof(why), "its bytes at 0x%" PRIx64 " could not be read (%s)", ptr,
			 strerror(-got));
		a->length = p->kind == PARAM_CSTRING ? -1 : (int64_t)len;
		a->error = strdup(why);
		return;
	}
	a->quoted = true;
	if (p->kind == PARAM_CSTRING) {
		/* read up to and with its NUL; none in the bytes read: cut */
		size_t n = got > 0 && !ta->str[p->string][got - 1] ? (size_t)got - 1 : (size_t)got;

		a->truncated = !(got > 0 && !ta->str[p->string][got - 1]);
		a->length = a->truncated ? -1 : (int64_t)n;
		a->value = escape(ta->str[p->string], n);
		return;
	}
	a->length = (int64_t)len;
	a->truncated = (uint64_t)got < len;
	a->value = escape(ta->str[p->string], (size_t)got);
}

static void render_one(const struct param *p, const struct tracer_args *ta, bool raw,
		       struct call_arg *a)
{
	uint64_t v = p->nregs ? ta->regs[p->regs[0] % TRACER_ARG_REGS] : 0;
	char buf[32];

	a->length = -1;
	if (p->why) {
		a->error = strdup(p->why);
		return;
	}
	switch (p->kind) {
	case PARAM_INT:
		snprintf(buf, sizeof(buf), "%" PRId64, sign_extend(v, p->size));
		a->value = strdup(buf);
		break;
	case PARAM_UINT:
		a->value = fmt(raw ? "0x%" PRIx64 : "%" PRIu64, zero_extend(v, p->size));
		break;
	case PARAM_BOOL: a->value = strdup(v & 0xff ? "true" : "false"); break;
	case PARAM_PTR: a->value = fmt("0x%" PRIx64, v); break;
	case PARAM_STRING:
	case PARAM_BYTES:
	case PARAM_CSTRING: render_string(p, ta, a); break;
	case PARAM_SLICE:
		/* its elements are not read: how many there are */
		snprintf(buf, sizeof(buf), "len %" PRIu64 " cap %" PRIu64,
			 ta->regs[p->regs[1] % TRACER_ARG_REGS],
			 ta->regs[p->regs[2] % TRACER_ARG_REGS]);
		a->value = strdup(buf);
		break;
	default: a->error = strdup("not read");
	}
}

/* ---- redaction ---- */

/* Held anywhere in a normalised name. */
static const char *const secret_words[] = {
	"password",	 "passwd",     "passphrase",   "secret",     "token",
	"apikey",	 "accesskey",  "privatekey",   "credential", "authorization",
	"cookie",	 "session",    "signature",    "bearer",     "creditcard",
	"cardnumber",	 "ccnumber",   "securitycode", "clientkey",  "masterkey",
	"encryptionkey", "signingkey", "salt",	       "nonce",	     "connectionstring",
	"dsn",		 NULL,
};
/* Only as the whole name: shorter words that are parts of other words. */
static const char *const secret_names[] = {
	"pwd", "pass", "auth", "pin",  "otp", "jwt", "ssn",
	"cvv", "cvc",  "csrf", "xsrf", "sid", "dsn", NULL,
};
static char *extra[CALLARGS_MAX_REDACT];
static size_t nextra;
static bool redact_off;

/* name lowercased, without '_', '-', '.' and spaces, into buf; false when too long. */
static bool normalise(const char *name, char *buf, size_t len)
{
	size_t n = 0;

	for (; *name; name++) {
		if (*name == '_' || *name == '-' || *name == '.' || *name == ' ')
			continue;
		if (n + 1 >= len)
			return false;
		buf[n++] = (char)tolower((unsigned char)*name);
	}
	buf[n] = 0;
	return true;
}

int call_args__redact_add(const char *name)
{
	char word[128];

	if (!normalise(name, word, sizeof(word)) || !word[0])
		return -EINVAL;
	if (nextra == CALLARGS_MAX_REDACT)
		return -E2BIG;
	extra[nextra] = strdup(word);
	if (!extra[nextra])
		return -ENOMEM;
	nextra++;
	return 0;
}

void call_args__redact_defaults(bool on)
{
	redact_off = !on;
}

void call_args__redact_reset(void)
{
	for (size_t i = 0; i < nextra; i++)
		free(extra[i]);
	nextra = 0;
	redact_off = false;
}

bool call_args__redacted(const char *name)
{
	char n[256];

	if (redact_off || !name)
		return false;
	/* a name too long to normalise: redacted, to be safe */
	if (!normalise(name, n, sizeof(n)))
		return true;
	for (size_t i = 0; secret_words[i]; i++)
		if (strstr(n, secret_words[i]))
			return true;
	for (size_t i = 0; secret_names[i]; i++)
		if (!strcmp(n, secret_names[i]))
			return true;
	for (size_t i = 0; i < nextra; i++)
		if (strstr(n, extra[i]))
			return true;
	return false;
}

int call_args__render(const struct tracer_args *ta, struct call_args *ret)
{
	const struct func_params *fp = ta->params;

	memset(ret, 0, sizeof(*ret));
	if (!fp || !fp->n)
		return 0;
	ret->a = calloc(fp->n, sizeof(*ret->a));
	if (!ret->a)
		return -ENOMEM;
	ret->n = fp->n;
	ret->more = fp->more;
	ret->note = fp->raw ? fp->raw_why : NULL;
	for (size_t i = 0; i < fp->n; i++) {
		struct call_arg *a = &ret->a[i];

		a->name = strdup(fp->p[i].name);
		a->type = strdup(fp->p[i].type);
		render_one(&fp->p[i], ta, fp->raw, a);
		/* before the value goes anywhere: only its type and length stay */
		if (a->value && call_args__redacted(fp->p[i].name)) {
			free(a->value);
			a->value = NULL;
			a->truncated = false;
			a->redacted = true;
		}
		if (!a->name || !a->type || (!a->value && !a->error && !a->redacted)) {
			call_args__clear(ret);
			return -ENOMEM;
		}
	}
	return 0;
}

void call_args__clear(struct call_args *ca)
{
	for (size_t i = 0; ca->a && i < ca->n; i++) {
		free(ca->a[i].name);
		free(ca->a[i].type);
		free(ca->a[i].value);
		free(ca->a[i].error);
	}
	free(ca->a);
	memset(ca, 0, sizeof(*ca));
}

static char *dup_or_null(const char *s, bool *failed)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*failed = true;
	return d;
}

/* strlen + 1, 0 for NULL */
static size_t str_bytes(const char *s)
{
	return s ? strlen(s) + 1 : 0;
}

size_t call_args__bytes(const struct call_args *ca)
{
	size_t n = ca->n * sizeof(*ca->a);

	for (size_t i = 0; i < ca->n; i++)
		n += str_bytes(ca->a[i].name) + str_bytes(ca->a[i].type) +
		     str_bytes(ca->a[i].value) + str_bytes(ca->a[i].error);
	return n;
}

int call_args__copy(const struct call_args *from, struct call_args *to)
{
	bool failed = false;

	*to = *from;
	to->a = NULL;
	to->n = 0;
	if (!from->n)
		return 0;
	to->a = calloc(from->n, sizeof(*to->a));
	if (!to->a)
		return -ENOMEM;
	to->n = from->n;
	for (size_t i = 0; i < from->n; i++) {
		to->a[i] = from->a[i];
		to->a[i].name = dup_or_null(from->a[i].name, &failed);
		to->a[i].type = dup_or_null(from->a[i].type, &failed);
		to->a[i].value = dup_or_null(from->a[i].value, &failed);
		to->a[i].error = dup_or_null(from->a[i].error, &failed);
	}
	if (failed) {
		call_args__clear(to);
		return -ENOMEM;
	}
	return 0;
}

cJSON *call_args__json(const struct call_args *ca)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < ca->n; i++) {
		const struct call_arg *a = &ca->a[i];
		cJSON *o = cJSON_CreateObject();

		if (!o)
			break;
		cJSON_AddItemToArray(arr, o);
		cJSON_AddStringToObject(o, "name", a->name);
		cJSON_AddStringToObject(o, "type", a->type);
		if (a->value)
			cJSON_AddStringToObject(o, "value", a->value);
		if (a->redacted)
			cJSON_AddBoolToObject(o, "redacted", true);
		if (a->length >= 0)
			cJSON_AddNumberToObject(o, "length", (double)a->length);
		if (a->truncated)
			cJSON_AddBoolToObject(o, "truncated", true);
		if (a->error)
			cJSON_AddStringToObject(o, "error", a->error);
	}
	return arr;
}

void call_args__text(const struct call_args *ca, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < ca->n && at < len; i++) {
		const struct call_arg *a = &ca->a[i];
		bool quote = a->value && a->quoted;
		int w;

		if (a->value)
			w = snprintf(buf + at, len - at, "%s%s=%s%s%s%s", i ? " " : "", a->name,
				     quote ? "\"" : "", a->value, quote ? "\"" : "",
				     a->truncated ? "..." : "");
		else if (a->redacted)
			w = snprintf(buf + at, len - at, "%s%s=<redacted>", i ? " " : "", a->name);
		else
			w = snprintf(buf + at, len - at, "%s%s=(%s)", i ? " " : "", a->name,
				     a->error);
		if (w < 0)
			break;
		at += (size_t)w;
	}
}
