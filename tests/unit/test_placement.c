// SPDX-License-Identifier: MIT
/* Placement (pod -> container -> process) with real fixture processes. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cgroup.h"
#include "agent/placement.h"
#include "test.h"

#define CID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define OTHER_CID "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define POD_UID "8f6ca8fd-03a1-4da0-ad1e-3cb8b5b27c8a"

/* A child running argv, once it has exec'd (its /proc/PID/exe is argv[0]). */
static pid_t spawn(char *const argv[])
{
	char link[64], exe[4096];
	pid_t pid = fork();

	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	for (int i = 0; pid > 0 && i < 400; i++) {
		ssize_t n = readlink(link, exe, sizeof(exe) - 1);

		exe[n > 0 ? n : 0] = '\0';
		if (n > 0 && !strcmp(exe, argv[0]))
			return pid;
		nanosleep(&(struct timespec){ 0, 5000000 }, NULL);
	}
	return -1;
}

/* The start time of process pid, as the agent's scan lists it (0 when gone). */
static uint64_t start_of(pid_t pid)
{
	uint64_t st = 0;

	return pid > 0 && !cgroup__pid_starttime("/proc", pid, &st) ? st : 0;
}

static void reap(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

struct found {
	pid_t pids[8];
	uint64_t starttime[8];
	char exe[8][256], path[8][64];
	dev_t dev[8];
	size_t n;
};

static void collect(const struct placement_proc *pp, void *ctx)
{
	struct found *f = ctx;

	if (f->n == 8)
		return;
	f->pids[f->n] = pp->proc.pid;
	f->starttime[f->n] = pp->proc.starttime;
	snprintf(f->exe[f->n], sizeof(f->exe[0]), "%s", pp->exe);
	snprintf(f->path[f->n], sizeof(f->path[0]), "%s", pp->path ? pp->path : "");
	f->dev[f->n] = pp->dev;
	f->n++;
}

static bool has_pid(const struct found *f, pid_t pid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->pids[i] == pid)
			return true;
	return false;
}

/* A pod of namespace shop whose container app runs (state as the kubelet writes it). */
static cJSON *pod_json(const char *app_state, const char *cid)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"shop\",\"uid\":\"%s\","
		 "\"labels\":{\"app\":\"web\"}},\"status\":{\"phase\":\"Running\","
		 "\"containerStatuses\":[{\"name\":\"app\",\"containerID\":\"containerd://%s\","
		 "\"state\":%s}]}}",
		 POD_UID, cid, app_state);
	return cJSON_Parse(text);
}

static bool spec_of(const char *json, struct probe_spec *s)
{
	cJSON *doc = cJSON_Parse(json);
	struct rw_error err;
	bool ok = doc && !probe_spec__parse(doc, s, &err);

	cJSON_Delete(doc);
	return ASSERT_TRUE(ok);
}

/* Places spec on the pod; the callback's finds and the errors. */
static bool place(const char *spec_json, const char *state, const char *cid, struct nodeprocs *np,
		  struct found *f, struct errlist *errs)
{
	cJSON *obj = pod_json(state, cid);
	struct probe_spec spec = {};
	struct pod pod = {};
	bool ok = ASSERT_TRUE(obj) && spec_of(spec_json, &spec) && ASSERT_OK(pod__parse(obj, &pod));

	memset(f, 0, sizeof(*f));
	if (ok)
		placement__pod(&spec, &pod, np, errs, collect, f);
	pod__clear(&pod);
	probe_spec__free(&spec);
	cJSON_Delete(obj);
	return ok;
}

#define RUNNING "{\"running\":{\"startedAt\":\"2026-11-23T12:00:00Z\"}}"

TEST(placement_processes_of_the_container)
{
	char *sleep_argv[] = { "/usr/bin/sleep", "60", NULL };
	char *tail_argv[] = { "/usr/bin/tail", "-f", "/dev/null", NULL };
	pid_t a = spawn(sleep_argv), b = spawn(sleep_argv), c = spawn(tail_argv);
	pid_t d = spawn(sleep_argv), e = spawn(sleep_argv);
	struct nodeprocs *np = nodeprocs__new("/proc");
	struct errlist errs = {};
	struct found f;
	struct stat st;
	bool ok = ASSERT_TRUE(a > 0 && b > 0 && c > 0 && d > 0 && e > 0) && ASSERT_TRUE(np) &&
		  ASSERT_OK(stat("/usr/bin/sleep", &st));

	/* a, b and c run in the container; d in the same container id, another pod; e's
	 * pid was a process's of the container, with another start time: e is not it */
	ok = ok && ASSERT_OK(nodeprocs__add(np, a, start_of(a), CID, POD_UID)) &&
	     ASSERT_OK(nodeprocs__add(np, b, start_of(b), CID, POD_UID)) &&
	     ASSERT_OK(nodeprocs__add(np, c, start_of(c), CID, POD_UID)) &&
	     ASSERT_OK(nodeprocs__add(np, d, start_of(d), CID,
				      "11111111-2222-3333-4444-555555555555")) &&
	     ASSERT_OK(nodeprocs__add(np, e, start_of(e) + 1, CID, POD_UID));
	/* the executable of the main process (the first in pid order outside a namespace) */
	ok = ok && place("{\"selector\":{},\"functions\":[\"f\"]}", RUNNING, CID, np, &f, &errs) &&
	     ASSERT_EQ(errs.n, 0) && ASSERT_EQ(f.n, 2) && ASSERT_TRUE(has_pid(&f, a)) &&
	     ASSERT_TRUE(has_pid(&f, b)) && ASSERT_FALSE(has_pid(&f, c)) &&
	     ASSERT_FALSE(has_pid(&f, d)) && ASSERT_FALSE(has_pid(&f, e)) &&
	     ASSERT_STREQ(f.exe[0], "/usr/bin/sleep") && ASSERT_STREQ(f.path[0], "") &&
	     ASSERT_EQ(f.dev[0], st.st_dev) && ASSERT_EQ(f.starttime[0], start_of(f.pids[0]));
	/* spec.executable, opened inside the container's root */
	ok = ok &&
	     place("{\"selector\":{},\"functions\":[\"f\"],\"executable\":\"/usr/bin/tail\"}",
		   RUNNING, CID, np, &f, &errs) &&
	     ASSERT_EQ(errs.n, 0) && ASSERT_EQ(f.n, 1) && ASSERT_EQ(f.pids[0], c) &&
	     ASSERT_STREQ(f.exe[0], "/usr/bin/tail") &&
	     ASSERT_TRUE(!strncmp(f.path[0], "/proc/self/fd/", 14));
	errlist__clear(&errs);
	nodeprocs__free(np);
	reap(a);
	reap(b);
	reap(c);
	reap(d);
	reap(e);
	return ok;
}

/* Places a probe whose spec.executable is a new FIFO (the process's root is "/"). */
static bool place_fifo(struct nodeprocs *np, struct found *f, struct errlist *errs)
{
	char dir[] = "/tmp/retwatch-fifo-XXXXXX", fifo[64], spec[256];
	bool ok = ASSERT_TRUE(mkdtemp(dir));

	if (!ok)
		return false;
	snprintf(fifo, sizeof(fifo), "%s/server", dir);
	snprintf(spec, sizeof(spec),
		 "{\"selector\":{},\"functions\":[\"f\"],\"executable\":\"%s\"}", fifo);
	ok = CHECK(!mkfifo(fifo, 0755), "mkfifo %s: %s", fifo, strerror(errno));
	alarm(10); /* a blocking open ends the run instead of hanging it */
	ok = ok && place(spec, RUNNING, CID, np, f, errs);
	alarm(0);
	unlink(fifo);
	rmdir(dir);
	return ok;
}

/* What cannot be placed says why, naming the pod and container. */
TEST(placement_errors)
{
	char *sleep_argv[] = { "/usr/bin/sleep", "60", NULL };
	pid_t a = spawn(sleep_argv);
	struct nodeprocs *np = nodeprocs__new("/proc");
	struct errlist errs = {};
	struct found f;
	bool ok = ASSERT_TRUE(a > 0) && ASSERT_TRUE(np) &&
		  ASSERT_OK(nodeprocs__add(np, a, start_of(a), CID, POD_UID));

	ok = ok &&
	     place("{\"selector\":{},\"functions\":[\"f\"],\"containers\":[\"sidecar\"]}", RUNNING,
		   CID, np, &f, &errs) &&
	     ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STREQ(errs.msgs[0], "pod web-1: no running container named in spec.containers");
	errlist__clear(&errs);
	ok = ok &&
	     place("{\"selector\":{},\"functions\":[\"f\"]}",
		   "{\"waiting\":{\"reason\":\"ContainerCreating\"}}", CID, np, &f, &errs) &&
	     ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STREQ(errs.msgs[0],
			  "pod web-1, container app: not running (ContainerCreating)");
	errlist__clear(&errs);
	ok = ok &&
	     place("{\"selector\":{},\"functions\":[\"f\"]}", RUNNING, "xyz", np, &f, &errs) &&
	     ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STRCONTAINS(errs.msgs[0], "unknown container id containerd://xyz");
	errlist__clear(&errs);
	ok = ok &&
	     place("{\"selector\":{},\"functions\":[\"f\"]}", RUNNING, OTHER_CID, np, &f, &errs) &&
	     ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STRCONTAINS(errs.msgs[0], "no process of container fedcba987654 on this node");
	errlist__clear(&errs);
	ok = ok &&
	     place("{\"selector\":{},\"functions\":[\"f\"],\"executable\":\"/no/such/server\"}",
		   RUNNING, CID, np, &f, &errs) &&
	     ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STRCONTAINS(errs.msgs[0],
				"cannot open spec.executable /no/such/server inside the container");
	errlist__clear(&errs);
	/* a FIFO without a writer: refused at once, not waited on */
	ok = ok && place_fifo(np, &f, &errs) && ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STRCONTAINS(errs.msgs[0], "is a FIFO, not a regular file");
	errlist__clear(&errs);
	/* the container's only process listed with another start time: its pid was reused */
	ok = ok && ASSERT_OK(nodeprocs__add(np, a, start_of(a) + 1, OTHER_CID, POD_UID)) &&
	     place("{\"selector\":{},\"functions\":[\"f\"]}", RUNNING, OTHER_CID, np, &f, &errs) &&
	     ASSERT_EQ(f.n, 0) && ASSERT_EQ(errs.n, 1) &&
	     ASSERT_STRCONTAINS(errs.msgs[0], "exited while being looked at");
	errlist__clear(&errs);
	nodeprocs__free(np);
	reap(a);
	return ok;
}

TEST(placement_selects)
{
	cJSON *obj = pod_json(RUNNING, CID);
	struct probe_spec web = {}, db = {};
	struct pod pod = {};
	bool ok = ASSERT_TRUE(obj) && ASSERT_OK(pod__parse(obj, &pod)) &&
		  spec_of("{\"functions\":[\"f\"],\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}",
			  &web) &&
		  spec_of("{\"functions\":[\"f\"],\"selector\":{\"matchLabels\":{\"app\":\"db\"}}}",
			  &db);

	ok = ok && ASSERT_TRUE(placement__selects(&web, "shop", &pod)) &&
	     ASSERT_FALSE(placement__selects(&web, "other", &pod)) &&
	     ASSERT_FALSE(placement__selects(&db, "shop", &pod));
	pod.done = true; /* Succeeded or Failed */
	ok = ok && ASSERT_FALSE(placement__selects(&web, "shop", &pod));
	pod__clear(&pod);
	probe_spec__free(&web);
	probe_spec__free(&db);
	cJSON_Delete(obj);
	return ok;
}
