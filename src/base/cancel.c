// SPDX-License-Identifier: MIT
#include "base/cancel.h"
#include "base/clock.h"

_Thread_local struct cancel_binding cancel_binding;

void cancel__bind(const atomic_bool *flag, uint64_t deadline_ns)
{
	cancel_binding = (struct cancel_binding){ .flag = flag, .deadline_ns = deadline_ns };
}

bool cancel__expired(void)
{
	struct cancel_binding *c = &cancel_binding;

	if (!c->expired && c->deadline_ns && clock__mono_ns() >= c->deadline_ns)
		c->expired = true;
	return c->expired;
}
