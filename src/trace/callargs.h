/* SPDX-License-Identifier: MIT */
/*
 * A call's arguments as text: each parameter's name, type and value (or why
 * it was not read), from what its entry probe kept (struct tracer_args).
 * Strings are shown as read, at most PARAMS_STRING_BYTES of them, bytes
 * outside printable ASCII escaped (\xNN), with their length.
 */
#ifndef RETWATCH_CALLARGS_H
#define RETWATCH_CALLARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct tracer_args;

struct call_arg {
	char *name, *type;
	char *value; /* NULL: not read (error says why) */
	char *error;
	int64_t length; /* of a string: its bytes; -1: not known */
	bool truncated; /* value holds its first bytes only */
	bool quoted;	/* a string's bytes, quoted in text */
	bool redacted;	/* its name names a secret: no value (type and length kept) */
};

struct call_args {
	struct call_arg *a;
	size_t n;
	size_t more;	  /* parameters not listed */
	const char *note; /* raw registers: why (static) */
};

/*
 * Redaction: a parameter whose name, lowercased and without '_', '-', '.'
 * and spaces, holds one of the secret words (password, secret, token,
 * apikey, credential, cookie, session, authorization, privatekey ...), or
 * is one of the short ones (pwd, pass, auth, pin, otp, jwt, ssn, cvv ...),
 * is rendered without its value, everywhere, before any value leaves the
 * node. name: one more word (matched as the long ones are). 0, -EINVAL (an
 * empty word), -E2BIG (CALLARGS_MAX_REDACT words added) or -ENOMEM.
 */
#define CALLARGS_MAX_REDACT 64
int call_args__redact_add(const char *name);
/* false: no value is redacted (the operator's choice); true: the default. */
void call_args__redact_defaults(bool on);
/* The defaults again, without the words added. */
void call_args__redact_reset(void);
/* Whether a parameter named name is redacted now. */
bool call_args__redacted(const char *name);

/* Renders what ta holds (nothing when ta->params is NULL). 0, -ENOMEM. */
int call_args__render(const struct tracer_args *ta, struct call_args *ret);
void call_args__clear(struct call_args *ca);
int call_args__copy(const struct call_args *from, struct call_args *to);
/* The heap bytes ca holds. */
size_t call_args__bytes(const struct call_args *ca);
/* A JSON array of {name, type, value | error, length, truncated}. */
cJSON *call_args__json(const struct call_args *ca);
/* `name=value ...` on one line, strings quoted. */
void call_args__text(const struct call_args *ca, char *buf, size_t len);

#endif
