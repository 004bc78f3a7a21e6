/* What a user or a crawl changes on a job besides its life: its meta
 * (jobs.meta, an RFC 7396 merge patch) and its history once it ended (a
 * note, a corrected state: jobs.history and its batch forms).
 *
 * Like flow/jobs.h's transitions, each runs on a store thread inside the
 * caller's store op, and writes the change with its event so both commit
 * or neither does. The event's actor is the op's (store_submit_as). None
 * changes the job counts: a correction moves a job between final states.
 *
 * Ownership: inputs are borrowed; jobs filled here are the caller's
 * (job_release). Errors as store.h's, and those named below. */
#ifndef SPIDERD_FLOW_HISTORY_H
#define SPIDERD_FLOW_HISTORY_H

#include <jansson.h>
#include <stdint.h>

#include "core/job.h"
#include "store/store.h"

/* Merges patch (an object) into job id's meta. out (may be NULL) = the job
 * after. -ENOENT: no such job; -E2BIG: the result would be over
 * JOB_META_MAX bytes (nothing written). */
int history_meta_patch(store_t *s, int64_t id, const json_t *patch, job_t *out);

/* One history update. */
typedef struct history_update {
  int set_state;      /* in: 1 = correct the state to `state` */
  job_state_t state;  /* in: a final state */
  const char *note;   /* in: the note (NULL = unchanged, "" = removed) */
} history_update_t;

/* Applies u to job id, which must have ended: its state (the one it ended
 * in stays as original_state), its note, and a job.history_updated event
 * with the before and after (none when nothing changes). out (may be
 * NULL) = the job after; *changed (may be NULL) = 1 when something did.
 * -ENOENT: no such job; SPD_ECONFLICT: it has not ended (out = the job as
 * it is). */
int history_update(store_t *s, int64_t id, const history_update_t *u, job_t *out,
                   int *changed);

#endif
