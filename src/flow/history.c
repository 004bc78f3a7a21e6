#include "flow/history.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"

/* ---- meta ---- */

int history_meta_patch(store_t *s, int64_t id, const json_t *patch, job_t *out) {
  job_t j;
  job_init(&j);
  int rc = store_job_get(s, id, &j);
  if (rc) goto out;
  if ((rc = job_meta_merge(&j.meta, patch))) goto out;
  /* The limit is on what is stored, so a patch that removes keys from a
   * full object is always accepted. */
  size_t size = json_dumpb(j.meta, NULL, 0, JSON_COMPACT);
  if (size > JOB_META_MAX) {
    rc = -E2BIG;
    goto out;
  }
  if ((rc = store_job_set_meta(s, id, j.meta))) goto out;
  if (out) {
    *out = j;
    job_init(&j);
  }
out:
  job_release(&j);
  return rc;
}

/* ---- history ---- */

static json_t *history_side(job_state_t state, const char *note) {
  return json_pack("{s:s, s:o}", "state", job_state_name(state), "note",
                   note ? json_string(note) : json_null());
}

/* Does u change j (its state or its note)? */
static int history_changes(const job_t *j, const history_update_t *u) {
  if (u->set_state && u->state != j->state) return 1;
  if (!u->note) return 0;
  const char *now = j->note ? j->note : "";
  return strcmp(now, u->note) != 0;
}

static int history_event(store_t *s, const job_t *before, const job_t *after) {
  json_t *d = json_pack("{s:s, s:s, s:s, s:o, s:o}", "project", after->project, "spider",
                        after->spider, "jobid", after->jobid, "before",
                        history_side(before->state, before->note), "after",
                        history_side(after->state, after->note));
  if (!d) return -ENOMEM;
  if (after->corrected)
    json_object_set_new(d, "original_state", json_string(job_state_name(after->original_state)));
  event_t e = {.type = (char *)EV_JOB_HISTORY_UPDATED, .ts_ms = clock_wall_ms(),
               .schedule_id = after->test ? 0 : after->schedule_id, .job_id = after->id, .data = d};
  int rc = store_event_add(s, &e);
  json_decref(d);
  return rc;
}

int history_update(store_t *s, int64_t id, const history_update_t *u, job_t *out,
                   int *changed) {
  job_t before, after;
  job_init(&before);
  job_init(&after);
  if (changed) *changed = 0;
  if (u->set_state && !job_state_final(u->state)) return -EINVAL;
  int rc = store_job_get(s, id, &before);
  if (rc) goto out;
  if (!job_state_final(before.state)) {
    rc = SPD_ECONFLICT;
    goto done;
  }
  if (!history_changes(&before, u)) goto done;
  job_state_t state = u->set_state ? u->state : before.state;
  /* The state the crawl ended in is kept from the first correction on. */
  int corrected = before.corrected || state != before.state;
  job_state_t original = before.corrected ? before.original_state : before.state;
  const char *note = u->note ? (*u->note ? u->note : NULL) : before.note;
  if ((rc = store_job_set_history(s, id, state, corrected, original, note))) goto out;
  if ((rc = store_job_get(s, id, &after))) goto out;
  if ((rc = history_event(s, &before, &after))) goto out;
  if (changed) *changed = 1;
done:
  if (out) {
    job_t *keep = after.id ? &after : &before;
    *out = *keep;
    job_init(keep);
  }
out:
  job_release(&before);
  job_release(&after);
  return rc;
}
