/* SPDX-License-Identifier: MIT */
/*
 * Label selectors as kubectl users write them (`-l app=web,tier!=db`) and as
 * the API server stores them (a LabelSelector: matchLabels and
 * matchExpressions): parsed from one, written as the other, and taken from
 * a workload (a Deployment's, StatefulSet's or DaemonSet's spec.selector, a
 * Pod's labels). Objects from the API server are untrusted: anything but
 * the documented shape is an error, never a crash.
 */
#ifndef RETWATCH_SELECTOR_H
#define RETWATCH_SELECTOR_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "base/rwerr.h"

/* Bounds of the FunctionProbe schema (crds/functionprobe.yaml). */
#define SELECTOR_MAX_LABELS 64
#define SELECTOR_MAX_EXPRS 32
#define SELECTOR_MAX_VALUES 256

/*
 * Parses kubectl's selector syntax: requirements one comma apart, each
 * `key=value` (or `==`), `key!=value`, `key in (a,b)`, `key notin (a,b)`,
 * `key` (exists) or `!key` (does not exist). *ret gets a LabelSelector
 * (to cJSON_Delete). -EINVAL with a message saying what to change.
 */
int selector__parse(const char *text, cJSON **ret, struct rw_error *err);

/*
 * Checks a LabelSelector (a workload's spec.selector) and returns a clean
 * copy holding only matchLabels and matchExpressions. -EINVAL when a field
 * has another shape, when an operator is unknown, or when it selects every
 * pod (empty): a probe of every pod of a namespace is not what was asked.
 */
int selector__from_json(const cJSON *sel, cJSON **ret, struct rw_error *err);

/* A LabelSelector of matchLabels only: a pod's metadata.labels. */
int selector__from_labels(const cJSON *labels, cJSON **ret, struct rw_error *err);

/*
 * A checked LabelSelector in kubectl's syntax, for a labelSelector query
 * (to escape) and for messages: `app=web,tier notin (db)`. -ENOSPC when it
 * does not fit in len.
 */
int selector__format(const cJSON *sel, char *buf, size_t len);

#endif
