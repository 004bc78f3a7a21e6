/* The SQLite backend: one file, WAL, one connection per store_t.
 *
 * Every statement is prepared once per connection and reset after each use,
 * so a steady state runs no SQL parser; resetting at once also ends each
 * implicit read transaction, which lets WAL checkpoints make progress.
 * Connections are opened SQLITE_OPEN_NOMUTEX because store.h already
 * promises that a store_t is used by one thread at a time.
 */
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "store/sqlite/internal.h"

/* Long enough for another process's group commit to finish, short enough
 * that a wedged writer shows up as an error rather than a hang. */
#define SQLITE_BUSY_MS 10000

/* Each entry brings the schema from version i to i + 1; entries are never
 * edited once released, only appended. */
static const char *const sqlite_migrations[] = {
    /* 1: jobs and meta. Row ids leave the store (events, logs) and must
     * never be reused, yet AUTOINCREMENT would write its sequence page in
     * every insert's commit (a quarter fewer single inserts per second), so
     * trimming records the highest id in meta instead (see SQ_INSERT). */
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY,"
    "  jobid TEXT NOT NULL,"
    "  project TEXT NOT NULL,"
    "  spider TEXT NOT NULL,"
    "  version TEXT,"
    "  args TEXT,"
    "  settings TEXT,"
    "  priority REAL NOT NULL DEFAULT 0,"
    "  state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 5),"
    "  node TEXT,"
    "  pid INTEGER NOT NULL DEFAULT 0,"
    "  pid_start INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  start_ms INTEGER NOT NULL DEFAULT 0,"
    "  end_ms INTEGER NOT NULL DEFAULT 0,"
    "  exit_code INTEGER NOT NULL DEFAULT -1,"
    "  term_signal INTEGER NOT NULL DEFAULT 0,"
    "  stats TEXT"
    ");"
    /* Partial indexes, one per question, so each state change rewrites
     * as few index pages as possible: a claim touches only jobs_pending and
     * jobs_running, a finish only jobs_running and jobs_ended, and the
     * claim walks jobs_pending in claim order without sorting. */
    "CREATE INDEX jobs_pending ON jobs(priority DESC, id) WHERE state = 0;"
    "CREATE INDEX jobs_running ON jobs(start_ms, id) WHERE state = 1;"
    /* The finished list and trimming, newest first, across final states. */
    "CREATE INDEX jobs_ended ON jobs(end_ms DESC, id DESC) WHERE state >= 2;"
    /* status.json and cancel.json. No state column: these two indexes are
     * never rewritten by a state change. */
    "CREATE INDEX jobs_jobid ON jobs(jobid, project);"
    /* No index on project alone: one more page in every insert's commit,
     * while a project's listing walks the small per-state indexes above. */
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;",
    /* 2: schedules, their runs, events, leases; jobs learn where they came
     * from (schedule, parent, retried attempt) and how to be robust. */
    "ALTER TABLE jobs ADD COLUMN schedule_id INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN parent_id INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN retry_of INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN max_retries INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN retry_backoff_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN not_before_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN heartbeat_ms INTEGER NOT NULL DEFAULT 0;"
    /* Partial: only jobs that came from a schedule or a parent pay for it. */
    "CREATE INDEX jobs_schedule ON jobs(schedule_id, id) WHERE schedule_id != 0;"
    "CREATE INDEX jobs_parent ON jobs(parent_id, id) WHERE parent_id != 0;"
    /* A claim skips jobs waiting out a retry delay from the index alone. */
    "DROP INDEX jobs_pending;"
    "CREATE INDEX jobs_pending ON jobs(priority DESC, id, not_before_ms) WHERE state = 0;"
    "CREATE TABLE schedules ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  name TEXT NOT NULL UNIQUE,"
    "  kind INTEGER NOT NULL,"
    "  expr TEXT,"
    "  interval_ms INTEGER NOT NULL DEFAULT 0,"
    "  once_ms INTEGER NOT NULL DEFAULT 0,"
    "  tz TEXT,"
    "  start_ms INTEGER NOT NULL DEFAULT 0,"
    "  end_ms INTEGER NOT NULL DEFAULT 0,"
    "  jitter_ms INTEGER NOT NULL DEFAULT 0,"
    "  overlap INTEGER NOT NULL DEFAULT 0,"
    "  missed INTEGER NOT NULL DEFAULT 0,"
    "  catchup_max INTEGER NOT NULL DEFAULT 1,"
    "  paused INTEGER NOT NULL DEFAULT 0,"
    "  project TEXT NOT NULL,"
    "  spider TEXT NOT NULL,"
    "  version TEXT,"
    "  args TEXT,"
    "  settings TEXT,"
    "  priority REAL NOT NULL DEFAULT 0,"
    "  timeout_ms INTEGER NOT NULL DEFAULT 0,"
    "  max_retries INTEGER NOT NULL DEFAULT 0,"
    "  retry_backoff_ms INTEGER NOT NULL DEFAULT 0,"
    "  webhooks TEXT,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  horizon_ms INTEGER NOT NULL DEFAULT 0,"
    "  refill_ms INTEGER NOT NULL DEFAULT 0,"
    "  last_due_ms INTEGER NOT NULL DEFAULT 0"
    ");"
    /* One row per due time of a schedule: the UNIQUE key is what makes a
     * due time fire once, whoever materialises it and however often. */
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY,"
    "  schedule_id INTEGER NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,"
    "  due_ms INTEGER NOT NULL,"
    "  fire_ms INTEGER NOT NULL,"
    "  state INTEGER NOT NULL DEFAULT 0,"
    "  job_id INTEGER NOT NULL DEFAULT 0,"
    "  done_ms INTEGER NOT NULL DEFAULT 0,"
    "  reason TEXT,"
    "  UNIQUE (schedule_id, due_ms)"
    ");"
    "CREATE INDEX runs_upcoming ON runs(fire_ms, id) WHERE state = 0;"
    "CREATE INDEX schedules_refill ON schedules(refill_ms) WHERE paused = 0;"
    /* No AUTOINCREMENT: its sequence row would be one more page in every
     * commit that appends an event (most do). Ids stay increasing because
     * pruning never deletes the newest event. */
    "CREATE TABLE events ("
    "  id INTEGER PRIMARY KEY,"
    "  ts_ms INTEGER NOT NULL,"
    "  type TEXT NOT NULL,"
    "  schedule_id INTEGER NOT NULL DEFAULT 0,"
    "  job_id INTEGER NOT NULL DEFAULT 0,"
    "  data TEXT"
    ");"
    "CREATE INDEX events_schedule ON events(schedule_id, id) WHERE schedule_id != 0;"
    "CREATE INDEX events_job ON events(job_id, id) WHERE job_id != 0;"
    "CREATE TABLE leases ("
    "  name TEXT PRIMARY KEY,"
    "  holder TEXT NOT NULL,"
    "  token INTEGER NOT NULL,"
    "  expires_ms INTEGER NOT NULL"
    ") WITHOUT ROWID;",
    /* 3: history retention (store_jobs_prune, store_events_prune). Without
     * these every prune would scan and sort whole tables on the writer.
     * Each costs one more b-tree page only in the write it concerns: a
     * job's end (partial: pending and running jobs never enter it), a
     * run's end. Events have none for age: their ids follow time.
     * jobs_history is a project/spider's history newest first; start_ms
     * and state make it covering (the planner counts a partial index as
     * covering only when it holds its condition's column too), so
     * pruning reads no table row and never sorts. */
    "CREATE INDEX jobs_history ON jobs(project, spider, end_ms DESC, id DESC, start_ms, state) "
    "WHERE state >= 2;"
    "CREATE INDEX runs_ended ON runs(done_ms) WHERE state != 0;",
    /* 4: task queues (sqlite/queue.c explains the layout) and unique jobs.
     * queue_items.state: 0 waiting and not yet due, 1 in flight, 2 dead,
     * 3 done, 4 waiting and due ("ready": it is in qi_ready). The element
     * is the last column so reading the others never touches its overflow
     * pages; uniqueness goes through its 64-bit hash (qi_hash), compared in
     * full on a hash match. */
    "CREATE TABLE queues ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  created_ms INTEGER NOT NULL,"
    "  paused INTEGER NOT NULL DEFAULT 0,"
    "  keep_done INTEGER NOT NULL DEFAULT 0,"
    "  visibility_ms INTEGER NOT NULL,"
    "  max_deliveries INTEGER NOT NULL,"
    "  backoff_ms INTEGER NOT NULL,"
    "  backoff_max_ms INTEGER NOT NULL,"
    "  max_inflight INTEGER NOT NULL DEFAULT 0,"
    "  key_mode INTEGER NOT NULL DEFAULT 0,"
    "  key_inflight INTEGER NOT NULL DEFAULT 0,"
    "  key_rate REAL NOT NULL DEFAULT 0,"
    "  key_burst REAL NOT NULL DEFAULT 1,"
    "  lease_seq INTEGER NOT NULL DEFAULT 0,"
    "  n_waiting INTEGER NOT NULL DEFAULT 0,"
    "  n_ready INTEGER NOT NULL DEFAULT 0,"
    "  n_inflight INTEGER NOT NULL DEFAULT 0,"
    "  n_dead INTEGER NOT NULL DEFAULT 0,"
    "  n_done INTEGER NOT NULL DEFAULT 0,"
    "  n_put INTEGER NOT NULL DEFAULT 0,"
    "  n_acked INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE TABLE queue_items ("
    "  id INTEGER PRIMARY KEY,"
    "  queue_id INTEGER NOT NULL,"
    "  hash INTEGER NOT NULL,"
    "  state INTEGER NOT NULL,"
    "  priority INTEGER NOT NULL,"
    "  due_ms INTEGER NOT NULL,"
    "  key TEXT NOT NULL,"
    "  deliveries INTEGER NOT NULL DEFAULT 0,"
    "  token INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  redue_ms INTEGER NOT NULL DEFAULT 0,"
    "  redue_pri INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT,"
    "  element BLOB NOT NULL"
    ");"
    "CREATE INDEX qi_hash ON queue_items(queue_id, hash);"
    "CREATE INDEX qi_time ON queue_items(queue_id, state, due_ms);"
    "CREATE INDEX qi_ready ON queue_items(queue_id, key, priority DESC, due_ms) WHERE state = 4;"
    "CREATE TABLE queue_keys ("
    "  queue_id INTEGER NOT NULL,"
    "  key TEXT NOT NULL,"
    "  n_ready INTEGER NOT NULL DEFAULT 0,"
    "  inflight INTEGER NOT NULL DEFAULT 0,"
    "  tokens REAL NOT NULL DEFAULT 0,"
    "  tokens_ms INTEGER NOT NULL DEFAULT 0,"
    "  block_ms INTEGER NOT NULL DEFAULT 0,"
    "  head_pri INTEGER NOT NULL DEFAULT 0,"
    "  head_due INTEGER NOT NULL DEFAULT 0,"
    "  open INTEGER NOT NULL DEFAULT 0,"
    "  wake_ms INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (queue_id, key)"
    ") WITHOUT ROWID;"
    "CREATE INDEX qk_open ON queue_keys(queue_id, head_pri DESC, head_due) WHERE open = 1;"
    "CREATE INDEX qk_wake ON queue_keys(queue_id, wake_ms) WHERE open = 0 AND wake_ms > 0;"
    /* The job tokens' secret (flow/jobtoken.h), made with the schema: the
     * migration runs once under the write lock, so nodes starting together
     * on one store cannot each make a different one. */
    "INSERT OR IGNORE INTO meta (key, value) "
    "VALUES ('auth.job_secret', lower(hex(randomblob(32))));"
    /* A unique_key names at most one pending or running job per project. */
    "ALTER TABLE jobs ADD COLUMN unique_key TEXT;"
    "CREATE UNIQUE INDEX jobs_unique ON jobs(project, unique_key) "
    "WHERE unique_key IS NOT NULL AND state < 2;",
    /* 5: nodes sharing the store (one, on SQLite: /api/v1/nodes shows it)
     * and cancel requests for a running job (cancel.json on a node that
     * does not run it). */
    "CREATE TABLE nodes ("
    "  name TEXT PRIMARY KEY,"
    "  url TEXT,"
    "  slots INTEGER NOT NULL DEFAULT 0,"
    "  running INTEGER NOT NULL DEFAULT 0,"
    "  started_ms INTEGER NOT NULL DEFAULT 0,"
    "  heartbeat_ms INTEGER NOT NULL DEFAULT 0,"
    "  dead INTEGER NOT NULL DEFAULT 0"
    ") WITHOUT ROWID;"
    "ALTER TABLE jobs ADD COLUMN cancel_ms INTEGER NOT NULL DEFAULT 0;",
    /* 6: each node's spiderd version, written with its beat, so a mixed
     * cluster shows which node runs what; rows from before stay NULL until
     * their node beats again. */
    "ALTER TABLE nodes ADD COLUMN version TEXT;",
    /* 7: users and API tokens (core/principal.h), in the store so every
     * node sharing it knows them. The key is the one a login or a token
     * looks up; a list walks it in order (users, then tokens, by name). */
    "CREATE TABLE principals ("
    "  kind INTEGER NOT NULL,"
    "  name TEXT NOT NULL,"
    "  label TEXT NOT NULL DEFAULT '',"
    "  secret TEXT NOT NULL DEFAULT '',"
    "  owner TEXT NOT NULL DEFAULT '',"
    "  role INTEGER NOT NULL,"
    "  projects TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL DEFAULT 0,"
    "  expires_ms INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (kind, name)"
    ") WITHOUT ROWID;",
    /* 8: a node draining (spiderd drain, or a SIGTERM's drain) says so with
     * its beat, so the cluster and /api/v1/nodes see it takes no jobs. */
    "ALTER TABLE nodes ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;",
    /* 9: a schedule's state, handed from one run to the next (the
     * Sneakpeek face's scraper state); NULL until a crawl or a user sets it. */
    "ALTER TABLE schedules ADD COLUMN state TEXT;",
    /* 10: a job's own fields (jobs.meta), and what a review of its history
     * changed: the state it ended in before a correction, and a note. */
    "ALTER TABLE jobs ADD COLUMN meta TEXT;"
    "ALTER TABLE jobs ADD COLUMN original_state INTEGER;"
    "ALTER TABLE jobs ADD COLUMN note TEXT;",
    /* 11: test runs (jobs.test_run), kept out of statistics and of their
     * schedule's history; a schedule's meta, copied into its jobs'. */
    "ALTER TABLE jobs ADD COLUMN test INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE schedules ADD COLUMN meta TEXT;",
    /* 12: a job's health beside the runs like it, with its reasons; a node's
     * memory for crawls, published with its beat. */
    "ALTER TABLE jobs ADD COLUMN health TEXT;"
    "ALTER TABLE jobs ADD COLUMN health_reasons TEXT;"
    "ALTER TABLE nodes ADD COLUMN mem_free INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE nodes ADD COLUMN mem_reserved INTEGER NOT NULL DEFAULT 0;",
    /* 13: a job may be paused (state 6) and resumed: the state's CHECK is
     * widened in place, as SQLite's documentation allows for a constraint
     * that every row already meets (the ALTER that follows reloads the
     * schema on every connection); and the runs of its process, one
     * segment each. */
    "PRAGMA writable_schema = ON;"
    "UPDATE sqlite_schema SET sql = replace(sql, 'CHECK (state BETWEEN 0 AND 5)', "
    "'CHECK (state BETWEEN 0 AND 6)') WHERE type = 'table' AND name = 'jobs';"
    "PRAGMA writable_schema = OFF;"
    "ALTER TABLE jobs ADD COLUMN segments TEXT;"
    "CREATE INDEX IF NOT EXISTS jobs_paused ON jobs(id) WHERE state = 6;",
    /* A job may wait for others to end (jobs.create's after): their ids,
     * and the few pending jobs that wait, indexed for each end's look. */
    "ALTER TABLE jobs ADD COLUMN \"after\" TEXT;"
    "CREATE INDEX IF NOT EXISTS jobs_waiting ON jobs(id) "
    "WHERE state = 0 AND \"after\" IS NOT NULL;",
};

#define SQLITE_SCHEMA_VERSION \
  ((int)(sizeof(sqlite_migrations) / sizeof(sqlite_migrations[0])))


enum sqlite_stmt_id {
  SQ_BEGIN,
  SQ_COMMIT,
  SQ_ROLLBACK,
  SQ_SAVEPOINT,
  SQ_RELEASE,
  SQ_ROLLBACK_TO,
  SQ_META_GET,
  SQ_META_SET,
  SQ_COUNT
};

static const char *const sqlite_sql[SQ_COUNT] = {
    [SQ_BEGIN] = "BEGIN IMMEDIATE",
    [SQ_COMMIT] = "COMMIT",
    [SQ_ROLLBACK] = "ROLLBACK",
    [SQ_SAVEPOINT] = "SAVEPOINT sp",
    [SQ_RELEASE] = "RELEASE sp",
    [SQ_ROLLBACK_TO] = "ROLLBACK TO sp",
    [SQ_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [SQ_META_SET] =
        "INSERT INTO meta (key, value) VALUES (?1, ?2) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
};


int sqlite_fail(struct sqlite_store *q, const char *what) {
  int code = sqlite3_extended_errcode(q->db);
  log_error("store", "sqlite %s: %s (%d)", what, sqlite3_errmsg(q->db), code);
  /* A full disk is the operator's to fix, not a fault of the store: it
   * says so (-ENOSPC: HTTP 507) rather than "store failure". */
  if ((code & 0xff) == SQLITE_FULL ||
      ((code & 0xff) == SQLITE_IOERR && sqlite3_system_errno(q->db) == ENOSPC))
    return -ENOSPC;
  return SPD_ESTORE;
}

sqlite3_stmt *sqlite_prepare_slot(struct sqlite_store *q, sqlite3_stmt **slot,
                                  const char *sql) {
  if (!*slot &&
      sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) !=
          SQLITE_OK) {
    sqlite_fail(q, "prepare");
    *slot = NULL;
  }
  return *slot;
}

static sqlite3_stmt *sqlite_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->stmt[id], sqlite_sql[id]);
}

/* Steps a statement that returns no rows and resets it. */
int sqlite_done(struct sqlite_store *q, sqlite3_stmt *st, const char *what) {
  int src = sqlite3_step(st);
  int rc = (src == SQLITE_DONE || src == SQLITE_ROW) ? 0 : sqlite_fail(q, what);
  sqlite3_reset(st);
  return rc;
}

int sqlite_each_row(struct sqlite_store *q, sqlite3_stmt *st,
                    int (*row)(sqlite3_stmt *st, void *ud), void *ud, const char *what) {
  int rc = 0, src;
  while (!rc && (src = sqlite3_step(st)) == SQLITE_ROW) rc = row(st, ud);
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, what);
  sqlite3_reset(st);
  return rc;
}

static int sqlite_run(struct sqlite_store *q, int id) {
  sqlite3_stmt *st = sqlite_stmt(q, id);
  if (!st) return SPD_ESTORE;
  return sqlite_done(q, st, sqlite_sql[id]);
}

/* ---- transactions ---- */

/* SQLite rolls a whole transaction back by itself after some errors
 * (SQLITE_FULL, SQLITE_IOERR, ...); afterwards every savepoint is gone. */
static int sqlite_tx_lost(struct sqlite_store *q) {
  if (q->in_tx && sqlite3_get_autocommit(q->db)) {
    log_error("store", "sqlite transaction was rolled back by an earlier error");
    q->in_tx = 0;
    q->sp_depth = 0;
    return 1;
  }
  return 0;
}

int sqlite_tx_begin(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (q->in_tx) return -EINVAL;
  int rc = sqlite_run(q, SQ_BEGIN);
  if (rc) return rc;
  q->in_tx = 1;
  q->sp_depth = 0;
  return 0;
}

int sqlite_tx_rollback(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (!q->in_tx) return -EINVAL;
  int rc = sqlite3_get_autocommit(q->db) ? 0 : sqlite_run(q, SQ_ROLLBACK);
  q->in_tx = 0;
  q->sp_depth = 0;
  return rc;
}

int sqlite_tx_commit(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (!q->in_tx) return -EINVAL;
  if (sqlite_tx_lost(q)) return SPD_ESTORE;
  int rc = sqlite_run(q, SQ_COMMIT);
  /* A failed COMMIT can leave the transaction open; end it so the
   * connection is usable again and the caller's view (failed) holds. */
  if (rc && !sqlite3_get_autocommit(q->db)) sqlite_run(q, SQ_ROLLBACK);
  q->in_tx = 0;
  q->sp_depth = 0;
  return rc;
}

int sqlite_sp_begin(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (!q->in_tx) return -EINVAL;
  if (sqlite_tx_lost(q)) return SPD_ESTORE;
  int rc = sqlite_run(q, SQ_SAVEPOINT);
  if (!rc) q->sp_depth++;
  return rc;
}

int sqlite_sp_release(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (!q->in_tx || q->sp_depth == 0) return -EINVAL;
  if (sqlite_tx_lost(q)) return SPD_ESTORE;
  int rc = sqlite_run(q, SQ_RELEASE);
  if (!rc) q->sp_depth--;
  return rc;
}

int sqlite_sp_rollback(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (!q->in_tx || q->sp_depth == 0) return -EINVAL;
  if (sqlite_tx_lost(q)) return SPD_ESTORE;
  int rc = sqlite_run(q, SQ_ROLLBACK_TO);
  if (!rc) rc = sqlite_run(q, SQ_RELEASE);
  if (!rc) q->sp_depth--;
  return rc;
}

/* Operations of several statements are one transaction of their own unless
 * the caller already opened one. */
int sqlite_auto_begin(struct sqlite_store *q, int *began) {
  *began = 0;
  if (q->in_tx) return 0;
  int rc = sqlite_run(q, SQ_BEGIN);
  if (!rc) *began = 1;
  return rc;
}

int sqlite_auto_end(struct sqlite_store *q, int began, int rc) {
  if (!began) return rc;
  if (rc) {
    if (!sqlite3_get_autocommit(q->db)) sqlite_run(q, SQ_ROLLBACK);
    return rc;
  }
  rc = sqlite_run(q, SQ_COMMIT);
  if (rc && !sqlite3_get_autocommit(q->db)) sqlite_run(q, SQ_ROLLBACK);
  return rc;
}

/* ---- binding and reading rows ---- */

int sqlite_bind_str(sqlite3_stmt *st, int i, const char *v) {
  return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

/* The dump is handed to SQLite, which frees it when the binding is
 * replaced or the statement finalized. */
int sqlite_bind_json(sqlite3_stmt *st, int i, const json_t *v) {
  if (!v) return sqlite3_bind_null(st, i);
  char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!text) return SQLITE_NOMEM;
  return sqlite3_bind_text(st, i, text, -1, free);
}

int sqlite_col_str(sqlite3_stmt *st, int i, char **out) {
  const unsigned char *v = sqlite3_column_text(st, i);
  *out = NULL;
  if (!v) return 0;
  *out = strdup((const char *)v);
  return *out ? 0 : -ENOMEM;
}

int sqlite_col_json(sqlite3_stmt *st, int i, json_t **out) {
  const char *v = (const char *)sqlite3_column_text(st, i);
  json_error_t jerr;
  *out = NULL;
  if (!v) return 0;
  *out = json_loads(v, JSON_DECODE_ANY, &jerr);
  if (!*out) {
    log_error("store", "sqlite: row %lld has a bad JSON column %d: %s",
              (long long)sqlite3_column_int64(st, 0), i, jerr.text);
    return SPD_ESTORE;
  }
  return 0;
}


int64_t sqlite_clamp(size_t v) {
  return v > (size_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

int sqlite_changed(struct sqlite_store *q, int rc) {
  if (rc) return rc;
  return sqlite3_changes(q->db) ? 0 : -ENOENT;
}

/* ---- meta ---- */

int sqlite_meta_get(store_t *s, const char *key, char **value) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sqlite_stmt(q, SQ_META_GET);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, key);
  int rc, src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    rc = sqlite_col_str(st, 0, value);
  else
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "get meta");
  sqlite3_reset(st);
  return rc;
}

int sqlite_meta_set(store_t *s, const char *key, const char *value) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sqlite_stmt(q, SQ_META_SET);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, key);
  sqlite_bind_str(st, 2, value);
  return sqlite_done(q, st, "set meta");
}

/* ---- open, schema, close ---- */

/* store.h promises the directory's missing last component is created, so
 * "dbs/jobs.db" works on a fresh install without creating arbitrary trees
 * from a typo. */
static int sqlite_mkdir_parent(const char *path, char *err, size_t errlen) {
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return 0;
  char *dir = strndup(path, (size_t)(slash - path));
  if (!dir) return -ENOMEM;
  int rc = 0;
  if (mkdir(dir, 0755) && errno != EEXIST) {
    rc = -errno;
    snprintf(err, errlen, "cannot create directory %s: %s", dir, strerror(errno));
  }
  free(dir);
  return rc;
}

static int sqlite_exec(struct sqlite_store *q, const char *sql, char *err,
                       size_t errlen) {
  char *msg = NULL;
  if (sqlite3_exec(q->db, sql, NULL, NULL, &msg) == SQLITE_OK) return 0;
  snprintf(err, errlen, "sqlite: %s", msg ? msg : sqlite3_errmsg(q->db));
  log_error("store", "sqlite: %s: %s", sql, msg ? msg : sqlite3_errmsg(q->db));
  sqlite3_free(msg);
  return SPD_ESTORE;
}

static int sqlite_user_version(struct sqlite_store *q, int *v, char *err,
                               size_t errlen) {
  sqlite3_stmt *st = NULL;
  int rc = SPD_ESTORE;
  if (sqlite3_prepare_v2(q->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    *v = sqlite3_column_int(st, 0);
    rc = 0;
  } else {
    snprintf(err, errlen, "sqlite: cannot read the schema version: %s",
             sqlite3_errmsg(q->db));
  }
  sqlite3_finalize(st);
  return rc;
}

/* The schema version is PRAGMA user_version, read again under BEGIN
 * IMMEDIATE so two processes opening a new file at once migrate it once:
 * the second waits for the first's write lock, then finds nothing to do. */
static int sqlite_migrate(struct sqlite_store *q, char *err, size_t errlen) {
  int v = 0, rc = sqlite_user_version(q, &v, err, errlen);
  if (rc || v == SQLITE_SCHEMA_VERSION) return rc;
  if (v < SQLITE_SCHEMA_VERSION) {
    if ((rc = sqlite_exec(q, "BEGIN IMMEDIATE", err, errlen))) return rc;
    if ((rc = sqlite_user_version(q, &v, err, errlen))) goto out;
    for (int i = v; i < SQLITE_SCHEMA_VERSION; i++)
      if ((rc = sqlite_exec(q, sqlite_migrations[i], err, errlen))) goto out;
    if (v < SQLITE_SCHEMA_VERSION) {
      char sql[48];
      snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", SQLITE_SCHEMA_VERSION);
      if ((rc = sqlite_exec(q, sql, err, errlen))) goto out;
    }
    if ((rc = sqlite_exec(q, "COMMIT", err, errlen))) goto out;
    if (v < SQLITE_SCHEMA_VERSION)
      log_info("store", "sqlite schema migrated from version %d to %d", v,
               SQLITE_SCHEMA_VERSION);
  }
  if (v > SQLITE_SCHEMA_VERSION) {
    snprintf(err, errlen,
             "the database's schema version %d is newer than this build's (%d)", v,
             SQLITE_SCHEMA_VERSION);
    rc = SPD_ESTORE;
  }
out:
  if (rc && !sqlite3_get_autocommit(q->db))
    sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/* Switching a new file to WAL needs a moment of exclusive access; when
 * another process holds it, SQLite may answer BUSY without calling the busy
 * handler, so retry here for as long as the busy timeout. */
static int sqlite_wal(struct sqlite_store *q, char *err, size_t errlen) {
  for (int waited = 0;; waited += 10) {
    sqlite3_stmt *st = NULL;
    int src = sqlite3_prepare_v2(q->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
    if (src == SQLITE_OK) src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
      const char *mode = (const char *)sqlite3_column_text(st, 0);
      int ok = mode && (strcmp(mode, "wal") == 0 || strcmp(mode, "memory") == 0);
      if (!ok)
        snprintf(err, errlen, "sqlite: cannot use WAL mode (journal mode is %s)",
                 mode ? mode : "unknown");
      sqlite3_finalize(st);
      return ok ? 0 : SPD_ESTORE;
    }
    sqlite3_finalize(st);
    if ((src & 0xff) != SQLITE_BUSY && (src & 0xff) != SQLITE_LOCKED) break;
    if (waited >= SQLITE_BUSY_MS) break;
    sqlite3_sleep(10);
  }
  snprintf(err, errlen, "sqlite: cannot switch to WAL mode: %s", sqlite3_errmsg(q->db));
  return SPD_ESTORE;
}

static void sqlite_close(store_t *s) {
  struct sqlite_store *q = SQ(s);
  if (!q) return;
  for (int i = 0; q->stmt && i < SQ_COUNT; i++) sqlite3_finalize(q->stmt[i]);
  free(q->stmt);
  /* Each file's statements, prepared on first use (NULL until then). */
  sqlite3_stmt **slots[] = {q->jobs_stmt, q->sched_stmt, q->janitor_stmt, q->queue_stmt,
                            q->nodes_stmt, q->auth_stmt};
  size_t nslots[] = {SQLITE_JOBS_SLOTS, SQLITE_SCHED_SLOTS, SQLITE_JANITOR_SLOTS,
                     SQLITE_QUEUE_SLOTS, SQLITE_NODES_SLOTS, SQLITE_AUTH_SLOTS};
  for (size_t f = 0; f < sizeof(slots) / sizeof(slots[0]); f++)
    for (size_t i = 0; i < nslots[f]; i++) sqlite3_finalize(slots[f][i]);
  if (q->list_stmt) {
    for (unsigned i = 0; i < SQLITE_LIST_SHAPES; i++) sqlite3_finalize(q->list_stmt[i]);
    free(q->list_stmt);
  }
  if (q->db && sqlite3_close(q->db) != SQLITE_OK)
    log_error("store", "sqlite close: %s", sqlite3_errmsg(q->db));
  free(q);
}

static int sqlite_open(const char *url, const char *path, store_t **out, char *err,
                       size_t errlen) {
  struct sqlite_store *q = NULL;
  int rc;
  if (!*path) {
    snprintf(err, errlen, "store URL %s names no file", url);
    return -EINVAL;
  }
  if (!sqlite3_threadsafe()) {
    snprintf(err, errlen, "this SQLite library was built without thread support");
    return SPD_ESTORE;
  }
  if ((rc = sqlite_mkdir_parent(path, err, errlen))) return rc;
  q = calloc(1, sizeof(*q));
  if (!q) return -ENOMEM;
  q->base.ops = &store_sqlite_ops;
  if (!(q->stmt = calloc(SQ_COUNT, sizeof(*q->stmt)))) {
    free(q);
    return -ENOMEM;
  }
  int src = sqlite3_open_v2(path, &q->db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                SQLITE_OPEN_NOMUTEX,
                            NULL);
  if (src != SQLITE_OK) {
    snprintf(err, errlen, "cannot open %s: %s", path,
             q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(src));
    rc = SPD_ESTORE;
    goto out;
  }
  sqlite3_extended_result_codes(q->db, 1);
  sqlite3_busy_timeout(q->db, SQLITE_BUSY_MS);
  if ((rc = sqlite_wal(q, err, errlen))) goto out;
  /* With synchronous=NORMAL the only fsyncs are a checkpoint's, and the
   * checkpoint runs inside whichever commit crosses the threshold; 10000
   * pages (~40 MB of WAL) instead of SQLite's 1000 makes that ten times
   * rarer and measurably raises single-commit throughput, while hot pages
   * rewritten by every commit are still copied once per checkpoint.
   * journal_size_limit keeps a burst from leaving a huge WAL behind.
   * A 16 MB page cache (SQLite's default is 2 MB) keeps the inner pages of
   * a large queue's uniqueness index (qi_hash, in hash order) resident:
   * puts into a queue of 3 million elements ran 10% faster with it. It
   * fills only as pages are used, so an idle daemon stays small. */
  rc = sqlite_exec(q,
                   "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; "
                   "PRAGMA wal_autocheckpoint = 10000; PRAGMA cache_size = -16384; "
                   "PRAGMA journal_size_limit = 67108864",
                   err, errlen);
  if (rc) goto out;
  if ((rc = sqlite_migrate(q, err, errlen))) goto out;
  *out = &q->base;
out:
  if (rc) {
    log_error("store", "open %s: %s", url, err);
    sqlite_close(&q->base);
  }
  return rc;
}

const struct store_ops store_sqlite_ops = {
    .name = "sqlite",
    .open = sqlite_open,
    .close = sqlite_close,
    .watch_open = sqlite_watch_open,
#define STORE_OP(op, params) .op = sqlite_##op,
#include "store/ops.h"
};
