// SPDX-License-Identifier: MIT
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "plugin/selector.h"

/* A label key: an optional prefix of at most 253 and a '/', then a name of 1 to 63. */
static bool valid_key(const char *k, size_t n)
{
	const char *slash = memchr(k, '/', n);
	size_t name = slash ? n - (size_t)(slash - k) - 1 : n;

	if (!n || name < 1 || name > 63 || (slash && (slash == k || slash - k > 253)))
		return false;
	if (slash && memchr(slash + 1, '/', name))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)k[i]) && !strchr("._-/", k[i]))
			return false;
	return true;
}

static bool valid_value(const char *v, size_t n)
{
	if (n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
			return false;
	return true;
}

static const char *skip_space(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* The length of the word at p: a key or value runs to a space or an operator. */
static size_t word_len(const char *p)
{
	size_t n = 0;

	while (p[n] && !strchr(" \t,=!()", p[n]))
		n++;
	return n;
}

static int add_expr(cJSON *sel, const char *key, size_t klen, const char *op, cJSON *values,
		    struct rw_error *err)
{
	cJSON *exprs = cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions");
	cJSON *e = cJSON_CreateObject();
	char k[320];

	if (!exprs)
		exprs = cJSON_AddArrayToObject(sel, "matchExpressions");
	if (!e || !exprs) {
		cJSON_Delete(e);
		cJSON_Delete(values);
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	cJSON_AddItemToArray(exprs, e);
	snprintf(k, sizeof(k), "%.*s", (int)klen, key);
	cJSON_AddStringToObject(e, "key", k);
	cJSON_AddStringToObject(e, "operator", op);
	if (values)
		cJSON_AddItemToObject(e, "values", values);
	if (cJSON_GetArraySize(exprs) > SELECTOR_MAX_EXPRS)
		return rw_error_set(err, EINVAL,
				    "the selector has more than %d requirements besides key=value: "
				    "a FunctionProbe holds at most that many",
				    SELECTOR_MAX_EXPRS);
	return 0;
}

/* `(a,b,c)` at p into a new array; *end after the ')'. */
static int parse_set(const char *p, const char **end, cJSON **ret, struct rw_error *err)
{
	cJSON *vals = cJSON_CreateArray();
	char v[64];

	p = skip_space(p);
	if (*p != '(')
		goto bad;
	for (p = skip_space(p + 1);; p = skip_space(p + 1)) {
		size_t n = word_len(p);

		if (!valid_value(p, n))
			goto bad;
		snprintf(v, sizeof(v), "%.*s", (int)n, p);
		cJSON_AddItemToArray(vals, cJSON_CreateString(v));
		if (cJSON_GetArraySize(vals) > SELECTOR_MAX_VALUES)
			goto bad;
		p = skip_space(p + n);
		if (*p == ')')
			break;
		if (*p != ',')
			goto bad;
	}
	*end = p + 1;
	*ret = vals;
	return 0;
bad:
	cJSON_Delete(vals);
	return rw_error_set(err, EINVAL,
			    "a set must be values in parentheses, one comma apart, as in "
			    "'tier in (web,api)' (values of letters, digits, '.', '_', '-', at "
			    "most 63 characters; at most %d of them)",
			    SELECTOR_MAX_VALUES);
}

static int add_label(cJSON *sel, const char *key, size_t klen, const char *val, size_t vlen,
		     struct rw_error *err)
{
	cJSON *labels = cJSON_GetObjectItemCaseSensitive(sel, "matchLabels");
	char k[320], v[64];

	if (!labels)
		labels = cJSON_AddObjectToObject(sel, "matchLabels");
	if (!labels)
		return rw_error_set(err, ENOMEM, "out of memory");
	snprintf(k, sizeof(k), "%.*s", (int)klen, key);
	snprintf(v, sizeof(v), "%.*s", (int)vlen, val);
	if (cJSON_GetObjectItemCaseSensitive(labels, k))
		return rw_error_set(err, EINVAL,
				    "the selector says %s= twice: give each label one value (or "
				    "'%s in (a,b)' for either)",
				    k, k);
	if (cJSON_GetArraySize(labels) >= SELECTOR_MAX_LABELS)
		return rw_error_set(err, EINVAL, "the selector has more than %d key=value labels",
				    SELECTOR_MAX_LABELS);
	cJSON_AddStringToObject(labels, k, v);
	return 0;
}

/* One requirement at p; *end after it. */
static int parse_one(cJSON *sel, const char *p, const char **end, struct rw_error *err)
{
	bool not = *p == '!';
	const char *key = skip_space(p + not ), *q;
	size_t klen = word_len(key), vlen;
	cJSON *vals = NULL;
	char v[64];
	int e;

	if (!valid_key(key, klen))
		return rw_error_set(err, EINVAL,
				    "'%.*s' is not a label key: a name of 1 to 63 letters, digits, "
				    "'.', '_' or '-', with an optional prefix and a '/' before it",
				    (int)(klen ? klen : 1), klen ? key : p);
	q = skip_space(key + klen);
	if (not || !*q || *q == ',') {
		*end = q;
		return add_expr(sel, key, klen, not ? "DoesNotExist" : "Exists", NULL, err);
	}
	if (*q == '=' || (*q == '!' && q[1] == '=')) {
		bool ne = *q == '!';

		q = skip_space(q + (ne || q[1] == '=' ? 2 : 1));
		vlen = word_len(q);
		if (!valid_value(q, vlen))
			return rw_error_set(err, EINVAL,
					    "'%.*s' is not a label value: at most 63 letters, "
					    "digits, '.', '_' or '-'",
					    (int)vlen, q);
		*end = skip_space(q + vlen);
		if (!ne)
			return add_label(sel, key, klen, q, vlen, err);
		snprintf(v, sizeof(v), "%.*s", (int)vlen, q);
		vals = cJSON_CreateArray();
		cJSON_AddItemToArray(vals, cJSON_CreateString(v));
		return add_expr(sel, key, klen, "NotIn", vals, err);
	}
	if (!strncmp(q, "in", 2) || !strncmp(q, "notin", 5)) {
		bool in = q[0] == 'i';

		if ((e = parse_set(q + (in ? 2 : 5), end, &vals, err)))
			return e;
		*end = skip_space(*end);
		return add_expr(sel, key, klen, in ? "In" : "NotIn", vals, err);
	}
	return rw_error_set(err, EINVAL,
			    "cannot read the selector at '%.40s': write key=value, key!=value, "
			    "'key in (a,b)', 'key notin (a,b)', key or !key, one comma apart",
			    q);
}

int selector__parse(const char *text, cJSON **ret, struct rw_error *err)
{
	cJSON *sel = cJSON_CreateObject();
	const char *p = skip_space(text);
	int e = 0;

	*ret = NULL;
	if (!sel)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (!*p) {
		e = rw_error_set(err, EINVAL, "the selector is empty: give one such as app=web");
		goto out;
	}
	while (!(e = parse_one(sel, p, &p, err))) {
		if (!*p)
			break;
		if (*p != ',') {
			e = rw_error_set(err, EINVAL,
					 "cannot read the selector at '%.40s': requirements are "
					 "one comma apart",
					 p);
			break;
		}
		p = skip_space(p + 1);
	}
out:
	if (e)
		cJSON_Delete(sel);
	else
		*ret = sel;
	return e;
}

static bool known_op(const char *op)
{
	return op && (!strcmp(op, "In") || !strcmp(op, "NotIn") || !strcmp(op, "Exists") ||
		      !strcmp(op, "DoesNotExist"));
}

/* A copy of one matchExpressions entry, checked. */
static int copy_expr(const cJSON *e, cJSON *exprs, struct rw_error *err)
{
	const cJSON *key = cJSON_GetObjectItemCaseSensitive(e, "key"),
		    *op = cJSON_GetObjectItemCaseSensitive(e, "operator"),
		    *vals = cJSON_GetObjectItemCaseSensitive(e, "values"), *v;
	bool set;
	cJSON *out, *outv;

	if (!cJSON_IsString(key) || !valid_key(key->valuestring, strlen(key->valuestring)) ||
	    !cJSON_IsString(op) || !known_op(op->valuestring))
		return rw_error_set(
			err, EINVAL,
			"the workload's selector has a malformed matchExpressions entry");
	set = !strcmp(op->valuestring, "In") || !strcmp(op->valuestring, "NotIn");
	if ((vals && !cJSON_IsArray(vals) && !cJSON_IsNull(vals)) ||
	    cJSON_GetArraySize(vals) > SELECTOR_MAX_VALUES ||
	    (set != (cJSON_IsArray(vals) && cJSON_GetArraySize(vals) > 0)))
		return rw_error_set(err, EINVAL,
				    "the workload's selector has a matchExpressions entry for %s "
				    "whose values do not fit its operator %s",
				    key->valuestring, op->valuestring);
	out = cJSON_CreateObject();
	cJSON_AddItemToArray(exprs, out);
	cJSON_AddStringToObject(out, "key", key->valuestring);
	cJSON_AddStringToObject(out, "operator", op->valuestring);
	if (!set)
		return 0;
	outv = cJSON_AddArrayToObject(out, "values");
	cJSON_ArrayForEach(v, vals)
	{
		if (!cJSON_IsString(v) || !valid_value(v->valuestring, strlen(v->valuestring)))
			return rw_error_set(err, EINVAL,
					    "the workload's selector has a value of %s that is not "
					    "a label value",
					    key->valuestring);
		cJSON_AddItemToArray(outv, cJSON_CreateString(v->valuestring));
	}
	return 0;
}

static int copy_labels(const cJSON *labels, cJSON *sel, struct rw_error *err)
{
	const cJSON *l;
	cJSON *out;

	if (!cJSON_IsObject(labels))
		return rw_error_set(err, EINVAL, "the labels are not an object");
	if (cJSON_GetArraySize(labels) > SELECTOR_MAX_LABELS)
		return rw_error_set(err, EINVAL,
				    "%d labels: a FunctionProbe's selector holds at most %d; "
				    "give a selector with -l instead",
				    cJSON_GetArraySize(labels), SELECTOR_MAX_LABELS);
	out = cJSON_AddObjectToObject(sel, "matchLabels");
	cJSON_ArrayForEach(l, labels)
	{
		if (!l->string || !valid_key(l->string, strlen(l->string)) || !cJSON_IsString(l) ||
		    !valid_value(l->valuestring, strlen(l->valuestring)) ||
		    cJSON_GetObjectItemCaseSensitive(out, l->string))
			return rw_error_set(err, EINVAL, "the label %.80s is malformed or repeated",
					    l->string ? l->string : "?");
		cJSON_AddStringToObject(out, l->string, l->valuestring);
	}
	return 0;
}

static bool selects_all(const cJSON *sel)
{
	return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sel, "matchLabels")) == 0 &&
	       cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions")) == 0;
}

int selector__from_json(const cJSON *sel, cJSON **ret, struct rw_error *err)
{
	const cJSON *labels = cJSON_GetObjectItemCaseSensitive(sel, "matchLabels"),
		    *exprs = cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions"), *e;
	cJSON *out = cJSON_CreateObject(), *oe;
	int r = 0;

	*ret = NULL;
	if (!out)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (!cJSON_IsObject(sel)) {
		r = rw_error_set(err, EINVAL, "the workload has no spec.selector");
		goto out;
	}
	if (labels && !cJSON_IsNull(labels) && (r = copy_labels(labels, out, err)))
		goto out;
	if (exprs && !cJSON_IsNull(exprs)) {
		if (!cJSON_IsArray(exprs) || cJSON_GetArraySize(exprs) > SELECTOR_MAX_EXPRS) {
			r = rw_error_set(err, EINVAL,
					 "the workload's matchExpressions is not a list of at most "
					 "%d entries",
					 SELECTOR_MAX_EXPRS);
			goto out;
		}
		oe = cJSON_AddArrayToObject(out, "matchExpressions");
		cJSON_ArrayForEach(e, exprs) if ((r = copy_expr(e, oe, err))) goto out;
	}
	if (selects_all(out))
		r = rw_error_set(err, EINVAL,
				 "the workload's selector is empty: it would select every pod of "
				 "the namespace; give the pods with -l instead");
out:
	if (r)
		cJSON_Delete(out);
	else
		*ret = out;
	return r;
}

int selector__from_labels(const cJSON *labels, cJSON **ret, struct rw_error *err)
{
	cJSON *out = cJSON_CreateObject();
	int r;

	*ret = NULL;
	if (!out)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (!cJSON_GetArraySize(labels))
		r = rw_error_set(err, EINVAL,
				 "the pod has no labels: a FunctionProbe selects pods by label; "
				 "label it or give a selector with -l");
	else
		r = copy_labels(labels, out, err);
	if (r)
		cJSON_Delete(out);
	else
		*ret = out;
	return r;
}

/* Appends printf output to buf at *off; false once it no longer fits. */
__attribute__((format(printf, 4, 5))) static bool put(char *buf, size_t len, size_t *off,
						      const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*off >= len)
		return false;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *off)
		return false;
	*off += (size_t)n;
	return true;
}

static bool format_expr(const cJSON *e, char *buf, size_t len, size_t *off)
{
	const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "key")),
		   *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "operator"));
	const cJSON *v;
	bool first = true;

	if (!key || !op)
		return false;
	if (!strcmp(op, "Exists") || !strcmp(op, "DoesNotExist"))
		return put(buf, len, off, "%s%s%s", *off ? "," : "", *op == 'D' ? "!" : "", key);
	if (!put(buf, len, off, "%s%s %s (", *off ? "," : "", key,
		 strcmp(op, "In") ? "notin" : "in"))
		return false;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(e, "values"))
	{
		if (!cJSON_IsString(v) ||
		    !put(buf, len, off, "%s%s", first ? "" : ",", v->valuestring))
			return false;
		first = false;
	}
	return put(buf, len, off, ")");
}

int selector__format(const cJSON *sel, char *buf, size_t len)
{
	const cJSON *l, *e;
	size_t off = 0;

	if (!len)
		return -ENOSPC;
	buf[0] = '\0';
	cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(sel, "matchLabels"))
	{
		if (!cJSON_IsString(l) || !l->string)
			return -EINVAL;
		if (!put(buf, len, &off, "%s%s=%s", off ? "," : "", l->string, l->valuestring))
			return -ENOSPC;
	}
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(sel, "matchExpressions"))
	{
		if (!format_expr(e, buf, len, &off))
			return -ENOSPC;
	}
	return 0;
}
