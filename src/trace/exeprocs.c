// SPDX-License-Identifier: MIT
#include "trace/exeprocs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "base/cgroup.h"

static int by_pid(const void *a, const void *b)
{
	const struct exeproc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

bool exeprocs__runs(const char *proc, pid_t pid, dev_t dev, ino_t ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%d/exe", proc, (int)pid);
	return !stat(path, &st) && st.st_dev == dev && st.st_ino == ino;
}

bool exeprocs__gone(const char *proc, pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%d/exe", proc, (int)pid);
	/* EACCES and the like: running, as far as can be told */
	return stat(path, &st) && (errno == ENOENT || errno == ESRCH);
}

const struct exeproc *exeprocs__find(const struct exeprocs *ep, pid_t pid)
{
	struct exeproc key = { .pid = pid };

	if (!ep->n)
		return NULL;
	return bsearch(&key, ep->procs, ep->n, sizeof(key), by_pid);
}

const struct exeproc *exeprocs__current(const struct exeprocs *ep, const char *proc, pid_t pid)
{
	const struct exeproc *e = exeprocs__find(ep, pid);
	uint64_t st;

	if (!e || cgroup__pid_starttime(proc, pid, &st) || st != e->starttime)
		return NULL;
	return e;
}

int exeprocs__scan(struct exeprocs *ep, const char *proc, uint64_t now_ns)
{
	struct exeproc *v = NULL, *more;
	size_t n = 0, cap = 0;
	struct dirent *d;
	DIR *dir = opendir(proc);
	int e = 0;

	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		const struct exeproc *old;
		char path[64], *end;
		struct stat st;
		long pid = strtol(d->d_name, &end, 10);
		uint64_t start;

		if (*end || pid <= 0 || pid > INT32_MAX)
			continue;
		snprintf(path, sizeof(path), "%s/%ld/exe", proc, pid);
		/* a kernel thread has none; a process gone meanwhile neither */
		if (cgroup__pid_starttime(proc, (pid_t)pid, &start) || stat(path, &st))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 256;
			more = realloc(v, cap * sizeof(*v));
			if (!more) {
				e = -ENOMEM;
				break;
			}
			v = more;
		}
		old = exeprocs__find(ep, (pid_t)pid);
		v[n++] = (struct exeproc){
			.pid = (pid_t)pid,
			.starttime = start,
			.dev = st.st_dev,
			.ino = st.st_ino,
			/* the same process running another file (exec) is new to it, and
			 * so is another process with its pid */
			.first_ns = old && old->starttime == start && old->dev == st.st_dev &&
						    old->ino == st.st_ino
					    ? old->first_ns
					    : now_ns,
		};
	}
	closedir(dir);
	if (e) {
		free(v);
		return e;
	}
	if (n)
		qsort(v, n, sizeof(*v), by_pid);
	free(ep->procs);
	ep->procs = v;
	ep->n = n;
	ep->scanned_ns = now_ns;
	return 0;
}

void exeprocs__clear(struct exeprocs *ep)
{
	free(ep->procs);
	*ep = (struct exeprocs){ 0 };
}

const char *exeprocs__origin(pid_t pid, const struct stat *st, char *buf, size_t len)
{
	struct stat exe;

	if (pid <= 0)
		return NULL;
	snprintf(buf, len, "/proc/%d/exe", (int)pid);
	if (stat(buf, &exe) || exe.st_ino != st->st_ino ||
	    (exe.st_dev != st->st_dev && major(exe.st_dev)))
		return NULL;
	return buf;
}
