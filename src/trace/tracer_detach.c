// SPDX-License-Identifier: MIT
/*
 * One function of one process detached, and back (the overhead guard): its
 * probes in that process go, what it counted is kept.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace/tracer_impl.h"

int tracer_target__detach(struct tracer *t, struct tracer_target *tt, size_t i,
			  struct rw_error *err)
{
	struct latency now;
	struct slot *s;
	uint32_t h;

	if (i >= tt->nfuncs)
		return rw_error_set(err, EINVAL, "no function %zu", i);
	s = tt->slots[i];
	if (!s)
		return 0;
	/* another target of this process (another probe) measures it too */
	tt->slots[i] = NULL;
	if (slot_used_in(t, s, tt->pid)) {
		tt->slots[i] = s;
		return rw_error_set(err, EBUSY, "another probe measures %s in this process",
				    s->info->name);
	}
	/* what it counted, kept: its histogram slot goes with its probes */
	if (!slot__hist(s, tt->pid, &h) || hist_slot__read(t, h, &now))
		memset(&now, 0, sizeof(now));
	else if (tt->base[i])
		latency__subtract(&now, tt->base[i]);
	/* its probes in this process go; the others' stay */
	slot__unuse(t, tt->file, s, tt->pid);
	free(tt->base[i]);
	tt->base[i] = NULL;
	if (!tt->kept[i])
		tt->kept[i] = calloc(1, sizeof(*tt->kept[i]));
	if (tt->kept[i])
		latency__merge(tt->kept[i], &now);
	return 0;
}

int tracer_target__reattach(struct tracer *t, struct tracer_target *tt, size_t i,
			    struct rw_error *err)
{
	const struct func_info *fi;
	struct slot *s;
	int e;

	if (i >= tt->nfuncs)
		return rw_error_set(err, EINVAL, "no function %zu", i);
	if (tt->slots[i])
		return 0;
	fi = tt->funcs[i].info;
	exe__refresh_for(t, tt->pid);
	s = file__find_slot(tt->file, fi->address);
	if (!s) {
		e = file__new_slot(t, tt->file, fi, &s, err);
		if (e)
			return e;
		e = slot__activate(t, s, err);
		if (!e)
			e = slot__attach_pid(t, tt->file, s, tt->pid, tt->threshold_ns, err);
		if (e) {
			slot__drop_pid(t, s, tt->pid);
			file__drop_slots(t, tt->file, &s, 1);
			return e;
		}
	} else {
		/* probes of their own for this process, where the slot has left it */
		e = slot__attach_pid(t, tt->file, s, tt->pid, tt->threshold_ns, err);
		if (e)
			return e;
		/* a slot of a live batch, probes attached: active again */
		s->meta.flags |= RW_FUNC_ACTIVE;
		slot__write(t, s);
	}
	s->users++;
	tt->slots[i] = s;
	tt->funcs[i].fn_id = s->fn_id;
	e = hist__create(t, tt, i, err);
	if (!e && tt->keep[i].n)
		tracer_target__keep_slowest(t, tt, i, tt->keep[i].n, tt->keep[i].floor_ns, false);
	return e;
}

bool tracer_target__detached(const struct tracer_target *tt, size_t i)
{
	return i < tt->nfuncs && !tt->slots[i];
}
