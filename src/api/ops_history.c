/* What a user (or a crawl, through its job token) changes on a job besides
 * its life: jobs.meta (a merge patch of its meta) and the history updates
 * of ended jobs (jobs.history, jobs.history_batch, jobs.history_by_status).
 * The changes themselves are flow/history.h's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "core/principal.h"
#include "error.h"
#include "flow/history.h"

#define HISTORY_BATCH_MAX 1000
#define HISTORY_BY_STATUS_MAX 10000

/* ---- meta ---- */

int op_meta_param(op_call_t *c, json_t **out) {
  const json_t *v = op_json(c, "meta");
  json_t *m = NULL;
  *out = NULL;
  if (!v) return 0;
  if (json_is_string(v)) m = json_loads(json_string_value(v), JSON_REJECT_DUPLICATES, NULL);
  else m = json_incref((json_t *)v);
  if (!json_is_object(m)) {
    json_decref(m);
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "meta"),
            "'meta' must be a JSON object");
    return 1;
  }
  size_t size = json_dumpb(m, NULL, 0, JSON_COMPACT);
  if (size > JOB_META_MAX) {
    json_decref(m);
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "meta", "max", JOB_META_MAX),
            "'meta' is %zu bytes as compact JSON; the limit is %d", size, JOB_META_MAX);
    return 1;
  }
  *out = m;
  return 0;
}

/* c->result: the patch. A job's token patches its own job only. */
static int meta_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_release(&c->job);
  job_init(&c->job);
  int rc = op_job_resolve(s, c);
  if (rc) return rc;
  if (c->who->kind == AUTH_JOB && c->job.id != c->who->job_id) return SPD_EFORBIDDEN;
  job_t after;
  job_init(&after);
  rc = history_meta_patch(s, c->job.id, c->result, &after);
  if (rc) return rc == -ENOENT ? SPD_ENOJOB : rc;
  job_release(&c->job);
  c->job = after;
  return 0;
}

static void meta_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == -E2BIG)
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "meta", "max", JOB_META_MAX),
            "the merged meta would be over %d bytes as compact JSON: nothing was changed",
            JOB_META_MAX);
  else if (rc == SPD_EFORBIDDEN)
    op_fail(c, rc, NULL, "a job's token may change its own job's meta only");
  else if (rc)
    op_fail_resolve(c, rc);
  else
    op_ok(c, op_render_job(&c->job));
}

void op_jobs_meta(op_call_t *c) {
  json_t *patch;
  if (op_meta_param(c, &patch)) return;
  c->result = patch;
  op_store(c, STORE_WRITE, meta_fn, meta_done);
}

/* ---- history ---- */

/* The update asked for: 1 after failing c. */
static int history_params(op_call_t *c, history_update_t *u) {
  const char *state = op_str(c, "state"), *note = op_str(c, "note");
  memset(u, 0, sizeof(*u));
  if (state) {
    if (job_state_parse(state, &u->state) || !job_state_final(u->state)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "state"),
              "'state' must be a final state (finished, failed, cancelled or lost), not '%s'",
              state);
      return 1;
    }
    u->set_state = 1;
  }
  if (note && strlen(note) > JOB_NOTE_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "note", "max", JOB_NOTE_MAX),
            "'note' is %zu bytes; the limit is %d", strlen(note), JOB_NOTE_MAX);
    return 1;
  }
  u->note = note;
  if (!state && !note) {
    op_fail(c, SPD_EMISSING, json_pack("{s:s}", "field", "state"),
            "give a corrected 'state', a 'note' or both");
    return 1;
  }
  return 0;
}

/* The job was still pending or running: nothing of the call was written. */
static void history_refused(op_call_t *c, const job_t *j) {
  op_fail(c, SPD_ECONFLICT,
          json_pack("{s:I,s:s}", "id", (json_int_t)j->id, "state", job_state_name(j->state)),
          "job %lld is %s: only an ended job's history can be updated", (long long)j->id,
          job_state_name(j->state));
}

static int history_one_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_release(&c->job);
  job_init(&c->job);
  int rc = op_job_resolve(s, c);
  if (rc) return rc;
  job_t out;
  rc = history_update(s, c->job.id, c->priv, &out, NULL);
  if (rc && rc != SPD_ECONFLICT) return rc == -ENOENT ? SPD_ENOJOB : rc;
  job_release(&c->job);
  c->job = out;
  c->num[6] = rc == SPD_ECONFLICT;
  return rc;
}

static void history_one_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == SPD_ECONFLICT && c->num[6]) history_refused(c, &c->job);
  else if (rc) op_fail_resolve(c, rc);
  else op_ok(c, op_render_job(&c->job));
}

static history_update_t *history_new(op_call_t *c) {
  history_update_t *u = calloc(1, sizeof(*u));
  if (!u) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return NULL;
  }
  if (history_params(c, u)) {
    free(u);
    return NULL;
  }
  c->priv = u;
  c->priv_free = free;
  return u;
}

void op_jobs_history(op_call_t *c) {
  if (!history_new(c)) return;
  op_store(c, STORE_WRITE, history_one_fn, history_one_done);
}

/* Applies c->priv to every job of c->list, all or none: the first job
 * that has not ended refuses the whole call (c->job = that job). The ids
 * changed go to c->result. */
static int history_apply(store_t *s, op_call_t *c) {
  json_decref(c->result);
  c->result = json_array();
  if (!c->result) return -ENOMEM;
  for (size_t i = 0; i < c->list.n; i++) {
    job_t out;
    int changed = 0;
    int rc = history_update(s, c->list.v[i].id, c->priv, &out, &changed);
    if (rc == SPD_ECONFLICT) {
      job_release(&c->job);
      c->job = out;
      c->num[6] = 1;
    } else if (!rc) {
      job_release(&out);
    }
    if (rc) return rc == -ENOENT ? SPD_ENOJOB : rc;
    if (changed) json_array_append_new(c->result, json_integer(c->list.v[i].id));
  }
  return 0;
}

static void history_many_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == SPD_ECONFLICT && c->num[6]) {
    history_refused(c, &c->job);
  } else if (rc == SPD_ENOJOB) {
    op_fail(c, rc, json_pack("{s:I}", "id", (json_int_t)c->num[5]), "job %lld not found",
            (long long)c->num[5]);
  } else if (!op_store_failed(c, rc)) {
    json_t *ids = c->result;
    c->result = NULL;
    op_ok(c, json_pack("{s:I,s:I,s:o}", "matched", (json_int_t)c->list.n, "updated",
                       (json_int_t)json_array_size(ids), "ids", ids));
  }
}

/* The jobs of ids (integers or Scrapyd job ids; a job of a project the
 * caller may not see is no job), into c->list. */
static int batch_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_list_release(&c->list);
  size_t i;
  const json_t *v;
  json_array_foreach(op_json(c, "ids"), i, v) {
    job_t j;
    job_init(&j);
    int rc = -ENOENT;
    c->num[5] = json_integer_value(v);
    if (json_is_integer(v)) rc = store_job_get(s, json_integer_value(v), &j);
    if (!rc && !principal_project_ok(c->who->projects, j.project)) rc = -ENOENT;
    if (!rc) rc = job_list_append(&c->list, &j, 1);
    job_release(&j);
    if (rc) return rc == -ENOENT ? SPD_ENOJOB : rc;
  }
  return history_apply(s, c);
}

void op_jobs_history_batch(op_call_t *c) {
  const json_t *ids = op_json(c, "ids");
  size_t n = json_array_size(ids), i;
  const json_t *v;
  int ok = json_is_array(ids) && n >= 1 && n <= HISTORY_BATCH_MAX;
  json_array_foreach(ids, i, v) ok = ok && json_is_integer(v) && json_integer_value(v) > 0;
  if (!ok) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "ids"),
            "'ids' must be an array of 1 to %d job ids (integers)", HISTORY_BATCH_MAX);
    return;
  }
  if (!history_new(c)) return;
  op_store(c, STORE_WRITE, batch_fn, history_many_done);
}

/* Every job that ended in state num[0] (project, spider, schedule as
 * given), ended in [num[1], num[2]) (0 = unbounded). */
static int by_status_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_list_t all = {0};
  job_list_release(&c->list);
  job_filter_t f = {.project = op_str(c, "project"),
                    .spider = op_str(c, "spider"),
                    .schedule_id = op_int(c, "schedule", 0),
                    .states = 1u << c->num[0],
                    .projects = (const char *const *)c->mine,
                    .nprojects = c->nmine,
                    .newest_first = 1,
                    .limit = HISTORY_BY_STATUS_MAX + 1};
  int rc = store_jobs_list(s, &f, &all);
  if (rc) return rc;
  if (all.n > HISTORY_BY_STATUS_MAX) {
    job_list_release(&all);
    return -E2BIG;
  }
  for (size_t i = 0; !rc && i < all.n; i++) {
    const job_t *j = &all.v[i];
    if ((c->num[1] && j->end_ms < c->num[1]) || (c->num[2] && j->end_ms >= c->num[2])) continue;
    rc = job_list_append(&c->list, &all.v[i], 1);
  }
  job_list_release(&all);
  return rc ? rc : history_apply(s, c);
}

static void by_status_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == -E2BIG)
    op_fail(c, SPD_EBADPARAM, json_pack("{s:i}", "max", HISTORY_BY_STATUS_MAX),
            "more than %d jobs match: narrow the filter (project, spider, schedule, "
            "ended_from, ended_to)", HISTORY_BY_STATUS_MAX);
  else
    history_many_done(arg, rc);
}

void op_jobs_history_by_status(op_call_t *c) {
  job_state_t st;
  const char *status = op_str(c, "status");
  if (job_state_parse(status, &st)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "status"),
            "unknown status '%s' (expected finished, failed, cancelled or lost)", status);
    return;
  }
  if (!job_state_final(st)) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:s,s:s}", "field", "status", "status", status),
            "'status' must be a final state (finished, failed, cancelled or lost): %s jobs "
            "have not ended and their history cannot be updated", status);
    return;
  }
  c->num[0] = st;
  if (op_time_param(c, "ended_from", 0, &c->num[1]) ||
      op_time_param(c, "ended_to", 0, &c->num[2]))
    return;
  if (!history_new(c)) return;
  op_store(c, STORE_WRITE, by_status_fn, by_status_done);
}
