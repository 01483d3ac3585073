// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include "emptyprog.h"
#include "trace/uprobe.h"

int empty_prog__load(bool multi)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = multi ? UPROBE_MULTI_ATTACH_TYPE : 0);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, EMPTY_PROG_NAME, "GPL", insns, 2, &opts);

	return fd < 0 ? -errno : fd;
}

int clock_prog__load(bool multi)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_get_attach_cookie },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_get_current_pid_tgid },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_ktime_get_ns },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = multi ? UPROBE_MULTI_ATTACH_TYPE : 0);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, CLOCK_PROG_NAME, "GPL", insns,
			       sizeof(insns) / sizeof(insns[0]), &opts);

	return fd < 0 ? -errno : fd;
}

uint32_t prog__id(int prog_fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(prog_fd, &info, &len) ? 0 : info.id;
}

int offsets__collect(const struct func_info *const *funcs, size_t n, struct offsets *ret)
{
	struct offsets o = { 0 };
	size_t nret = 0;

	for (size_t i = 0; i < n; i++)
		if (funcs[i]->mode != FUNC_MODE_ENTRY_ONLY)
			nret += funcs[i]->nreturns;
	o.entries = calloc(n + 1, sizeof(*o.entries));
	o.rets = calloc(nret + 1, sizeof(*o.rets));
	o.cookies = calloc(n + nret + 1, sizeof(*o.cookies));
	if (!o.entries || !o.rets || !o.cookies) {
		offsets__free(&o);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct func_info *fi = funcs[i];

		o.entries[o.nentries++] = fi->file_offset;
		if (fi->mode == FUNC_MODE_ENTRY_ONLY)
			continue;
		for (size_t k = 0; k < fi->nreturns; k++)
			o.rets[o.nrets++] = fi->file_offset + fi->returns[k];
	}
	*ret = o;
	return 0;
}

void offsets__free(struct offsets *o)
{
	if (!o)
		return;
	free(o->entries);
	free(o->rets);
	free(o->cookies);
	*o = (struct offsets){ 0 };
}

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}
