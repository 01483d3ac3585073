// SPDX-License-Identifier: MIT
/*
 * What the kernel must have for the BPF programs to load, said in words
 * where it lacks it: a verifier's "Invalid argument" names nothing, and
 * nodes on older kernels (Debian 11's and Amazon Linux 2's 5.10) are run.
 * Nothing newer than 5.15's attach cookies is needed: the deep purge's loop
 * is a bounded one in a global function (bpf/frames.bpf.h), not bpf_loop
 * (5.17).
 * Asked only after a load failed, so a kernel that loads the programs pays
 * nothing for it. Each helper is probed by loading a program that calls it
 * (libbpf_probe_bpf_helper); what cannot be probed so (64-bit
 * compare-and-swap, 5.12) came before the newest helper named here.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "base/rwerr.h"
#include "trace/tracer.h"

static const struct kfeature {
	enum bpf_func_id id;
	const char *name;
	const char *since; /* the Linux release that brought it */
} kfeatures[] = {
	{ BPF_FUNC_get_attach_cookie, "bpf_get_attach_cookie", "5.15" },
	{ BPF_FUNC_get_current_task_btf, "bpf_get_current_task_btf", "5.11" },
	{ BPF_FUNC_ringbuf_reserve, "the BPF ring buffer", "5.8" },
};

int tracer__kernel_lacks(struct rw_error *err)
{
	char missing[256] = "";
	size_t len = 0;
	struct utsname u;

	for (size_t i = 0; i < sizeof(kfeatures) / sizeof(kfeatures[0]); i++) {
		const struct kfeature *f = &kfeatures[i];

		if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, f->id, NULL) != 0)
			continue; /* there, or not known (probing was refused) */
		len += snprintf(missing + len, len < sizeof(missing) ? sizeof(missing) - len : 0,
				"%s%s (Linux %s)", len ? ", " : "", f->name, f->since);
	}
	if (!len)
		return 0;
	if (uname(&u))
		strcpy(u.release, "unknown");
	return rw_error_set(
		err, EOPNOTSUPP,
		"this kernel (%s) lacks what retwatch's BPF programs need: %s; retwatch "
		"runs on Linux " TRACER_LOWEST_KERNEL " or later",
		u.release, missing);
}

/* The running kernel's major and minor release, 0 where it cannot be read. */
static unsigned kernel_release(struct utsname *u)
{
	unsigned major = 0, minor = 0;

	if (uname(u) || sscanf(u->release, "%u.%u", &major, &minor) != 2)
		return 0;
	return major << 16 | minor;
}

/* Whether /proc/cpuinfo lists flag for the CPU (one word of its flags line). */
static bool cpu_has(const char *flag)
{
	char line[4096], *w, *save;
	bool has = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return false;
	while (!has && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		for (w = strtok_r(strchr(line, ':'), " :\n", &save); w && !has;
		     w = strtok_r(NULL, " \n", &save))
			has = !strcmp(w, flag);
		break;
	}
	fclose(f);
	return has;
}

/* tracer__kernel_trampoline_refusal, asked once. */
static const char *trampoline_refusal(void)
{
	struct utsname u;
	unsigned release = kernel_release(&u);
	struct btf *btf;
	bool has;

#if !defined(__x86_64__)
	return "the return trampoline is used on x86-64 alone";
#endif
	/* 6.11 made the trampoline a syscall; 6.14 let it through seccomp
	 * filters (before, a container's filter could refuse it: a crash) */
	if (release < (6U << 16 | 14))
		return "this kernel is older than Linux 6.14, whose return trampoline "
		       "seccomp filters let through";
	/* a hijacked return address against a shadow stack: not tried */
	if (cpu_has("user_shstk"))
		return "this CPU keeps user shadow stacks";
	btf = btf__load_vmlinux_btf();
	has = btf && btf__find_by_name_kind(btf, "__x64_sys_uretprobe", BTF_KIND_FUNC) > 0;
	btf__free(btf);
	return has ? NULL : "this kernel has no uretprobe syscall";
}

static const char *trampoline_why;

static void ask_trampoline(void)
{
	trampoline_why = trampoline_refusal();
}

const char *tracer__kernel_trampoline_refusal(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, ask_trampoline);
	return trampoline_why;
}
