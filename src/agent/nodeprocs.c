// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cgroup.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/overlay.h"
#include "agent/nodeprocs.h"

/* A runtime starts a container's first process in its own cgroup and moves
 * it: a young process outside any container is looked at again. */
#define PROC_SETTLE_NS (5 * NS_PER_S)

struct proc_ent {
	pid_t pid;
	uint64_t starttime;
	uint64_t seen_ns; /* when first listed */
	/* read together, at the kubelet's positions in the cgroup path (cgroup__parse_pod) */
	char cid[CGROUP_ID_LEN + 1];	  /* "" when in no pod's container */
	char pod_uid[CGROUP_UID_MAX + 1]; /* the pod of that container */
	signed char init;		  /* pid 1 of its namespace: 1, 0, or -1 not known yet */
	bool reread;			  /* its cgroup changed under an attach: read it again */
};

struct nodeprocs {
	char *proc;
	struct proc_ent *procs; /* by pid */
	size_t n;
};

struct nodeprocs *nodeprocs__new(const char *proc)
{
	struct nodeprocs *np = calloc(1, sizeof(*np));

	if (np && !(np->proc = strdup(proc))) {
		free(np);
		return NULL;
	}
	return np;
}

void nodeprocs__free(struct nodeprocs *np)
{
	if (!np)
		return;
	free(np->procs);
	free(np->proc);
	free(np);
}

static int proc_cmp(const void *x, const void *y)
{
	const struct proc_ent *a = x, *b = y;

	return (a->pid > b->pid) - (a->pid < b->pid);
}

static struct proc_ent *grow(struct proc_ent *v, size_t n, size_t *cap)
{
	struct proc_ent *g;

	if (n < *cap)
		return v;
	g = realloc(v, (*cap = *cap ? *cap * 2 : 512) * sizeof(*g));
	if (!g)
		free(v);
	return g;
}

static const struct proc_ent *find(const struct nodeprocs *np, pid_t pid)
{
	struct proc_ent key = { .pid = pid };

	return np->n ? bsearch(&key, np->procs, np->n, sizeof(key), proc_cmp) : NULL;
}

/*
 * A process listed by the last scan whose pid, start time and container
 * still hold is carried over as it was. Everything else is read afresh: a
 * pid another process took over (its start time says so) is a new process,
 * never its predecessor's container.
 */
static bool carry_over(const struct proc_ent *old, uint64_t starttime, uint64_t now)
{
	return old && old->starttime == starttime && !old->reread &&
	       (old->cid[0] || now - old->seen_ns > PROC_SETTLE_NS);
}

void nodeprocs__scan(struct nodeprocs *np)
{
	struct proc_ent *next = NULL;
	const struct proc_ent *old;
	uint64_t now = clock__mono_ns(), st;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d = opendir(np->proc);

	if (!d) {
		log_error("failed to list %s: %s", np->proc, strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		struct proc_ent key = { .pid = (pid_t)strtol(de->d_name, NULL, 10), .init = -1 };

		if (key.pid <= 0)
			continue;
		next = grow(next, n, &cap);
		if (!next)
			break;
		/* a process gone since readdir, or whose stat cannot be read, is not listed */
		if (cgroup__pid_starttime(np->proc, key.pid, &key.starttime))
			continue;
		old = find(np, key.pid);
		if (carry_over(old, key.starttime, now)) {
			next[n++] = *old;
			continue;
		}
		if (old && old->starttime != key.starttime)
			old = NULL;
		key.seen_ns = old ? old->seen_ns : now;
		/* cgroup and start time through one directory: the same process's */
		if (cgroup__pid_pod(np->proc, key.pid, key.pod_uid, key.cid, &st))
			key.cid[0] = key.pod_uid[0] = '\0';
		else if (st != key.starttime)
			/* taken over between the two reads: the cgroup is the newer one's */
			key.starttime = st, key.seen_ns = now;
		next[n++] = key;
	}
	closedir(d);
	if (!next)
		return;
	qsort(next, n, sizeof(*next), proc_cmp);
	free(np->procs);
	np->procs = next;
	np->n = n;
}

int nodeprocs__add(struct nodeprocs *np, pid_t pid, uint64_t starttime, const char *cid,
		   const char *pod_uid)
{
	struct proc_ent *v = realloc(np->procs, (np->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	np->procs = v;
	memset(&v[np->n], 0, sizeof(v[0]));
	v[np->n].pid = pid;
	v[np->n].starttime = starttime;
	v[np->n].init = -1;
	snprintf(v[np->n].cid, sizeof(v[0].cid), "%s", cid);
	snprintf(v[np->n].pod_uid, sizeof(v[0].pod_uid), "%s", pod_uid);
	np->n++;
	qsort(np->procs, np->n, sizeof(*v), proc_cmp);
	return 0;
}

/* Up to len - 1 bytes of np->proc/pid/name, NUL-terminated; the length or -1. */
static ssize_t read_proc_file(const struct nodeprocs *np, pid_t pid, const char *name, char *buf,
			      size_t len)
{
	char path[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%d/%s", np->proc, pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* The container's first process: pid 1 in its pid namespace. */
static bool ns_init(const struct nodeprocs *np, pid_t pid)
{
	char text[4096], *line, *last;

	if (read_proc_file(np, pid, "status", text, sizeof(text)) <= 0)
		return false;
	line = strstr(text, "\nNSpid:");
	if (!line)
		return false;
	line += 1;
	last = strchr(line, '\n');
	if (last)
		*last = '\0';
	last = strrchr(line, '\t');
	return last && strtol(last + 1, NULL, 10) == 1 && last != line + 6;
}

static bool is_init(const struct nodeprocs *np, struct proc_ent *pe)
{
	if (pe->init < 0)
		pe->init = ns_init(np, pe->pid);
	return pe->init == 1;
}

size_t nodeprocs__container(struct nodeprocs *np, const char *cid, const char *pod_uid,
			    struct nodeproc **ret_procs)
{
	struct nodeproc *v = calloc(np->n + 1, sizeof(*v));
	size_t n = 0, first = SIZE_MAX;

	*ret_procs = NULL;
	for (size_t i = 0; v && i < np->n; i++) {
		struct proc_ent *pe = &np->procs[i];

		if (!pe->cid[0] || strcmp(pe->cid, cid) || strcmp(pe->pod_uid, pod_uid))
			continue;
		if (first == SIZE_MAX && is_init(np, pe))
			first = n;
		v[n++] = (struct nodeproc){ pe->pid, pe->starttime };
	}
	if (first != SIZE_MAX && first) {
		struct nodeproc main = v[first];

		memmove(v + 1, v, first * sizeof(*v));
		v[0] = main;
	}
	if (!n)
		free(v);
	else
		*ret_procs = v;
	return n;
}

const char *nodeprocs__pod_of(const struct nodeprocs *np, pid_t pid)
{
	const struct proc_ent *pe = find(np, pid);

	if (!pe)
		return NULL;
	return pe->cid[0] ? pe->pod_uid : "";
}

bool nodeprocs__alive(const struct nodeprocs *np, const struct nodeproc *p)
{
	uint64_t st = 0;

	return !cgroup__pid_starttime(np->proc, p->pid, &st) && st == p->starttime;
}

bool nodeprocs__listed(const struct nodeprocs *np, const struct nodeproc *p)
{
	const struct proc_ent *pe = find(np, p->pid);

	return pe && pe->starttime == p->starttime;
}

bool nodeprocs__still_in(struct nodeprocs *np, const struct nodeproc *p, const char *cid,
			 const char *pod_uid)
{
	char id[CGROUP_ID_LEN + 1], uid[CGROUP_UID_MAX + 1];
	struct proc_ent *pe = (struct proc_ent *)find(np, p->pid);
	uint64_t st = 0;

	if (!cgroup__pid_pod(np->proc, p->pid, uid, id, &st) && st == p->starttime &&
	    !strcmp(id, cid) && !strcmp(uid, pod_uid))
		return true;
	/* the next scan places it afresh */
	if (pe && pe->starttime == p->starttime)
		pe->reread = true;
	return false;
}

/*
 * PPid and the depth of the PID namespace (NSpid's fields) of pid, from
 * /proc/PID/status: kernel text, though its Name line is the process's own
 * (escaped, one line). -errno.
 */
static int proc_parent(pid_t pid, pid_t *ret_ppid, int *ret_depth)
{
	char path[64], buf[8192], *at;
	ssize_t n;
	int fd, depth = 0;
	long ppid;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	at = strstr(buf, "\nPPid:\t");
	if (!at || sscanf(at + 7, "%ld", &ppid) != 1 || ppid < 0)
		return -EINVAL;
	at = strstr(buf, "\nNSpid:");
	if (!at)
		return -EINVAL;
	for (at += 7; *at && *at != '\n'; at++)
		depth += *at == '\t';
	*ret_ppid = (pid_t)ppid;
	*ret_depth = depth;
	return 0;
}

/*
 * The process that started pid's container: its first ancestor outside
 * pid's PID namespace (the runtime's shim or monitor). -1 when there is none
 * (pid is in the agent's own PID namespace, or the chain is too long).
 */
static pid_t runtime_process(pid_t pid)
{
	pid_t p = pid, parent;
	int depth, d;

	if (proc_parent(pid, &parent, &depth) || depth < 2)
		return -1;
	for (int i = 0; i < 64 && parent > 1; i++) {
		p = parent;
		if (proc_parent(p, &parent, &d))
			return -1;
		if (d < depth)
			return p;
	}
	return -1;
}

/*
 * The root that pid's container runtime sees, where the paths of its
 * overlay's layers are valid: /proc/1/root in a pod (the agent runs in the
 * host's PID namespace, not in its mount namespace); where PID 1 is out of
 * reach (one with capabilities the agent lacks refuses it), the root of the
 * runtime process that started pid's container; else / (run on the host).
 */
void nodeprocs__host_root(pid_t pid, char *buf, size_t len)
{
	pid_t runtime;

	snprintf(buf, len, "/proc/1/root");
	if (!access("/proc/1/root/", X_OK))
		return;
	runtime = runtime_process(pid);
	if (runtime > 0) {
		snprintf(buf, len, "/proc/%d/root", runtime);
		if (!access(buf, X_OK))
			return;
	}
	snprintf(buf, len, "/");
}

/*
 * pid's executable in its image layer, when the container's root is an
 * overlay (as containerd, CRI-O and Docker make it); -1 otherwise.
 */
int nodeprocs__layer_exe(pid_t pid)
{
	char link[64], exe[4096], root[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0 || exe[0] != '/')
		return -1;
	exe[n] = '\0';
	nodeprocs__host_root(pid, root, sizeof(root));
	return overlay__open_real(pid, exe, root);
}
