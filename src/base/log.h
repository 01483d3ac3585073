/* SPDX-License-Identifier: MIT */
/*
 * JSON-line logging: one object per event on stderr, with "ts", "level" and
 * "msg", plus fields the caller adds. Safe from several threads (a line is
 * written with one call).
 */
#ifndef RETWATCH_LOG_H
#define RETWATCH_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
/* "debug", "info", "warn" or "error"; -EINVAL otherwise. */
int log_parse_level(const char *s, enum log_level *ret);
bool log_enabled(enum log_level level);

/* A new event object with ts, level and msg set, or NULL when level is off
 * (or out of memory); add fields, then log_emit() it. */
cJSON *log_event(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the event as one line and frees it; NULL is fine. */
void log_emit(cJSON *ev);

#define log_error(...) log_emit(log_event(LOG_ERROR, __VA_ARGS__))
#define log_warn(...) log_emit(log_event(LOG_WARN, __VA_ARGS__))
#define log_info(...) log_emit(log_event(LOG_INFO, __VA_ARGS__))
#define log_debug(...) log_emit(log_event(LOG_DEBUG, __VA_ARGS__))

/* Now as an RFC 3339 UTC time with digits (0, 3 or 6) of fractional seconds,
 * as the log, the status and Leases write times. */
void time_rfc3339(char *buf, size_t len, unsigned int digits);
/* The same for ns of CLOCK_REALTIME. */
void time_rfc3339_at(uint64_t ns, char *buf, size_t len, unsigned int digits);
#define TIME_RFC3339_LEN 40

/* Routes libbpf's messages into the log (warnings and up; debug with LOG_DEBUG). */
void log_route_libbpf(void);

#endif
