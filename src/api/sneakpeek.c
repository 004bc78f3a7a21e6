/* Sneakpeek's JSON-RPC face (api/sneakpeek.h): its methods as operations
 * of a table of their own, translated to and from spiderd's schedules and
 * jobs. Writes go through the native operations (schedules.*, jobs.*) or
 * flow/, so every check and event of theirs applies; reads that need a
 * schedule's state read the store here. */
#include "api/sneakpeek.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/auth.h"
#include "api/jobs.h"
#include "api/ops_impl.h"
#include "api/projects.h"
#include "clock.h"
#include "core/principal.h"
#include "core/schedule.h"
#include "error.h"
#include "flow/jobtoken.h"
#include "flow/schedules.h"
#include "http/http.h"

#define SP_EPHEMERAL "ephemeral_scraper"
#define SP_SCRAPER "scraper"
#define SP_LOG_CHUNK (256 * 1024) /* bytes of log read per get_task_logs */
#define SP_LINES_MAX 10000
#define SP_TASKS_MAX 1000 /* get_task_instances: the newest ones */

enum { SP_ESCRAPER = 5000, SP_ETASK = 5001, SP_EACTIVE = 10000, SP_EHANDLER = 10004 };

/* Sneakpeek's fixed schedules that are intervals; every_month is cron's
 * @monthly, inactive a paused schedule. */
static const struct {
  const char *name;
  int64_t ms;
} sp_intervals[] = {{"every_second", 1000},     {"every_minute", 60000},
                    {"every_hour", 3600000},    {"every_day", 86400000},
                    {"every_week", 604800000}};
#define SP_NINTERVALS (sizeof(sp_intervals) / sizeof(sp_intervals[0]))
static const char *const sp_schedules[] = {"inactive",  "every_second", "every_minute",
                                           "every_hour", "every_day",    "every_week",
                                           "every_month", "crontab",     NULL};

/* Sneakpeek: 0 utmost, 1 high, 2 normal (lower first); spiderd: higher
 * first, 0 by default. */
static int sp_priority(double native) { return native >= 2 ? 0 : native >= 1 ? 1 : 2; }

static json_t *sp_seconds(int64_t ms) {
  return ms ? json_integer((json_int_t)((ms + 999) / 1000)) : json_null();
}

static const char *sp_schedule_name(const schedule_t *sc, const char **crontab) {
  *crontab = NULL;
  if (sc->paused) return "inactive";
  if (sc->kind == SCHED_INTERVAL)
    for (size_t i = 0; i < SP_NINTERVALS; i++)
      if (sc->interval_ms == sp_intervals[i].ms) return sp_intervals[i].name;
  if (sc->kind == SCHED_CRON && sc->expr && !strcmp(sc->expr, "@monthly")) return "every_month";
  if (sc->kind == SCHED_CRON) *crontab = sc->expr;
  return "crontab"; /* other intervals and one-off times have no Sneakpeek name */
}

static json_t *render_scraper(const schedule_t *sc, const char *state) {
  const char *crontab;
  const char *schedule = sp_schedule_name(sc, &crontab);
  char id[24];
  snprintf(id, sizeof(id), "%" PRId64, sc->id);
  json_t *params = sc->args && json_object_size(sc->args) ? json_incref(sc->args) : json_null();
  return json_pack("{s:s, s:s, s:s++, s:s, s:o, s:{s:o, s:n}, s:i, s:o, s:o}", "id", id, "name",
                   sc->name, "handler", sc->project, "/", sc->spider, "schedule", schedule,
                   "schedule_crontab", op_str_or_null(crontab), "config", "params", params,
                   "middleware_config", "priority", sp_priority(sc->priority), "state",
                   op_str_or_null(state), "timeout", sp_seconds(sc->timeout_ms));
}

static const char *sp_status(job_state_t st) {
  switch (st) {
  case JOB_PENDING:
  case JOB_PAUSED: return "pending"; /* Sneakpeek has no paused: it waits */
  case JOB_RUNNING: return "started";
  case JOB_FINISHED: return "succeeded";
  case JOB_CANCELLED: return "killed";
  case JOB_LOST: return "dead";
  default: return "failed";
  }
}

/* An ephemeral task's payload as Sneakpeek keeps it: the handler, the
 * config and the state it ran with. */
static json_t *sp_payload(const job_t *j) {
  if (j->schedule_id) return json_string("");
  json_t *params = j->args ? json_deep_copy(j->args) : json_object();
  json_t *state = json_incref(json_object_get(params, SCHEDULES_STATE_ARG));
  json_object_del(params, SCHEDULES_STATE_ARG);
  if (!json_object_size(params)) {
    json_decref(params);
    params = json_null();
  }
  json_t *p = json_pack("{s:s++, s:{s:o, s:n}, s:o}", "scraper_handler", j->project, "/",
                        j->spider, "scraper_config", "params", params, "middleware_config",
                        "scraper_state", state ? state : json_null());
  char *text = p ? json_dumps(p, JSON_COMPACT) : NULL;
  json_decref(p);
  json_t *out = text ? json_string(text) : json_null();
  free(text);
  return out;
}

static json_t *render_task(const job_t *j) {
  char name[24];
  snprintf(name, sizeof(name), "%" PRId64, j->schedule_id);
  char *result = j->stats ? json_dumps(j->stats, JSON_COMPACT) : NULL;
  int64_t active = j->heartbeat_ms > j->start_ms ? j->heartbeat_ms : j->start_ms;
  json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id",
                        (json_int_t)j->id, "task_name", j->schedule_id ? name : SP_EPHEMERAL,
                        "task_handler", j->schedule_id ? SP_SCRAPER : SP_EPHEMERAL, "status",
                        sp_status(j->state), "priority", sp_priority(j->priority), "created_at",
                        op_iso_time(j->created_ms), "started_at", op_iso_time(j->start_ms),
                        "last_active_at", op_iso_time(active), "finished_at",
                        op_iso_time(j->end_ms), "payload", sp_payload(j), "result",
                        op_str_or_null(result), "timeout", sp_seconds(j->timeout_ms));
  free(result);
  return o;
}

/* ---- errors ---- */

json_t *sneakpeek_error(const op_def_t *def, const op_result_t *r) {
  int code = spd_rpc_code(r->code);
  const char *msg = r->message;
  int handler = !strcmp(def->name, "create_scraper") || !strcmp(def->name, "update_scraper") ||
                !strcmp(def->name, "run_ephemeral");
  if (r->code == SPD_ENOSCHEDULE) code = SP_ESCRAPER, msg = "Scraper not found";
  else if (r->code == SPD_ENOJOB) code = SP_ETASK, msg = "Task not found";
  else if (r->code == SPD_ECONFLICT && !strcmp(def->name, "enqueue_scraper"))
    code = SP_EACTIVE, msg = "Concurrent execution of the task is disallowed";
  else if (handler && (r->code == SPD_ENOPROJECT || r->code == SPD_ENOSPIDER ||
                       r->code == SPD_ENOVERSION))
    code = SP_EHANDLER, msg = "Unknown task handler error";
  json_t *details = r->details ? json_incref((json_t *)r->details) : json_object();
  return json_pack("{s:i, s:s, s:{s:s, s:s, s:o}}", "code", code, "message", msg, "data", "code",
                   spd_errname(r->code), "message", r->message ? r->message : "", "details",
                   details);
}

/* ---- sub-calls of native operations ---- */

/* Runs the native op `name` for c with params (taken); fn gets c. */
static void sp_sub(op_call_t *c, const char *name, json_t *params, op_reply_fn fn) {
  op_start(c->app, op_find(name), params, NULL, 0, c->req, fn, c);
}

/* Ends c with a sub-call's error; 1 when r failed. */
static int sp_failed(op_call_t *c, const op_result_t *r) {
  if (!r->code) return 0;
  op_fail(c, r->code, r->details ? json_incref((json_t *)r->details) : NULL, "%s",
          r->message ? r->message : spd_strerror(r->code));
  return 1;
}

static int sp_bad(op_call_t *c, const char *field, const char *why) {
  op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", field), "%s", why);
  return 1;
}

/* A scraper's id: a string of digits (Sneakpeek's ids are strings) or an
 * integer; anything else names no scraper. */
static int sp_id(op_call_t *c, const json_t *v, int64_t *id) {
  const char *s = json_string_value(v);
  char *end = NULL;
  *id = -1;
  if (json_is_integer(v)) *id = json_integer_value(v);
  else if (s && *s >= '0' && *s <= '9') *id = strtoll(s, &end, 10);
  if (end && *end) *id = -1;
  if (*id > 0) return 0;
  op_fail(c, SPD_ENOSCHEDULE, json_pack("{s:s}", "id", s ? s : "?"), "scraper '%.64s' not found",
          s ? s : "?");
  return 1;
}

/* ---- reading scrapers (with their state) ---- */

static void sp_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) op_fail(c, rc, NULL, "%s", c->err[0] ? c->err : spd_strerror(rc));
  else op_ok_result(c);
}

static int sp_render_one(store_t *s, op_call_t *c, schedule_t *sc) {
  char *state = NULL;
  int rc = store_schedule_state_get(s, sc->id, &state);
  if (rc == -ENOENT) rc = 0; /* deleted since: shown as it was read */
  json_t *o = rc ? NULL : render_scraper(sc, state);
  free(state);
  if (!rc && !o) rc = -ENOMEM;
  if (o && json_is_array(c->result)) json_array_append_new(c->result, o);
  else if (o) c->result = o;
  return rc;
}

/* num[0]: the schedule's id. */
static int sp_get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  char key[24];
  snprintf(key, sizeof(key), "%" PRId64, c->num[0]);
  schedule_t sc;
  int rc = schedules_find(s, key, c->who->projects, &sc, c->err, sizeof(c->err));
  if (rc) return rc;
  rc = sp_render_one(s, c, &sc);
  schedule_release(&sc);
  return rc;
}

static void sp_get_scraper(op_call_t *c) {
  if (!sp_id(c, op_json(c, "id"), &c->num[0])) op_store(c, STORE_READ, sp_get_fn, sp_done);
}

static int sp_list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  schedule_list_t l = {0};
  int rc = store_schedules_list(s, 0, 0, &l);
  if (!rc && !(c->result = json_array())) rc = -ENOMEM;
  for (size_t i = 0; i < l.n && !rc; i++)
    if (principal_project_ok(c->who->projects, l.v[i].project))
      rc = sp_render_one(s, c, &l.v[i]);
  schedule_list_release(&l);
  return rc;
}

static void sp_get_scrapers(op_call_t *c) { op_store(c, STORE_READ, sp_list_fn, sp_done); }

/* ---- writing scrapers ---- */

/* Sneakpeek's timeout: seconds, or an ISO 8601 duration as pydantic writes
 * a timedelta ("PT30S", "P1DT2H"). ms 0 = none. 0 or -1. */
static int sp_duration(const json_t *v, int64_t *ms) {
  *ms = 0;
  if (!v || json_is_null(v)) return 0;
  if (json_is_number(v)) {
    double s = json_number_value(v);
    if (!(s >= 0) || s > 1e9) return -1;
    *ms = (int64_t)llround(s * 1000);
    return 0;
  }
  const char *p = json_string_value(v);
  if (!p || *p++ != 'P') return -1;
  double total = 0;
  int in_time = 0, any = 0;
  while (*p) {
    if (*p == 'T' && !in_time) {
      in_time = 1, p++;
      continue;
    }
    char *end;
    double n = strtod(p, &end);
    if (end == p || n < 0) return -1;
    double unit = *end == 'D' && !in_time ? 86400 : *end == 'W' && !in_time ? 604800
                  : *end == 'H' && in_time ? 3600 : *end == 'M' && in_time ? 60
                  : *end == 'S' && in_time ? 1 : 0;
    if (!unit) return -1;
    total += n * unit, any = 1, p = end + 1;
  }
  if (!any || total > 1e9) return -1;
  *ms = (int64_t)llround(total * 1000);
  return 0;
}

/* Spider arguments are strings: other values of config.params are kept as
 * their JSON text. */
static json_t *sp_args(const json_t *params) {
  json_t *args = json_object();
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)params, k, v) {
    if (json_is_string(v)) {
      json_object_set(args, k, v);
      continue;
    }
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    json_object_set_new(args, k, text ? json_string(text) : json_null());
    free(text);
  }
  return args;
}

/* Splits a handler "PROJECT/SPIDER" into p's project and spider. */
static int sp_handler(op_call_t *c, const json_t *h, json_t *p) {
  const char *s = json_string_value(h), *slash = s ? strchr(s, '/') : NULL;
  if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/')) {
    op_fail(c, SPD_ENOSPIDER, json_pack("{s:s}", "handler", s ? s : ""),
            "unknown handler '%.128s': a handler is a deployed spider, PROJECT/SPIDER",
            s ? s : "");
    return 1;
  }
  json_object_set_new(p, "project", json_stringn(s, (size_t)(slash - s)));
  json_object_set_new(p, "spider", json_string(slash + 1));
  return 0;
}

/* Sneakpeek's schedule (and crontab) into p's timing and paused. create:
 * inactive still needs a timing (a day, never run while paused). */
static int sp_timing(op_call_t *c, const json_t *sc, json_t *p, int create) {
  const char *name = json_string_value(json_object_get(sc, "schedule"));
  const char *cron = json_string_value(json_object_get(sc, "schedule_crontab"));
  int known = 0;
  for (int i = 0; name && sp_schedules[i]; i++) known |= !strcmp(name, sp_schedules[i]);
  if (!known) return sp_bad(c, "schedule", "'schedule' must be one of inactive, every_second, "
                                           "every_minute, every_hour, every_day, every_week, "
                                           "every_month, crontab");
  json_object_set_new(p, "paused", json_boolean(!strcmp(name, "inactive")));
  for (size_t i = 0; i < SP_NINTERVALS; i++)
    if (!strcmp(name, sp_intervals[i].name))
      json_object_set_new(p, "interval", json_real(sp_intervals[i].ms / 1000.0));
  if (!strcmp(name, "every_month")) json_object_set_new(p, "cron", json_string("@monthly"));
  if (!strcmp(name, "crontab")) {
    if (!cron) return sp_bad(c, "schedule_crontab", "'schedule_crontab' is required for crontab");
    json_object_set_new(p, "cron", json_string(cron));
  }
  if (create && !strcmp(name, "inactive")) json_object_set_new(p, "interval", json_real(86400));
  return 0;
}

/* The native fields of a Sneakpeek scraper (create: CreateScraperRequest;
 * update: Scraper). NULL after failing c. */
static json_t *sp_fields(op_call_t *c, const json_t *sc, int create) {
  if (!json_is_object(sc)) {
    sp_bad(c, "scraper", "'scraper' must be an object");
    return NULL;
  }
  json_t *p = json_object();
  const json_t *name = json_object_get(sc, "name"), *config = json_object_get(sc, "config");
  const json_t *prio = json_object_get(sc, "priority");
  const json_t *params = json_object_get(config, "params");
  int64_t timeout = 0;
  int bad = 0;
  if (!json_is_string(name)) bad = sp_bad(c, "name", "'name' must be a string");
  else if (config && !json_is_object(config) && !json_is_null(config))
    bad = sp_bad(c, "config", "'config' must be an object");
  else if (params && !json_is_object(params) && !json_is_null(params))
    bad = sp_bad(c, "config", "'config.params' must be an object or null");
  else if (prio && (!json_is_integer(prio) || json_integer_value(prio) < 0 ||
                    json_integer_value(prio) > 2))
    bad = sp_bad(c, "priority", "'priority' must be 0 (utmost), 1 (high) or 2 (normal)");
  else if (sp_duration(json_object_get(sc, create ? "timeout_seconds" : "timeout"), &timeout))
    bad = sp_bad(c, "timeout", "'timeout' must be seconds or an ISO 8601 duration");
  else if (!(bad = sp_handler(c, json_object_get(sc, "handler"), p)))
    bad = sp_timing(c, sc, p, create);
  if (bad) {
    json_decref(p);
    return NULL;
  }
  json_object_set(p, "name", (json_t *)name);
  json_object_set_new(p, "args", params && json_is_object(params) ? sp_args(params) : json_object());
  json_object_set_new(p, "priority", json_real(2 - (prio ? json_integer_value(prio) : 2)));
  json_object_set_new(p, "timeout", json_real(timeout / 1000.0));
  if (create) json_object_set_new(p, "overlap", json_string("skip")); /* one run at a time */
  return p;
}

/* After a native write: the schedule it left, read again with its state. */
static void sp_written(void *ud, const op_result_t *r) {
  op_call_t *c = ud;
  if (sp_failed(c, r)) return;
  c->num[0] = json_integer_value(json_object_get(r->value, "id"));
  op_store(c, STORE_READ, sp_get_fn, sp_done);
}

static void sp_create_scraper(op_call_t *c) {
  json_t *p = sp_fields(c, op_json(c, "scraper"), 1);
  if (p) sp_sub(c, "schedules.create", p, sp_written);
}

/* update_scraper's state, after the definition (num[0], text: the state;
 * num[1]: 1 when the scraper gave one). */
static int sp_state_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return schedules_state_set(s, c->num[0], c->text, c->err, sizeof(c->err));
}

static void sp_state_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) sp_done(c, rc);
  else op_store(c, STORE_READ, sp_get_fn, sp_done);
}

static void sp_updated(void *ud, const op_result_t *r) {
  op_call_t *c = ud;
  if (sp_failed(c, r)) return;
  if (c->num[1]) op_store(c, STORE_WRITE, sp_state_fn, sp_state_done);
  else op_store(c, STORE_READ, sp_get_fn, sp_done);
}

static void sp_update_scraper(op_call_t *c) {
  const json_t *sc = op_json(c, "scraper");
  json_t *p = sp_fields(c, sc, 0);
  if (!p) return;
  const json_t *state = json_object_get(sc, "state");
  if (state && !json_is_string(state) && !json_is_null(state)) {
    json_decref(p);
    sp_bad(c, "state", "'state' must be a string or null");
    return;
  }
  if (sp_id(c, json_object_get(sc, "id"), &c->num[0])) {
    json_decref(p);
    return;
  }
  c->num[1] = state != NULL;
  if (json_is_string(state) && !(c->text = strdup(json_string_value(state)))) {
    json_decref(p);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  char key[24];
  snprintf(key, sizeof(key), "%" PRId64, c->num[0]);
  json_object_set_new(p, "schedule", json_string(key));
  sp_sub(c, "schedules.update", p, sp_updated);
}

/* delete_scraper answers with the scraper it deleted: read, then delete. */
static void sp_deleted(void *ud, const op_result_t *r) {
  op_call_t *c = ud;
  if (!sp_failed(c, r)) op_ok_result(c);
}

static void sp_delete_read(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    sp_done(c, rc);
    return;
  }
  char key[24];
  snprintf(key, sizeof(key), "%" PRId64, c->num[0]);
  sp_sub(c, "schedules.delete", json_pack("{s:s}", "schedule", key), sp_deleted);
}

static void sp_delete_scraper(op_call_t *c) {
  if (!sp_id(c, op_json(c, "id"), &c->num[0]))
    op_store(c, STORE_READ, sp_get_fn, sp_delete_read);
}

/* ---- tasks ---- */

/* enqueue_scraper: the scraper's job, unless one is active (Sneakpeek
 * runs a scraper once at a time): num[0] the scraper, num[2] the active
 * task. A unique key per scraper refuses two enqueues racing each other. */
static int sp_enqueue_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  char key[40];
  snprintf(key, sizeof(key), "%" PRId64, c->num[0]);
  schedule_t sc;
  int rc = schedules_find(s, key, c->who->projects, &sc, c->err, sizeof(c->err));
  if (rc) return rc;
  job_list_t l = {0};
  job_filter_t f = {.schedule_id = sc.id, .states = 1u << JOB_PENDING | 1u << JOB_RUNNING,
                    .limit = 1};
  if (!(rc = store_jobs_list(s, &f, &l)) && l.n) {
    c->num[2] = l.v[0].id;
    snprintf(c->err, sizeof(c->err), "scraper %" PRId64 " has an active task (%" PRId64 ")",
             sc.id, l.v[0].id);
    rc = SPD_ECONFLICT;
  }
  job_list_release(&l);
  if (!rc) rc = schedule_job(&sc, c->text, clock_wall_ms(), &c->job);
  if (!rc) rc = schedules_job_state(s, &c->job);
  if (!rc && c->num[1] >= 0) c->job.priority = 2 - c->num[1];
  snprintf(key, sizeof(key), "sneakpeek:scraper:%" PRId64, sc.id);
  if (!rc && !(c->job.unique_key = strdup(key))) rc = -ENOMEM;
  schedule_release(&sc);
  return rc;
}

static void sp_active(op_call_t *c) {
  op_fail(c, SPD_ECONFLICT, json_pack("{s:I}", "task_id", (json_int_t)c->num[2]), "%s",
          c->err[0] ? c->err : "the scraper has an active task");
}

static void sp_enqueued(void *ud, int rc, int stage, const char *error_text) {
  op_call_t *c = ud;
  if (!rc && stage == API_JOB_EXISTING) {
    c->num[2] = c->job.id;
    c->err[0] = '\0';
    sp_active(c);
  } else if (stage == API_JOB_SPIDER) {
    op_fail(c, SPD_ENOSPIDER, json_pack("{s:s}", "spider", c->job.spider),
            "spider '%s' not found", c->job.spider);
  } else if (rc) {
    op_fail(c, rc, NULL, "%s", error_text ? error_text : spd_strerror(rc));
  } else {
    op_ok(c, render_task(&c->job));
  }
}

static void sp_enqueue_read(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == SPD_ECONFLICT) {
    sp_active(c);
    return;
  }
  if (rc) {
    sp_done(c, rc);
    return;
  }
  char *egg = NULL;
  rc = api_egg_resolve(c->app, c->job.project, c->job.version, &egg);
  if (!rc) rc = api_job_enqueue(c->app, &c->job, egg, sp_enqueued, c, c->who);
  free(egg);
  if (rc) op_fail(c, rc, NULL, "cannot queue the task: %s", spd_strerror(rc));
}

static void sp_enqueue_scraper(op_call_t *c) {
  char jobid[33];
  if (sp_id(c, op_json(c, "scraper_id"), &c->num[0])) return;
  c->num[1] = op_int(c, "priority", -1);
  api_uuid1_hex(c->app, jobid);
  if (!(c->text = strdup(jobid))) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  op_store(c, STORE_READ, sp_enqueue_fn, sp_enqueue_read);
}

/* num[0]: the job. */
static int sp_task_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_t j;
  int rc = store_job_get(s, c->num[0], &j);
  if (!rc && !principal_project_ok(c->who->projects, j.project)) {
    job_release(&j);
    rc = -ENOENT;
  }
  if (rc == -ENOENT) {
    snprintf(c->err, sizeof(c->err), "task %" PRId64 " not found", c->num[0]);
    return SPD_ENOJOB;
  }
  if (rc) return rc;
  c->result = render_task(&j);
  job_release(&j);
  return c->result ? 0 : -ENOMEM;
}

static void sp_get_task_instance(op_call_t *c) {
  c->num[0] = op_int(c, "task_id", 0);
  op_store(c, STORE_READ, sp_task_fn, sp_done);
}

/* The newest tasks of a scraper, or of no scraper (ephemeral_scraper). */
static int sp_tasks_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  const char *name = op_str(c, "task_name");
  int ephemeral = !strcmp(name, SP_EPHEMERAL);
  schedule_t sc;
  job_filter_t f = {.newest_first = 1, .limit = SP_TASKS_MAX};
  int rc = 0;
  if (!ephemeral) {
    if (!(*name >= '0' && *name <= '9')) {
      snprintf(c->err, sizeof(c->err), "scraper '%.64s' not found", name);
      return SPD_ENOSCHEDULE;
    }
    if ((rc = schedules_find(s, name, c->who->projects, &sc, c->err, sizeof(c->err)))) return rc;
    f.schedule_id = sc.id;
    schedule_release(&sc);
  }
  job_list_t l = {0};
  if ((rc = store_jobs_list(s, &f, &l))) return rc;
  if (!(c->result = json_array())) rc = -ENOMEM;
  for (size_t i = 0; i < l.n && !rc; i++)
    if ((!ephemeral || !l.v[i].schedule_id) &&
        principal_project_ok(c->who->projects, l.v[i].project))
      json_array_append_new(c->result, render_task(&l.v[i]));
  job_list_release(&l);
  return rc;
}

static void sp_get_task_instances(op_call_t *c) {
  op_store(c, STORE_READ, sp_tasks_fn, sp_done);
}

/* get_task_logs: the crawl's log as lines; a line's id is the byte offset
 * where the next one starts, so last_log_line_id is where to read on. */
static void sp_log_read(void *ud, const op_result_t *r) {
  op_call_t *c = ud;
  if (sp_failed(c, r)) return;
  const char *text = json_string_value(json_object_get(r->value, "text"));
  int64_t at = json_integer_value(json_object_get(r->value, "offset"));
  int final = json_is_true(json_object_get(r->value, "eof")) &&
              !json_is_true(json_object_get(r->value, "running"));
  json_t *lines = json_array();
  size_t len = text ? strlen(text) : 0;
  for (size_t i = 0; i < len && json_array_size(lines) < (size_t)c->num[1];) {
    const char *nl = memchr(text + i, '\n', len - i);
    size_t end = nl ? (size_t)(nl - text) + 1 : len;
    if (!nl && !final && end - i < SP_LOG_CHUNK / 2) break; /* a line still being written */
    char id[24];
    snprintf(id, sizeof(id), "%" PRId64, at + (int64_t)end);
    size_t n = end - i - (nl ? 1 : 0);
    if (n && text[i + n - 1] == '\r') n--;
    json_array_append_new(lines, json_pack("{s:s, s:{s:s%}}", "id", id, "data", "message",
                                           text + i, n));
    i = end;
  }
  op_ok(c, lines);
}

static void sp_get_task_logs(op_call_t *c) {
  const json_t *last = op_json(c, "last_log_line_id");
  const char *s = json_string_value(last);
  long long offset = 0;
  char *end = NULL;
  if (json_is_integer(last)) offset = json_integer_value(last);
  else if (s) offset = strtoll(s, &end, 10);
  if ((last && !json_is_null(last) && !json_is_integer(last) && (!s || !*s || *end)) ||
      offset < 0) {
    sp_bad(c, "last_log_line_id", "'last_log_line_id' must be the id of a log line");
    return;
  }
  c->num[1] = op_int(c, "max_lines", 100);
  sp_sub(c, "jobs.log",
         json_pack("{s:I, s:I, s:i}", "id", (json_int_t)op_int(c, "task_id", 0), "offset",
                   (json_int_t)offset, "limit", SP_LOG_CHUNK),
         sp_log_read);
}

/* ---- handlers and constants ---- */

static void sp_handlers_listed(void *ud, const op_result_t *r) {
  op_call_t *c = ud;
  if (sp_failed(c, r)) return;
  json_t *out = json_array();
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(r->value, "scrapers"), i, v)
      json_array_append(out, json_object_get(v, "id"));
  op_ok(c, out);
}

static void sp_get_scraper_handlers(op_call_t *c) {
  sp_sub(c, "scrapers.list", json_object(), sp_handlers_listed);
}

static void sp_get_schedules(op_call_t *c) {
  json_t *out = json_array();
  for (int i = 0; sp_schedules[i]; i++) json_array_append_new(out, json_string(sp_schedules[i]));
  op_ok(c, out);
}

static void sp_get_priorities(op_call_t *c) {
  op_ok(c, json_pack("[{s:s,s:i},{s:s,s:i},{s:s,s:i}]", "name", "UTMOST", "value", 0, "name",
                     "HIGH", "value", 1, "name", "NORMAL", "value", 2));
}

/* Read-only for whoever may not change scrapers. */
static void sp_is_read_only(op_call_t *c) { op_ok(c, json_boolean(c->who->role < ROLE_RUN)); }

/* run_ephemeral: a job of the handler's spider with the config's params
 * and the state as spider arguments, no scraper. */
static void sp_ephemeral_queued(void *ud, const op_result_t *r) {
  op_call_t *c = ud;
  if (sp_failed(c, r)) return;
  c->num[0] = json_integer_value(json_object_get(r->value, "id"));
  op_store(c, STORE_READ, sp_task_fn, sp_done);
}

static void sp_run_ephemeral(op_call_t *c) {
  const json_t *task = op_json(c, "task");
  const json_t *config = json_object_get(task, "scraper_config");
  const json_t *params = json_object_get(config, "params");
  const json_t *state = json_object_get(task, "scraper_state");
  if (!json_is_object(task)) {
    sp_bad(c, "task", "'task' must be an object");
    return;
  }
  if ((params && !json_is_object(params) && !json_is_null(params)) ||
      (state && !json_is_string(state) && !json_is_null(state))) {
    sp_bad(c, "task", "'scraper_config.params' must be an object and 'scraper_state' a string");
    return;
  }
  json_t *p = json_object();
  if (sp_handler(c, json_object_get(task, "scraper_handler"), p)) {
    json_decref(p);
    return;
  }
  json_t *args = json_is_object(params) ? sp_args(params) : json_object();
  if (json_is_string(state)) json_object_set(args, SCHEDULES_STATE_ARG, (json_t *)state);
  json_object_set_new(p, "args", args);
  json_object_set_new(p, "priority", json_real(2 - op_int(c, "priority", 2)));
  sp_sub(c, "jobs.create", p, sp_ephemeral_queued);
}

/* set_scraper_state: a running crawl replaces its scraper's state with its
 * job's token; the next run starts from it. */
static int sp_set_state_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return schedules_state_from_job(s, c->num[1], c->text, &c->num[0], c->err, sizeof(c->err));
}

/* The running job whose token came with the call: the authenticated one
 * when the daemon requires credentials, else the Bearer token itself
 * (without auth nothing else checks it). 0 when none. */
static int64_t sp_job_of(op_call_t *c) {
  if (c->who->kind == AUTH_JOB) return c->who->job_id;
  const char *h = c->req ? http_req_header(c->req, "Authorization") : NULL;
  if (!h || strncasecmp(h, "Bearer ", 7) || !c->app->job_secret[0]) return 0;
  int64_t id = jobtoken_check(c->app->job_secret, h + 7);
  return id > 0 && flow_running_here(&c->app->flow, id) ? id : 0;
}

static void sp_set_state_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    sp_done(c, rc);
    return;
  }
  char id[24];
  snprintf(id, sizeof(id), "%" PRId64, c->num[0]);
  op_ok(c, json_pack("{s:s, s:o}", "scraper_id", id, "state", op_str_or_null(c->text)));
}

static void sp_set_scraper_state(op_call_t *c) {
  const json_t *state = op_json(c, "state");
  if (!(c->num[1] = sp_job_of(c))) {
    op_fail(c, SPD_EFORBIDDEN, NULL,
            "set_scraper_state is a running crawl's, with its job's token (SPIDERD_TOKEN); "
            "update_scraper sets a scraper's state");
    return;
  }
  if (state && !json_is_string(state) && !json_is_null(state)) {
    sp_bad(c, "state", "'state' must be a string or null");
    return;
  }
  if (json_is_string(state) && !(c->text = strdup(json_string_value(state)))) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  op_store(c, STORE_WRITE, sp_set_state_fn, sp_set_state_done);
}

/* ---- the table ---- */

#define SP_END {NULL, 0, 0, 0, 0}
#define SP_REQ OPF_REQUIRED
static const op_param_t p_none[] = {SP_END};
static const op_param_t p_id[] = {{"id", OPT_ANY, SP_REQ, 0, 0}, SP_END};
static const op_param_t p_scraper[] = {{"scraper", OPT_ANY, SP_REQ, 0, 0}, SP_END};
static const op_param_t p_enqueue[] = {{"scraper_id", OPT_ANY, SP_REQ, 0, 0},
                                       {"priority", OPT_INT, 0, 0, 2},
                                       SP_END};
static const op_param_t p_tasks[] = {{"task_name", OPT_STR, SP_REQ, 0, 0}, SP_END};
static const op_param_t p_task[] = {{"task_id", OPT_INT, SP_REQ, 1, INT64_MAX}, SP_END};
static const op_param_t p_logs[] = {{"task_id", OPT_INT, SP_REQ, 1, INT64_MAX},
                                    {"last_log_line_id", OPT_ANY, 0, 0, 0},
                                    {"max_lines", OPT_INT, 0, 1, SP_LINES_MAX},
                                    SP_END};
static const op_param_t p_ephemeral[] = {{"task", OPT_ANY, SP_REQ, 0, 0},
                                         {"priority", OPT_INT, 0, 0, 2},
                                         SP_END};
static const op_param_t p_state[] = {{"state", OPT_ANY, 0, 0, 0}, SP_END};

#define SP_OP(name, fn, params, flags, role) \
  {name, NULL, fn, params, flags, "POST", "/jsonrpc", 200, OP_BODY_JSON, role}
static const op_def_t sp_table[] = {
    SP_OP("get_scrapers", sp_get_scrapers, p_none, 0, ROLE_READ),
    SP_OP("get_scraper", sp_get_scraper, p_id, 0, ROLE_READ),
    SP_OP("create_scraper", sp_create_scraper, p_scraper, OP_WRITE, ROLE_RUN),
    SP_OP("update_scraper", sp_update_scraper, p_scraper, OP_WRITE, ROLE_RUN),
    SP_OP("delete_scraper", sp_delete_scraper, p_id, OP_WRITE, ROLE_RUN),
    SP_OP("enqueue_scraper", sp_enqueue_scraper, p_enqueue, OP_WRITE, ROLE_RUN),
    SP_OP("get_task_instances", sp_get_task_instances, p_tasks, 0, ROLE_READ),
    SP_OP("get_task_instance", sp_get_task_instance, p_task, 0, ROLE_READ),
    SP_OP("get_task_logs", sp_get_task_logs, p_logs, 0, ROLE_READ),
    SP_OP("get_scraper_handlers", sp_get_scraper_handlers, p_none, 0, ROLE_READ),
    SP_OP("get_schedules", sp_get_schedules, p_none, 0, ROLE_READ),
    SP_OP("get_priorities", sp_get_priorities, p_none, 0, ROLE_READ),
    SP_OP("is_read_only", sp_is_read_only, p_none, 0, ROLE_READ),
    SP_OP("run_ephemeral", sp_run_ephemeral, p_ephemeral, OP_WRITE, ROLE_RUN),
    SP_OP("set_scraper_state", sp_set_scraper_state, p_state, OP_WRITE, ROLE_READ),
};

const op_def_t *sneakpeek_find(const char *method) {
  for (size_t i = 0; i < sizeof(sp_table) / sizeof(sp_table[0]); i++)
    if (!strcmp(sp_table[i].name, method)) return &sp_table[i];
  return NULL;
}

int sneakpeek_for_jobs(const op_def_t *def) { return def && def->fn == sp_set_scraper_state; }
