/* Backfills (flow/backfill.h). */
#include "flow/backfill.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/calendar.h"
#include "core/cron.h"
#include "core/principal.h"
#include "core/schedule.h"
#include "error.h"
#include "flow/calendars.h"
#include "flow/jobs.h"
#include "flow/schedules.h"
#include "log.h"

#define LIST_KEY "backfills"
#define ENDED_KEPT 100 /* ended backfills the list keeps, for backfills.list */

/* ---- the key/value records ---- */

/* The JSON at key, NULL (and 0) when there is none. */
static int meta_json(store_t *s, const char *key, json_t **out) {
  char *text = NULL;
  int rc = store_meta_get(s, key, &text);
  *out = NULL;
  if (rc == -ENOENT) return 0;
  if (!rc && !(*out = json_loads(text, 0, NULL))) rc = SPD_ESTORE;
  free(text);
  return rc;
}

static int meta_put(store_t *s, const char *key, const json_t *v) {
  char *text = json_dumps(v, JSON_COMPACT);
  int rc = text ? store_meta_set(s, key, text) : -ENOMEM;
  free(text);
  return rc;
}

static void record_key(char *buf, size_t len, int64_t id, const char *suffix) {
  snprintf(buf, len, "backfill.%" PRId64 "%s", id, suffix);
}

static int record_get(store_t *s, int64_t id, json_t **rec) {
  char key[64];
  record_key(key, sizeof(key), id, "");
  return meta_json(s, key, rec);
}

static int record_put(store_t *s, const json_t *rec) {
  char key[64];
  record_key(key, sizeof(key), json_integer_value(json_object_get(rec, "id")), "");
  return meta_put(s, key, rec);
}

static int paused_get(store_t *s, int64_t id, int *paused) {
  char key[64], *v = NULL;
  record_key(key, sizeof(key), id, ".paused");
  int rc = store_meta_get(s, key, &v);
  *paused = !rc && v && !strcmp(v, "1");
  free(v);
  return rc == -ENOENT ? 0 : rc;
}

static int64_t rec_int(const json_t *rec, const char *k) {
  return json_integer_value(json_object_get(rec, k));
}

static const char *rec_str(const json_t *rec, const char *k) {
  return json_string_value(json_object_get(rec, k));
}

static void random_hex(char *out, size_t bytes) {
  uint8_t b[32];
  if (bytes > sizeof(b)) bytes = sizeof(b);
  if (getrandom(b, bytes, 0) != (ssize_t)bytes)
    for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)((uintptr_t)out >> (i % 8) ^ i * 131);
  for (size_t i = 0; i < bytes; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static int event(store_t *s, const char *type, int64_t schedule_id, int64_t job_id, json_t *data) {
  event_t e = {.type = (char *)type, .schedule_id = schedule_id, .job_id = job_id, .data = data};
  int rc = data ? store_event_add(s, &e) : -ENOMEM;
  json_decref(data);
  return rc;
}

/* ---- planning ---- */

/* The job that ran slot `due` before, 0 when none: the latest backfill's,
 * else the schedule's own run's. */
static int64_t slot_job(const json_t *done, const sched_run_list_t *runs, int64_t due) {
  char key[24];
  snprintf(key, sizeof(key), "%" PRId64, due);
  const json_t *j = json_object_get(done, key);
  if (j) return json_integer_value(j);
  for (size_t i = 0; i < runs->n; i++)
    if (runs->v[i].due_ms == due && runs->v[i].state == RUN_FIRED) return runs->v[i].job_id;
  return 0;
}

/* Did slot due run (and, with redo_failed, not fail)? 1, 0, or < 0. */
static int slot_ran(store_t *s, const json_t *done, const sched_run_list_t *runs, int64_t due,
                    int redo_failed) {
  int64_t id = slot_job(done, runs, due);
  if (!id) return 0;
  if (!redo_failed) return 1;
  job_t j;
  int rc = store_job_get(s, id, &j);
  if (rc == -ENOENT) return 1; /* gone from history: it ran */
  if (rc) return rc;
  int failed = j.state == JOB_FAILED || j.state == JOB_LOST;
  job_release(&j);
  return !failed;
}

/* The slots of [from, to] to run: due times neither in a calendar of the
 * schedule nor run already; *nran and *ncal count those left out. */
typedef struct plan {
  int64_t *slots;
  size_t n;
  int nran, ncal;
} plan_t;

static int plan_filter(store_t *s, const schedule_t *sc, const backfill_opts_t *o, plan_t *p) {
  calendar_set_t cals = {0};
  sched_run_list_t runs = {0};
  json_t *done = NULL;
  char key[64];
  snprintf(key, sizeof(key), "backfill.slots.%" PRId64, sc->id);
  run_filter_t f = {.schedule_id = sc->id, .states = 1u << RUN_FIRED, .from_ms = o->from_ms,
                    .to_ms = o->to_ms + 1};
  int rc = calendars_load(s, sc->id, &cals);
  if (!rc) rc = store_runs_list(s, &f, &runs);
  if (!rc) rc = meta_json(s, key, &done);
  size_t k = 0;
  for (size_t i = 0; i < p->n && !rc; i++) {
    int ran = 0;
    if (calendar_set_covers(&cals, p->slots[i])) {
      p->ncal++;
      continue;
    }
    if ((ran = slot_ran(s, done, &runs, p->slots[i], o->redo_failed)) < 0) rc = ran;
    else if (ran) p->nran++;
    else p->slots[k++] = p->slots[i];
  }
  p->n = k;
  json_decref(done);
  sched_run_list_release(&runs);
  calendar_set_release(&cals);
  return rc;
}

static int plan(store_t *s, const schedule_t *sc, const backfill_opts_t *o, plan_t *p, char *err,
                size_t len) {
  cron_spec_t spec;
  int more = 0, rc = schedule_compile(sc, &spec, err, len);
  if (rc) return rc;
  p->slots = malloc(BACKFILL_SLOTS_MAX * sizeof(*p->slots));
  rc = p->slots ? cron_between(&spec, o->from_ms - 1, o->to_ms, p->slots, BACKFILL_SLOTS_MAX,
                               &p->n, &more)
                : -ENOMEM;
  cron_spec_release(&spec);
  if (!rc && more) {
    snprintf(err, len, "the window holds more than %d slots: backfill it in parts",
             BACKFILL_SLOTS_MAX);
    rc = SPD_EBADPARAM;
  }
  if (!rc) rc = plan_filter(s, sc, o, p);
  for (size_t i = 0; !rc && o->newest_first && i < p->n / 2; i++) {
    int64_t x = p->slots[i];
    p->slots[i] = p->slots[p->n - 1 - i];
    p->slots[p->n - 1 - i] = x;
  }
  return rc;
}

static json_t *iso_json(int64_t ms, const char *tz) {
  char buf[CRON_ISO_MAX];
  return cron_format_iso(ms, tz, buf, sizeof(buf)) ? json_null() : json_string(buf);
}

static json_t *slots_json(const plan_t *p, const char *tz) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < p->n; i++)
    json_array_append_new(a, json_pack("{s:o, s:I}", "due", iso_json(p->slots[i], tz), "due_ms",
                                       (json_int_t)p->slots[i]));
  return a;
}

/* ---- starting ---- */

/* Adds id to the list of backfills, dropping the oldest ended ones. */
static int list_add(store_t *s, int64_t id) {
  json_t *list = NULL, *kept = json_array();
  int rc = store_shared(s) ? store_claim_lock(s) : 0;
  if (!rc) rc = meta_json(s, LIST_KEY, &list);
  size_t i, ended = 0;
  json_t *v;
  /* Newest first: the running ones all stay, ended ones up to ENDED_KEPT. */
  if (!rc && kept) json_array_append_new(kept, json_integer(id));
  json_array_foreach(list, i, v) {
    json_t *rec = NULL;
    if (rc || !kept || (rc = record_get(s, json_integer_value(v), &rec))) break;
    int live = rec && !strcmp(rec_str(rec, "state") ?: "", "running");
    if (rec && (live || ended++ < ENDED_KEPT)) json_array_append(kept, v);
    json_decref(rec);
  }
  if (!rc && !kept) rc = -ENOMEM;
  if (!rc) rc = meta_put(s, LIST_KEY, kept);
  json_decref(list);
  json_decref(kept);
  return rc;
}

/* The parent job: running on no node from now on, the schedule's project
 * and spider, no schedule of its own (its overlap policy is the
 * children's business). */
static int insert_parent(store_t *s, const schedule_t *sc, int64_t now_ms, job_t *p) {
  char jobid[48] = "backfill-";
  random_hex(jobid + strlen(jobid), 12);
  job_init(p);
  p->jobid = strdup(jobid);
  p->project = strdup(sc->project);
  p->spider = strdup(sc->spider);
  p->args = json_object();
  p->settings = json_object();
  p->state = JOB_RUNNING;
  p->created_ms = p->start_ms = now_ms;
  if (!p->jobid || !p->project || !p->spider || !p->args || !p->settings) return -ENOMEM;
  return store_job_insert(s, p);
}

static json_t *new_record(const schedule_t *sc, const job_t *p, const backfill_opts_t *o,
                          const plan_t *pl, int64_t now_ms) {
  json_t *slots = json_array();
  for (size_t i = 0; slots && i < pl->n; i++) json_array_append_new(slots, json_integer(pl->slots[i]));
  return json_pack("{s:I, s:s, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:i, s:i, s:s?, s:b, "
                   "s:s, s:s, s:s, s:I, s:I}",
                   "id", (json_int_t)p->id, "jobid", p->jobid, "schedule_id", (json_int_t)sc->id,
                   "schedule", sc->name, "project", sc->project, "spider", sc->spider, "tz",
                   sc->tz ? sc->tz : "UTC", "from_ms", (json_int_t)o->from_ms, "to_ms",
                   (json_int_t)o->to_ms, "slots", slots, "next", 0, "max_running",
                   o->max_running, "slot_arg", o->slot_arg, "slot_date", o->slot_date, "redo",
                   o->redo_failed ? "failed" : "missing", "order",
                   o->newest_first ? "newest" : "oldest", "state", "running", "created_ms",
                   (json_int_t)now_ms, "ended_ms", (json_int_t)0);
}

static int start(store_t *s, const schedule_t *sc, const backfill_opts_t *o, const plan_t *pl,
                 int64_t now_ms, int64_t *id, flow_change_t *ch) {
  job_t p;
  int rc = insert_parent(s, sc, now_ms, &p);
  json_t *rec = rc ? NULL : new_record(sc, &p, o, pl, now_ms);
  if (!rc && !rec) rc = -ENOMEM;
  if (!rc) rc = record_put(s, rec);
  if (!rc) rc = list_add(s, p.id);
  if (!rc)
    rc = event(s, "backfill.started", sc->id, p.id,
               json_pack("{s:s, s:s, s:s, s:s, s:I, s:i}", "schedule", sc->name, "project",
                         sc->project, "spider", sc->spider, "jobid", p.jobid, "slots",
                         (json_int_t)pl->n, "max_running", o->max_running));
  if (!rc) {
    *id = p.id;
    ch->schedules = 1; /* the tick releases the first children now */
  }
  json_decref(rec);
  job_release(&p);
  return rc;
}

int backfills_start(store_t *s, const char *key, const char *projects, const backfill_opts_t *o,
                    int64_t now_ms, json_t **out, char *err, size_t len, flow_change_t *ch) {
  schedule_t sc;
  plan_t p = {0};
  int64_t id = 0;
  int rc = schedules_find(s, key, projects, &sc, err, len);
  if (rc) return rc;
  backfill_opts_t opts = *o;
  if (opts.to_ms > now_ms) opts.to_ms = now_ms; /* the future is the schedule's own */
  if (opts.from_ms > opts.to_ms) {
    snprintf(err, len, "'from' must be before 'to' and in the past");
    rc = SPD_EBADPARAM;
  }
  if (!rc) rc = plan(s, &sc, &opts, &p, err, len);
  if (!rc && !opts.dry_run && p.n) rc = start(s, &sc, &opts, &p, now_ms, &id, ch);
  json_t *bf = NULL;
  if (!rc && id) rc = backfills_get(s, id, NULL, &bf, err, len);
  if (!rc)
    *out = json_pack("{s:b, s:I, s:o, s:{s:i, s:i}, s:o}", "dry_run", opts.dry_run, "count",
                     (json_int_t)p.n, "slots", slots_json(&p, sc.tz), "left_out", "ran", p.nran,
                     "calendar", p.ncal, "backfill", bf ? bf : json_null());
  if (!rc && !*out) rc = -ENOMEM;
  free(p.slots);
  schedule_release(&sc);
  return rc;
}

/* ---- reading ---- */

static int record_visible(store_t *s, int64_t id, const char *projects, json_t **rec, char *err,
                          size_t len) {
  int rc = record_get(s, id, rec);
  if (!rc && *rec && !principal_project_ok(projects, rec_str(*rec, "project"))) {
    json_decref(*rec);
    *rec = NULL;
  }
  if (!rc && !*rec) {
    snprintf(err, len, "backfill %" PRId64 " not found", id);
    rc = SPD_ENOJOB;
  }
  return rc;
}

/* A cancelled parent ends its backfill at once, though the record says so
 * only from the next tick: the record's state follows the parent's. */
static int state_now(store_t *s, json_t *rec) {
  job_t p;
  job_init(&p);
  if (strcmp(rec_str(rec, "state") ?: "", "running")) return 0;
  int rc = store_job_get(s, rec_int(rec, "id"), &p);
  if (!rc && job_state_final(p.state))
    json_object_set_new(rec, "state", json_string(job_state_name(p.state)));
  job_release(&p);
  return rc == -ENOENT ? 0 : rc;
}

static json_t *time_json(int64_t ms) { return ms ? job_time_json(ms) : json_null(); }

/* A record as the API shows it: the slots as a count. counts: the
 * children by state, NULL to leave them out. */
static json_t *render(const json_t *rec, int paused, const int64_t *counts) {
  const char *tz = rec_str(rec, "tz");
  json_t *o = json_pack(
      "{s:I, s:s, s:I, s:s, s:s, s:s, s:o, s:o, s:I, s:I, s:I, s:O, s:b, s:O, s:O, s:s, s:b, "
      "s:o, s:o}",
      "id", (json_int_t)rec_int(rec, "id"), "jobid", rec_str(rec, "jobid"), "schedule_id",
      (json_int_t)rec_int(rec, "schedule_id"), "schedule", rec_str(rec, "schedule"), "project",
      rec_str(rec, "project"), "spider", rec_str(rec, "spider"), "from",
      iso_json(rec_int(rec, "from_ms"), tz), "to", iso_json(rec_int(rec, "to_ms"), tz), "slots",
      (json_int_t)json_array_size(json_object_get(rec, "slots")), "released",
      (json_int_t)rec_int(rec, "next"), "max_running", (json_int_t)rec_int(rec, "max_running"),
      "slot_arg", json_object_get(rec, "slot_arg") ?: json_null(), "slot_date",
      json_is_true(json_object_get(rec, "slot_date")), "redo", json_object_get(rec, "redo"),
      "order", json_object_get(rec, "order"), "state", rec_str(rec, "state"), "paused", paused,
      "created_at", time_json(rec_int(rec, "created_ms")), "ended_at",
      time_json(rec_int(rec, "ended_ms")));
  if (o && counts) {
    json_t *c = json_object();
    for (int st = 0; c && st < JOB_NSTATES; st++)
      json_object_set_new(c, job_state_name((job_state_t)st), json_integer(counts[st]));
    json_object_set_new(o, "children", c ? c : json_null());
  }
  return o;
}

int backfills_get(store_t *s, int64_t id, const char *projects, json_t **out, char *err,
                  size_t len) {
  json_t *rec = NULL;
  job_list_t kids = {0};
  int64_t counts[JOB_NSTATES] = {0};
  int paused = 0, rc = record_visible(s, id, projects, &rec, err, len);
  job_filter_t f = {.parent_id = id};
  if (!rc) rc = state_now(s, rec);
  if (!rc) rc = paused_get(s, id, &paused);
  if (!rc) rc = store_jobs_list(s, &f, &kids);
  for (size_t i = 0; !rc && i < kids.n; i++) counts[kids.v[i].state]++;
  if (!rc && !(*out = render(rec, paused, counts))) rc = -ENOMEM;
  job_list_release(&kids);
  json_decref(rec);
  return rc;
}

int backfills_list(store_t *s, const char *projects, json_t **out) {
  json_t *list = NULL, *arr = json_array();
  int rc = arr ? meta_json(s, LIST_KEY, &list) : -ENOMEM;
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) {
    json_t *rec = NULL;
    int paused = 0;
    if (rc || (rc = record_get(s, json_integer_value(v), &rec))) break;
    if (rec && principal_project_ok(projects, rec_str(rec, "project")) &&
        !(rc = paused_get(s, rec_int(rec, "id"), &paused)))
      json_array_append_new(arr, render(rec, paused, NULL));
    json_decref(rec);
  }
  json_decref(list);
  if (rc) json_decref(arr);
  else *out = arr;
  return rc;
}

int backfills_pause(store_t *s, int64_t id, const char *projects, int pause, json_t **out,
                    char *err, size_t len, flow_change_t *ch) {
  json_t *rec = NULL;
  int was = 0, rc = record_visible(s, id, projects, &rec, err, len);
  if (!rc) rc = state_now(s, rec);
  if (!rc) rc = paused_get(s, id, &was);
  if (!rc && strcmp(rec_str(rec, "state") ?: "", "running")) {
    snprintf(err, len, "backfill %" PRId64 " has ended (%s)", id, rec_str(rec, "state"));
    rc = SPD_ECONFLICT;
  }
  if (!rc && was != pause) {
    char key[64];
    record_key(key, sizeof(key), id, ".paused");
    rc = store_meta_set(s, key, pause ? "1" : "0");
    if (!rc)
      rc = event(s, pause ? "backfill.paused" : "backfill.resumed", rec_int(rec, "schedule_id"),
                 id, json_pack("{s:s, s:s, s:s}", "schedule", rec_str(rec, "schedule"), "jobid",
                               rec_str(rec, "jobid"), "project", rec_str(rec, "project")));
    if (!rc && !pause) ch->schedules = 1; /* release at once */
  }
  json_decref(rec);
  return rc ? rc : backfills_get(s, id, projects, out, err, len);
}

int backfills_parent(store_t *s, int64_t id, const char *projects, job_t *parent, char *err,
                     size_t len) {
  json_t *rec = NULL;
  int rc = record_visible(s, id, projects, &rec, err, len);
  json_decref(rec);
  if (!rc && (rc = store_job_get(s, id, parent)) == -ENOENT) {
    snprintf(err, len, "backfill %" PRId64 " not found", id);
    rc = SPD_ENOJOB;
  }
  return rc;
}

/* ---- the tick ---- */

typedef struct step {
  store_t *s;
  const char *node;
  int64_t now;
  flow_change_t *ch;
  job_list_t *cancel;
  json_t *rec;
  job_t parent;
} step_t;

/* The record says it ended, as state, now. */
static int mark_ended(step_t *st, const char *state, const char *why) {
  json_object_set_new(st->rec, "state", json_string(state));
  json_object_set_new(st->rec, "ended_ms", json_integer(st->now));
  int rc = record_put(st->s, st->rec);
  if (!rc)
    rc = event(st->s, "backfill.finished", rec_int(st->rec, "schedule_id"),
               rec_int(st->rec, "id"),
               json_pack("{s:s, s:s, s:s, s:s, s:s?}", "schedule", rec_str(st->rec, "schedule"),
                         "jobid", rec_str(st->rec, "jobid"), "project",
                         rec_str(st->rec, "project"), "state", state, "reason", why));
  return rc;
}

/* The parent ended (cancelled): its children still live are cancelled. */
static int stop_children(step_t *st) {
  jobs_cancel_t c = {.project = st->parent.project, .jobid = st->parent.jobid,
                     .node = st->node, .children_only = 1};
  int rc = jobs_cancel(st->s, &c, st->now);
  st->ch->unqueued += c.change.unqueued;
  st->ch->finished += c.change.finished;
  if (!rc) rc = job_list_append(st->cancel, c.running.v, c.running.n);
  job_list_release(&c.running);
  if (!rc) rc = mark_ended(st, job_state_name(st->parent.state), NULL);
  return rc;
}

/* Queues the child of slot due. */
static int release(step_t *st, const schedule_t *sc, int64_t due, json_t *done) {
  char jobid[33], iso[CRON_ISO_MAX], key[24];
  random_hex(jobid, 16);
  job_t j;
  int rc = cron_format_iso(due, sc->tz, iso, sizeof(iso));
  if (!rc) rc = schedule_job(sc, jobid, st->now, &j);
  if (rc) return rc;
  j.parent_id = st->parent.id;
  const char *arg = rec_str(st->rec, "slot_arg");
  int date = json_is_true(json_object_get(st->rec, "slot_date"));
  if (json_object_set_new(j.args, BACKFILL_TIME_ARG, json_string(iso)) ||
      (arg && json_object_set_new(j.args, arg, json_stringn(iso, date ? 10 : strlen(iso)))))
    rc = -ENOMEM;
  if (!rc)
    rc = jobs_enqueue(st->s, &j,
                      json_pack("{s:I, s:I, s:s}", "backfill", (json_int_t)st->parent.id,
                                "due_ms", (json_int_t)due, "due", iso),
                      st->ch);
  snprintf(key, sizeof(key), "%" PRId64, due);
  if (!rc && json_object_set_new(done, key, json_integer(j.id))) rc = -ENOMEM;
  job_release(&j);
  return rc;
}

/* Releases children while fewer than max_running live; *live = how many
 * live after. */
static int release_some(step_t *st, size_t *live) {
  job_list_t kids = {0};
  job_filter_t f = {.parent_id = st->parent.id, .states = 1u << JOB_PENDING | 1u << JOB_RUNNING};
  schedule_t sc;
  json_t *done = NULL, *slots = json_object_get(st->rec, "slots");
  size_t next = (size_t)rec_int(st->rec, "next"), max = (size_t)rec_int(st->rec, "max_running");
  int paused = 0, rc = store_jobs_list(st->s, &f, &kids);
  char key[64];
  *live = kids.n;
  job_list_release(&kids);
  if (!rc) rc = paused_get(st->s, st->parent.id, &paused);
  if (rc || paused || next >= json_array_size(slots) || *live >= max) return rc;
  schedule_init(&sc);
  snprintf(key, sizeof(key), "backfill.slots.%" PRId64, rec_int(st->rec, "schedule_id"));
  if ((rc = store_schedule_get(st->s, rec_int(st->rec, "schedule_id"), &sc)) == -ENOENT) {
    json_object_set_new(st->rec, "next", json_integer((json_int_t)json_array_size(slots)));
    return 0; /* its schedule is gone: nothing more to run */
  }
  if (!rc) rc = meta_json(st->s, key, &done);
  if (!rc && !done && !(done = json_object())) rc = -ENOMEM;
  size_t before = next;
  for (; !rc && *live < max && next < json_array_size(slots); next++, (*live)++)
    rc = release(st, &sc, json_integer_value(json_array_get(slots, next)), done);
  if (!rc && next != before) {
    json_object_set_new(st->rec, "next", json_integer((json_int_t)next));
    rc = meta_put(st->s, key, done);
    if (!rc) rc = record_put(st->s, st->rec);
  }
  json_decref(done);
  schedule_release(&sc);
  return rc;
}

/* Every child released and ended: the parent ends, failed when a child did. */
static int finish(step_t *st) {
  job_list_t kids = {0};
  job_filter_t f = {.parent_id = st->parent.id,
                    .states = 1u << JOB_FAILED | 1u << JOB_LOST};
  int rc = store_jobs_list(st->s, &f, &kids);
  job_state_t end = kids.n ? JOB_FAILED : JOB_FINISHED;
  char why[96] = "";
  if (kids.n) snprintf(why, sizeof(why), "%zu of its runs failed", kids.n);
  job_list_release(&kids);
  if (!rc) rc = jobs_end_idle(st->s, &st->parent, end, st->now, why[0] ? why : NULL, st->ch);
  if (!rc) rc = mark_ended(st, job_state_name(end), why[0] ? why : NULL);
  return rc;
}

static int step(step_t *st) {
  int64_t id = rec_int(st->rec, "id");
  job_init(&st->parent);
  int rc = store_job_get(st->s, id, &st->parent);
  if (rc == -ENOENT) return mark_ended(st, "cancelled", "its job was deleted");
  if (rc) return rc;
  size_t live = 0;
  if (job_state_final(st->parent.state)) rc = stop_children(st);
  else if (!(rc = release_some(st, &live)) && !live &&
           (size_t)rec_int(st->rec, "next") >= json_array_size(json_object_get(st->rec, "slots")))
    rc = finish(st);
  job_release(&st->parent);
  return rc;
}

int backfills_tick(store_t *s, const char *node, int64_t now_ms, flow_change_t *ch,
                   job_list_t *cancel) {
  json_t *list = NULL;
  int rc = meta_json(s, LIST_KEY, &list);
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) {
    step_t st = {.s = s, .node = node, .now = now_ms, .ch = ch, .cancel = cancel};
    if (rc || (rc = record_get(s, json_integer_value(v), &st.rec))) break;
    if (st.rec && !strcmp(rec_str(st.rec, "state") ?: "", "running")) rc = step(&st);
    json_decref(st.rec);
  }
  json_decref(list);
  return rc;
}
