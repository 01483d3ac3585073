// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cgroup.h"
#include "agent/placement.h"
#include "base/rootpath.h"

/* Where the probe's executable is found in one container. */
struct where {
	struct placement_proc pp;
	char exe[4096], path[64];
	int fd; /* spec.executable, opened inside the container; -1 otherwise */
};

bool placement__selects(const struct probe_spec *spec, const char *ns, const struct pod *pod)
{
	return !strcmp(pod->ns, ns) && probe_spec__selects(spec, &pod->labels) && !pod->done;
}

static bool exe_identity(pid_t pid, dev_t *ret_dev, ino_t *ret_ino)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &st))
		return false;
	*ret_dev = st.st_dev;
	*ret_ino = st.st_ino;
	return true;
}

/* The executable named in the spec, opened inside the container's root. */
static int open_in_container(const struct probe_spec *spec, const struct placement_proc *pp,
			     pid_t main_pid, struct errlist *errs)
{
	char root[64];
	int rootfd, fd;
	mode_t mode;

	snprintf(root, sizeof(root), "/proc/%d/root", main_pid);
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		errlist__add(errs, "pod %s, container %s: cannot open the container's root: %s",
			     pp->pod, pp->container, strerror(errno));
		return -1;
	}
	fd = rootpath__open_regular(rootfd, spec->executable, &mode);
	close(rootfd);
	if (fd == -ENXIO && mode)
		errlist__add(errs,
			     "pod %s, container %s: spec.executable %s is %s, not a regular file",
			     pp->pod, pp->container, spec->executable, rootpath__kind(mode));
	else if (fd < 0)
		errlist__add(errs,
			     "pod %s, container %s: cannot open spec.executable %s inside the "
			     "container: %s",
			     pp->pod, pp->container, spec->executable, strerror(-fd));
	return fd;
}

/* The executable's identity and where to open it. 0, or -1 with an error added. */
static int locate_executable(const struct probe_spec *spec, struct where *w, pid_t main_pid,
			     struct errlist *errs)
{
	struct stat st;
	ssize_t n;

	if (spec->executable) {
		w->fd = open_in_container(spec, &w->pp, main_pid, errs);
		if (w->fd < 0 || fstat(w->fd, &st))
			return -1;
		snprintf(w->path, sizeof(w->path), "/proc/self/fd/%d", w->fd);
		w->pp.path = w->path;
		w->pp.exe = spec->executable;
	} else {
		snprintf(w->path, sizeof(w->path), "/proc/%d/exe", main_pid);
		if (stat(w->path, &st)) {
			errlist__add(
				errs,
				"pod %s, container %s: cannot read process %d's executable: %s",
				w->pp.pod, w->pp.container, main_pid, strerror(errno));
			return -1;
		}
		n = readlink(w->path, w->exe, sizeof(w->exe) - 1);
		w->exe[n > 0 ? n : 0] = '\0';
		w->pp.exe = w->exe;
	}
	w->pp.dev = st.st_dev;
	w->pp.ino = st.st_ino;
	return 0;
}

static void place_container(const struct probe_spec *spec, const struct pod *pod,
			    const struct pod_container *c, struct nodeprocs *np,
			    struct errlist *errs, placement_fn fn, void *ctx)
{
	struct where w = { .pp = { .pod = pod->name, .pod_uid = pod->uid, .container = c->name },
			   .fd = -1 };
	char cid[CGROUP_ID_LEN + 1];
	struct nodeproc *procs = NULL;
	size_t n, placed = 0;

	if (cgroup__status_container_id(c->id, cid)) {
		errlist__add(errs, "pod %s, container %s: unknown container id %s", pod->name,
			     c->name, c->id);
		return;
	}
	w.pp.cid = cid;
	n = nodeprocs__container(np, cid, pod->uid, &procs);
	if (!n) {
		errlist__add(errs,
			     "pod %s, container %s: no process of container %.12s on this node "
			     "(the agent needs the host's PID namespace)",
			     pod->name, c->name, cid);
		return;
	}
	if (locate_executable(spec, &w, procs[0].pid, errs))
		goto out;
	/* the executable was that process's, not a later one's with its pid */
	if (!nodeprocs__alive(np, &procs[0])) {
		errlist__add(errs, "pod %s, container %s: process %d exited while being looked at",
			     pod->name, c->name, procs[0].pid);
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		dev_t dev;
		ino_t ino;

		if (!exe_identity(procs[k].pid, &dev, &ino) || dev != w.pp.dev || ino != w.pp.ino)
			continue;
		/* the file read is the listed process's (a pid taken over is not) */
		if (!nodeprocs__alive(np, &procs[k]))
			continue;
		w.pp.proc = procs[k];
		fn(&w.pp, ctx);
		placed++;
	}
	if (!placed)
		errlist__add(errs, "pod %s, container %s: no process runs %s", pod->name, c->name,
			     w.pp.exe);
out:
	if (w.fd >= 0)
		close(w.fd);
	free(procs);
}

void placement__pod(const struct probe_spec *spec, const struct pod *pod, struct nodeprocs *np,
		    struct errlist *errs, placement_fn fn, void *ctx)
{
	size_t wanted = 0;

	for (size_t i = 0; i < pod->ncontainers; i++) {
		const struct pod_container *c = &pod->containers[i];

		if (!probe_spec__wants_container(spec, c->name))
			continue;
		wanted++;
		if (!c->id || !c->running) {
			errlist__add(errs, "pod %s, container %s: not running (%s)", pod->name,
				     c->name, c->why_not);
			continue;
		}
		place_container(spec, pod, c, np, errs, fn, ctx);
	}
	if (!wanted)
		errlist__add(errs, "pod %s: no running container%s%s", pod->name,
			     spec->ncontainers ? " named in spec.containers" : "",
			     pod->ncontainers ? "" : " yet");
}
