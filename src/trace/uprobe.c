// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "trace/uprobe.h"

/*
 * union bpf_attr for BPF_LINK_CREATE with uprobe_multi (include/uapi/linux/
 * bpf.h of Linux 6.6+), which the installed headers predate.
 */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t multi_flags;
	uint32_t pid;
	uint32_t pad;
};
_Static_assert(sizeof(struct link_create_uprobe_multi) == 64, "bpf_attr layout");

/* ENOTSUPP, which the kernel returns for an instruction it cannot probe. */
#define KERNEL_ENOTSUPP 524

/* Link and perf-event descriptors open: made here, not yet closed. */
static size_t links_open;

/* Counts fd (a descriptor just made, or -errno) as open. */
static int link_opened(int fd)
{
	if (fd >= 0)
		__atomic_add_fetch(&links_open, 1, __ATOMIC_RELAXED);
	return fd;
}

static void link_close(int fd)
{
	close(fd);
	__atomic_sub_fetch(&links_open, 1, __ATOMIC_RELAXED);
}

size_t uprobe_links__open(void)
{
	return __atomic_load_n(&links_open, __ATOMIC_RELAXED);
}

static const char *cause(int e)
{
	if (e == KERNEL_ENOTSUPP)
		return "the kernel cannot probe an instruction there";
	return strerror(e);
}

/* BPF_F_UPROBE_MULTI_RETURN: the link's programs run at the functions' returns. */
#define UPROBE_MULTI_RETURN 1U

static int link_create_multi(int prog_fd, const char *path, const uint64_t *offsets,
			     const uint64_t *cookies, size_t n, pid_t pid, bool ret)
{
	struct link_create_uprobe_multi attr = {
		.pid = pid > 0 ? (uint32_t)pid : 0,
		.prog_fd = prog_fd,
		.attach_type = UPROBE_MULTI_ATTACH_TYPE,
		.path = (uintptr_t)path,
		.offsets = (uintptr_t)offsets,
		.cookies = (uintptr_t)cookies,
		.cnt = n,
		.multi_flags = ret ? UPROBE_MULTI_RETURN : 0,
	};
	int fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));

	return link_opened(fd < 0 ? -errno : fd);
}

bool uprobe_multi_supported(int prog_fd)
{
	uint64_t offset = 0, cookie = 0;
	int fd = link_create_multi(prog_fd, "/", &offset, &cookie, 1, -1, false);

	/* "/" is no regular file: a kernel that knows the link type says so */
	if (fd >= 0)
		link_close(fd);
	return fd >= 0 || fd == -EBADF;
}

void uprobe_links__init(struct uprobe_links *l)
{
	*l = (struct uprobe_links){ .multi_fd = -1 };
}

/* Links closing at once: their grace periods overlap (hundreds: about 1 s). */
#define REAPER_THREADS 16

/* The descriptors to close, and the threads that close them. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	int *fds; /* queued */
	size_t n, cap;
	size_t busy; /* being closed */
	size_t nthreads;
} reaper = { .lock = PTHREAD_MUTEX_INITIALIZER,
	     .work = PTHREAD_COND_INITIALIZER,
	     .idle = PTHREAD_COND_INITIALIZER };

static void *reap(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&reaper.lock);
	for (;;) {
		int fd;

		while (!reaper.n)
			pthread_cond_wait(&reaper.work, &reaper.lock);
		fd = reaper.fds[--reaper.n];
		reaper.busy++;
		pthread_mutex_unlock(&reaper.lock);
		link_close(fd);
		pthread_mutex_lock(&reaper.lock);
		if (--reaper.busy == 0 && !reaper.n)
			pthread_cond_broadcast(&reaper.idle);
	}
	return NULL;
}

/* Hands fd to the reaper; closes it here when no thread can take it. */
static void reap_fd(int fd)
{
	bool queued = false;
	pthread_attr_t attr;
	pthread_t tid;

	if (fd < 0)
		return;
	pthread_mutex_lock(&reaper.lock);
	if (reaper.n == reaper.cap) {
		size_t cap = reaper.cap ? 2 * reaper.cap : 64;
		int *more = realloc(reaper.fds, cap * sizeof(*more));

		if (more) {
			reaper.fds = more;
			reaper.cap = cap;
		}
	}
	if (reaper.n < reaper.cap) {
		reaper.fds[reaper.n++] = fd;
		queued = true;
	}
	if (queued && reaper.nthreads < REAPER_THREADS &&
	    reaper.nthreads < reaper.n + reaper.busy && !pthread_attr_init(&attr)) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (!pthread_create(&tid, &attr, reap, NULL))
			reaper.nthreads++;
		pthread_attr_destroy(&attr);
	}
	if (queued && !reaper.nthreads) {
		reaper.n--; /* no thread: close it here */
		queued = false;
	}
	if (queued)
		pthread_cond_signal(&reaper.work);
	pthread_mutex_unlock(&reaper.lock);
	if (!queued)
		link_close(fd);
}

bool uprobe_links__closing(void)
{
	bool closing;

	pthread_mutex_lock(&reaper.lock);
	closing = reaper.n || reaper.busy;
	pthread_mutex_unlock(&reaper.lock);
	return closing;
}

void uprobe_links__wait_closed(void)
{
	pthread_mutex_lock(&reaper.lock);
	while (reaper.n || reaper.busy)
		pthread_cond_wait(&reaper.idle, &reaper.lock);
	pthread_mutex_unlock(&reaper.lock);
}

void uprobe_links__close(struct uprobe_links *l)
{
	reap_fd(l->multi_fd);
	for (size_t i = 0; i < l->n && l->link_fds; i++) {
		reap_fd(l->link_fds[i]);
		reap_fd(l->perf_fds[i]);
	}
	free(l->link_fds);
	free(l->perf_fds);
	uprobe_links__init(l);
}

static int uprobe_pmu_type(void)
{
	static int type = -1;
	FILE *f;

	if (type >= 0)
		return type;
	f = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	if (!f)
		return -errno;
	if (fscanf(f, "%d", &type) != 1)
		type = -1;
	fclose(f);
	return type >= 0 ? type : -EINVAL;
}

/*
 * The bit of a uprobe perf event's config that makes it a uretprobe, from
 * the PMU's format ("config:0"); -errno.
 */
static int uretprobe_bit(void)
{
	static int bit = -1;
	FILE *f;

	if (bit >= 0)
		return bit;
	f = fopen("/sys/bus/event_source/devices/uprobe/format/retprobe", "re");
	if (!f)
		return -errno;
	if (fscanf(f, "config:%d", &bit) != 1 || bit < 0 || bit > 63)
		bit = -1;
	fclose(f);
	return bit >= 0 ? bit : -EINVAL;
}

static int perf_uprobe_open(int type, const char *path, uint64_t offset, pid_t pid, int ret_bit)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = type,
		.config = ret_bit >= 0 ? 1ULL << ret_bit : 0,
		.config1 = (uintptr_t)path,
		.config2 = offset,
	};
	/* a process: its threads, on any CPU; else every process, on CPU 0 */
	int fd = syscall(__NR_perf_event_open, &attr, pid > 0 ? pid : -1, pid > 0 ? -1 : 0, -1,
			 PERF_FLAG_FD_CLOEXEC);

	return link_opened(fd < 0 ? -errno : fd);
}

static int attach_perf(struct uprobe_links *l, int prog_fd, const char *path,
		       const uint64_t *offsets, const uint64_t *cookies, size_t n, pid_t pid,
		       bool ret, struct rw_error *err)
{
	int type = uprobe_pmu_type(), ret_bit = ret ? uretprobe_bit() : -1;

	if (type < 0)
		return rw_error_set(err, -type, "uprobes are not available: %s", strerror(-type));
	if (ret && ret_bit < 0)
		return rw_error_set(err, -ret_bit, "uretprobes are not available: %s",
				    strerror(-ret_bit));
	l->perf_fds = malloc(n * sizeof(int));
	l->link_fds = malloc(n * sizeof(int));
	if (!l->perf_fds || !l->link_fds)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_link_create_opts, opts, .perf_event.bpf_cookie = cookies[i]);
		int pfd = perf_uprobe_open(type, path, offsets[i], pid, ret_bit), lfd;

		if (pfd < 0)
			return rw_error_set(err, -pfd,
					    "failed to create a uprobe at offset 0x%llx: %s",
					    (unsigned long long)offsets[i], cause(-pfd));
		lfd = link_opened(bpf_link_create(prog_fd, pfd, BPF_PERF_EVENT, &opts));
		if (lfd < 0) {
			int e = -errno;

			link_close(pfd);
			return rw_error_set(err, -e,
					    "failed to attach a uprobe at offset 0x%llx: %s",
					    (unsigned long long)offsets[i], cause(-e));
		}
		l->perf_fds[l->n] = pfd;
		l->link_fds[l->n++] = lfd;
	}
	return 0;
}

int uprobe_attach(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
		  const uint64_t *offsets, const uint64_t *cookies, size_t n, struct rw_error *err)
{
	return uprobe_attach_pid(l, prog_fd, multi, path, offsets, cookies, n, -1, err);
}

static int attach(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
		  const uint64_t *offsets, const uint64_t *cookies, size_t n, pid_t pid, bool ret,
		  struct rw_error *err)
{
	int e;

	uprobe_links__close(l);
	if (!n)
		return 0;
	if (multi) {
		e = link_create_multi(prog_fd, path, offsets, cookies, n, pid, ret);
		if (e < 0)
			return rw_error_set(err, -e,
					    "failed to attach %zu %s in %s (uprobe_multi): %s", n,
					    ret ? "uretprobes" : "uprobes", path, strerror(-e));
		l->multi_fd = e;
		l->n = n;
		return 0;
	}
	e = attach_perf(l, prog_fd, path, offsets, cookies, n, pid, ret, err);
	if (e)
		uprobe_links__close(l);
	return e;
}

int uprobe_attach_pid(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
		      const uint64_t *offsets, const uint64_t *cookies, size_t n, pid_t pid,
		      struct rw_error *err)
{
	return attach(l, prog_fd, multi, path, offsets, cookies, n, pid, false, err);
}

int uretprobe_attach_pid(struct uprobe_links *l, int prog_fd, bool multi, const char *path,
			 const uint64_t *offsets, const uint64_t *cookies, size_t n, pid_t pid,
			 struct rw_error *err)
{
	return attach(l, prog_fd, multi, path, offsets, cookies, n, pid, true, err);
}
