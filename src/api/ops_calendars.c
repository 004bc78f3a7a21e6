/* Exclusion calendars (calendars.*) and backfills (schedules.backfill,
 * backfills.*): parameters are checked here, each change is made by
 * flow/calendars.h or flow/backfill.h in one store op, and what it did is
 * applied on the loop (flow_apply: the scheduler ticks at once). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/jobs.h"
#include "api/ops_impl.h"
#include "clock.h"
#include "error.h"
#include "flow/backfill.h"
#include "flow/calendars.h"

/* c->result: the answer; c->err: why it failed; c->priv: a write's
 * flow_change_t; c->num[7]: the success status, 0 = the op's own. */
static void done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail(c, rc, NULL, "%s", c->err[0] ? c->err : spd_strerror(rc));
    return;
  }
  if (c->priv) flow_apply(&c->app->flow, c->priv);
  json_t *r = c->result;
  c->result = NULL;
  op_ok_status(c, r, (int)c->num[7]);
}

static void write_op(op_call_t *c, int (*fn)(store_t *, void *)) {
  if (!(c->priv = calloc(1, sizeof(flow_change_t)))) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv_free = free;
  op_store(c, STORE_WRITE, fn, done);
}

/* ---- calendars ---- */

/* Calendars apply to every project's schedules: a caller limited to some
 * projects may read them, not change them. 1 after failing the call. */
static int limited(op_call_t *c) {
  if (!c->who->projects || !c->who->projects[0]) return 0;
  op_fail(c, SPD_EFORBIDDEN, NULL,
          "calendars apply to every project: a caller limited to some projects cannot change "
          "them");
  return 1;
}

static int cal_list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  json_t *arr = NULL;
  int rc = calendars_list(s, &arr);
  if (!rc && !(c->result = json_pack("{s:o}", "calendars", arr))) rc = -ENOMEM;
  return rc;
}

void op_calendars_list(op_call_t *c) { op_store(c, STORE_READ, cal_list_fn, done); }

static int cal_get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return calendars_get(s, op_str(c, "name"), &c->result, c->err, sizeof(c->err));
}

void op_calendars_get(op_call_t *c) { op_store(c, STORE_READ, cal_get_fn, done); }

static int cal_put_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  json_decref(c->result);
  c->result = NULL;
  return calendars_put(s, c->params, !strcmp(c->def->name, "calendars.create"), clock_wall_ms(),
                       &c->result, c->err, sizeof(c->err));
}

/* calendars.create and calendars.update (a whole new definition). */
void op_calendars_put(op_call_t *c) {
  if (!limited(c)) write_op(c, cal_put_fn);
}

static int cal_delete_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return calendars_delete(s, op_str(c, "name"), c->err, sizeof(c->err));
}

void op_calendars_delete(op_call_t *c) {
  if (!limited(c)) write_op(c, cal_delete_fn);
}

/* ---- backfills ---- */

typedef struct bf_call {
  flow_change_t change; /* first: write_op's flow_change_t */
  backfill_opts_t opts;
} bf_call_t;

static int backfill_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  bf_call_t *b = c->priv;
  b->change = (flow_change_t){0};
  json_decref(c->result);
  c->result = NULL;
  int rc = backfills_start(s, op_str(c, "schedule"), c->who->projects, &b->opts,
                           clock_wall_ms(), &c->result, c->err, sizeof(c->err), &b->change);
  /* Nothing left to run: answered, nothing created. */
  if (!rc && json_is_null(json_object_get(c->result, "backfill"))) c->num[7] = 200;
  return rc;
}

static int bad(op_call_t *c, const char *field, const char *why) {
  op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", field), "%s", why);
  return 1;
}

/* Reads the options into o; 1 after failing the call. */
static int backfill_opts(op_call_t *c, backfill_opts_t *o) {
  const char *redo = op_str(c, "redo"), *order = op_str(c, "order");
  const char *fmt = op_str(c, "slot_format"), *arg = op_str(c, "slot_arg");
  if (op_time_param(c, "from", 0, &o->from_ms) || op_time_param(c, "to", 0, &o->to_ms)) return 1;
  if (o->from_ms > o->to_ms) return bad(c, "from", "'from' must be before 'to'");
  if (o->from_ms > clock_wall_ms())
    return bad(c, "from", "'from' is in the future: a backfill runs slots that have passed");
  if (redo && strcmp(redo, "missing") && strcmp(redo, "failed"))
    return bad(c, "redo", "'redo' must be missing (slots that never ran) or failed (those too "
                          "whose run failed)");
  if (order && strcmp(order, "oldest") && strcmp(order, "newest"))
    return bad(c, "order", "'order' must be oldest or newest");
  if (fmt && strcmp(fmt, "time") && strcmp(fmt, "date"))
    return bad(c, "slot_format", "'slot_format' must be time or date");
  if (arg && (!arg[0] || strchr(arg, '=') || arg[0] == '_'))
    return bad(c, "slot_arg", "'slot_arg' must be a spider argument's name (no '=', not "
                              "starting with '_')");
  o->redo_failed = redo && !strcmp(redo, "failed");
  o->newest_first = order && !strcmp(order, "newest");
  o->max_running = (int)op_int(c, "max_running", 1);
  o->dry_run = json_is_true(op_json(c, "dry_run"));
  o->slot_arg = arg;
  o->slot_date = fmt && !strcmp(fmt, "date");
  return 0;
}

void op_schedules_backfill(op_call_t *c) {
  bf_call_t *b = calloc(1, sizeof(*b));
  if (!b) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = b;
  c->priv_free = free;
  if (backfill_opts(c, &b->opts)) return;
  /* A dry run creates nothing: 200, not 201. */
  c->num[7] = b->opts.dry_run ? 200 : 0;
  op_store(c, STORE_WRITE, backfill_fn, done);
}

/* The backfill's id (its parent job's) into c->num[6]; 1 after failing
 * the call. */
static int bf_id(op_call_t *c) {
  const json_t *v = op_json(c, "id");
  const char *id = json_string_value(v);
  char *end = NULL;
  long long n = json_is_integer(v) ? json_integer_value(v)
                : id && *id >= '0' && *id <= '9' ? strtoll(id, &end, 10)
                                                 : 0;
  if (n > 0 && (!end || !*end)) {
    c->num[6] = n;
    return 0;
  }
  op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "id"),
          "'id' must be a backfill's id (its job's id, a number)");
  return 1;
}

static int bf_get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return backfills_get(s, c->num[6], c->who->projects, &c->result, c->err,
                       sizeof(c->err));
}

void op_backfills_get(op_call_t *c) {
  if (!bf_id(c)) op_store(c, STORE_READ, bf_get_fn, done);
}

static int bf_list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  json_t *arr = NULL;
  int rc = backfills_list(s, c->who->projects, &arr);
  if (!rc && !(c->result = json_pack("{s:o}", "backfills", arr))) rc = -ENOMEM;
  return rc;
}

void op_backfills_list(op_call_t *c) { op_store(c, STORE_READ, bf_list_fn, done); }

static int bf_pause_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  json_decref(c->result);
  c->result = NULL;
  *(flow_change_t *)c->priv = (flow_change_t){0};
  return backfills_pause(s, c->num[6], c->who->projects,
                         !strcmp(c->def->name, "backfills.pause"), &c->result, c->err,
                         sizeof(c->err), c->priv);
}

/* backfills.pause and backfills.resume. */
void op_backfills_pause(op_call_t *c) {
  if (!bf_id(c)) write_op(c, bf_pause_fn);
}

/* ---- backfills.cancel: the parent job's cancel (jobs.cancel) ---- */

static void cancel_answered(void *ud, int rc, int found, int count) {
  op_call_t *c = ud;
  (void)found;
  (void)count;
  if (op_store_failed(c, rc)) return;
  op_store(c, STORE_READ, bf_get_fn, done);
}

static void parent_found(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    done(c, rc);
    return;
  }
  if (job_state_final(c->job.state)) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:I, s:s}", "id", (json_int_t)c->job.id, "state",
                                        job_state_name(c->job.state)),
            "backfill %lld has already ended (%s)", (long long)c->job.id,
            job_state_name(c->job.state));
    return;
  }
  rc = api_job_cancel(c->app, c->job.project, c->job.jobid, SIGTERM, cancel_answered, c, c->who);
  if (rc == SPD_ESHUTDOWN) op_fail(c, rc, NULL, "the daemon is shutting down");
  else if (rc) op_fail(c, rc, NULL, "%s", spd_strerror(rc));
}

static int parent_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_release(&c->job);
  job_init(&c->job);
  return backfills_parent(s, c->num[6], c->who->projects, &c->job, c->err,
                          sizeof(c->err));
}

void op_backfills_cancel(op_call_t *c) {
  if (!bf_id(c)) op_store(c, STORE_READ, parent_fn, parent_found);
}
