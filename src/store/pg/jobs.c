/* The PostgreSQL backend's jobs, nodes, cancel requests, eggs and history
 * retention (store/pg/internal.h): the same contracts as sqlite.c, sqlite/nodes.c and
 * sqlite/janitor.c, for several nodes sharing one database.
 *
 * What several connections at once change, and how it stays right:
 *  - claims lock the rows they take (FOR UPDATE SKIP LOCKED), so two nodes
 *    never take one job and neither waits for the other;
 *  - unique keys are a partial unique index; an insert that would break it
 *    does nothing (ON CONFLICT DO NOTHING, never a failed statement, which
 *    would abort the caller's transaction) and then names the holder;
 *  - reaping marks nodes dead with an UPDATE (row locks), then ends their
 *    running jobs in the same transaction, so two reapers never report one
 *    job twice: the second waits for the first, then finds nothing.
 * Ids come from an identity sequence: never reused, whatever is deleted. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "store/pg/internal.h"

/* Text columns are COLLATE "C": byte order, as SQLite's BINARY, so listings
 * by name come out in the same order on both backends (and comparisons skip
 * the locale). */
const char pg_schema_jobs[] =
    "CREATE TABLE jobs ("
    "  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  jobid TEXT COLLATE \"C\" NOT NULL,"
    "  project TEXT COLLATE \"C\" NOT NULL,"
    "  spider TEXT COLLATE \"C\" NOT NULL,"
    "  version TEXT,"
    "  args TEXT,"
    "  settings TEXT,"
    "  priority DOUBLE PRECISION NOT NULL DEFAULT 0,"
    "  state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 5),"
    "  node TEXT COLLATE \"C\","
    "  pid INTEGER NOT NULL DEFAULT 0,"
    "  pid_start BIGINT NOT NULL DEFAULT 0,"
    "  created_ms BIGINT NOT NULL,"
    "  start_ms BIGINT NOT NULL DEFAULT 0,"
    "  end_ms BIGINT NOT NULL DEFAULT 0,"
    "  exit_code INTEGER NOT NULL DEFAULT -1,"
    "  term_signal INTEGER NOT NULL DEFAULT 0,"
    "  stats TEXT,"
    "  schedule_id BIGINT NOT NULL DEFAULT 0,"
    "  parent_id BIGINT NOT NULL DEFAULT 0,"
    "  retry_of BIGINT NOT NULL DEFAULT 0,"
    "  attempt INTEGER NOT NULL DEFAULT 1,"
    "  max_retries INTEGER NOT NULL DEFAULT 0,"
    "  retry_backoff_ms BIGINT NOT NULL DEFAULT 0,"
    "  timeout_ms BIGINT NOT NULL DEFAULT 0,"
    "  not_before_ms BIGINT NOT NULL DEFAULT 0,"
    "  heartbeat_ms BIGINT NOT NULL DEFAULT 0,"
    "  unique_key TEXT COLLATE \"C\","
    "  cancel_ms BIGINT NOT NULL DEFAULT 0"
    ")"
    /* jobs is a hot queue: every job is updated several times (claim,
     * pid, heartbeats, end) and most rows end up deleted. Heartbeats, pids
     * and cancel requests change no indexed column, so with 30% free space
     * per page they are HOT updates: the new version stays in the page and
     * no index is touched. Autovacuum runs after 1% of the table changed
     * (not 20%) and without cost sleeps, so dead versions are reclaimed
     * before they bloat the table and its partial indexes, and inserts
     * alone (a queue filling up) also trigger it, keeping the visibility
     * map fresh for index-only scans. */
    " WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01,"
    " autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02,"
    " autovacuum_vacuum_cost_delay = 0);"
    /* Partial indexes, one per question, as in SQLite: a claim touches only
     * jobs_pending and jobs_running, a finish jobs_running and the ended
     * ones; a claim walks jobs_pending in claim order and tests
     * not_before_ms inside the index. */
    "CREATE INDEX jobs_pending ON jobs (priority DESC, id, not_before_ms) WHERE state = 0;"
    "CREATE INDEX jobs_running ON jobs (start_ms, id) WHERE state = 1;"
    "CREATE INDEX jobs_ended ON jobs (end_ms DESC, id DESC) WHERE state >= 2;"
    /* status.json and cancel.json; no state column, so no state change
     * rewrites it. */
    "CREATE INDEX jobs_jobid ON jobs (jobid, project);"
    "CREATE INDEX jobs_schedule ON jobs (schedule_id, id) WHERE schedule_id <> 0;"
    "CREATE INDEX jobs_parent ON jobs (parent_id, id) WHERE parent_id <> 0;"
    /* History retention and a project's ended counts: a project/spider's
     * history newest first. */
    "CREATE INDEX jobs_history ON jobs (project, spider, end_ms DESC, id DESC) "
    "INCLUDE (start_ms, state) WHERE state >= 2;"
    /* A unique_key names at most one pending or running job per project. */
    "CREATE UNIQUE INDEX jobs_unique ON jobs (project, unique_key) "
    "WHERE unique_key IS NOT NULL AND state < 2;"
    "CREATE TABLE nodes ("
    "  name TEXT COLLATE \"C\" PRIMARY KEY,"
    "  url TEXT,"
    "  slots INTEGER NOT NULL DEFAULT 0,"
    "  running INTEGER NOT NULL DEFAULT 0,"
    "  started_ms BIGINT NOT NULL DEFAULT 0,"
    "  heartbeat_ms BIGINT NOT NULL DEFAULT 0,"
    "  dead INTEGER NOT NULL DEFAULT 0"
    ");"
    "CREATE TABLE eggs ("
    "  project TEXT COLLATE \"C\" NOT NULL,"
    "  version TEXT COLLATE \"C\" NOT NULL,"
    "  data BYTEA NOT NULL,"
    "  size BIGINT NOT NULL,"
    "  created_ms BIGINT NOT NULL,"
    "  PRIMARY KEY (project, version)"
    ");"
    /* Eggs are zip files: compressing them again wastes the writer's CPU. */
    "ALTER TABLE eggs ALTER COLUMN data SET STORAGE EXTERNAL;";

/* Prepared statement slots (store/pg/internal.h: this file owns 32..127). */
enum {
  PJ_INSERT = PG_SLOT_JOBS,
  PJ_UNIQUE_HELD,
  PJ_CLAIM,
  PJ_STARTED,
  PJ_REQUEUE,
  PJ_FINISH,
  PJ_CANCEL,
  PJ_GET,
  PJ_STATUS,
  PJ_COUNTS,
  PJ_COUNTS_PROJECT,
  PJ_COUNTS_SINCE,
  PJ_THROUGHPUT,
  PJ_TRIM,
  PJ_HEARTBEAT,
  PJ_NEXT_DUE,
  PJ_SET_META,
  PJ_SET_HISTORY,
  PJ_PRUNE_PAIR,
  PJ_PRUNE_DELETE,
  PN_BEAT_DEAD,
  PN_BEAT,
  PN_LIST,
  PN_REAP_NODES,
  PN_REAP_JOBS,
  PN_CANCEL_REQ,
  PN_CANCEL_LIST,
  PE_PUT,
  PE_GET,
  PE_LIST,
  PE_DELETE_ONE,
  PE_DELETE_ALL,
  PJ_STATS,
  PJ_SET_HEALTH,
  PJ_SET_SEGMENTS,
  PJ_RESUME,
  PJ_WAITING,
  PJ_WAKE,
  PJ_LOCK_AFTER,
  PE_STATE_PUT,
  PE_STATE_GET,
  PE_STATE_DELETE,
  /* The job list's common shapes (see pg_list_slot). */
  PJ_LIST,
  PJ_LIST_END = PJ_LIST + 32,
};

_Static_assert(PJ_LIST_END <= PG_SLOT_SCHED, "pg/jobs.c's slots overflow its range");

#define PG_JOB_COLS                                                          \
  "id, jobid, project, spider, version, args, settings, priority, state, " \
  "node, pid, pid_start, created_ms, start_ms, end_ms, exit_code, "        \
  "term_signal, stats, schedule_id, parent_id, retry_of, attempt, "        \
  "max_retries, retry_backoff_ms, timeout_ms, not_before_ms, heartbeat_ms, " \
  "unique_key, meta, original_state, note, test, health, health_reasons, segments, cancel_ms, " \
  "\"after\""

/* ---- reading rows ---- */

/* Reads row `row` of PG_JOB_COLS into j (initialised here). */
static int pg_row_job(const PGresult *r, int row, job_t *j) {
  int rc;
  job_init(j);
  j->id = pg_i64(r, row, 0);
  if ((rc = pg_str(r, row, 1, &j->jobid))) goto out;
  if ((rc = pg_str(r, row, 2, &j->project))) goto out;
  if ((rc = pg_str(r, row, 3, &j->spider))) goto out;
  if ((rc = pg_str(r, row, 4, &j->version))) goto out;
  if ((rc = pg_json(r, row, 5, &j->args))) goto out;
  if ((rc = pg_json(r, row, 6, &j->settings))) goto out;
  j->priority = pg_dbl(r, row, 7);
  j->state = (job_state_t)pg_i64(r, row, 8);
  if ((rc = pg_str(r, row, 9, &j->node))) goto out;
  j->pid = (int)pg_i64(r, row, 10);
  j->pid_start = pg_i64(r, row, 11);
  j->created_ms = pg_i64(r, row, 12);
  j->start_ms = pg_i64(r, row, 13);
  j->end_ms = pg_i64(r, row, 14);
  j->exit_code = (int)pg_i64(r, row, 15);
  j->term_signal = (int)pg_i64(r, row, 16);
  if ((rc = pg_json(r, row, 17, &j->stats))) goto out;
  j->schedule_id = pg_i64(r, row, 18);
  j->parent_id = pg_i64(r, row, 19);
  j->retry_of = pg_i64(r, row, 20);
  j->attempt = (int)pg_i64(r, row, 21);
  j->max_retries = (int)pg_i64(r, row, 22);
  j->retry_backoff_ms = pg_i64(r, row, 23);
  j->timeout_ms = pg_i64(r, row, 24);
  j->not_before_ms = pg_i64(r, row, 25);
  j->heartbeat_ms = pg_i64(r, row, 26);
  if ((rc = pg_str(r, row, 27, &j->unique_key))) goto out;
  if ((rc = pg_json(r, row, 28, &j->meta))) goto out;
  j->corrected = !PQgetisnull(r, row, 29);
  j->original_state = (job_state_t)pg_i64(r, row, 29);
  if ((rc = pg_str(r, row, 30, &j->note))) goto out;
  j->test = (int)pg_i64(r, row, 31);
  if ((rc = pg_str(r, row, 32, &j->health))) goto out;
  if ((rc = pg_json(r, row, 33, &j->health_reasons))) goto out;
  if ((rc = pg_json(r, row, 34, &j->segments))) goto out;
  j->cancel_ms = pg_i64(r, row, 35);
  if ((rc = pg_json(r, row, 36, &j->after))) goto out;
out:
  if (rc) {
    if (rc == SPD_ESTORE)
      log_error("store", "PostgreSQL: job %lld has a bad JSON column", (long long)j->id);
    job_release(j);
  }
  return rc;
}

static void pg_jobs_free(job_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) job_release(&v[i]);
  free(v);
}

/* Every row of r as jobs (*v malloc'd, NULL when none). */
static int pg_read_jobs(const PGresult *r, job_t **v, size_t *n) {
  int rows = PQntuples(r);
  *v = NULL;
  *n = 0;
  if (rows <= 0) return 0;
  job_t *jobs = calloc((size_t)rows, sizeof(*jobs));
  if (!jobs) return -ENOMEM;
  for (int i = 0; i < rows; i++) {
    int rc = pg_row_job(r, i, &jobs[i]);
    if (rc) {
      pg_jobs_free(jobs, (size_t)i);
      return rc;
    }
  }
  *v = jobs;
  *n = (size_t)rows;
  return 0;
}

static int pg_cmp_claimed(const void *a, const void *b) {
  const job_t *x = a, *y = b;
  if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int pg_cmp_id(const void *a, const void *b) {
  const job_t *x = a, *y = b;
  return (x->id > y->id) - (x->id < y->id);
}

/* Appends r's rows to out (sorted by cmp when not NULL); clears r. */
static int pg_append_jobs(PGresult *r, job_list_t *out,
                          int (*cmp)(const void *, const void *)) {
  job_t *v;
  size_t n;
  int rc = pg_read_jobs(r, &v, &n);
  PQclear(r);
  if (rc) return rc;
  if (cmp && n > 1) qsort(v, n, sizeof(*v), cmp);
  rc = job_list_append(out, v, n);
  pg_jobs_free(v, n);
  return rc;
}

/* Runs a statement returning PG_JOB_COLS rows and appends them to out. */
static int pg_jobs_query(struct pg_store *q, int slot, const char *sql, pg_params_t *p,
                         job_list_t *out, int (*cmp)(const void *, const void *),
                         const char *what) {
  int rc;
  PGresult *r = pg_run(q, slot, sql, p, 0, &rc, what);
  if (!r) return rc;
  return pg_append_jobs(r, out, cmp);
}

static int64_t pg_clamp(size_t v) { return v > (size_t)INT64_MAX ? INT64_MAX : (int64_t)v; }

/* The number of rows a command changed. */
static int pg_changes(const PGresult *r) { return (int)strtol(PQcmdTuples((PGresult *)r), NULL, 10); }

/* ---- jobs ---- */

/* A job that waits for others holds their rows (FOR SHARE) until its
 * transaction ends: an end of one of them (an UPDATE) waits for the new
 * row to commit, so that end's look for waiting jobs sees it; or the end
 * committed first, and the creation's read of its state sees it ended.
 * Without the lock, each could miss the other under READ COMMITTED and
 * the job would wait forever. */
static int pg_lock_after(struct pg_store *q, const json_t *after) {
  pg_params_t p = {0};
  int rc;
  pg_p_json(&p, after);
  PGresult *r = pg_run(q, PJ_LOCK_AFTER,
                       "SELECT id FROM jobs WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)"
                       "::bigint) ORDER BY id FOR SHARE",
                       &p, 0, &rc, "lock upstream jobs");
  if (!r) return rc;
  PQclear(r);
  return 0;
}

int pg_job_insert(store_t *s, job_t *j) {
  struct pg_store *q = PGQ(s);
  if (j->after) {
    int rc = pg_lock_after(q, j->after);
    if (rc) return rc;
  }
  int64_t created = j->created_ms ? j->created_ms : clock_wall_ms();
  /* Final states are outside jobs_unique: only a live job takes its key. */
  int keyed = j->unique_key && j->state < JOB_FINISHED;
  /* A refused insert reads the holder; should the holder end in between,
   * the key is free and the insert is tried again. */
  for (int attempt = 0; attempt < 100; attempt++) {
    pg_params_t p = {0};
    pg_p_str(&p, j->jobid);
    pg_p_str(&p, j->project);
    pg_p_str(&p, j->spider);
    pg_p_str(&p, j->version);
    pg_p_json(&p, j->args);
    pg_p_json(&p, j->settings);
    pg_p_dbl(&p, j->priority);
    pg_p_i64(&p, (int64_t)j->state);
    pg_p_str(&p, j->node);
    pg_p_i64(&p, j->pid);
    pg_p_i64(&p, j->pid_start);
    pg_p_i64(&p, created);
    pg_p_i64(&p, j->start_ms);
    pg_p_i64(&p, j->end_ms);
    pg_p_i64(&p, j->exit_code);
    pg_p_i64(&p, j->term_signal);
    pg_p_json(&p, j->stats);
    pg_p_i64(&p, j->schedule_id);
    pg_p_i64(&p, j->parent_id);
    pg_p_i64(&p, j->retry_of);
    pg_p_i64(&p, j->attempt > 0 ? j->attempt : 1);
    pg_p_i64(&p, j->max_retries);
    pg_p_i64(&p, j->retry_backoff_ms);
    pg_p_i64(&p, j->timeout_ms);
    pg_p_i64(&p, j->not_before_ms);
    pg_p_i64(&p, j->heartbeat_ms);
    pg_p_str(&p, j->unique_key);
    pg_p_json(&p, j->meta);
    pg_p_i64(&p, j->test ? 1 : 0);
    pg_p_json(&p, j->after);
    int rc;
    PGresult *r = pg_run(
        q, PJ_INSERT,
        "INSERT INTO jobs (jobid, project, spider, version, args, settings, "
        "priority, state, node, pid, pid_start, created_ms, start_ms, end_ms, "
        "exit_code, term_signal, stats, schedule_id, parent_id, retry_of, attempt, "
        "max_retries, retry_backoff_ms, timeout_ms, not_before_ms, heartbeat_ms, "
        "unique_key, meta, test, \"after\") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
        "$10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, "
        "$26, $27, $28, $29, $30) "
        "ON CONFLICT (project, unique_key) WHERE unique_key IS NOT NULL AND state < 2 "
        "DO NOTHING RETURNING id",
        &p, 0, &rc, "insert job");
    if (!r) return rc;
    if (PQntuples(r) == 1) {
      j->id = pg_i64(r, 0, 0);
      j->created_ms = created;
      PQclear(r);
      if (j->state == JOB_PENDING) pg_note(q, STORE_NOTE_JOBS);
      return 0;
    }
    PQclear(r);
    if (!keyed) {
      log_error("store", "insert job: no row inserted");
      return SPD_ESTORE;
    }
    /* A seek in jobs_unique (unique_key = $2 implies its IS NOT NULL). */
    pg_p_str(&p, j->project);
    pg_p_str(&p, j->unique_key);
    r = pg_run(q, PJ_UNIQUE_HELD,
               "SELECT id FROM jobs WHERE project = $1 AND unique_key = $2 AND state < 2",
               &p, 0, &rc, "find unique job");
    if (!r) return rc;
    if (PQntuples(r) > 0) {
      j->id = pg_i64(r, 0, 0);
      PQclear(r);
      return SPD_ECONFLICT;
    }
    PQclear(r);
  }
  log_error("store", "insert job: the unique key kept changing hands");
  return -EAGAIN;
}

int pg_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms, job_list_t *out) {
  pg_params_t p = {0};
  pg_p_str(&p, node);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, pg_clamp(max));
  /* SKIP LOCKED: rows another node is claiming right now are passed over,
   * so claims never wait on each other nor take one job twice. */
  return pg_jobs_query(PGQ(s), PJ_CLAIM,
                       "UPDATE jobs SET state = 1, node = $1, start_ms = $2 WHERE id IN "
                       "(SELECT id FROM jobs WHERE state = 0 AND not_before_ms <= $2 "
                       "ORDER BY priority DESC, id LIMIT $3 FOR UPDATE SKIP LOCKED) "
                       "RETURNING " PG_JOB_COLS,
                       &p, out, pg_cmp_claimed, "claim jobs");
}

int pg_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                      const job_key_t *skip, size_t nskip, job_list_t *out) {
  pg_params_t p = {0};
  char sql[2048];
  pg_p_str(&p, node);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, pg_clamp(max));
  size_t n = (size_t)snprintf(sql, sizeof(sql),
                              "UPDATE jobs SET state = 1, node = $1, start_ms = $2 WHERE id IN "
                              "(SELECT id FROM jobs WHERE state = 0 AND not_before_ms <= $2 "
                              "AND NOT (false");
  for (size_t i = 0; i < nskip && n < sizeof(sql); i++) {
    pg_p_str(&p, skip[i].project);
    if (skip[i].spider) {
      pg_p_str(&p, skip[i].spider);
      n += (size_t)snprintf(sql + n, sizeof(sql) - n, " OR (project = $%d AND spider = $%d)",
                            p.n - 1, p.n);
    } else {
      n += (size_t)snprintf(sql + n, sizeof(sql) - n, " OR project = $%d", p.n);
    }
  }
  if (n < sizeof(sql))
    snprintf(sql + n, sizeof(sql) - n,
             ") ORDER BY priority DESC, id LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING " PG_JOB_COLS);
  return pg_jobs_query(PGQ(s), -1, sql, &p, out, pg_cmp_claimed, "claim jobs");
}

int pg_job_started(store_t *s, int64_t id, int pid, int64_t pid_start) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_i64(&p, pid);
  pg_p_i64(&p, pid_start);
  return pg_cmd(PGQ(s), PJ_STARTED, "UPDATE jobs SET pid = $2, pid_start = $3 WHERE id = $1",
                &p, 1, "record job process");
}

int pg_job_requeue(store_t *s, int64_t id) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  int rc = pg_cmd(q, PJ_REQUEUE,
                  "UPDATE jobs SET state = 0, node = NULL, start_ms = 0, pid = 0, cancel_ms = 0, "
                  "pid_start = 0 WHERE id = $1 AND state = 1",
                  &p, 1, "requeue job");
  if (!rc) pg_note(q, STORE_NOTE_JOBS);
  return rc;
}

int pg_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms, int exit_code,
                  int term_signal, const json_t *stats) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_i64(&p, (int64_t)state);
  pg_p_i64(&p, end_ms);
  pg_p_i64(&p, exit_code);
  pg_p_i64(&p, term_signal);
  pg_p_json(&p, stats);
  if (stats && !p.v[5]) {
    pg_params_release(&p);
    return -ENOMEM;
  }
  int rc = pg_cmd(q, PJ_FINISH,
                  "UPDATE jobs SET state = $2, end_ms = $3, exit_code = $4, "
                  "term_signal = $5, stats = $6 WHERE id = $1",
                  &p, 1, "finish job");
  /* No notice: a NOTIFY serializes the commits of every notifying
   * transaction on the server (one global lock held through the WAL
   * flush), and a job's end wakes no one unless [concurrency] limits wait
   * on it, which the daemon notifies itself (supervise.c). */
  return rc;
}

int pg_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                          int64_t now_ms, int *count) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  pg_p_str(&p, project);
  pg_p_str(&p, jobid);
  pg_p_i64(&p, now_ms);
  int rc;
  PGresult *r = pg_run(q, PJ_CANCEL,
                       "UPDATE jobs SET state = 4, end_ms = $3 "
                       "WHERE jobid = $2 AND project = $1 AND state = 0",
                       &p, 0, &rc, "cancel pending jobs");
  if (!r) return rc;
  *count = pg_changes(r);
  PQclear(r);
  /* They ended (and freed their unique keys). */
  if (*count) pg_note(q, STORE_NOTE_JOBS);
  return 0;
}

int pg_job_get(store_t *s, int64_t id, job_t *out) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  int rc;
  PGresult *r = pg_run(PGQ(s), PJ_GET, "SELECT " PG_JOB_COLS " FROM jobs WHERE id = $1", &p, 0,
                       &rc, "get job");
  if (!r) return rc;
  if (PQntuples(r) == 0) {
    rc = -ENOENT;
  } else {
    job_t j;
    rc = pg_row_job(r, 0, &j);
    if (!rc) *out = j;
  }
  PQclear(r);
  return rc;
}

int pg_job_status(store_t *s, const char *project, const char *jobid, job_state_t *out) {
  pg_params_t p = {0};
  pg_p_str(&p, jobid);
  pg_p_str(&p, project);
  int rc;
  /* Rank: any started final state, then running, then pending; among
   * several final ones the latest ended wins. */
  PGresult *r = pg_run(PGQ(s), PJ_STATUS,
                       "SELECT state FROM jobs WHERE jobid = $1 "
                       "AND ($2::text IS NULL OR project = $2::text) "
                       "AND (state < 2 OR start_ms <> 0) "
                       "ORDER BY CASE WHEN state >= 2 THEN 0 WHEN state = 1 THEN 1 ELSE 2 END, "
                       "end_ms DESC, id DESC LIMIT 1",
                       &p, 0, &rc, "job status");
  if (!r) return rc;
  if (PQntuples(r) == 0) rc = -ENOENT;
  else *out = (job_state_t)pg_i64(r, 0, 0);
  PQclear(r);
  return rc;
}

#define PG_LIST_ALL_STATES ((1u << JOB_NSTATES) - 1)
#define PG_LIST_FINAL_STATES (PG_LIST_ALL_STATES & ~3u)

/* Appends to a statement being built. */
struct sqlbuf {
  char s[4096];
  size_t n;
};

static void sb_add(struct sqlbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(struct sqlbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (b->n < sizeof(b->s)) {
    int k = vsnprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, ap);
    if (k > 0) b->n += (size_t)k;
  }
  va_end(ap);
}

/* The native API's listing: filters that vary per call, newest id first,
 * planned per call (the API pages through, it does not poll). */
/* " AND state IN (...)" of the states in mask `states`. */
static void sb_states_in(struct sqlbuf *b, unsigned states) {
  const char *sep = " AND state IN (";
  for (int i = 0; i < JOB_NSTATES; i++)
    if (states & (1u << i)) {
      sb_add(b, "%s%d", sep, i);
      sep = ", ";
    }
  sb_add(b, ")");
}

/* f's conditions on project (and its set of projects: one parameter
 * each), job id, node and start, their values on p. */
static void sb_job_where(struct sqlbuf *b, pg_params_t *p, const job_filter_t *f) {
  if (f->project) pg_p_str(p, f->project), sb_add(b, " AND project = $%d", p->n);
  for (size_t i = 0; i < f->nprojects; i++)
    pg_p_str(p, f->projects[i]), sb_add(b, "%s$%d", i ? ", " : " AND project IN (", p->n);
  if (f->nprojects) sb_add(b, ")");
  if (f->jobid) pg_p_str(p, f->jobid), sb_add(b, " AND jobid = $%d", p->n);
  if (f->node) pg_p_str(p, f->node), sb_add(b, " AND node = $%d", p->n);
  if (f->started_only) sb_add(b, " AND start_ms <> 0");
}

static int pg_jobs_list_native(struct pg_store *q, const job_filter_t *f, job_list_t *out) {
  struct sqlbuf b = {.n = 0};
  pg_params_t p = {0};
  sb_add(&b, "SELECT " PG_JOB_COLS " FROM jobs WHERE true");
  if (f->states) sb_states_in(&b, f->states);
  sb_job_where(&b, &p, f);
  if (f->spider) pg_p_str(&p, f->spider), sb_add(&b, " AND spider = $%d", p.n);
  if (f->schedule_id)
    pg_p_i64(&p, f->schedule_id), sb_add(&b, " AND schedule_id = $%d", p.n);
  if (f->test) sb_add(&b, " AND test = %d", f->test > 0);
  if (f->parent_id) pg_p_i64(&p, f->parent_id), sb_add(&b, " AND parent_id = $%d", p.n);
  if (f->created_from_ms)
    pg_p_i64(&p, f->created_from_ms), sb_add(&b, " AND created_ms >= $%d", p.n);
  if (f->created_to_ms)
    pg_p_i64(&p, f->created_to_ms), sb_add(&b, " AND created_ms < $%d", p.n);
  if (f->before_id) pg_p_i64(&p, f->before_id), sb_add(&b, " AND id < $%d", p.n);
  if (f->health && !strcmp(f->health, "none")) sb_add(&b, " AND health IS NULL");
  else if (f->health) pg_p_str(&p, f->health), sb_add(&b, " AND health = $%d", p.n);
  if (f->text) {
    /* position, not ILIKE: the user's % and _ are plain text. Under the C
     * collation lower() folds ASCII only, as every backend does. */
    pg_p_str(&p, f->text);
    int t = p.n;
    sb_add(&b,
           " AND (position(lower($%d COLLATE \"C\") in lower(jobid)) > 0"
           " OR position(lower($%d COLLATE \"C\") in lower(spider)) > 0"
           " OR position(lower($%d COLLATE \"C\") in lower(project)) > 0"
           " OR EXISTS (SELECT 1 FROM json_each_text(CASE WHEN json_typeof(args::json) ="
           " 'object' THEN args::json END) AS a WHERE position(lower($%d COLLATE \"C\") in"
           " lower(a.value COLLATE \"C\")) > 0))",
           t, t, t, t);
  }
  /* A string at the key: ->> alone would give a number's digits. */
  for (size_t i = 0; i < f->nmeta; i++) {
    pg_p_str(&p, f->meta[2 * i]);
    pg_p_str(&p, f->meta[2 * i + 1]);
    sb_add(&b, " AND jsonb_typeof(meta -> $%d::text) = 'string' AND (meta ->> $%d::text) = $%d",
           p.n - 1, p.n - 1, p.n);
  }
  int history = f->ended_first && f->project && f->spider && f->states && !(f->states & 3u);
  sb_add(&b, history ? " AND state >= 2 ORDER BY end_ms DESC, id DESC" : " ORDER BY id DESC");
  if (f->limit) pg_p_i64(&p, pg_clamp(f->limit)), sb_add(&b, " LIMIT $%d", p.n);
  return pg_jobs_query(q, -1, b.s, &p, out, NULL, "list jobs");
}

/* A prepared slot for the shapes the daemon polls (all states, pending,
 * running or every final state; with or without project, started_only and
 * limit), -1 (planned per call) for the others. */
static int pg_list_slot(unsigned states, const job_filter_t *f) {
  int cat;
  if (states == PG_LIST_ALL_STATES) cat = 0;
  else if (states == 1u << JOB_PENDING) cat = 1;
  else if (states == 1u << JOB_RUNNING) cat = 2;
  else if (states == PG_LIST_FINAL_STATES) cat = 3;
  else return -1;
  if (f->jobid || f->node || f->nprojects) return -1;
  return PJ_LIST + cat * 8 + !!f->project * 4 + !!f->started_only * 2 + !!f->limit;
}

int pg_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out) {
  struct pg_store *q = PGQ(s);
  if (f->spider || f->schedule_id || f->parent_id || f->created_from_ms ||
      f->created_to_ms || f->before_id || f->newest_first || f->text || f->nmeta || f->test ||
      f->health)
    return pg_jobs_list_native(q, f, out);
  unsigned states = f->states ? f->states : PG_LIST_ALL_STATES;
  struct sqlbuf b = {.n = 0};
  pg_params_t p = {0};
  sb_add(&b, "SELECT " PG_JOB_COLS " FROM jobs WHERE true");
  if (states == PG_LIST_FINAL_STATES) {
    /* The partial indexes' own conditions, so the planner sees they apply. */
    sb_add(&b, " AND state >= 2");
  } else if (!(states & (states - 1))) {
    sb_add(&b, " AND state = %d", __builtin_ctz(states));
  } else if (states != PG_LIST_ALL_STATES) {
    sb_states_in(&b, states);
  }
  sb_job_where(&b, &p, f);
  if (states == 1u << JOB_PENDING)
    sb_add(&b, " ORDER BY priority DESC, id");
  else if (states == 1u << JOB_RUNNING)
    sb_add(&b, " ORDER BY start_ms, id");
  else if (!(states & 3u))
    sb_add(&b, " ORDER BY end_ms DESC, id DESC");
  else
    sb_add(&b, " ORDER BY CASE WHEN state >= 2 THEN 2 ELSE state END, "
               "CASE state WHEN 0 THEN -priority WHEN 1 THEN start_ms "
               "ELSE -end_ms END, "
               "CASE WHEN state >= 2 THEN -id ELSE id END");
  if (f->limit) pg_p_i64(&p, pg_clamp(f->limit)), sb_add(&b, " LIMIT $%d", p.n);
  return pg_jobs_query(q, pg_list_slot(states, f), b.s, &p, out, NULL, "list jobs");
}

/* Scrapyd's groups as store_jobs_page reads them: the condition (the
 * partial index's own), the sort key and which way key and id run. */
static const struct page_group {
  const char *cond, *key;
  int key_desc, id_desc;
} page_groups[JOB_NGROUPS] = {
    {"state = 0", "priority", 1, 0},
    {"state = 1", "start_ms", 0, 0},
    {"state >= 2 AND start_ms <> 0", "end_ms", 1, 1},
};

/* One part of a page: 0 the group from its start; 1 the jobs with the
 * cursor's key and an id past its; 2 the jobs with a key past its. Two
 * parts, not one (key, id) comparison: pending's key runs DESC and its id
 * ASC, which no row value says, and an OR of both walks every tie of the
 * key from the first (a million pending jobs share priority 0). */
static int pg_page_part(store_t *s, int group, int part, const char *project,
                        const job_page_key_t *after, size_t limit, job_list_t *out) {
  struct pg_store *q = PGQ(s);
  const struct page_group *g = &page_groups[group];
  struct sqlbuf b = {.n = 0};
  pg_params_t p = {0};
  sb_add(&b, "SELECT " PG_JOB_COLS " FROM jobs WHERE %s", g->cond);
  if (project) pg_p_str(&p, project), sb_add(&b, " AND project = $%d", p.n);
  if (part) {
    if (group == JOB_GROUP_PENDING) pg_p_dbl(&p, after->priority);
    else pg_p_i64(&p, after->t_ms);
    if (part == 1) sb_add(&b, " AND %s = $%d", g->key, p.n);
    else sb_add(&b, " AND %s %s $%d", g->key, g->key_desc ? "<" : ">", p.n);
  }
  if (part == 1) pg_p_i64(&p, after->id), sb_add(&b, " AND id %s $%d", g->id_desc ? "<" : ">", p.n);
  pg_p_i64(&p, pg_clamp(limit));
  sb_add(&b, " ORDER BY %s%s, id%s LIMIT $%d", g->key, g->key_desc ? " DESC" : "",
         g->id_desc ? " DESC" : "", p.n);
  return pg_jobs_query(q, -1, b.s, &p, out, NULL, "page jobs");
}

int pg_jobs_page(store_t *s, int group, const char *project, size_t limit,
                 job_page_key_t *after, job_list_t *out, int *more) {
  return store_jobs_page_parts(s, pg_page_part, group, project, limit, after, out, more);
}

int pg_job_counts(store_t *s, const char *project, int64_t ended_since_ms,
                  int64_t counts[JOB_NSTATES]) {
  pg_params_t p = {0};
  int rc;
  PGresult *r;
  /* One arm per partial index, so no arm reads the whole table. */
  if (ended_since_ms) {
    /* The ended arm is a range of jobs_ended: the window only. */
    pg_p_str(&p, project);
    pg_p_i64(&p, ended_since_ms);
    r = pg_run(PGQ(s), PJ_COUNTS_SINCE,
               "SELECT 0, count(*) FROM jobs WHERE state = 0 "
               "AND ($1::text IS NULL OR project = $1) "
               "UNION ALL SELECT 1, count(*) FROM jobs WHERE state = 1 "
               "AND ($1::text IS NULL OR project = $1) "
               "UNION ALL SELECT state, count(*) FROM jobs WHERE state >= 2 "
               "AND end_ms >= $2 AND ($1::text IS NULL OR project = $1) GROUP BY state",
               &p, 0, &rc, "count jobs");
  } else if (project) {
    pg_p_str(&p, project);
    r = pg_run(PGQ(s), PJ_COUNTS_PROJECT,
               "SELECT 0, count(*) FROM jobs WHERE state = 0 AND project = $1 "
               "UNION ALL SELECT 1, count(*) FROM jobs WHERE state = 1 AND project = $1 "
               "UNION ALL SELECT state, count(*) FROM jobs WHERE state >= 2 "
               "AND project = $1 AND start_ms <> 0 GROUP BY state",
               &p, 0, &rc, "count jobs");
  } else {
    r = pg_run(PGQ(s), PJ_COUNTS,
               "SELECT 0, count(*) FROM jobs WHERE state = 0 "
               "UNION ALL SELECT 1, count(*) FROM jobs WHERE state = 1 "
               "UNION ALL SELECT state, count(*) FROM jobs WHERE state >= 2 "
               "AND start_ms <> 0 GROUP BY state",
               NULL, 0, &rc, "count jobs");
  }
  if (!r) return rc;
  for (int i = 0; i < PQntuples(r); i++) {
    int64_t state = pg_i64(r, i, 0);
    if (state >= 0 && state < JOB_NSTATES) counts[state] = pg_i64(r, i, 1);
  }
  PQclear(r);
  return 0;
}

/* Items come from the stats of the window's rows (always JSON: written by
 * pg_p_json); a row whose stats are not an object or whose count is not a
 * number adds 0. */
int pg_job_throughput(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                      int64_t step_ms, job_bucket_t *buckets, size_t n) {
  pg_params_t p = {0};
  int rc;
  pg_p_i64(&p, from_ms);
  pg_p_i64(&p, to_ms);
  pg_p_i64(&p, step_ms);
  pg_p_str(&p, project);
  PGresult *r = pg_run(
      PGQ(s), PJ_THROUGHPUT,
      "SELECT (end_ms - $1) / $3, count(*) FILTER (WHERE state = 2), "
      "count(*) FILTER (WHERE state = 3), coalesce(sum(CASE WHEN "
      "json_typeof(stats::json) = 'object' AND "
      "json_typeof(stats::json -> 'items') = 'number' THEN "
      "trunc((stats::json ->> 'items')::numeric) WHEN "
      "json_typeof(stats::json) = 'object' AND "
      "json_typeof(stats::json -> 'item_scraped_count') = 'number' THEN "
      "trunc((stats::json ->> 'item_scraped_count')::numeric) END), 0)::bigint "
      "FROM jobs WHERE state >= 2 AND end_ms >= $1 AND end_ms < $2 "
      "AND ($4::text IS NULL OR project = $4) GROUP BY 1",
      &p, 0, &rc, "job throughput");
  if (!r) return rc;
  for (int i = 0; i < PQntuples(r); i++) {
    int64_t k = pg_i64(r, i, 0);
    if (k < 0 || (size_t)k >= n) continue;
    buckets[k].finished = pg_i64(r, i, 1);
    buckets[k].failed = pg_i64(r, i, 2);
    buckets[k].items = pg_i64(r, i, 3);
  }
  PQclear(r);
  return 0;
}

int pg_trim_finished(store_t *s, int keep, int *deleted) {
  pg_params_t p = {0};
  pg_p_i64(&p, keep - 1);
  int rc;
  /* One statement: the cut-off (the keep-th newest started final job, or
   * the oldest when there are fewer), then every started final job older
   * than it and every never-started one that ended before it. */
  PGresult *r = pg_run(
      PGQ(s), PJ_TRIM,
      "WITH cut AS (SELECT end_ms, id FROM ("
      "(SELECT end_ms, id, 0 AS k FROM jobs WHERE state >= 2 AND state <> 6 AND start_ms <> 0 "
      "ORDER BY end_ms DESC, id DESC LIMIT 1 OFFSET $1) UNION ALL "
      "(SELECT end_ms, id, 1 AS k FROM jobs WHERE state >= 2 AND state <> 6 AND start_ms <> 0 "
      "ORDER BY end_ms, id LIMIT 1)) c ORDER BY k LIMIT 1) "
      "DELETE FROM jobs j USING cut WHERE j.state >= 2 AND j.state <> 6 AND "
      "((j.start_ms <> 0 AND (j.end_ms, j.id) < (cut.end_ms, cut.id)) OR "
      "(j.start_ms = 0 AND j.end_ms < cut.end_ms))",
      &p, 0, &rc, "trim jobs");
  if (!r) return rc;
  *deleted = pg_changes(r);
  PQclear(r);
  return 0;
}

int pg_job_heartbeat(store_t *s, int64_t id, int64_t now_ms) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_i64(&p, now_ms);
  return pg_cmd(PGQ(s), PJ_HEARTBEAT,
                "UPDATE jobs SET heartbeat_ms = $2 WHERE id = $1 AND state = 1", &p, 1,
                "job heartbeat");
}

int pg_job_next_due(store_t *s, int64_t now_ms, int64_t *out) {
  pg_params_t p = {0};
  pg_p_i64(&p, now_ms);
  int rc;
  PGresult *r = pg_run(PGQ(s), PJ_NEXT_DUE,
                       "SELECT min(not_before_ms) FROM jobs WHERE state = 0 "
                       "AND not_before_ms > $1",
                       &p, 0, &rc, "next due job");
  if (!r) return rc;
  *out = PQntuples(r) ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  return 0;
}

/* ---- history retention ---- */

/* The next project/spider pair with ended jobs after (project, spider),
 * by a seek in jobs_history. 0 and the pair (malloc'd), -ENOENT at the end. */
static int pg_prune_next_pair(struct pg_store *q, const char *project, const char *spider,
                              char **np, char **ns) {
  pg_params_t p = {0};
  pg_p_str(&p, project);
  pg_p_str(&p, spider);
  int rc;
  PGresult *r = pg_run(q, PJ_PRUNE_PAIR,
                       "SELECT project, spider FROM jobs WHERE state >= 2 "
                       "AND (project, spider) > ($1, $2) ORDER BY project, spider LIMIT 1",
                       &p, 0, &rc, "prune jobs");
  if (!r) return rc;
  if (PQntuples(r) == 0) {
    rc = -ENOENT;
  } else if ((rc = pg_str(r, 0, 0, np)) == 0 && (rc = pg_str(r, 0, 1, ns)) != 0) {
    free(*np);
    *np = NULL;
  }
  PQclear(r);
  return rc;
}

/* Deletes up to max expired jobs of one pair, appending them to v. */
static int pg_prune_pair(struct pg_store *q, const char *project, const char *spider, int keep,
                         int64_t before, size_t max, job_t **v, size_t *n) {
  pg_params_t p = {0};
  pg_p_str(&p, project);
  pg_p_str(&p, spider);
  pg_p_i64(&p, keep);
  pg_p_i64(&p, before);
  pg_p_i64(&p, pg_clamp(max));
  int rc;
  /* `newer` is how many started jobs of the pair ended after this one: a
   * job goes once keep of them are newer (a job that never started takes
   * no place in the count), or when it ended before the cut-off; never
   * while a child of it is pending or running. state >= 2 again in the
   * DELETE: nothing but an ended job is ever deleted. The victims are an
   * ARRAY(...) (an InitPlan: computed once), deleted through the primary
   * key. Joined in any other way (IN, a MATERIALIZED CTE), the planner,
   * whose statistics may say no job has ended yet, nested the whole
   * victim list inside a scan of the ended jobs: quadratic, 14-57 s for
   * 5,000 rows, with a snapshot that kept vacuum from the jobs table. */
  PGresult *r = pg_run(
      q, PJ_PRUNE_DELETE,
      "DELETE FROM jobs WHERE state >= 2 AND state <> 6 AND id = ANY (ARRAY(SELECT id FROM ("
      "SELECT id, end_ms, count(*) FILTER (WHERE start_ms <> 0) OVER ("
      "ORDER BY end_ms DESC, id DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) "
      "AS newer FROM jobs WHERE state >= 2 AND state <> 6 AND project = $1 AND spider = $2) t "
      "WHERE (($3::bigint > 0 AND newer >= $3::bigint) OR "
      "($4::bigint > 0 AND end_ms < $4::bigint)) "
      "AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = t.id "
      "AND c.parent_id <> 0 AND c.state < 2) "
      "ORDER BY end_ms DESC, id DESC LIMIT $5)) "
      "RETURNING id, jobid, project, spider, state, start_ms, end_ms",
      &p, 0, &rc, "prune jobs");
  if (!r) return rc;
  int rows = PQntuples(r);
  if (rows > 0) {
    job_t *nv = realloc(*v, (*n + (size_t)rows) * sizeof(*nv));
    if (!nv) {
      PQclear(r);
      return -ENOMEM;
    }
    *v = nv;
    for (int i = 0; i < rows && !rc; i++) {
      job_t *j = &nv[*n];
      job_init(j);
      j->id = pg_i64(r, i, 0);
      j->state = (job_state_t)pg_i64(r, i, 4);
      j->start_ms = pg_i64(r, i, 5);
      j->end_ms = pg_i64(r, i, 6);
      if ((rc = pg_str(r, i, 1, &j->jobid)) || (rc = pg_str(r, i, 2, &j->project)) ||
          (rc = pg_str(r, i, 3, &j->spider)))
        job_release(j);
      else
        (*n)++;
    }
  }
  PQclear(r);
  return rc;
}

int pg_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules, int keep_default,
                  int64_t ended_before_default_ms, size_t max, job_list_t *deleted) {
  struct pg_store *q = PGQ(s);
  job_t *v = NULL;
  size_t n = 0;
  char *project = NULL, *spider = NULL;
  int began = 0;
  int rc = pg_auto_begin(q, &began);
  if (rc) return rc;
  /* Names are never empty, so ('', '') comes before every pair. */
  while (n < max) {
    char *np = NULL, *ns = NULL;
    rc = pg_prune_next_pair(q, project ? project : "", spider ? spider : "", &np, &ns);
    if (rc) break;
    free(project);
    free(spider);
    project = np;
    spider = ns;
    int keep = 0;
    int64_t before = 0;
    store_prune_limits(rules, nrules, keep_default, ended_before_default_ms, project, spider,
                       &keep, &before);
    if (!keep && !before) continue;
    if ((rc = pg_prune_pair(q, project, spider, keep, before, max - n, &v, &n))) break;
  }
  if (rc == -ENOENT) rc = 0;
  free(project);
  free(spider);
  rc = pg_auto_end(q, began, rc);
  /* Handed over only once committed: the caller deletes files by it. */
  if (!rc) rc = job_list_append(deleted, v, n);
  pg_jobs_free(v, n);
  return rc;
}

/* ---- nodes ---- */

int pg_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead) {
  struct pg_store *q = PGQ(s);
  int began = 0, rc = pg_auto_begin(q, &began);
  if (rc) return rc;
  /* FOR UPDATE: a reaper that is declaring this node dead right now is
   * waited for, so its verdict is seen (the node must then stop its
   * crawls, which are being retried elsewhere). */
  pg_params_t p = {0};
  pg_p_str(&p, n->name);
  PGresult *r = pg_run(q, PN_BEAT_DEAD, "SELECT dead FROM nodes WHERE name = $1 FOR UPDATE",
                       &p, 0, &rc, "read node");
  if (r) {
    *was_dead = PQntuples(r) && pg_i64(r, 0, 0) != 0;
    PQclear(r);
    pg_p_str(&p, n->name);
    pg_p_str(&p, n->url);
    pg_p_i64(&p, n->slots);
    pg_p_i64(&p, n->running);
    pg_p_i64(&p, n->started_ms);
    pg_p_i64(&p, now_ms);
    pg_p_str(&p, n->version);
    pg_p_i64(&p, n->draining != 0);
    pg_p_i64(&p, n->mem_free);
    pg_p_i64(&p, n->mem_reserved);
    rc = pg_cmd(q, PN_BEAT,
                "INSERT INTO nodes (name, url, slots, running, started_ms, heartbeat_ms, dead, "
                "version, draining, mem_free, mem_reserved) "
                "VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $8, $9, $10) "
                "ON CONFLICT (name) DO UPDATE SET "
                "url = excluded.url, slots = excluded.slots, running = excluded.running, "
                "started_ms = excluded.started_ms, heartbeat_ms = excluded.heartbeat_ms, "
                "dead = 0, version = excluded.version, draining = excluded.draining, "
                "mem_free = excluded.mem_free, mem_reserved = excluded.mem_reserved",
                &p, 0, "node beat");
  }
  return pg_auto_end(q, began, rc);
}

static int node_row(const PGresult *r, int i, void *out) {
  node_info_t n = {0};
  int rc;
  if ((rc = pg_str(r, i, 0, &n.name)) || (rc = pg_str(r, i, 1, &n.url)) ||
      (rc = pg_str(r, i, 7, &n.version))) {
    node_info_release(&n);
    return rc;
  }
  n.slots = (int)pg_i64(r, i, 2);
  n.running = (int)pg_i64(r, i, 3);
  n.started_ms = pg_i64(r, i, 4);
  n.heartbeat_ms = pg_i64(r, i, 5);
  n.dead = (int)pg_i64(r, i, 6);
  n.draining = (int)pg_i64(r, i, 8);
  n.mem_free = pg_i64(r, i, 9);
  n.mem_reserved = pg_i64(r, i, 10);
  if ((rc = node_list_push(out, &n))) node_info_release(&n);
  return rc;
}

int pg_nodes_list(store_t *s, node_list_t *out) {
  return pg_list(PGQ(s), PN_LIST,
                 "SELECT name, url, slots, running, started_ms, heartbeat_ms, dead, "
                 "version, draining, mem_free, mem_reserved FROM nodes ORDER BY name",
                 "list nodes", node_row, out);
}

int pg_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                  job_list_t *lost) {
  struct pg_store *q = PGQ(s);
  job_t *v = NULL;
  size_t n = 0;
  int reaped = 0, began = 0, rc = pg_auto_begin(q, &began);
  if (rc) return rc;
  /* The UPDATE locks the nodes it declares dead: a second reaper waits for
   * this transaction, then finds them dead already and their jobs ended. */
  pg_params_t p = {0};
  pg_p_str(&p, self);
  pg_p_i64(&p, now_ms - timeout_ms);
  PGresult *r = pg_run(q, PN_REAP_NODES,
                       "UPDATE nodes SET dead = 1 WHERE dead = 0 AND name <> $1 "
                       "AND heartbeat_ms < $2",
                       &p, 0, &rc, "reap nodes");
  if (r) {
    reaped = pg_changes(r);
    PQclear(r);
    pg_p_i64(&p, now_ms);
    r = pg_run(q, PN_REAP_JOBS,
               "UPDATE jobs SET state = 5, end_ms = $1 WHERE state = 1 AND node IN "
               "(SELECT name FROM nodes WHERE dead = 1) RETURNING " PG_JOB_COLS,
               &p, 0, &rc, "reap jobs");
    if (r) {
      rc = pg_read_jobs(r, &v, &n);
      PQclear(r);
    }
  }
  if (!rc && (reaped || n)) pg_note(q, STORE_NOTE_NODES);
  rc = pg_auto_end(q, began, rc);
  if (!rc) {
    /* The caller sees what they were. */
    for (size_t i = 0; i < n; i++) {
      v[i].state = JOB_RUNNING;
      v[i].end_ms = 0;
    }
    if (n > 1) qsort(v, n, sizeof(*v), pg_cmp_id);
    rc = job_list_append(lost, v, n);
  }
  pg_jobs_free(v, n);
  return rc;
}

int pg_job_cancel_request(store_t *s, int64_t id, int64_t now_ms) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_i64(&p, now_ms);
  int rc = pg_cmd(q, PN_CANCEL_REQ, "UPDATE jobs SET cancel_ms = $2 WHERE id = $1 AND state = 1",
                  &p, 1, "request cancel");
  if (!rc) pg_note(q, STORE_NOTE_CANCEL);
  return rc;
}

int pg_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out) {
  pg_params_t p = {0};
  pg_p_str(&p, node);
  return pg_jobs_query(PGQ(s), PN_CANCEL_LIST,
                       "SELECT " PG_JOB_COLS " FROM jobs WHERE state = 1 AND node = $1 "
                       "AND cancel_ms <> 0 ORDER BY id",
                       &p, out, NULL, "list cancel requests");
}

/* ---- eggs ---- */

int pg_egg_put(store_t *s, const char *project, const char *version, const void *data,
               size_t len, int64_t now_ms) {
  struct pg_store *q = PGQ(s);
  if (len > (size_t)INT_MAX) return -EINVAL; /* bytea holds at most 1 GB anyway */
  pg_params_t p = {0};
  pg_p_str(&p, project);
  pg_p_str(&p, version);
  pg_p_bin(&p, data ? data : "", data ? len : 0);
  pg_p_i64(&p, (int64_t)len);
  pg_p_i64(&p, now_ms);
  int rc = pg_cmd(q, PE_PUT,
                  "INSERT INTO eggs (project, version, data, size, created_ms) "
                  "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (project, version) DO UPDATE SET "
                  "data = excluded.data, size = excluded.size, created_ms = excluded.created_ms",
                  &p, 0, "store egg");
  if (!rc) pg_note(q, STORE_NOTE_EGGS);
  return rc;
}

int pg_egg_get(store_t *s, const char *project, const char *version, void **data,
               size_t *len) {
  pg_params_t p = {0};
  pg_p_str(&p, project);
  pg_p_str(&p, version);
  int rc;
  /* Binary results: the bytes as they are, no hex text to decode. */
  PGresult *r = pg_run(PGQ(s), PE_GET,
                       "SELECT data FROM eggs WHERE project = $1 AND version = $2", &p, 1, &rc,
                       "read egg");
  if (!r) return rc;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return -ENOENT;
  }
  size_t n = (size_t)PQgetlength(r, 0, 0);
  void *buf = malloc(n ? n : 1);
  if (!buf) {
    PQclear(r);
    return -ENOMEM;
  }
  memcpy(buf, PQgetvalue(r, 0, 0), n);
  PQclear(r);
  *data = buf;
  *len = n;
  return 0;
}

static int egg_row(const PGresult *r, int i, void *out) {
  egg_ref_t e = {0};
  int rc;
  if (!(rc = pg_str(r, i, 0, &e.project)) && !(rc = pg_str(r, i, 1, &e.version))) {
    e.size = pg_i64(r, i, 2);
    e.created_ms = pg_i64(r, i, 3);
    rc = egg_list_push(out, &e);
  }
  if (rc) {
    free(e.project);
    free(e.version);
  }
  return rc;
}

int pg_eggs_list(store_t *s, egg_list_t *out) {
  return pg_list(PGQ(s), PE_LIST,
                 "SELECT project, version, size, created_ms FROM eggs ORDER BY project, version",
                 "list eggs", egg_row, out);
}

int pg_egg_delete(store_t *s, const char *project, const char *version, int *count) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  pg_p_str(&p, project);
  int rc;
  PGresult *r;
  if (version) {
    pg_p_str(&p, version);
    r = pg_run(q, PE_DELETE_ONE, "DELETE FROM eggs WHERE project = $1 AND version = $2", &p,
               0, &rc, "delete egg");
  } else {
    r = pg_run(q, PE_DELETE_ALL, "DELETE FROM eggs WHERE project = $1", &p, 0, &rc,
               "delete eggs");
  }
  if (!r) return rc;
  *count = pg_changes(r);
  PQclear(r);
  if (*count) pg_note(q, STORE_NOTE_EGGS);
  return 0;
}

/* The window's ended jobs down jobs_ended, only the columns the stats need
 * (stats are always JSON text here: written by pg_p_json). */
int pg_job_stats_scan(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                      job_stats_row_fn fn, void *ud) {
  pg_params_t p = {0};
  int rc;
  pg_p_i64(&p, from_ms);
  pg_p_i64(&p, to_ms);
  pg_p_str(&p, project);
  PGresult *r = pg_run(
      PGQ(s), PJ_STATS,
      "SELECT project, spider, schedule_id, state, start_ms, end_ms, CASE "
      "WHEN json_typeof(stats::json) <> 'object' THEN 0 "
      "WHEN json_typeof(stats::json -> 'items') = 'number' "
      "THEN trunc((stats::json ->> 'items')::numeric) "
      "WHEN json_typeof(stats::json -> 'item_scraped_count') = 'number' "
      "THEN trunc((stats::json ->> 'item_scraped_count')::numeric) ELSE 0 END::bigint "
      "FROM jobs WHERE state >= 2 AND start_ms <> 0 AND end_ms >= $1 AND end_ms < $2 "
      "AND test = 0 AND ($3::text IS NULL OR project = $3)",
      &p, 0, &rc, "job stats");
  if (!r) return rc;
  rc = 0;
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    job_stats_row_t row = {.project = PQgetvalue(r, i, 0),
                           .spider = PQgetvalue(r, i, 1),
                           .schedule_id = pg_i64(r, i, 2),
                           .state = (int)pg_i64(r, i, 3),
                           .start_ms = pg_i64(r, i, 4),
                           .end_ms = pg_i64(r, i, 5),
                           .items = PQgetisnull(r, i, 6) ? 0 : pg_i64(r, i, 6)};
    rc = fn(ud, &row);
  }
  PQclear(r);
  return rc;
}

int pg_job_set_meta(store_t *s, int64_t id, const json_t *meta) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_json(&p, meta);
  return pg_cmd(PGQ(s), PJ_SET_META, "UPDATE jobs SET meta = $2::jsonb WHERE id = $1", &p, 1,
                "set job meta");
}

int pg_job_set_history(store_t *s, int64_t id, job_state_t state, int corrected,
                       job_state_t original, const char *note) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_i64(&p, (int64_t)state);
  if (corrected) pg_p_i64(&p, (int64_t)original);
  else pg_p_str(&p, NULL);
  pg_p_str(&p, note);
  return pg_cmd(PGQ(s), PJ_SET_HISTORY,
                "UPDATE jobs SET state = $2, original_state = $3::integer, note = $4 "
                "WHERE id = $1 AND state >= 2 AND state <> 6",
                &p, 1, "update job history");
}

int pg_job_set_health(store_t *s, int64_t id, const char *health, const json_t *reasons) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_str(&p, health);
  pg_p_json(&p, reasons);
  return pg_cmd(PGQ(s), PJ_SET_HEALTH,
                "UPDATE jobs SET health = $2, health_reasons = $3::jsonb WHERE id = $1", &p, 1,
                "set job health");
}

int pg_job_set_segments(store_t *s, int64_t id, const json_t *segments) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_json(&p, segments);
  if (segments && !p.v[1]) {
    pg_params_release(&p);
    return -ENOMEM;
  }
  return pg_cmd(PGQ(s), PJ_SET_SEGMENTS, "UPDATE jobs SET segments = $2 WHERE id = $1", &p, 1,
                "set job segments");
}

int pg_job_resume(store_t *s, int64_t id) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  return pg_cmd(PGQ(s), PJ_RESUME,
                "UPDATE jobs SET state = 0, node = NULL, pid = 0, pid_start = 0, "
                "start_ms = 0, end_ms = 0, exit_code = -1, term_signal = 0, "
                "not_before_ms = 0, heartbeat_ms = 0, cancel_ms = 0 "
                "WHERE id = $1 AND state = 6",
                &p, 1, "resume job");
}

/* ---- paused crawls' state ---- */

int pg_job_state_put(store_t *s, int64_t id, const void *data, size_t len, int64_t now_ms) {
  if (len > (size_t)INT_MAX) return -EINVAL;
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_bin(&p, data ? data : "", data ? len : 0);
  pg_p_i64(&p, (int64_t)len);
  pg_p_i64(&p, now_ms);
  return pg_cmd(PGQ(s), PE_STATE_PUT,
                "INSERT INTO job_states (job_id, data, size, created_ms) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT (job_id) DO UPDATE SET "
                "data = excluded.data, size = excluded.size, created_ms = excluded.created_ms",
                &p, 0, "store job state");
}

int pg_job_state_get(store_t *s, int64_t id, void **data, size_t *len) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  int rc;
  PGresult *r = pg_run(PGQ(s), PE_STATE_GET, "SELECT data FROM job_states WHERE job_id = $1",
                       &p, 1, &rc, "read job state");
  if (!r) return rc;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return -ENOENT;
  }
  size_t n = (size_t)PQgetlength(r, 0, 0);
  void *buf = malloc(n ? n : 1);
  if (buf) memcpy(buf, PQgetvalue(r, 0, 0), n);
  PQclear(r);
  if (!buf) return -ENOMEM;
  *data = buf;
  *len = n;
  return 0;
}

int pg_job_state_delete(store_t *s, int64_t id) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  int rc;
  PGresult *r = pg_run(PGQ(s), PE_STATE_DELETE, "DELETE FROM job_states WHERE job_id = $1", &p,
                       0, &rc, "delete job state");
  if (!r) return rc;
  PQclear(r);
  return 0;
}

int pg_jobs_waiting(store_t *s, int64_t upstream, job_list_t *out) {
  pg_params_t p = {0};
  pg_p_i64(&p, upstream);
  return pg_jobs_query(PGQ(s), PJ_WAITING,
                       "SELECT " PG_JOB_COLS " FROM jobs WHERE state = 0 AND \"after\" IS NOT "
                       "NULL AND \"after\" @> jsonb_build_array($1::bigint) ORDER BY id",
                       &p, out, NULL, "list waiting jobs");
}

int pg_job_wake(store_t *s, int64_t id, int64_t now_ms) {
  pg_params_t p = {0};
  pg_p_i64(&p, id);
  pg_p_i64(&p, now_ms);
  int rc = pg_cmd(PGQ(s), PJ_WAKE, "UPDATE jobs SET not_before_ms = $2 WHERE id = $1 AND state = 0",
                  &p, 1, "wake job");
  if (!rc) pg_note(PGQ(s), STORE_NOTE_JOBS);
  return rc;
}
