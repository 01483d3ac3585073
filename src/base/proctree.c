// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/proctree.h"

/* Longer than any stat line the kernel writes (52 numbers and a name). */
#define STAT_MAX 1024

int proc_stat__parse(const char *line, size_t len, struct proc_stat *ret)
{
	const char *open = memchr(line, '(', len), *close = NULL, *p;
	unsigned long long v;
	size_t n;
	int field;

	for (p = line + len; p > line; p--)
		if (p[-1] == ')') {
			close = p - 1;
			break;
		}
	if (!open || !close || close < open)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	n = (size_t)(close - open - 1);
	if (n >= sizeof(ret->comm))
		n = sizeof(ret->comm) - 1;
	memcpy(ret->comm, open + 1, n);
	/* after the name: field 3 (state), 4 (ppid) ... 22 (starttime) */
	p = close + 1;
	for (field = 3; field <= 22; field++) {
		char *end;

		while (p < line + len && *p == ' ')
			p++;
		if (p >= line + len)
			return -EINVAL;
		if (field == 4 || field == 22) {
			errno = 0;
			v = strtoull(p, &end, 10);
			if (errno || end == p || end > line + len)
				return -EINVAL;
			if (field == 4)
				ret->ppid = (pid_t)v;
			else
				ret->start = v;
		}
		while (p < line + len && *p != ' ')
			p++;
	}
	return 0;
}

int proc_stat__read(pid_t pid, struct proc_stat *ret)
{
	char path[64], buf[STAT_MAX + 1];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, STAT_MAX);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	buf[n] = '\0';
	return proc_stat__parse(buf, (size_t)n, ret);
}

bool proctree__descends(pid_t pid, const pid_t *roots, size_t nroots)
{
	struct proc_stat st;

	for (int depth = 0; depth < PROCTREE_MAX_DEPTH; depth++) {
		if (proc_stat__read(pid, &st) || st.ppid <= 1)
			return false;
		for (size_t i = 0; i < nroots; i++)
			if (st.ppid == roots[i])
				return true;
		pid = st.ppid;
	}
	return false;
}

int proctree__cgroup(pid_t pid, char *buf, size_t len)
{
	char path[64], line[4096];
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");

		line[n] = '\0';
		/* the unified hierarchy: "0::/path" */
		if (strncmp(line, "0::", 3))
			continue;
		if (n - 3 >= len) {
			ret = -ENAMETOOLONG;
			break;
		}
		memcpy(buf, line + 3, n - 3 + 1);
		ret = 0;
		break;
	}
	fclose(f);
	return ret;
}

int proctree__each(int (*fn)(pid_t pid, void *ctx), void *ctx)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int ret = 0;

	if (!d)
		return -errno;
	while (!ret && (de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);

		if (*end || pid <= 0)
			continue;
		ret = fn((pid_t)pid, ctx);
	}
	closedir(d);
	return ret;
}
