/* The SQLite backend's schedules, runs, events and leases (store.h).
 * Statements are prepared once per connection into sched_stmt slots, as in
 * sqlite.c; listings whose filters vary per call are prepared per call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "store/sqlite/internal.h"

#define SCHED_COLS                                                               \
  "id, name, kind, expr, interval_ms, once_ms, tz, start_ms, end_ms, jitter_ms, " \
  "overlap, missed, catchup_max, paused, project, spider, version, args, "       \
  "settings, priority, timeout_ms, max_retries, retry_backoff_ms, webhooks, "    \
  "created_ms, updated_ms, horizon_ms, last_due_ms, refill_ms, meta"
#define SCHED_PARAMS                                                              \
  "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, " \
  "?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30"
#define RUN_COLS "id, schedule_id, due_ms, fire_ms, state, job_id, done_ms, reason"
#define EVENT_COLS "id, ts_ms, type, schedule_id, job_id, data"

enum {
  SS_SCHED_INSERT,
  SS_SCHED_UPDATE,
  SS_SCHED_DELETE,
  SS_SCHED_GET,
  SS_SCHED_FIND,
  SS_SCHED_LIST,
  SS_SCHED_HORIZON,
  SS_SCHED_REFILL,
  SS_RUN_DEFER,
  SS_SCHED_LAST_DUE,
  SS_RUN_ADD,
  SS_RUN_CLEAR,
  SS_RUN_DUE,
  SS_RUN_END,
  SS_EVENT_ADD,
  SS_EVENT_HEAD,
  SS_LEASE_ACQUIRE,
  SS_LEASE_CHECK,
  SS_LEASE_RELEASE,
  SS_LEASE_GET,
  SS_STATE_GET,
  SS_STATE_SET,
  SS_COUNT
};

_Static_assert(SS_COUNT <= SQLITE_SCHED_SLOTS, "grow SQLITE_SCHED_SLOTS");

static const char *const sched_sql[SS_COUNT] = {
    [SS_SCHED_INSERT] = "INSERT INTO schedules (" SCHED_COLS ") VALUES (NULL, " SCHED_PARAMS ")",
    [SS_SCHED_UPDATE] =
        "UPDATE schedules SET (" SCHED_COLS ") = (?1, " SCHED_PARAMS ") WHERE id = ?1",
    [SS_SCHED_DELETE] = "DELETE FROM schedules WHERE id = ?1",
    [SS_SCHED_GET] = "SELECT " SCHED_COLS " FROM schedules WHERE id = ?1",
    [SS_SCHED_FIND] = "SELECT " SCHED_COLS " FROM schedules WHERE name = ?1",
    [SS_SCHED_LIST] =
        "SELECT " SCHED_COLS " FROM schedules WHERE id > ?1 ORDER BY id LIMIT ?2",
    [SS_SCHED_HORIZON] = "UPDATE schedules SET horizon_ms = ?2, refill_ms = ?3 WHERE id = ?1",
    [SS_STATE_GET] = "SELECT state FROM schedules WHERE id = ?1",
    [SS_STATE_SET] = "UPDATE schedules SET state = ?2 WHERE id = ?1",
    [SS_SCHED_REFILL] = "SELECT " SCHED_COLS " FROM schedules WHERE paused = 0 "
                        "AND refill_ms <= ?1 ORDER BY refill_ms LIMIT ?2",
    [SS_RUN_DEFER] = "UPDATE runs SET reason = ?2 WHERE id = ?1 AND state = 0",
    [SS_SCHED_LAST_DUE] =
        "UPDATE schedules SET last_due_ms = max(last_due_ms, ?2) WHERE id = ?1",
    [SS_RUN_ADD] = "INSERT INTO runs (schedule_id, due_ms, fire_ms) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT (schedule_id, due_ms) DO NOTHING",
    [SS_RUN_CLEAR] = "DELETE FROM runs WHERE schedule_id = ?1 AND state = 0",
    [SS_RUN_DUE] = "SELECT " RUN_COLS " FROM runs WHERE state = 0 AND fire_ms <= ?1 "
                   "ORDER BY fire_ms, id LIMIT ?2",
    [SS_RUN_END] = "UPDATE runs SET state = ?2, job_id = ?3, reason = ?4, done_ms = ?5 "
                   "WHERE id = ?1 AND state = 0 RETURNING schedule_id, due_ms",
    [SS_EVENT_ADD] =
        "INSERT INTO events (ts_ms, type, schedule_id, job_id, data) VALUES (?1, ?2, ?3, ?4, ?5)",
    /* One statement decides and takes: free, expired, or ours. The token
     * stays while the same holder renews an unexpired lease and grows on
     * every other take (SET reads the old row's values). */
    [SS_LEASE_ACQUIRE] =
        "INSERT INTO leases (name, holder, token, expires_ms) VALUES (?1, ?2, 1, ?3 + ?4) "
        "ON CONFLICT (name) DO UPDATE SET "
        "token = CASE WHEN holder = excluded.holder AND expires_ms > ?3 "
        "THEN token ELSE token + 1 END, "
        "holder = excluded.holder, expires_ms = excluded.expires_ms "
        "WHERE holder = excluded.holder OR expires_ms <= ?3 "
        "RETURNING token",
    [SS_EVENT_HEAD] = "SELECT coalesce(max(id), 0) FROM events",
    [SS_LEASE_CHECK] =
        "SELECT 1 FROM leases WHERE name = ?1 AND token = ?2 AND expires_ms > ?3",
    [SS_LEASE_RELEASE] =
        "UPDATE leases SET expires_ms = 0 WHERE name = ?1 AND holder = ?2 AND token = ?3",
    [SS_LEASE_GET] = "SELECT holder, token, expires_ms FROM leases WHERE name = ?1",
};

static sqlite3_stmt *sched_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->sched_stmt[id], sched_sql[id]);
}

/* Grows a {v, n} list of elem-sized items by one zeroed slot; *cap tracks
 * the allocation. Returns the slot or NULL. */
static void *list_grow(void **v, size_t *n, size_t *cap, size_t elem) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    void *nv = realloc(*v, c * elem);
    if (!nv) return NULL;
    *v = nv;
    *cap = c;
  }
  void *slot = (char *)*v + (*n)++ * elem;
  memset(slot, 0, elem);
  return slot;
}

/* Steps st (bound) to its end, each row decoded by row into a new element
 * of the array *v of *n (elem bytes each, zeroed); a row that fails to
 * decode is dropped (row releases what it took). Resets st. */
static int read_rows(struct sqlite_store *q, sqlite3_stmt *st, void **v, size_t *n, size_t elem,
                     int (*row)(sqlite3_stmt *st, void *e), const char *what) {
  size_t cap = *n;
  int rc = 0, src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    void *e = list_grow(v, n, &cap, elem);
    if (!e) {
      rc = -ENOMEM;
      break;
    }
    if ((rc = row(st, e))) {
      (*n)--;
      break;
    }
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, what);
  sqlite3_reset(st);
  return rc;
}

/* ---- schedules ---- */

static int bind_schedule(sqlite3_stmt *st, const schedule_t *sc) {
  int b = sqlite3_bind_int64(st, 1, sc->id);
  b |= sqlite_bind_str(st, 2, sc->name);
  b |= sqlite3_bind_int(st, 3, (int)sc->kind);
  b |= sqlite_bind_str(st, 4, sc->expr);
  b |= sqlite3_bind_int64(st, 5, sc->interval_ms);
  b |= sqlite3_bind_int64(st, 6, sc->once_ms);
  b |= sqlite_bind_str(st, 7, sc->tz);
  b |= sqlite3_bind_int64(st, 8, sc->start_ms);
  b |= sqlite3_bind_int64(st, 9, sc->end_ms);
  b |= sqlite3_bind_int64(st, 10, sc->jitter_ms);
  b |= sqlite3_bind_int(st, 11, (int)sc->overlap);
  b |= sqlite3_bind_int(st, 12, (int)sc->missed);
  b |= sqlite3_bind_int(st, 13, sc->catchup_max);
  b |= sqlite3_bind_int(st, 14, sc->paused);
  b |= sqlite_bind_str(st, 15, sc->project);
  b |= sqlite_bind_str(st, 16, sc->spider);
  b |= sqlite_bind_str(st, 17, sc->version);
  b |= sqlite_bind_json(st, 18, sc->args);
  b |= sqlite_bind_json(st, 19, sc->settings);
  b |= sqlite3_bind_double(st, 20, sc->priority);
  b |= sqlite3_bind_int64(st, 21, sc->timeout_ms);
  b |= sqlite3_bind_int(st, 22, sc->max_retries);
  b |= sqlite3_bind_int64(st, 23, sc->retry_backoff_ms);
  b |= sqlite_bind_json(st, 24, sc->webhooks);
  b |= sqlite3_bind_int64(st, 25, sc->created_ms);
  b |= sqlite3_bind_int64(st, 26, sc->updated_ms);
  b |= sqlite3_bind_int64(st, 27, sc->horizon_ms);
  b |= sqlite3_bind_int64(st, 28, sc->last_due_ms);
  b |= sqlite3_bind_int64(st, 29, sc->refill_ms);
  b |= sqlite_bind_json(st, 30, sc->meta);
  return b;
}

static int row_schedule(sqlite3_stmt *st, void *e) {
  schedule_t *sc = e;
  int rc;
  schedule_init(sc);
  sc->id = sqlite3_column_int64(st, 0);
  if ((rc = sqlite_col_str(st, 1, &sc->name))) goto out;
  sc->kind = (sched_kind_t)sqlite3_column_int(st, 2);
  if ((rc = sqlite_col_str(st, 3, &sc->expr))) goto out;
  sc->interval_ms = sqlite3_column_int64(st, 4);
  sc->once_ms = sqlite3_column_int64(st, 5);
  if ((rc = sqlite_col_str(st, 6, &sc->tz))) goto out;
  sc->start_ms = sqlite3_column_int64(st, 7);
  sc->end_ms = sqlite3_column_int64(st, 8);
  sc->jitter_ms = sqlite3_column_int64(st, 9);
  sc->overlap = (sched_overlap_t)sqlite3_column_int(st, 10);
  sc->missed = (sched_missed_t)sqlite3_column_int(st, 11);
  sc->catchup_max = sqlite3_column_int(st, 12);
  sc->paused = sqlite3_column_int(st, 13);
  if ((rc = sqlite_col_str(st, 14, &sc->project))) goto out;
  if ((rc = sqlite_col_str(st, 15, &sc->spider))) goto out;
  if ((rc = sqlite_col_str(st, 16, &sc->version))) goto out;
  if ((rc = sqlite_col_json(st, 17, &sc->args))) goto out;
  if ((rc = sqlite_col_json(st, 18, &sc->settings))) goto out;
  sc->priority = sqlite3_column_double(st, 19);
  sc->timeout_ms = sqlite3_column_int64(st, 20);
  sc->max_retries = sqlite3_column_int(st, 21);
  sc->retry_backoff_ms = sqlite3_column_int64(st, 22);
  if ((rc = sqlite_col_json(st, 23, &sc->webhooks))) goto out;
  sc->created_ms = sqlite3_column_int64(st, 24);
  sc->updated_ms = sqlite3_column_int64(st, 25);
  sc->horizon_ms = sqlite3_column_int64(st, 26);
  sc->last_due_ms = sqlite3_column_int64(st, 27);
  sc->refill_ms = sqlite3_column_int64(st, 28);
  if ((rc = sqlite_col_json(st, 29, &sc->meta))) goto out;
out:
  if (rc) schedule_release(sc);
  return rc;
}

/* Steps a schedule write; a taken name is a conflict, not a store failure. */
static int schedule_write(struct sqlite_store *q, sqlite3_stmt *st, const schedule_t *sc,
                          const char *what) {
  if (bind_schedule(st, sc) != SQLITE_OK) {
    sqlite3_clear_bindings(st);
    return sqlite_fail(q, what);
  }
  int src = sqlite3_step(st), rc = 0;
  if (src == SQLITE_CONSTRAINT_UNIQUE)
    rc = SPD_ECONFLICT;
  else if (src != SQLITE_DONE)
    rc = sqlite_fail(q, what);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st); /* frees the JSON dumps now */
  return rc;
}

int sqlite_schedule_insert(store_t *s, schedule_t *sc) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_INSERT);
  if (!st) return SPD_ESTORE;
  int64_t now = clock_wall_ms();
  if (!sc->created_ms) sc->created_ms = now;
  if (!sc->updated_ms) sc->updated_ms = sc->created_ms;
  int rc = schedule_write(q, st, sc, "insert schedule");
  if (!rc) sc->id = sqlite3_last_insert_rowid(q->db);
  return rc;
}

int sqlite_schedule_update(store_t *s, const schedule_t *sc) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_UPDATE);
  if (!st) return SPD_ESTORE;
  return sqlite_changed(q, schedule_write(q, st, sc, "update schedule"));
}

int sqlite_schedule_delete(store_t *s, int64_t id) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_DELETE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  return sqlite_changed(q, sqlite_done(q, st, "delete schedule"));
}

int sqlite_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, name ? SS_SCHED_FIND : SS_SCHED_GET);
  if (!st) return SPD_ESTORE;
  if (name)
    sqlite_bind_str(st, 1, name);
  else
    sqlite3_bind_int64(st, 1, id);
  int rc, src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    rc = row_schedule(st, out);
  else
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "get schedule");
  sqlite3_reset(st);
  return rc;
}

int sqlite_schedule_state_get(store_t *s, int64_t id, char **state) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_STATE_GET);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  int rc = 0, src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    const char *v = (const char *)sqlite3_column_text(st, 0);
    if (v && !(*state = strdup(v))) rc = -ENOMEM;
  } else {
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "get schedule state");
  }
  sqlite3_reset(st);
  return rc;
}

int sqlite_schedule_state_set(store_t *s, int64_t id, const char *state) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_STATE_SET);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite_bind_str(st, 2, state);
  return sqlite_changed(q, sqlite_done(q, st, "set schedule state"));
}

static int read_schedules(struct sqlite_store *q, sqlite3_stmt *st, int64_t key,
                          size_t limit, schedule_list_t *out) {
  sqlite3_bind_int64(st, 1, key);
  sqlite3_bind_int64(st, 2, limit ? sqlite_clamp(limit) : -1);
  return read_rows(q, st, (void **)&out->v, &out->n, sizeof(*out->v), row_schedule,
                   "list schedules");
}

int sqlite_schedules_list(store_t *s, int64_t after_id, size_t limit,
                          schedule_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_LIST);
  return st ? read_schedules(q, st, after_id, limit, out) : SPD_ESTORE;
}

int sqlite_schedules_refill(store_t *s, int64_t now_ms, size_t limit,
                            schedule_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_REFILL);
  return st ? read_schedules(q, st, now_ms, limit, out) : SPD_ESTORE;
}

int sqlite_run_defer(store_t *s, int64_t run_id, const char *reason) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_RUN_DEFER);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite_bind_str(st, 2, reason);
  return sqlite_changed(q, sqlite_done(q, st, "defer run"));
}

/* ---- runs ---- */

static int row_run(sqlite3_stmt *st, void *e) {
  sched_run_t *r = e;
  memset(r, 0, sizeof(*r));
  r->id = sqlite3_column_int64(st, 0);
  r->schedule_id = sqlite3_column_int64(st, 1);
  r->due_ms = sqlite3_column_int64(st, 2);
  r->fire_ms = sqlite3_column_int64(st, 3);
  r->state = (run_state_t)sqlite3_column_int(st, 4);
  r->job_id = sqlite3_column_int64(st, 5);
  r->done_ms = sqlite3_column_int64(st, 6);
  return sqlite_col_str(st, 7, &r->reason);
}

static int read_runs(struct sqlite_store *q, sqlite3_stmt *st, sched_run_list_t *out) {
  return read_rows(q, st, (void **)&out->v, &out->n, sizeof(*out->v), row_run, "list runs");
}

static int set_horizon(struct sqlite_store *q, int64_t schedule_id, int64_t horizon_ms,
                       int64_t refill_ms) {
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_HORIZON);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, schedule_id);
  sqlite3_bind_int64(st, 2, horizon_ms);
  sqlite3_bind_int64(st, 3, refill_ms);
  return sqlite_changed(q, sqlite_done(q, st, "set schedule horizon"));
}

int sqlite_runs_add(store_t *s, int64_t schedule_id, const int64_t *due,
                    const int64_t *fire, size_t n, int64_t horizon_ms, int64_t refill_ms) {
  struct sqlite_store *q = SQ(s);
  int began = 0;
  sqlite3_stmt *st = sched_stmt(q, SS_RUN_ADD);
  if (!st) return SPD_ESTORE;
  int rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  /* The horizon first: it also says whether the schedule still exists. */
  rc = set_horizon(q, schedule_id, horizon_ms, refill_ms);
  for (size_t i = 0; i < n && !rc; i++) {
    sqlite3_bind_int64(st, 1, schedule_id);
    sqlite3_bind_int64(st, 2, due[i]);
    sqlite3_bind_int64(st, 3, fire[i]);
    rc = sqlite_done(q, st, "add run");
  }
  return sqlite_auto_end(q, began, rc);
}

int sqlite_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms) {
  struct sqlite_store *q = SQ(s);
  int began = 0;
  sqlite3_stmt *st = sched_stmt(q, SS_RUN_CLEAR);
  if (!st) return SPD_ESTORE;
  int rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  rc = set_horizon(q, schedule_id, from_ms, 0);
  if (!rc) {
    sqlite3_bind_int64(st, 1, schedule_id);
    rc = sqlite_done(q, st, "clear runs");
  }
  return sqlite_auto_end(q, began, rc);
}

int sqlite_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_RUN_DUE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, until_ms);
  sqlite3_bind_int64(st, 2, sqlite_clamp(max));
  return read_runs(q, st, out);
}

static void add_states(char *sql, size_t len, size_t *n, unsigned states, int nstates) {
  if (!states) return;
  const char *sep = " AND state IN (";
  for (int i = 0; i < nstates; i++)
    if (states & (1u << i)) {
      *n += (size_t)snprintf(sql + *n, len - *n, "%s%d", sep, i);
      sep = ", ";
    }
  *n += (size_t)snprintf(sql + *n, len - *n, ")");
}

int sqlite_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out) {
  struct sqlite_store *q = SQ(s);
  char sql[512];
  size_t n = (size_t)snprintf(sql, sizeof(sql), "SELECT " RUN_COLS " FROM runs WHERE id > ?1");
  if (f->schedule_id) n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND schedule_id = ?2");
  if (f->from_ms) n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND due_ms >= ?3");
  if (f->to_ms) n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND due_ms < ?4");
  add_states(sql, sizeof(sql), &n, f->states, RUN_NSTATES);
  snprintf(sql + n, sizeof(sql) - n, " ORDER BY due_ms, id LIMIT ?5");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sqlite_fail(q, "prepare run list");
  sqlite3_bind_int64(st, 1, f->after_id);
  sqlite3_bind_int64(st, 2, f->schedule_id);
  sqlite3_bind_int64(st, 3, f->from_ms);
  sqlite3_bind_int64(st, 4, f->to_ms);
  sqlite3_bind_int64(st, 5, f->limit ? sqlite_clamp(f->limit) : -1);
  int rc = read_runs(q, st, out);
  sqlite3_finalize(st);
  return rc;
}

static int set_last_due(struct sqlite_store *q, int64_t schedule_id, int64_t due_ms) {
  sqlite3_stmt *st = sched_stmt(q, SS_SCHED_LAST_DUE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, schedule_id);
  sqlite3_bind_int64(st, 2, due_ms);
  return sqlite_done(q, st, "set schedule last due");
}

int sqlite_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                   const char *reason, int64_t now_ms) {
  struct sqlite_store *q = SQ(s);
  int began = 0;
  sqlite3_stmt *st = sched_stmt(q, SS_RUN_END);
  if (!st) return SPD_ESTORE;
  int rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int(st, 2, (int)state);
  sqlite3_bind_int64(st, 3, job_id);
  sqlite_bind_str(st, 4, reason);
  sqlite3_bind_int64(st, 5, now_ms);
  int64_t schedule_id = 0, due_ms = 0;
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    schedule_id = sqlite3_column_int64(st, 0);
    due_ms = sqlite3_column_int64(st, 1);
    src = sqlite3_step(st);
  } else if (src == SQLITE_DONE) {
    rc = -ENOENT;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "end run");
  sqlite3_reset(st);
  if (!rc) rc = set_last_due(q, schedule_id, due_ms);
  return sqlite_auto_end(q, began, rc);
}

/* ---- events ---- */

int sqlite_event_add(store_t *s, event_t *e) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_EVENT_ADD);
  if (!st) return SPD_ESTORE;
  if (!e->ts_ms) e->ts_ms = clock_wall_ms();
  sqlite3_bind_int64(st, 1, e->ts_ms);
  sqlite_bind_str(st, 2, e->type);
  sqlite3_bind_int64(st, 3, e->schedule_id);
  sqlite3_bind_int64(st, 4, e->job_id);
  if (sqlite_bind_json(st, 5, e->data) != SQLITE_OK) return -ENOMEM;
  int rc = sqlite_done(q, st, "add event");
  sqlite3_bind_null(st, 5);
  if (!rc) e->id = sqlite3_last_insert_rowid(q->db);
  return rc;
}

static int row_event(sqlite3_stmt *st, void *v) {
  event_t *e = v;
  int rc;
  e->id = sqlite3_column_int64(st, 0);
  e->ts_ms = sqlite3_column_int64(st, 1);
  e->schedule_id = sqlite3_column_int64(st, 3);
  e->job_id = sqlite3_column_int64(st, 4);
  if ((rc = sqlite_col_str(st, 2, &e->type)) || (rc = sqlite_col_json(st, 5, &e->data)))
    event_release(e);
  return rc;
}

int sqlite_events_list(store_t *s, const event_filter_t *f, event_list_t *out) {
  struct sqlite_store *q = SQ(s);
  char sql[512];
  size_t n = (size_t)snprintf(sql, sizeof(sql), "SELECT " EVENT_COLS " FROM events WHERE id > ?1");
  if (f->type_prefix)
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND substr(type, 1, length(?2)) = ?2");
  /* "!= 0" spelled out: the partial indexes apply only when the query
   * implies their condition, which a bound ?3 alone does not. */
  if (f->schedule_id)
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND schedule_id = ?3 AND schedule_id != 0");
  if (f->job_id)
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND job_id = ?4 AND job_id != 0");
  if (f->before_id) n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND id < ?6");
  snprintf(sql + n, sizeof(sql) - n, " ORDER BY id%s LIMIT ?5", f->newest_first ? " DESC" : "");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sqlite_fail(q, "prepare event list");
  sqlite3_bind_int64(st, 1, f->after_id);
  sqlite_bind_str(st, 2, f->type_prefix);
  sqlite3_bind_int64(st, 3, f->schedule_id);
  sqlite3_bind_int64(st, 4, f->job_id);
  sqlite3_bind_int64(st, 5, f->limit ? sqlite_clamp(f->limit) : -1);
  sqlite3_bind_int64(st, 6, f->before_id);
  int rc = read_rows(q, st, (void **)&out->v, &out->n, sizeof(*out->v), row_event,
                     "list events");
  sqlite3_finalize(st);
  return rc;
}

int sqlite_events_head(store_t *s, int64_t *id) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_EVENT_HEAD);
  if (!st) return SPD_ESTORE;
  int rc = 0;
  if (sqlite3_step(st) == SQLITE_ROW)
    *id = sqlite3_column_int64(st, 0);
  else
    rc = sqlite_fail(q, "events head");
  sqlite3_reset(st);
  return rc;
}

/* ---- leases ---- */

int sqlite_lease_acquire(store_t *s, const char *name, const char *holder,
                         int64_t now_ms, int64_t ttl_ms, int64_t *token) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_LEASE_ACQUIRE);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, name);
  sqlite_bind_str(st, 2, holder);
  sqlite3_bind_int64(st, 3, now_ms);
  sqlite3_bind_int64(st, 4, ttl_ms);
  int rc = 0, src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    *token = sqlite3_column_int64(st, 0);
    src = sqlite3_step(st);
  } else if (src == SQLITE_DONE) {
    rc = -EBUSY;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "acquire lease");
  sqlite3_reset(st);
  return rc;
}

int sqlite_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_LEASE_CHECK);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, name);
  sqlite3_bind_int64(st, 2, token);
  sqlite3_bind_int64(st, 3, now_ms);
  int src = sqlite3_step(st);
  int rc = src == SQLITE_ROW ? 0 : src == SQLITE_DONE ? SPD_EFENCED : sqlite_fail(q, "check lease");
  sqlite3_reset(st);
  return rc;
}

int sqlite_lease_release(store_t *s, const char *name, const char *holder,
                         int64_t token) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_LEASE_RELEASE);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, name);
  sqlite_bind_str(st, 2, holder);
  sqlite3_bind_int64(st, 3, token);
  return sqlite_changed(q, sqlite_done(q, st, "release lease"));
}

int sqlite_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                     int64_t *expires_ms) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sched_stmt(q, SS_LEASE_GET);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, name);
  int rc, src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    *token = sqlite3_column_int64(st, 1);
    *expires_ms = sqlite3_column_int64(st, 2);
    rc = sqlite_col_str(st, 0, holder);
  } else {
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "get lease");
  }
  sqlite3_reset(st);
  return rc;
}
