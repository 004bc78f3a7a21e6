/* A schedule's changes in one place: created, updated, paused, resumed and
 * deleted, each with the event that records it (schedule.created,
 * schedule.updated, schedule.paused, schedule.resumed, schedule.deleted).
 *
 * Each runs on a store thread inside the caller's store op (store_submit),
 * reads the schedule, checks and writes it in that one transaction, so two
 * concurrent updates cannot lose each other's fields and the change and its
 * event commit together or not at all. Each sets ch->schedules when it
 * changed something: the caller hands ch to flow_apply on the loop, which
 * makes the scheduler tick at once (the upcoming runs were cleared).
 *
 * Running a schedule now changes no schedule: it is a job queued from the
 * schedule's template (schedule_job, then flow/jobs.h's jobs_enqueue).
 *
 * A schedule is named by key: its row id (digits) or its name. A schedule of
 * a project the caller may not see (projects: core/principal.h's list, ""
 * = every project) is none to it: SPD_ENOSCHEDULE, as an unknown one.
 *
 * Errors as store.h's, and SPD_ENOSCHEDULE, SPD_EBADPARAM (a field: the
 * reason in err), SPD_ECONFLICT (the name is taken); err is filled whenever
 * a person should read why. Ownership: inputs are borrowed; *out is the
 * caller's (schedule_release), filled only on success.
 */
#ifndef SPIDERD_FLOW_SCHEDULES_H
#define SPIDERD_FLOW_SCHEDULES_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/schedule.h"
#include "flow/flow.h"
#include "store/store.h"

/* Applies the fields present in the object p (the API's names: name,
 * project, spider, version, tz, cron | interval | at, start, end, jitter,
 * timeout, retry_backoff, overlap, missed, catchup_max, paused, priority,
 * retries, args, settings, webhooks) to sc (calendars is not a field of
 * sc: schedules_create and schedules_update link it, flow/calendars.h), a new schedule (id 0: one
 * timing is then required) or a stored one, then checks the whole
 * definition computes. 0, or SPD_EBADPARAM / -ENOMEM with a message in err.
 * Pure (no store): also what a preview runs on the loop. */
int schedules_apply_fields(schedule_t *sc, const json_t *p, char *err, size_t len);

/* The schedule named key, visible with projects, into *out. A read. */
int schedules_find(store_t *s, const char *key, const char *projects, schedule_t *out,
                   char *err, size_t len);

/* Inserts the schedule the fields describe (schedules_apply_fields on an
 * empty one), with schedule.created. */
int schedules_create(store_t *s, const json_t *fields, schedule_t *out, char *err, size_t len,
                     flow_change_t *ch);

/* Applies fields (the key's own entry "schedule", if any, is ignored) to
 * the schedule key, stamps updated_ms = now_ms and clears its upcoming
 * runs (the old definition's), with schedule.updated. */
int schedules_update(store_t *s, const char *key, const char *projects, const json_t *fields,
                     int64_t now_ms, schedule_t *out, char *err, size_t len, flow_change_t *ch);

/* Pauses (pause = 1) or resumes (0) the schedule key. Either way its
 * upcoming runs are cleared: paused, it has none; resumed, they start from
 * now_ms, and the time it was paused is no downtime (nothing in it is
 * missed). Already so: nothing is written, no event, *out as it is. */
int schedules_pause(store_t *s, const char *key, const char *projects, int pause,
                    int64_t now_ms, schedule_t *out, char *err, size_t len, flow_change_t *ch);

/* schedules_pause with a note: who paused it (by) and why, either may be
 * NULL; kept with the time while the schedule stays paused, put in the
 * schedule.paused event, dropped by a resume. Pausing a paused schedule
 * with a note replaces its note (no event). */
int schedules_pause_noted(store_t *s, const char *key, const char *projects, int pause,
                          const char *by, const char *why, int64_t now_ms, schedule_t *out,
                          char *err, size_t len, flow_change_t *ch);

/* The pause note of schedule id into *note (a new object; NULL = none). */
int schedules_pause_note(store_t *s, int64_t id, json_t **note);

/* Deletes the schedule key and its runs (its jobs and events stay), with
 * schedule.deleted. */
int schedules_delete(store_t *s, const char *key, const char *projects, char *err, size_t len,
                     flow_change_t *ch);

/* A schedule's state: a text its crawls hand on from one run to the next
 * (the Sneakpeek face's scraper state). A job of the schedule gets it as
 * the spider argument SCHEDULES_STATE_ARG; the crawl replaces it through its
 * job's token. */
#define SCHEDULES_STATE_MAX (64 * 1024)
#define SCHEDULES_STATE_ARG "scraper_state"

/* Sets the state of schedule id (NULL clears it). SPD_ENOSCHEDULE,
 * SPD_EBADPARAM (longer than SCHEDULES_STATE_MAX). */
int schedules_state_set(store_t *s, int64_t id, const char *state, char *err, size_t len);

/* Sets the state of the schedule that started job job_id (*schedule_id =
 * its id, 0 when none). SPD_ENOJOB; SPD_EBADPARAM when the job has no
 * schedule. */
int schedules_state_from_job(store_t *s, int64_t job_id, const char *state, int64_t *schedule_id,
                             char *err, size_t len);

/* Adds j's schedule's state to j's args (SCHEDULES_STATE_ARG), when it
 * has one. A read. 0 or -ENOMEM / a store error. */
int schedules_job_state(store_t *s, job_t *j);

#endif
