/* The PostgreSQL backend's schedules, runs, events and leases (store.h),
 * ported from sqlite/sched.c and sqlite/janitor.c's events_prune.
 *
 * Unlike SQLite, PostgreSQL has concurrent writers (other connections,
 * other nodes), and a failed statement aborts the caller's whole
 * transaction. So:
 *  - name conflicts are found without a failing statement (INSERT ... ON
 *    CONFLICT DO NOTHING) or, for a rename, inside a savepoint of our own;
 *  - a missing schedule is found by locking its row first, never by a
 *    foreign key violation;
 *  - every write that touches a schedule and its runs locks the schedule
 *    row first (runs_add, runs_clear, run_end, run_add_ended), so two of
 *    them never wait on each other in opposite orders;
 *  - a lease is decided and taken by one INSERT ... ON CONFLICT DO UPDATE,
 *    and lease_check holds a share lock on the lease row until the
 *    caller's commit, so no one takes the lease between check and commit.
 *
 * Statements are prepared once per connection in slots PG_SLOT_SCHED + i;
 * listings whose filters vary per call are sent as one-off statements. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "store/pg/internal.h"

const char pg_schema_sched[] =
    "CREATE TABLE schedules ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  kind INTEGER NOT NULL,"
    "  expr TEXT,"
    "  interval_ms BIGINT NOT NULL DEFAULT 0,"
    "  once_ms BIGINT NOT NULL DEFAULT 0,"
    "  tz TEXT,"
    "  start_ms BIGINT NOT NULL DEFAULT 0,"
    "  end_ms BIGINT NOT NULL DEFAULT 0,"
    "  jitter_ms BIGINT NOT NULL DEFAULT 0,"
    "  overlap INTEGER NOT NULL DEFAULT 0,"
    "  missed INTEGER NOT NULL DEFAULT 0,"
    "  catchup_max INTEGER NOT NULL DEFAULT 1,"
    "  paused INTEGER NOT NULL DEFAULT 0,"
    "  project TEXT NOT NULL,"
    "  spider TEXT NOT NULL,"
    "  version TEXT,"
    "  args TEXT,"
    "  settings TEXT,"
    "  priority DOUBLE PRECISION NOT NULL DEFAULT 0,"
    "  timeout_ms BIGINT NOT NULL DEFAULT 0,"
    "  max_retries INTEGER NOT NULL DEFAULT 0,"
    "  retry_backoff_ms BIGINT NOT NULL DEFAULT 0,"
    "  webhooks TEXT,"
    "  created_ms BIGINT NOT NULL,"
    "  updated_ms BIGINT NOT NULL,"
    "  horizon_ms BIGINT NOT NULL DEFAULT 0,"
    "  refill_ms BIGINT NOT NULL DEFAULT 0,"
    "  last_due_ms BIGINT NOT NULL DEFAULT 0"
    ");"
    "CREATE INDEX schedules_refill ON schedules(refill_ms) WHERE paused = 0;"
    /* One row per due time of a schedule: the UNIQUE key is what makes a
     * due time fire once, whoever materialises it and however often. It
     * also serves the cascade and a schedule's run listing. */
    "CREATE TABLE runs ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  schedule_id BIGINT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,"
    "  due_ms BIGINT NOT NULL,"
    "  fire_ms BIGINT NOT NULL,"
    "  state INTEGER NOT NULL DEFAULT 0,"
    "  job_id BIGINT NOT NULL DEFAULT 0,"
    "  done_ms BIGINT NOT NULL DEFAULT 0,"
    "  reason TEXT,"
    "  UNIQUE (schedule_id, due_ms)"
    ");"
    "CREATE INDEX runs_upcoming ON runs(fire_ms, id) WHERE state = 0;"
    "CREATE INDEX runs_ended ON runs(done_ms) WHERE state <> 0;"
    /* Ids come from the identity's sequence: never reused, whatever is
     * pruned. No index on ts_ms: events are appended in time order and
     * pruned oldest id first. */
    "CREATE TABLE events ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  ts_ms BIGINT NOT NULL,"
    "  type TEXT NOT NULL,"
    "  schedule_id BIGINT NOT NULL DEFAULT 0,"
    "  job_id BIGINT NOT NULL DEFAULT 0,"
    "  data TEXT"
    ");"
    "CREATE INDEX events_schedule ON events(schedule_id, id) WHERE schedule_id <> 0;"
    "CREATE INDEX events_job ON events(job_id, id) WHERE job_id <> 0;"
    "CREATE TABLE leases ("
    "  name TEXT PRIMARY KEY,"
    "  holder TEXT NOT NULL,"
    "  token BIGINT NOT NULL,"
    "  expires_ms BIGINT NOT NULL"
    ");";

#define SCHED_COLS                                                               \
  "id, name, kind, expr, interval_ms, once_ms, tz, start_ms, end_ms, jitter_ms, " \
  "overlap, missed, catchup_max, paused, project, spider, version, args, "       \
  "settings, priority, timeout_ms, max_retries, retry_backoff_ms, webhooks, "    \
  "created_ms, updated_ms, horizon_ms, last_due_ms, refill_ms, meta"
/* The writable columns (all but id), bound as $2..$30 by bind_schedule. */
#define SCHED_WCOLS                                                          \
  "name, kind, expr, interval_ms, once_ms, tz, start_ms, end_ms, jitter_ms, " \
  "overlap, missed, catchup_max, paused, project, spider, version, args, "   \
  "settings, priority, timeout_ms, max_retries, retry_backoff_ms, webhooks, " \
  "created_ms, updated_ms, horizon_ms, last_due_ms, refill_ms, meta"
#define SCHED_PARAMS                                                              \
  "$2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, " \
  "$19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30"
#define RUN_COLS "id, schedule_id, due_ms, fire_ms, state, job_id, done_ms, reason"
#define EVENT_COLS "id, ts_ms, type, schedule_id, job_id, data"

enum {
  PS_SCHED_INSERT = PG_SLOT_SCHED,
  PS_SCHED_UPDATE,
  PS_SCHED_DELETE,
  PS_SCHED_GET,
  PS_SCHED_FIND,
  PS_SCHED_LIST,
  PS_SCHED_REFILL,
  PS_SCHED_HORIZON,
  PS_SCHED_LOCK_RUN,
  PS_RUN_DEFER,
  PS_RUN_ADD,
  PS_RUN_CLEAR,
  PS_RUN_DUE,
  PS_RUN_END,
  PS_EVENT_ADD,
  PS_EVENT_HEAD,
  PS_EVENT_PRUNE,
  PS_RUN_PRUNE,
  PS_LEASE_ACQUIRE,
  PS_LEASE_CHECK,
  PS_LEASE_RELEASE,
  PS_LEASE_GET,
  PS_STATE_GET,
  PS_STATE_SET,
  PS_END
};

_Static_assert(PS_END <= PG_SLOT_QUEUE, "pg/sched.c's slots are 128..191");

/* The insert binds no id: its parameters are the writable columns, $1..$29. */
static const char sql_sched_insert[] =
    "INSERT INTO schedules (" SCHED_WCOLS ") VALUES ("
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, "
    "$18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29) "
    "ON CONFLICT (name) DO NOTHING RETURNING id";
static const char sql_sched_update[] =
    "UPDATE schedules SET (" SCHED_WCOLS ") = (" SCHED_PARAMS ") WHERE id = $1";
static const char sql_sched_delete[] = "DELETE FROM schedules WHERE id = $1";
static const char sql_sched_get[] = "SELECT " SCHED_COLS " FROM schedules WHERE id = $1";
static const char sql_sched_find[] = "SELECT " SCHED_COLS " FROM schedules WHERE name = $1";
/* LIMIT NULL is no limit. */
static const char sql_sched_list[] = "SELECT " SCHED_COLS
                                     " FROM schedules WHERE id > $1 ORDER BY id LIMIT $2";
static const char sql_sched_refill[] =
    "SELECT " SCHED_COLS " FROM schedules WHERE paused = 0 AND refill_ms <= $1 "
    "ORDER BY refill_ms, id LIMIT $2";
static const char sql_sched_horizon[] =
    "UPDATE schedules SET horizon_ms = $2, refill_ms = $3 WHERE id = $1";
/* The schedule of a run, locked before the run is (the order every write
 * of a schedule and its runs keeps). */
static const char sql_sched_lock_run[] =
    "SELECT s.id FROM runs r JOIN schedules s ON s.id = r.schedule_id WHERE r.id = $1 "
    "FOR NO KEY UPDATE OF s";
static const char sql_run_defer[] = "UPDATE runs SET reason = $2 WHERE id = $1 AND state = 0";
static const char sql_run_add[] =
    "INSERT INTO runs (schedule_id, due_ms, fire_ms) "
    "SELECT $1::bigint, d, f FROM unnest($2::bigint[], $3::bigint[]) AS t(d, f) "
    "ON CONFLICT (schedule_id, due_ms) DO NOTHING";
static const char sql_run_clear[] = "DELETE FROM runs WHERE schedule_id = $1 AND state = 0";
static const char sql_run_due[] = "SELECT " RUN_COLS " FROM runs WHERE state = 0 "
                                  "AND fire_ms <= $1 ORDER BY fire_ms, id LIMIT $2";
/* Ends the run only while it is upcoming, and moves its schedule's
 * last_due_ms in the same statement: no row back means it ended already. */
static const char sql_run_end[] =
    "WITH r AS (UPDATE runs SET state = $2, job_id = $3, reason = $4, done_ms = $5 "
    "WHERE id = $1 AND state = 0 RETURNING schedule_id, due_ms) "
    "UPDATE schedules s SET last_due_ms = greatest(s.last_due_ms, r.due_ms) "
    "FROM r WHERE s.id = r.schedule_id RETURNING s.id";
/* Readers page events by id ("after N"), so ids must become visible in
 * order: a sequence alone lets a transaction holding a smaller id commit
 * after a reader went past it, and that event would never be seen. The
 * lock (per schema, held to the commit) orders every transaction that
 * adds events, so the id is taken only once every earlier one committed. */
static const char sql_event_add[] =
    "WITH l AS (SELECT pg_advisory_xact_lock(hashtext('spiderd.events.' || current_schema()))) "
    "INSERT INTO events (ts_ms, type, schedule_id, job_id, data) "
    "SELECT $1, $2, $3, $4, $5 FROM l RETURNING id";
static const char sql_event_head[] = "SELECT coalesce(max(id), 0) FROM events";
/* As SQLite: among the `max` oldest events by id, those older than the
 * cut-off; never the newest event (events_head stays where it was). */
static const char sql_event_prune[] =
    "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT $2) "
    "AND ts_ms < $1 AND id < (SELECT max(id) FROM events)";
/* "state <> 0" is runs_ended's own condition, so the planner uses it. */
static const char sql_run_prune[] =
    "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE state <> 0 "
    "AND done_ms < $1 ORDER BY done_ms LIMIT $2)";
/* One statement decides and takes: free, expired, or ours. The token
 * stays while the same holder renews an unexpired lease and grows on every
 * other take. ON CONFLICT locks the row and evaluates SET and WHERE on its
 * newest version, so of two nodes racing for it one wins; the loser gets no
 * row back (-EBUSY). */
static const char sql_lease_acquire[] =
    "INSERT INTO leases AS l (name, holder, token, expires_ms) "
    "VALUES ($1, $2, 1, $3::bigint + $4::bigint) "
    "ON CONFLICT (name) DO UPDATE SET "
    "token = CASE WHEN l.holder = excluded.holder AND l.expires_ms > $3::bigint "
    "THEN l.token ELSE l.token + 1 END, "
    "holder = excluded.holder, expires_ms = excluded.expires_ms "
    "WHERE l.holder = excluded.holder OR l.expires_ms <= $3::bigint "
    "RETURNING l.token";
/* FOR SHARE: a take (which updates the row) waits for the checking
 * transaction's end, so the fenced work commits under a valid lease. */
static const char sql_lease_check[] =
    "SELECT 1 FROM leases WHERE name = $1 AND token = $2 AND expires_ms > $3 FOR SHARE";
static const char sql_lease_release[] =
    "UPDATE leases SET expires_ms = 0 WHERE name = $1 AND holder = $2 AND token = $3";
static const char sql_lease_get[] = "SELECT holder, token, expires_ms FROM leases WHERE name = $1";

/* A limit of 0 (all) is SQL NULL: LIMIT NULL is no limit. */
static void p_limit(pg_params_t *p, size_t limit) {
  if (!limit)
    pg_p_str(p, NULL);
  else
    pg_p_i64(p, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
}

/* Grows a {v, n} list to hold `more` further zeroed items. */
static int list_reserve(void **v, size_t n, size_t more, size_t elem) {
  if (!more) return 0;
  void *nv = realloc(*v, (n + more) * elem);
  if (!nv) return -ENOMEM;
  memset((char *)nv + n * elem, 0, more * elem);
  *v = nv;
  return 0;
}

/* ---- schedules ---- */

/* $1 = id (update only), then the writable columns in SCHED_WCOLS order. */
static void bind_schedule(pg_params_t *p, const schedule_t *sc, int with_id) {
  if (with_id) pg_p_i64(p, sc->id);
  pg_p_str(p, sc->name);
  pg_p_i64(p, (int64_t)sc->kind);
  pg_p_str(p, sc->expr);
  pg_p_i64(p, sc->interval_ms);
  pg_p_i64(p, sc->once_ms);
  pg_p_str(p, sc->tz);
  pg_p_i64(p, sc->start_ms);
  pg_p_i64(p, sc->end_ms);
  pg_p_i64(p, sc->jitter_ms);
  pg_p_i64(p, (int64_t)sc->overlap);
  pg_p_i64(p, (int64_t)sc->missed);
  pg_p_i64(p, sc->catchup_max);
  pg_p_i64(p, sc->paused);
  pg_p_str(p, sc->project);
  pg_p_str(p, sc->spider);
  pg_p_str(p, sc->version);
  pg_p_json(p, sc->args);
  pg_p_json(p, sc->settings);
  pg_p_dbl(p, sc->priority);
  pg_p_i64(p, sc->timeout_ms);
  pg_p_i64(p, sc->max_retries);
  pg_p_i64(p, sc->retry_backoff_ms);
  pg_p_json(p, sc->webhooks);
  pg_p_i64(p, sc->created_ms);
  pg_p_i64(p, sc->updated_ms);
  pg_p_i64(p, sc->horizon_ms);
  pg_p_i64(p, sc->last_due_ms);
  pg_p_i64(p, sc->refill_ms);
  pg_p_json(p, sc->meta);
}

static int row_schedule(const PGresult *r, int i, schedule_t *sc) {
  int rc;
  schedule_init(sc);
  sc->id = pg_i64(r, i, 0);
  if ((rc = pg_str(r, i, 1, &sc->name))) goto out;
  sc->kind = (sched_kind_t)pg_i64(r, i, 2);
  if ((rc = pg_str(r, i, 3, &sc->expr))) goto out;
  sc->interval_ms = pg_i64(r, i, 4);
  sc->once_ms = pg_i64(r, i, 5);
  if ((rc = pg_str(r, i, 6, &sc->tz))) goto out;
  sc->start_ms = pg_i64(r, i, 7);
  sc->end_ms = pg_i64(r, i, 8);
  sc->jitter_ms = pg_i64(r, i, 9);
  sc->overlap = (sched_overlap_t)pg_i64(r, i, 10);
  sc->missed = (sched_missed_t)pg_i64(r, i, 11);
  sc->catchup_max = (int)pg_i64(r, i, 12);
  sc->paused = (int)pg_i64(r, i, 13);
  if ((rc = pg_str(r, i, 14, &sc->project))) goto out;
  if ((rc = pg_str(r, i, 15, &sc->spider))) goto out;
  if ((rc = pg_str(r, i, 16, &sc->version))) goto out;
  if ((rc = pg_json(r, i, 17, &sc->args))) goto out;
  if ((rc = pg_json(r, i, 18, &sc->settings))) goto out;
  sc->priority = pg_dbl(r, i, 19);
  sc->timeout_ms = pg_i64(r, i, 20);
  sc->max_retries = (int)pg_i64(r, i, 21);
  sc->retry_backoff_ms = pg_i64(r, i, 22);
  if ((rc = pg_json(r, i, 23, &sc->webhooks))) goto out;
  sc->created_ms = pg_i64(r, i, 24);
  sc->updated_ms = pg_i64(r, i, 25);
  sc->horizon_ms = pg_i64(r, i, 26);
  sc->last_due_ms = pg_i64(r, i, 27);
  sc->refill_ms = pg_i64(r, i, 28);
  if ((rc = pg_json(r, i, 29, &sc->meta))) goto out;
out:
  if (rc) schedule_release(sc);
  return rc;
}

int pg_schedule_insert(store_t *s, schedule_t *sc) {
  struct pg_store *q = PGQ(s);
  int64_t now = clock_wall_ms();
  if (!sc->created_ms) sc->created_ms = now;
  if (!sc->updated_ms) sc->updated_ms = sc->created_ms;
  pg_params_t p = {0};
  bind_schedule(&p, sc, 0);
  int rc;
  /* A taken name inserts nothing and returns no row: no failed statement,
   * so a caller's transaction goes on. */
  PGresult *r = pg_run(q, PS_SCHED_INSERT, sql_sched_insert, &p, 0, &rc, "insert schedule");
  if (!r) return rc;
  if (PQntuples(r))
    sc->id = pg_i64(r, 0, 0);
  else
    rc = SPD_ECONFLICT;
  PQclear(r);
  return rc;
}

int pg_schedule_update(store_t *s, const schedule_t *sc) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  bind_schedule(&p, sc, 1);
  if (!q->in_tx) /* one statement: a taken name fails it alone */
    return pg_cmd(q, PS_SCHED_UPDATE, sql_sched_update, &p, 1, "update schedule");
  /* Inside the caller's transaction, a rename onto a taken name must not
   * abort it: the update runs in a savepoint of its own, undone on a
   * conflict. (A prior check could not see a name another transaction is
   * inserting at the same time.) */
  int rc = pg_exec(q, "SAVEPOINT spiderd_sched_update", "savepoint");
  if (rc) {
    pg_params_release(&p);
    return rc;
  }
  rc = pg_cmd(q, PS_SCHED_UPDATE, sql_sched_update, &p, 1, "update schedule");
  int rc2;
  if (rc && rc != -ENOENT) /* the statement failed: undo it alone */
    rc2 = pg_exec(q,
                  "ROLLBACK TO SAVEPOINT spiderd_sched_update; "
                  "RELEASE SAVEPOINT spiderd_sched_update",
                  "rollback savepoint");
  else
    rc2 = pg_exec(q, "RELEASE SAVEPOINT spiderd_sched_update", "release savepoint");
  return rc ? rc : rc2;
}

int pg_schedule_delete(store_t *s, int64_t id) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  return pg_cmd(PGQ(s), PS_SCHED_DELETE, sql_sched_delete, &p, 1, "delete schedule");
}

int pg_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  if (name)
    pg_p_str(&p, name);
  else
    pg_p_i64(&p, id);
  int rc;
  PGresult *r = name ? pg_run(q, PS_SCHED_FIND, sql_sched_find, &p, 0, &rc, "find schedule")
                     : pg_run(q, PS_SCHED_GET, sql_sched_get, &p, 0, &rc, "get schedule");
  if (!r) return rc;
  rc = PQntuples(r) ? row_schedule(r, 0, out) : -ENOENT;
  PQclear(r);
  return rc;
}

static const char sql_state_get[] = "SELECT state FROM schedules WHERE id = $1";
static const char sql_state_set[] = "UPDATE schedules SET state = $2 WHERE id = $1";

int pg_schedule_state_get(store_t *s, int64_t id, char **state) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_STATE_GET, sql_state_get, &p, 0, &rc, "get schedule state");
  if (!r) return rc;
  rc = PQntuples(r) ? pg_str(r, 0, 0, state) : -ENOENT;
  PQclear(r);
  return rc;
}

int pg_schedule_state_set(store_t *s, int64_t id, const char *state) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_str(&p, state);
  return pg_cmd(PGQ(s), PS_STATE_SET, sql_state_set, &p, 1, "set schedule state");
}

/* Appends every row of r to out. */
static int read_schedules(PGresult *r, schedule_list_t *out) {
  int n = PQntuples(r), rc = list_reserve((void **)&out->v, out->n, (size_t)n, sizeof(*out->v));
  for (int i = 0; i < n && !rc; i++)
    if (!(rc = row_schedule(r, i, &out->v[out->n]))) out->n++;
  PQclear(r);
  return rc;
}

int pg_schedules_list(store_t *s, int64_t after_id, size_t limit, schedule_list_t *out) {
  pg_params_t p = {0};
  pg_p_i64(&p, after_id);
  p_limit(&p, limit);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_SCHED_LIST, sql_sched_list, &p, 0, &rc, "list schedules");
  return r ? read_schedules(r, out) : rc;
}

int pg_schedules_refill(store_t *s, int64_t now_ms, size_t limit, schedule_list_t *out) {
  pg_params_t p = {0};
  pg_p_i64(&p, now_ms);
  p_limit(&p, limit);
  int rc;
  PGresult *r =
      pg_run(PGQ(s), PS_SCHED_REFILL, sql_sched_refill, &p, 0, &rc, "schedules to refill");
  return r ? read_schedules(r, out) : rc;
}

/* ---- runs ---- */

static int row_run(const PGresult *r, int i, sched_run_t *run) {
  memset(run, 0, sizeof(*run));
  run->id = pg_i64(r, i, 0);
  run->schedule_id = pg_i64(r, i, 1);
  run->due_ms = pg_i64(r, i, 2);
  run->fire_ms = pg_i64(r, i, 3);
  run->state = (run_state_t)pg_i64(r, i, 4);
  run->job_id = pg_i64(r, i, 5);
  run->done_ms = pg_i64(r, i, 6);
  return pg_str(r, i, 7, &run->reason);
}

static int read_runs(PGresult *r, sched_run_list_t *out) {
  int n = PQntuples(r), rc = list_reserve((void **)&out->v, out->n, (size_t)n, sizeof(*out->v));
  for (int i = 0; i < n && !rc; i++)
    if (!(rc = row_run(r, i, &out->v[out->n]))) out->n++;
  PQclear(r);
  return rc;
}

/* Sets a schedule's horizon and refill time; this also locks its row
 * (first, as every write of a schedule and its runs) and says whether it
 * exists (-ENOENT). */
static int set_horizon(struct pg_store *q, int64_t schedule_id, int64_t horizon_ms,
                       int64_t refill_ms) {
  pg_params_t p = {0};
  pg_p_i64(&p, schedule_id);
  pg_p_i64(&p, horizon_ms);
  pg_p_i64(&p, refill_ms);
  return pg_cmd(q, PS_SCHED_HORIZON, sql_sched_horizon, &p, 1, "set schedule horizon");
}

/* "{1,2,3}": an int64 array's text form. malloc'd, NULL when out of memory. */
static char *i64_array(const int64_t *v, size_t n) {
  size_t cap = n * 21 + 3, len = 0;
  char *buf = malloc(cap);
  if (!buf) return NULL;
  buf[len++] = '{';
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? "," : "", v[i]);
  snprintf(buf + len, cap - len, "}");
  return buf;
}

int pg_runs_add(store_t *s, int64_t schedule_id, const int64_t *due, const int64_t *fire,
                size_t n, int64_t horizon_ms, int64_t refill_ms) {
  struct pg_store *q = PGQ(s);
  char *dues = NULL, *fires = NULL;
  if (n) {
    dues = i64_array(due, n);
    fires = i64_array(fire, n);
    if (!dues || !fires) {
      free(dues);
      free(fires);
      return -ENOMEM;
    }
  }
  int began, rc = pg_auto_begin(q, &began);
  if (!rc) rc = set_horizon(q, schedule_id, horizon_ms, refill_ms);
  if (!rc && n) {
    /* All in one statement; a due time the schedule has is left alone. */
    pg_params_t p = {0};
    pg_p_i64(&p, schedule_id);
    pg_p_str(&p, dues);
    pg_p_str(&p, fires);
    rc = pg_cmd(q, PS_RUN_ADD, sql_run_add, &p, 0, "add runs");
  }
  free(dues);
  free(fires);
  return pg_auto_end(q, began, rc);
}

int pg_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms) {
  struct pg_store *q = PGQ(s);
  int began, rc = pg_auto_begin(q, &began);
  if (!rc) rc = set_horizon(q, schedule_id, from_ms, 0);
  if (!rc) {
    pg_params_t p = {0};
    pg_p_i64(&p, schedule_id);
    rc = pg_cmd(q, PS_RUN_CLEAR, sql_run_clear, &p, 0, "clear runs");
  }
  return pg_auto_end(q, began, rc);
}

int pg_run_defer(store_t *s, int64_t run_id, const char *reason) {
  pg_params_t p = {0};
  pg_p_i64(&p, run_id);
  pg_p_str(&p, reason);
  return pg_cmd(PGQ(s), PS_RUN_DEFER, sql_run_defer, &p, 1, "defer run");
}

int pg_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out) {
  pg_params_t p = {0};
  pg_p_i64(&p, until_ms);
  p_limit(&p, max);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_RUN_DUE, sql_run_due, &p, 0, &rc, "due runs");
  return r ? read_runs(r, out) : rc;
}

int pg_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out) {
  char sql[512];
  pg_params_t p = {0};
  pg_p_i64(&p, f->after_id);
  size_t n = (size_t)snprintf(sql, sizeof(sql), "SELECT " RUN_COLS " FROM runs WHERE id > $1");
  if (f->schedule_id) {
    pg_p_i64(&p, f->schedule_id);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND schedule_id = $%d", p.n);
  }
  if (f->from_ms) {
    pg_p_i64(&p, f->from_ms);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND due_ms >= $%d", p.n);
  }
  if (f->to_ms) {
    pg_p_i64(&p, f->to_ms);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND due_ms < $%d", p.n);
  }
  if (f->states) {
    const char *sep = " AND state IN (";
    for (int i = 0; i < RUN_NSTATES; i++)
      if (f->states & (1u << i)) {
        n += (size_t)snprintf(sql + n, sizeof(sql) - n, "%s%d", sep, i);
        sep = ", ";
      }
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, ")");
  }
  p_limit(&p, f->limit);
  snprintf(sql + n, sizeof(sql) - n, " ORDER BY due_ms, id LIMIT $%d", p.n);
  int rc;
  PGresult *r = pg_run(PGQ(s), -1, sql, &p, 0, &rc, "list runs");
  return r ? read_runs(r, out) : rc;
}

/* Locks the schedule of run_id (-ENOENT when no such run). */
static int lock_run_schedule(struct pg_store *q, int64_t run_id) {
  pg_params_t p = {0};
  pg_p_i64(&p, run_id);
  int rc;
  PGresult *r = pg_run(q, PS_SCHED_LOCK_RUN, sql_sched_lock_run, &p, 0, &rc, "lock schedule");
  if (!r) return rc;
  rc = PQntuples(r) ? 0 : -ENOENT;
  PQclear(r);
  return rc;
}

int pg_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
               const char *reason, int64_t now_ms) {
  struct pg_store *q = PGQ(s);
  int began, rc = pg_auto_begin(q, &began);
  if (!rc) rc = lock_run_schedule(q, run_id);
  if (!rc) {
    pg_params_t p = {0};
    pg_p_i64(&p, run_id);
    pg_p_i64(&p, (int64_t)state);
    pg_p_i64(&p, job_id);
    pg_p_str(&p, reason);
    pg_p_i64(&p, now_ms);
    PGresult *r = pg_run(q, PS_RUN_END, sql_run_end, &p, 0, &rc, "end run");
    if (r) {
      if (!PQntuples(r)) rc = -ENOENT; /* ended already: each run ends once */
      PQclear(r);
    }
  }
  return pg_auto_end(q, began, rc);
}

/* ---- events ---- */

int pg_event_add(store_t *s, event_t *e) {
  if (!e->ts_ms) e->ts_ms = clock_wall_ms();
  pg_params_t p = {0};
  pg_p_i64(&p, e->ts_ms);
  pg_p_str(&p, e->type);
  pg_p_i64(&p, e->schedule_id);
  pg_p_i64(&p, e->job_id);
  pg_p_json(&p, e->data);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_EVENT_ADD, sql_event_add, &p, 0, &rc, "add event");
  if (!r) return rc;
  if (PQntuples(r))
    e->id = pg_i64(r, 0, 0);
  else
    rc = SPD_ESTORE;
  PQclear(r);
  return rc;
}

int pg_events_list(store_t *s, const event_filter_t *f, event_list_t *out) {
  char sql[512];
  pg_params_t p = {0};
  pg_p_i64(&p, f->after_id);
  size_t n =
      (size_t)snprintf(sql, sizeof(sql), "SELECT " EVENT_COLS " FROM events WHERE id > $1");
  if (f->type_prefix) { /* literal: no LIKE wildcards */
    pg_p_str(&p, f->type_prefix);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n,
                          " AND left(type, char_length($%d::text)) = $%d::text", p.n, p.n);
  }
  /* "<> 0" spelled out so the partial indexes apply. */
  if (f->schedule_id) {
    pg_p_i64(&p, f->schedule_id);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n,
                          " AND schedule_id = $%d AND schedule_id <> 0", p.n);
  }
  if (f->job_id) {
    pg_p_i64(&p, f->job_id);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND job_id = $%d AND job_id <> 0", p.n);
  }
  if (f->before_id) {
    pg_p_i64(&p, f->before_id);
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND id < $%d", p.n);
  }
  p_limit(&p, f->limit);
  snprintf(sql + n, sizeof(sql) - n, " ORDER BY id%s LIMIT $%d", f->newest_first ? " DESC" : "",
           p.n);
  int rc;
  PGresult *r = pg_run(PGQ(s), -1, sql, &p, 0, &rc, "list events");
  if (!r) return rc;
  int rows = PQntuples(r);
  rc = list_reserve((void **)&out->v, out->n, (size_t)rows, sizeof(*out->v));
  for (int i = 0; i < rows && !rc; i++) {
    event_t *e = &out->v[out->n];
    e->id = pg_i64(r, i, 0);
    e->ts_ms = pg_i64(r, i, 1);
    e->schedule_id = pg_i64(r, i, 3);
    e->job_id = pg_i64(r, i, 4);
    if ((rc = pg_str(r, i, 2, &e->type)) || (rc = pg_json(r, i, 5, &e->data))) {
      event_release(e);
      break;
    }
    out->n++;
  }
  PQclear(r);
  return rc;
}

int pg_events_head(store_t *s, int64_t *id) {
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_EVENT_HEAD, sql_event_head, NULL, 0, &rc, "events head");
  if (!r) return rc;
  if (PQntuples(r))
    *id = pg_i64(r, 0, 0);
  else
    rc = SPD_ESTORE;
  PQclear(r);
  return rc;
}

/* Runs a prune statement ($1 cut-off, $2 batch); adds the rows gone to *n. */
static int delete_older(struct pg_store *q, int slot, const char *sql, int64_t before_ms,
                        size_t max, int *n, const char *what) {
  pg_params_t p = {0};
  pg_p_i64(&p, before_ms);
  p_limit(&p, max);
  int rc;
  PGresult *r = pg_run(q, slot, sql, &p, 0, &rc, what);
  if (!r) return rc;
  *n += atoi(PQcmdTuples(r));
  PQclear(r);
  return 0;
}

int pg_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted) {
  struct pg_store *q = PGQ(s);
  int n = 0, began, rc = pg_auto_begin(q, &began);
  if (!rc) rc = delete_older(q, PS_EVENT_PRUNE, sql_event_prune, before_ms, max, &n,
                             "prune events");
  if (!rc && (size_t)n < max)
    rc = delete_older(q, PS_RUN_PRUNE, sql_run_prune, before_ms, max - (size_t)n, &n,
                      "prune runs");
  rc = pg_auto_end(q, began, rc);
  if (!rc) *deleted = n;
  return rc;
}

/* ---- leases ---- */

int pg_lease_acquire(store_t *s, const char *name, const char *holder, int64_t now_ms,
                     int64_t ttl_ms, int64_t *token) {
  pg_params_t p = {0};
  pg_p_str(&p, name);
  pg_p_str(&p, holder);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, ttl_ms);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_LEASE_ACQUIRE, sql_lease_acquire, &p, 0, &rc, "acquire lease");
  if (!r) return rc;
  if (PQntuples(r))
    *token = pg_i64(r, 0, 0);
  else
    rc = -EBUSY;
  PQclear(r);
  return rc;
}

int pg_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms) {
  pg_params_t p = {0};
  pg_p_str(&p, name);
  pg_p_i64(&p, token);
  pg_p_i64(&p, now_ms);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_LEASE_CHECK, sql_lease_check, &p, 0, &rc, "check lease");
  if (!r) return rc;
  rc = PQntuples(r) ? 0 : SPD_EFENCED;
  PQclear(r);
  return rc;
}

int pg_lease_release(store_t *s, const char *name, const char *holder, int64_t token) {
  pg_params_t p = {0};
  pg_p_str(&p, name);
  pg_p_str(&p, holder);
  pg_p_i64(&p, token);
  return pg_cmd(PGQ(s), PS_LEASE_RELEASE, sql_lease_release, &p, 1, "release lease");
}

int pg_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                 int64_t *expires_ms) {
  pg_params_t p = {0};
  pg_p_str(&p, name);
  int rc;
  PGresult *r = pg_run(PGQ(s), PS_LEASE_GET, sql_lease_get, &p, 0, &rc, "get lease");
  if (!r) return rc;
  if (PQntuples(r)) {
    *token = pg_i64(r, 0, 1);
    *expires_ms = pg_i64(r, 0, 2);
    rc = pg_str(r, 0, 0, holder);
  } else {
    rc = -ENOENT;
  }
  PQclear(r);
  return rc;
}
