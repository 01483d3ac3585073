// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/libbpf.h>

#include "base/log.h"
#include "base/termsafe.h"

static enum log_level min_level = LOG_INFO;
static const char *const level_names[] = { "debug", "info", "warn", "error" };

void log_set_level(enum log_level level)
{
	min_level = level;
}

int log_parse_level(const char *s, enum log_level *ret)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (!strcmp(s, level_names[i])) {
			*ret = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

bool log_enabled(enum log_level level)
{
	return level >= min_level;
}

void time_rfc3339(char *buf, size_t len, unsigned int digits)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	time_rfc3339_at((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec, buf, len,
			digits);
}

void time_rfc3339_at(uint64_t ns, char *buf, size_t len, unsigned int digits)
{
	time_t secs = (time_t)(ns / 1000000000ULL);
	struct tm tm;
	char sec[32];
	long frac;

	gmtime_r(&secs, &tm);
	strftime(sec, sizeof(sec), "%Y-%m-%dT%H:%M:%S", &tm);
	if (!digits) {
		snprintf(buf, len, "%sZ", sec);
		return;
	}
	digits = digits > 6 ? 6 : digits;
	frac = (long)(ns % 1000000000ULL);
	for (unsigned int i = digits; i < 9; i++)
		frac /= 10;
	snprintf(buf, len, "%s.%0*ldZ", sec, (int)digits, frac);
}

static cJSON *log_vevent(enum log_level level, const char *fmt, va_list ap)
{
	char ts[48], msg[1024];
	cJSON *ev;

	if (!log_enabled(level))
		return NULL;
	ev = cJSON_CreateObject();
	if (!ev)
		return NULL;
	time_rfc3339(ts, sizeof(ts), 3);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	cJSON_AddStringToObject(ev, "ts", ts);
	cJSON_AddStringToObject(ev, "level", level_names[level]);
	cJSON_AddStringToObject(ev, "msg", msg);
	return ev;
}

cJSON *log_event(enum log_level level, const char *fmt, ...)
{
	va_list ap;
	cJSON *ev;

	va_start(ap, fmt);
	ev = log_vevent(level, fmt, ap);
	va_end(ap);
	return ev;
}

void log_emit(cJSON *ev)
{
	char *raw, *line;

	if (!ev)
		return;
	/* a terminal shows it (kubectl logs): no DEL or C1 raw (termsafe.h) */
	raw = cJSON_PrintUnformatted(ev);
	line = raw ? termsafe__json(raw) : NULL;
	free(raw);
	if (line) {
		/* one write per line keeps lines whole across threads */
		size_t n = strlen(line);

		line[n] = '\n';
		fwrite(line, 1, n + 1, stderr);
		fflush(stderr);
		line[n] = '\0';
	}
	free(line);
	cJSON_Delete(ev);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum log_level l = level == LIBBPF_WARN ? LOG_WARN : LOG_DEBUG;
	cJSON *ev;
	char *nl;

	ev = log_vevent(l, fmt, ap);
	if (!ev)
		return 0;
	/* libbpf ends its messages with a newline */
	nl = strrchr(cJSON_GetObjectItem(ev, "msg")->valuestring, '\n');
	if (nl && !nl[1])
		*nl = '\0';
	cJSON_AddStringToObject(ev, "source", "libbpf");
	log_emit(ev);
	return 0;
}

void log_route_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
