/* Runs that check themselves: at a job's end its counts are compared with
 * the previous runs like it (the same schedule; with no schedule, the same
 * project, spider and arguments), and the job gets a health ("ok",
 * "degraded", "broken", or none while there is too little history) with
 * its reasons, an event job.degraded or job.broken, and, when its
 * schedule's rules say so, the schedule pauses itself after enough broken
 * runs in a row. The rules (core/health.h) are the defaults, overridden by
 * a project's and then by a schedule's own, kept in the store's meta
 * table.
 *
 * Everything here runs on a store thread, inside the caller's transaction.
 *
 * Ownership: health_item_fields and health_rules_own return new objects.
 */
#ifndef SPIDERD_FLOW_HEALTH_H
#define SPIDERD_FLOW_HEALTH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/health.h"
#include "core/job.h"
#include "flow/flow.h"
#include "store/store.h"

/* How many lines of an items file are sampled. */
#define HEALTH_SAMPLE_LINES 200

/* The share of items carrying each field (present, not null, not ""),
 * from the first HEALTH_SAMPLE_LINES JSON lines of the items file at path:
 * an object field -> share, or NULL when there is no file or no item. */
json_t *health_item_fields(const char *path);

/* The rules for a job of project and schedule_id (0 = none): the
 * defaults, the project's overrides, the schedule's. */
int health_rules_for(store_t *s, const char *project, int64_t schedule_id, health_rules_t *out);

/* The overrides set for a project (schedule_id 0) or a schedule (project
 * NULL) into *out: an object, empty when none. */
int health_rules_own(store_t *s, const char *project, int64_t schedule_id, json_t **out);

/* Replaces those overrides with rules (an object; NULL or {} = none):
 * -EINVAL with why when one is not a rule or out of its range. */
int health_rules_set(store_t *s, const char *project, int64_t schedule_id, const json_t *rules,
                     char *why, size_t whylen);

/* Rates job j, ended in state at end_ms with stats: records its health and
 * reasons, its job.degraded / job.broken event, and pauses its schedule
 * when the rules' pause_after broken runs in a row are reached (c gets the
 * schedule's change). Cancelled and lost jobs are not rated. */
int health_rate(store_t *s, const job_t *j, job_state_t state, const json_t *stats,
                int64_t end_ms, const char *end_reason, flow_change_t *c);

#endif
