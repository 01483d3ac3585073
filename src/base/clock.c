// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

uint64_t clock__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

bool clock__boottime_shifted(void)
{
	FILE *f = fopen("/proc/self/timens_offsets", "re");
	char line[128], name[32];
	long long sec, nsec;
	bool shifted = false;

	if (!f)
		return false; /* no time namespaces in this kernel */
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%31s %lld %lld", name, &sec, &nsec) == 3 &&
		    !strcmp(name, "boottime") && (sec || nsec))
			shifted = true;
	fclose(f);
	return shifted;
}

void clock__rfc3339(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

time_t clock__parse_rfc3339(const char *s)
{
	struct tm tm = { 0 };

	if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
		return 0;
	return timegm(&tm);
}
