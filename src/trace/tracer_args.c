// SPDX-License-Identifier: MIT
/*
 * Arguments: a function whose arguments are captured has RW_FUNC_ARGS in its
 * slot, and the strings its parameters name in str_args; its entries keep
 * their argument registers (bpf/trace.bpf.c), and its calls sent carry
 * them, given here their parameters (binary__params) for the caller to show.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/params.h"
#include "trace/tracer.h"
#include "trace/tracer_impl.h"

_Static_assert(TRACER_ARG_REGS == RW_ARG_REGS && PREG__COUNT == RW_ARG_REGS,
	       "the registers an entry keeps");
_Static_assert(TRACER_STR_ARGS == RW_MAX_STR_ARGS && PARAMS_MAX_STRINGS == RW_MAX_STR_ARGS &&
		       PARAMS_STRING_BYTES == RW_STR_BYTES,
	       "the strings a call carries");

void slot__forget_args(struct tracer *t, uint32_t fn_id)
{
	if (t->args_of && fn_id < RW_MAX_FUNCS)
		t->args_of[fn_id] = NULL;
}

int tracer_target__capture_args(struct tracer *t, struct tracer_target *tt, size_t i,
				struct rw_error *err)
{
	const struct func_params *fp;
	struct slot *s;
	int e;

	if (!t->capture_args)
		return rw_error_set(err, EPERM, "capturing arguments is not enabled");
	if (i >= tt->nfuncs || !tt->slots[i])
		return rw_error_set(err, EINVAL, "no such function");
	s = tt->slots[i];
	if (s->meta.flags & RW_FUNC_ENTRY_ONLY)
		return rw_error_set(err, EOPNOTSUPP,
				    "%s is counted at its entry alone: no call of it is sent",
				    s->info->name);
	if (!t->args_of) {
		t->args_of = calloc(RW_MAX_FUNCS, sizeof(*t->args_of));
		if (!t->args_of)
			return rw_error_set(err, ENOMEM, "out of memory");
	}
	fp = binary__params(tt->file->bin, s->info, tracer__entry_site(tt, s->info), err);
	if (!fp)
		return -EINVAL;
	tt->keep[i].args = true;
	t->args_of[s->fn_id] = fp;
	if ((s->meta.flags & RW_FUNC_ARGS) && s->meta.str_args == params__kernel_strings(fp))
		return 0;
	s->meta.flags |= RW_FUNC_ARGS;
	s->meta.str_args = params__kernel_strings(fp);
	e = slot__write(t, s);
	return e ? rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e)) : 0;
}

bool tracer_target__captures(const struct tracer_target *tt, size_t i)
{
	return i < tt->nfuncs && tt->keep[i].args;
}

void event__args(const struct tracer *t, const struct rw_event *e, struct tracer_event *ev)
{
	memset(&ev->args, 0, sizeof(ev->args));
	if (!e->args_kept || !t->args_of || e->fn_id >= RW_MAX_FUNCS || !t->args_of[e->fn_id])
		return;
	ev->args.params = t->args_of[e->fn_id];
	memcpy(ev->args.regs, e->args.r, sizeof(ev->args.regs));
	for (int i = 0; i < RW_MAX_STR_ARGS; i++) {
		ev->args.str[i] = e->str[i];
		ev->args.str_len[i] = e->str_len[i] > RW_STR_BYTES ? RW_STR_BYTES : e->str_len[i];
	}
}
