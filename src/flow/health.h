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

/* What health_rate decided, for health_announce. */
typedef struct health_verdict {
  health_level_t level;
  json_t *reasons;  /* owned: health_verdict_release */
  int pause_after;  /* the rules' */
} health_verdict_t;

/* Rates job j, ending in state at end_ms with stats: records its health
 * and reasons (before its end is written, so that no reader sees it ended
 * and not rated yet, on a store whose op is not one transaction), into *v.
 * Cancelled and lost jobs are not rated (level HEALTH_NONE). */
int health_rate(store_t *s, const job_t *j, job_state_t state, const json_t *stats,
                int64_t end_ms, const char *end_reason, health_verdict_t *v);

/* After the end's event: the job.degraded / job.broken event, and the
 * schedule's pause when the rules' pause_after broken runs in a row are
 * reached (c gets the schedule's change). */
int health_announce(store_t *s, const job_t *j, int64_t end_ms, const health_verdict_t *v,
                    flow_change_t *c);

void health_verdict_release(health_verdict_t *v);

#endif
