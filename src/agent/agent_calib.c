// SPDX-License-Identifier: MIT
/*
 * The probes' bias and cost, calibrated at start and again every
 * --calibrate-every, a round a turn of the loop.
 */
#include <stdio.h>

#include "base/clock.h"
#include "base/log.h"
#include "trace/calibrate.h"
#include "agent/agent_impl.h"

static void log_calibration(const struct calibration *cal, const char *msg)
{
	cJSON *ev = log_event(LOG_INFO, "%s", msg), *by;

	if (!ev)
		return;
	cJSON_AddNumberToObject(ev, "bias_ns", (double)cal->bias_ns);
	cJSON_AddNumberToObject(ev, "bias_lo_ns", (double)cal->bias_lo_ns);
	cJSON_AddNumberToObject(ev, "bias_hi_ns", (double)cal->bias_hi_ns);
	cJSON_AddNumberToObject(ev, "call_cost_ns", (double)cal->call_cost_ns);
	cJSON_AddNumberToObject(ev, "entry_only_call_cost_ns", (double)cal->entry_only_cost_ns);
	by = cJSON_AddObjectToObject(ev, "bias_by_entry_ns");
	for (int k = 0; by && k < PROBE_ENTRY__N; k++)
		cJSON_AddNumberToObject(by, probe_entry__str(k), (double)cal->entry_bias_ns[k]);
	log_emit(ev);
}

/* How much of a measured duration is the probes' own, and what a traced
 * call costs: measured here, and again every --calibrate-every (recalibrate);
 * without it durations stay as measured and the overhead guard is off. */
void agent_calib__run(struct agent *a)
{
	struct rw_error err = { "" };

	a->next_calibration = clock__mono_ns() + a->o.calibrate_every_ns;
	if (calibrate__run(a->tracer, &a->env.cal, &err)) {
		log_warn("cannot calibrate the probes' bias and cost (durations are reported as "
			 "measured, the overhead guard is off, entry probes at each function's "
			 "first byte): %s",
			 err.msg);
		tracer__set_site_kinds(a->tracer, 0);
		return;
	}
	a->page.calibrations++;
	log_calibration(&a->env.cal, "probes calibrated");
	/* where entry probes may go is decided once: probes attached keep their sites */
	tracer__set_site_kinds(a->tracer, calibrate__emulated(&a->env.cal));
	for (int k = PROBE_ENTRY_STEPPED + 1; k < PROBE_ENTRY__N; k++)
		if (!(calibrate__emulated(&a->env.cal) & (1U << k)))
			log_warn(
				"this kernel steps a probe on a %s out of line (measured): entry "
				"probes stay at the first byte of functions whose entry site is one",
				probe_entry__str(k));
}

/* Rounds of a calibration run at most this often: a burst of load slows a few. */
#define CALIBRATION_ROUND_GAP_NS (NS_PER_S / 50)

/*
 * The bias and cost follow the machine (its load, its CPU's frequency): a
 * calibration again every --calibrate-every, a round (a few milliseconds)
 * per turn of the loop, so that nothing waits for it. The figures in use
 * change only when it completes; a failed one leaves them as they were.
 */
void agent_calib__tick(struct agent *a, uint64_t now)
{
	struct rw_error err = { "" };
	struct calibration cal;
	int e;

	if (!a->o.calibrate_every_ns || now < a->next_calibration)
		return;
	if (!a->calibrator)
		e = calibrator__start(a->tracer, &a->calibrator, &err);
	else
		e = calibrator__step(a->calibrator, &cal, &err);
	if (!e) { /* started, or rounds remain */
		a->next_calibration = now + CALIBRATION_ROUND_GAP_NS;
		return;
	}
	calibrator__free(a->calibrator);
	a->calibrator = NULL;
	a->next_calibration = now + a->o.calibrate_every_ns;
	if (e < 0) {
		log_warn("cannot calibrate the probes again (the figures of the last calibration "
			 "stay in use): %s",
			 err.msg);
		return;
	}
	a->env.cal = cal;
	a->page.calibrations++;
	log_calibration(&a->env.cal, "probes calibrated again");
}
