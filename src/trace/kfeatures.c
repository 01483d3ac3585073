// SPDX-License-Identifier: MIT
/*
 * What the kernel must have for the BPF programs to load, said in words
 * where it lacks it: a verifier's "Invalid argument" names nothing, and
 * nodes on older kernels (Debian 11's and Amazon Linux 2's 5.10) are run.
 * Asked only after a load failed, so a kernel that loads the programs pays
 * nothing for it. Each helper is probed by loading a program that calls it
 * (libbpf_probe_bpf_helper); what cannot be probed so (64-bit
 * compare-and-swap, 5.12) came before the newest helper named here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include <bpf/libbpf.h>

#include "base/rwerr.h"
#include "trace/tracer.h"

static const struct kfeature {
	enum bpf_func_id id;
	const char *name;
	const char *since; /* the Linux release that brought it */
} kfeatures[] = {
	{ BPF_FUNC_loop, "bpf_loop", "5.17" },
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
