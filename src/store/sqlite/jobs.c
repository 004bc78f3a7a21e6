/* The SQLite backend's job ops (store.h's jobs section): insert with unique
 * keys, claims, starts and ends, lookups, listings (one cached statement per
 * filter shape) and trimming. Statements are prepared on first use and
 * reset after each (see sqlite.c). */
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core/array.h"
#include "error.h"
#include "log.h"
#include "store/sqlite/internal.h"

enum sqlite_jobs_stmt_id {
  SJOB_INSERT,
  SJOB_UNIQUE_HELD,
  SJOB_CLAIM,
  SJOB_CLAIM_ONE,
  SJOB_STARTED,
  SJOB_REQUEUE,
  SJOB_FINISH,
  SJOB_CANCEL,
  SJOB_GET,
  SJOB_STATUS,
  SJOB_COUNTS,
  SJOB_COUNTS_PROJECT,
  SJOB_COUNTS_SINCE,
  SJOB_COUNTS_SINCE_PROJECT,
  SJOB_THROUGHPUT,
  SJOB_THROUGHPUT_PROJECT,
  SJOB_TRIM_NTH,
  SJOB_TRIM_OLDEST,
  SJOB_TRIM_LAST_ID,
  SJOB_TRIM_STARTED,
  SJOB_TRIM_UNSTARTED,
  SJOB_HEARTBEAT,
  SJOB_NEXT_DUE,
  SJOB_SET_META,
  SJOB_SET_HISTORY,
  SJOB_SET_HEALTH,
  SJOB_SET_SEGMENTS,
  SJOB_RESUME,
  SJOB_WAITING,
  SJOB_WAKE,
  SJOB_COUNT
};

static const char *const sqlite_jobs_sql[SJOB_COUNT] = {
    /* The next id is past both the live rows and the highest id trimming
     * ever deleted: two index seeks, no extra page written. */
    [SJOB_INSERT] =
        "INSERT INTO jobs (id, jobid, project, spider, version, args, settings, "
        "priority, state, node, pid, pid_start, created_ms, start_ms, end_ms, "
        "exit_code, term_signal, stats, schedule_id, parent_id, retry_of, attempt, "
        "max_retries, retry_backoff_ms, timeout_ms, not_before_ms, heartbeat_ms, "
        "unique_key, meta, test, \"after\") VALUES "
        "(max(coalesce((SELECT max(id) FROM jobs), 0), coalesce((SELECT "
        "CAST(value AS INTEGER) FROM meta WHERE key = 'jobs.last_id'), 0)) + 1, "
        "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, "
        "?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
    /* The holder of a unique key: a seek in the partial index jobs_unique
     * (unique_key = ?2 implies its IS NOT NULL). */
    [SJOB_UNIQUE_HELD] =
        "SELECT id FROM jobs WHERE project = ?1 AND unique_key = ?2 AND state < 2",
    [SJOB_CLAIM] =
        "UPDATE jobs SET state = 1, node = ?1, start_ms = ?2 WHERE id IN "
        "(SELECT id FROM jobs WHERE state = 0 AND not_before_ms <= ?2 "
        "ORDER BY priority DESC, id LIMIT ?3) "
        "RETURNING " SQLITE_JOB_COLS,
    /* The common case (one free slot) as a scalar subquery: IN (...) would
     * build a second temporary b-tree besides RETURNING's, and those two
     * together allocate enough that malloc trims and refaults its heap on
     * every claim, which halves group-commit throughput. */
    [SJOB_CLAIM_ONE] =
        "UPDATE jobs SET state = 1, node = ?1, start_ms = ?2 WHERE id = "
        "(SELECT id FROM jobs WHERE state = 0 AND not_before_ms <= ?2 "
        "ORDER BY priority DESC, id LIMIT 1) "
        "RETURNING " SQLITE_JOB_COLS,
    [SJOB_STARTED] = "UPDATE jobs SET pid = ?2, pid_start = ?3 WHERE id = ?1",
    [SJOB_REQUEUE] = "UPDATE jobs SET state = 0, node = NULL, start_ms = 0, pid = 0, cancel_ms = 0, "
                   "pid_start = 0 WHERE id = ?1 AND state = 1",
    [SJOB_FINISH] =
        "UPDATE jobs SET state = ?2, end_ms = ?3, exit_code = ?4, "
        "term_signal = ?5, stats = ?6 WHERE id = ?1",
    [SJOB_CANCEL] =
        "UPDATE jobs SET state = 4, end_ms = ?3 "
        "WHERE jobid = ?2 AND project = ?1 AND state = 0",
    [SJOB_GET] = "SELECT " SQLITE_JOB_COLS " FROM jobs WHERE id = ?1",
    /* Rank: any started final state, then running, then pending; among
     * several final ones the latest ended wins. */
    [SJOB_STATUS] =
        "SELECT state FROM jobs WHERE jobid = ?1 AND (?2 IS NULL OR project = ?2) "
        "AND (state < 2 OR start_ms != 0) "
        "ORDER BY CASE WHEN state >= 2 THEN 0 WHEN state = 1 THEN 1 ELSE 2 END, "
        "end_ms DESC, id DESC LIMIT 1",
    /* One arm per partial index, so no arm scans the table. */
    [SJOB_COUNTS] =
        "SELECT 0, count(*) FROM jobs WHERE state = 0 "
        "UNION ALL SELECT 1, count(*) FROM jobs WHERE state = 1 "
        "UNION ALL SELECT state, count(*) FROM jobs WHERE state >= 2 "
        "AND start_ms != 0 GROUP BY state",
    [SJOB_COUNTS_PROJECT] =
        "SELECT state, count(*) FROM jobs WHERE project = ?1 "
        "AND (state < 2 OR start_ms != 0) GROUP BY state",
    /* The ended arm walks jobs_ended from since on: the window only. */
    [SJOB_COUNTS_SINCE] =
        "SELECT 0, count(*) FROM jobs WHERE state = 0 "
        "UNION ALL SELECT 1, count(*) FROM jobs WHERE state = 1 "
        "UNION ALL SELECT state, count(*) FROM jobs WHERE state >= 2 "
        "AND end_ms >= ?2 GROUP BY state",
    [SJOB_COUNTS_SINCE_PROJECT] =
        "SELECT 0, count(*) FROM jobs WHERE state = 0 AND project = ?1 "
        "UNION ALL SELECT 1, count(*) FROM jobs WHERE state = 1 AND project = ?1 "
        "UNION ALL SELECT state, count(*) FROM jobs WHERE state >= 2 "
        "AND end_ms >= ?2 AND project = ?1 GROUP BY state",
    /* A range of jobs_ended; the stats are read from the window's rows. */
    [SJOB_THROUGHPUT] =
        "SELECT (end_ms - ?1) / ?3, sum(state = 2), sum(state = 3), "
        "sum(CASE WHEN json_valid(stats) THEN "
        "coalesce(CAST(json_extract(stats, '$.items') AS INTEGER), "
        "CAST(json_extract(stats, '$.item_scraped_count') AS INTEGER), 0) "
        "ELSE 0 END) FROM jobs WHERE state >= 2 AND end_ms >= ?1 AND end_ms < ?2 "
        "GROUP BY 1",
    [SJOB_THROUGHPUT_PROJECT] =
        "SELECT (end_ms - ?1) / ?3, sum(state = 2), sum(state = 3), "
        "sum(CASE WHEN json_valid(stats) THEN "
        "coalesce(CAST(json_extract(stats, '$.items') AS INTEGER), "
        "CAST(json_extract(stats, '$.item_scraped_count') AS INTEGER), 0) "
        "ELSE 0 END) FROM jobs WHERE state >= 2 AND end_ms >= ?1 AND end_ms < ?2 "
        "AND project = ?4 GROUP BY 1",
    [SJOB_TRIM_NTH] =
        "SELECT end_ms, id FROM jobs WHERE state >= 2 AND state <> 6 AND start_ms != 0 "
        "ORDER BY end_ms DESC, id DESC LIMIT 1 OFFSET ?1",
    [SJOB_TRIM_OLDEST] =
        "SELECT end_ms, id FROM jobs WHERE state >= 2 AND state <> 6 AND start_ms != 0 "
        "ORDER BY end_ms, id LIMIT 1",
    [SJOB_TRIM_LAST_ID] =
        "INSERT INTO meta (key, value) SELECT 'jobs.last_id', coalesce(max(id), 0) FROM jobs "
        "WHERE 1 ON CONFLICT (key) DO UPDATE SET value = excluded.value "
        "WHERE CAST(value AS INTEGER) < CAST(excluded.value AS INTEGER)",
    [SJOB_TRIM_STARTED] =
        "DELETE FROM jobs WHERE state >= 2 AND state <> 6 AND start_ms != 0 "
        "AND (end_ms < ?1 OR (end_ms = ?1 AND id < ?2))",
    [SJOB_TRIM_UNSTARTED] =
        "DELETE FROM jobs WHERE state >= 2 AND state <> 6 AND start_ms = 0 AND end_ms < ?1",
    [SJOB_HEARTBEAT] = "UPDATE jobs SET heartbeat_ms = ?2 WHERE id = ?1 AND state = 1",
    [SJOB_NEXT_DUE] =
        "SELECT min(not_before_ms) FROM jobs WHERE state = 0 AND not_before_ms > ?1",
    [SJOB_SET_META] = "UPDATE jobs SET meta = ?2 WHERE id = ?1",
    [SJOB_SET_HISTORY] = "UPDATE jobs SET state = ?2, original_state = ?3, note = ?4 "
                         "WHERE id = ?1 AND state >= 2 AND state <> 6",
    [SJOB_SET_SEGMENTS] = "UPDATE jobs SET segments = ?2 WHERE id = ?1",
    [SJOB_RESUME] = "UPDATE jobs SET state = 0, node = NULL, pid = 0, pid_start = 0, "
                    "start_ms = 0, end_ms = 0, exit_code = -1, term_signal = 0, "
                    "not_before_ms = 0, heartbeat_ms = 0, cancel_ms = 0 "
                    "WHERE id = ?1 AND state = 6",
    [SJOB_SET_HEALTH] = "UPDATE jobs SET health = ?2, health_reasons = ?3 WHERE id = ?1",
    /* The partial index jobs_waiting holds the few pending jobs that wait
     * for others: the scan of their lists stays small. */
    [SJOB_WAITING] = "SELECT " SQLITE_JOB_COLS " FROM jobs INDEXED BY jobs_waiting "
                     "WHERE state = 0 AND \"after\" IS NOT NULL AND EXISTS "
                     "(SELECT 1 FROM json_each(jobs.\"after\") WHERE value = ?1) ORDER BY id",
    [SJOB_WAKE] = "UPDATE jobs SET not_before_ms = ?2 WHERE id = ?1 AND state = 0",
};


_Static_assert(SJOB_COUNT <= SQLITE_JOBS_SLOTS, "grow SQLITE_JOBS_SLOTS");

static sqlite3_stmt *jobs_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->jobs_stmt[id], sqlite_jobs_sql[id]);
}

static int jobs_run(struct sqlite_store *q, int id) {
  sqlite3_stmt *st = jobs_stmt(q, id);
  if (!st) return SPD_ESTORE;
  return sqlite_done(q, st, sqlite_jobs_sql[id]);
}

/* ---- rows ---- */

/* Reads one row of SQLITE_JOB_COLS into j (initialised here). */
int sqlite_row_job(sqlite3_stmt *st, job_t *j) {
  int rc;
  job_init(j);
  j->id = sqlite3_column_int64(st, 0);
  if ((rc = sqlite_col_str(st, 1, &j->jobid))) goto out;
  if ((rc = sqlite_col_str(st, 2, &j->project))) goto out;
  if ((rc = sqlite_col_str(st, 3, &j->spider))) goto out;
  if ((rc = sqlite_col_str(st, 4, &j->version))) goto out;
  if ((rc = sqlite_col_json(st, 5, &j->args))) goto out;
  if ((rc = sqlite_col_json(st, 6, &j->settings))) goto out;
  j->priority = sqlite3_column_double(st, 7);
  j->state = (job_state_t)sqlite3_column_int(st, 8);
  if ((rc = sqlite_col_str(st, 9, &j->node))) goto out;
  j->pid = sqlite3_column_int(st, 10);
  j->pid_start = sqlite3_column_int64(st, 11);
  j->created_ms = sqlite3_column_int64(st, 12);
  j->start_ms = sqlite3_column_int64(st, 13);
  j->end_ms = sqlite3_column_int64(st, 14);
  j->exit_code = sqlite3_column_int(st, 15);
  j->term_signal = sqlite3_column_int(st, 16);
  if ((rc = sqlite_col_json(st, 17, &j->stats))) goto out;
  j->schedule_id = sqlite3_column_int64(st, 18);
  j->parent_id = sqlite3_column_int64(st, 19);
  j->retry_of = sqlite3_column_int64(st, 20);
  j->attempt = sqlite3_column_int(st, 21);
  j->max_retries = sqlite3_column_int(st, 22);
  j->retry_backoff_ms = sqlite3_column_int64(st, 23);
  j->timeout_ms = sqlite3_column_int64(st, 24);
  j->not_before_ms = sqlite3_column_int64(st, 25);
  j->heartbeat_ms = sqlite3_column_int64(st, 26);
  if ((rc = sqlite_col_str(st, 27, &j->unique_key))) goto out;
  if ((rc = sqlite_col_json(st, 28, &j->meta))) goto out;
  j->corrected = sqlite3_column_type(st, 29) != SQLITE_NULL;
  j->original_state = (job_state_t)sqlite3_column_int(st, 29);
  if ((rc = sqlite_col_str(st, 30, &j->note))) goto out;
  j->test = sqlite3_column_int(st, 31);
  if ((rc = sqlite_col_str(st, 32, &j->health))) goto out;
  if ((rc = sqlite_col_json(st, 33, &j->health_reasons))) goto out;
  if ((rc = sqlite_col_json(st, 34, &j->segments))) goto out;
  j->cancel_ms = sqlite3_column_int64(st, 35);
  if ((rc = sqlite_col_json(st, 36, &j->after))) goto out;
out:
  if (rc) job_release(j);
  return rc;
}

void sqlite_rows_release(struct sqlite_rows *r) {
  for (size_t i = 0; i < r->n; i++) job_release(&r->v[i]);
  free(r->v);
  r->v = NULL;
  r->n = r->cap = 0;
}

/* Steps st to the end, reading every row; resets st. */
int sqlite_read_rows(struct sqlite_store *q, sqlite3_stmt *st,
                            struct sqlite_rows *r, const char *what) {
  int rc = 0, src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    rc = array_reserve((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v));
    if (rc) goto out;
    rc = sqlite_row_job(st, &r->v[r->n]);
    if (rc) goto out;
    r->n++;
  }
  if (src != SQLITE_DONE) rc = sqlite_fail(q, what);
out:
  sqlite3_reset(st);
  return rc;
}
/* ---- jobs ---- */

/* The id of the pending or running job of project holding key: 0 and *id,
 * -ENOENT, or SPD_ESTORE. */
static int sqlite_unique_holder(struct sqlite_store *q, const char *project, const char *key,
                                int64_t *id) {
  sqlite3_stmt *st = jobs_stmt(q, SJOB_UNIQUE_HELD);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, project);
  sqlite_bind_str(st, 2, key);
  int src = sqlite3_step(st), rc = 0;
  if (src == SQLITE_ROW) *id = sqlite3_column_int64(st, 0);
  else rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "find unique job");
  sqlite3_reset(st);
  return rc;
}

/* One INSERT of j; SPD_ECONFLICT (not logged) when jobs_unique refuses it. */
static int sqlite_job_insert_row(struct sqlite_store *q, job_t *j, int64_t created) {
  sqlite3_stmt *st = jobs_stmt(q, SJOB_INSERT);
  if (!st) return SPD_ESTORE;
  int b = sqlite_bind_str(st, 1, j->jobid);
  b |= sqlite_bind_str(st, 2, j->project);
  b |= sqlite_bind_str(st, 3, j->spider);
  b |= sqlite_bind_str(st, 4, j->version);
  b |= sqlite_bind_json(st, 5, j->args);
  b |= sqlite_bind_json(st, 6, j->settings);
  b |= sqlite3_bind_double(st, 7, j->priority);
  b |= sqlite3_bind_int(st, 8, (int)j->state);
  b |= sqlite_bind_str(st, 9, j->node);
  b |= sqlite3_bind_int(st, 10, j->pid);
  b |= sqlite3_bind_int64(st, 11, j->pid_start);
  b |= sqlite3_bind_int64(st, 12, created);
  b |= sqlite3_bind_int64(st, 13, j->start_ms);
  b |= sqlite3_bind_int64(st, 14, j->end_ms);
  b |= sqlite3_bind_int(st, 15, j->exit_code);
  b |= sqlite3_bind_int(st, 16, j->term_signal);
  b |= sqlite_bind_json(st, 17, j->stats);
  b |= sqlite3_bind_int64(st, 18, j->schedule_id);
  b |= sqlite3_bind_int64(st, 19, j->parent_id);
  b |= sqlite3_bind_int64(st, 20, j->retry_of);
  b |= sqlite3_bind_int(st, 21, j->attempt > 0 ? j->attempt : 1);
  b |= sqlite3_bind_int(st, 22, j->max_retries);
  b |= sqlite3_bind_int64(st, 23, j->retry_backoff_ms);
  b |= sqlite3_bind_int64(st, 24, j->timeout_ms);
  b |= sqlite3_bind_int64(st, 25, j->not_before_ms);
  b |= sqlite3_bind_int64(st, 26, j->heartbeat_ms);
  b |= sqlite_bind_str(st, 27, j->unique_key);
  b |= sqlite_bind_json(st, 28, j->meta);
  b |= sqlite3_bind_int(st, 29, j->test ? 1 : 0);
  b |= sqlite_bind_json(st, 30, j->after);
  if (b != SQLITE_OK) {
    sqlite3_clear_bindings(st);
    return sqlite_fail(q, "bind job");
  }
  int src = sqlite3_step(st);
  int rc = 0;
  /* (src & 0xff): the primary code, whether or not extended codes are on. */
  if ((src & 0xff) == SQLITE_CONSTRAINT &&
      sqlite3_extended_errcode(q->db) == SQLITE_CONSTRAINT_UNIQUE && j->unique_key)
    rc = SPD_ECONFLICT;
  else if (src != SQLITE_DONE)
    rc = sqlite_fail(q, "insert job");
  sqlite3_reset(st);
  return rc;
}

int sqlite_job_insert(store_t *s, job_t *j) {
  struct sqlite_store *q = SQ(s);
  int64_t created = j->created_ms ? j->created_ms : clock_wall_ms();
  /* Final states are outside jobs_unique: only a live job takes its key. */
  int keyed = j->unique_key && j->state < JOB_FINISHED;
  int began = 0, rc = 0;
  int64_t holder = 0;
  /* The lookup and the insert under one write lock (BEGIN IMMEDIATE, or
   * the caller's transaction), so the holder found is the one the index
   * would name; a refusal by the index all the same (another writer that
   * does not look first) is answered the same way. */
  if (keyed && (rc = sqlite_auto_begin(q, &began))) return rc;
  if (keyed) {
    rc = sqlite_unique_holder(q, j->project, j->unique_key, &holder);
    if (rc == 0) rc = SPD_ECONFLICT;
    else if (rc == -ENOENT) rc = 0;
  }
  if (rc == 0) rc = sqlite_job_insert_row(q, j, created);
  if (rc == 0) {
    j->id = sqlite3_last_insert_rowid(q->db);
    j->created_ms = created;
  } else if (rc == SPD_ECONFLICT && !holder) {
    int hrc = sqlite_unique_holder(q, j->project, j->unique_key, &holder);
    if (hrc) rc = hrc == -ENOENT ? SPD_ESTORE : hrc;
  }
  if (keyed) rc = sqlite_auto_end(q, began, rc);
  if (rc == SPD_ECONFLICT) j->id = holder;
  return rc;
}

static int sqlite_cmp_claimed(const void *a, const void *b) {
  const job_t *x = a, *y = b;
  if (x->priority != y->priority) return x->priority > y->priority ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* A claim whose SQL skips limited projects and spiders: prepared per call
 * (its shape follows the limits at their maximum), finalized in claim_run. */
static sqlite3_stmt *sqlite_claim_skip_stmt(struct sqlite_store *q, const job_key_t *skip,
                                            size_t nskip) {
  char sql[2048];
  size_t n = (size_t)snprintf(sql, sizeof(sql),
                              "UPDATE jobs SET state = 1, node = ?1, start_ms = ?2 WHERE id IN "
                              "(SELECT id FROM jobs WHERE state = 0 AND not_before_ms <= ?2 "
                              "AND NOT (0");
  for (size_t i = 0; i < nskip && n < sizeof(sql); i++)
    n += (size_t)snprintf(sql + n, sizeof(sql) - n,
                          skip[i].spider ? " OR (project = ? AND spider = ?)" : " OR project = ?");
  if (n < sizeof(sql))
    snprintf(sql + n, sizeof(sql) - n,
             ") ORDER BY priority DESC, id LIMIT ?3) RETURNING " SQLITE_JOB_COLS);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK) {
    sqlite_fail(q, "prepare claim");
    return NULL;
  }
  int i = 4;
  for (size_t k = 0; k < nskip; k++) {
    sqlite_bind_str(st, i++, skip[k].project);
    if (skip[k].spider) sqlite_bind_str(st, i++, skip[k].spider);
  }
  return st;
}

static int sqlite_claim_run(store_t *s, const char *node, size_t max, int64_t now_ms,
                            const job_key_t *skip, size_t nskip, job_list_t *out);

int sqlite_job_claim(store_t *s, const char *node, size_t max,
                            int64_t now_ms, job_list_t *out) {
  return sqlite_claim_run(s, node, max, now_ms, NULL, 0, out);
}

int sqlite_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                                 const job_key_t *skip, size_t nskip, job_list_t *out) {
  return sqlite_claim_run(s, node, max, now_ms, skip, nskip, out);
}

static int sqlite_claim_run(store_t *s, const char *node, size_t max, int64_t now_ms,
                            const job_key_t *skip, size_t nskip, job_list_t *out) {
  struct sqlite_store *q = SQ(s);
  struct sqlite_rows r = {0};
  int began = 0;
  sqlite3_stmt *st = nskip ? sqlite_claim_skip_stmt(q, skip, nskip)
                           : jobs_stmt(q, max == 1 ? SJOB_CLAIM_ONE : SJOB_CLAIM);
  if (!st) return SPD_ESTORE;
  /* BEGIN IMMEDIATE takes the write lock before the SELECT inside the
   * UPDATE reads, so two connections can never pick the same rows. */
  int rc = sqlite_auto_begin(q, &began);
  if (rc) {
    if (nskip) sqlite3_finalize(st);
    return rc;
  }
  sqlite_bind_str(st, 1, node);
  sqlite3_bind_int64(st, 2, now_ms);
  if (max != 1 || nskip) sqlite3_bind_int64(st, 3, sqlite_clamp(max));
  rc = sqlite_read_rows(q, st, &r, "claim jobs");
  if (nskip) sqlite3_finalize(st);
  rc = sqlite_auto_end(q, began, rc);
  if (rc) goto out;
  /* RETURNING gives rows in no promised order. */
  if (r.n > 1) qsort(r.v, r.n, sizeof(*r.v), sqlite_cmp_claimed);
  rc = job_list_append(out, r.v, r.n);
out:
  sqlite_rows_release(&r);
  return rc;
}

int sqlite_job_started(store_t *s, int64_t id, int pid, int64_t pid_start) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_STARTED);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int(st, 2, pid);
  sqlite3_bind_int64(st, 3, pid_start);
  return sqlite_changed(q, sqlite_done(q, st, "record job process"));
}

int sqlite_job_requeue(store_t *s, int64_t id) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_REQUEUE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  return sqlite_changed(q, sqlite_done(q, st, "requeue job"));
}

int sqlite_job_finish(store_t *s, int64_t id, job_state_t state,
                             int64_t end_ms, int exit_code, int term_signal,
                             const json_t *stats) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_FINISH);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int(st, 2, (int)state);
  sqlite3_bind_int64(st, 3, end_ms);
  sqlite3_bind_int(st, 4, exit_code);
  sqlite3_bind_int(st, 5, term_signal);
  if (sqlite_bind_json(st, 6, stats) != SQLITE_OK) return -ENOMEM;
  int rc = sqlite_changed(q, sqlite_done(q, st, "finish job"));
  sqlite3_bind_null(st, 6); /* frees the stats dump now, not at next use */
  return rc;
}

int sqlite_job_cancel_pending(store_t *s, const char *project,
                                     const char *jobid, int64_t now_ms,
                                     int *count) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_CANCEL);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, project);
  sqlite_bind_str(st, 2, jobid);
  sqlite3_bind_int64(st, 3, now_ms);
  int rc = sqlite_done(q, st, "cancel pending jobs");
  if (!rc) *count = sqlite3_changes(q->db);
  return rc;
}

int sqlite_job_get(store_t *s, int64_t id, job_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_GET);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  int rc, src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    job_t j;
    rc = sqlite_row_job(st, &j);
    if (!rc) *out = j;
  } else {
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "get job");
  }
  sqlite3_reset(st);
  return rc;
}

int sqlite_job_status(store_t *s, const char *project, const char *jobid,
                             job_state_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_STATUS);
  if (!st) return SPD_ESTORE;
  sqlite_bind_str(st, 1, jobid);
  sqlite_bind_str(st, 2, project);
  int rc = 0, src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    *out = (job_state_t)sqlite3_column_int(st, 0);
  else
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "job status");
  sqlite3_reset(st);
  return rc;
}

int sqlite_job_heartbeat(store_t *s, int64_t id, int64_t now_ms) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_HEARTBEAT);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, now_ms);
  return sqlite_changed(q, sqlite_done(q, st, "job heartbeat"));
}

int sqlite_job_next_due(store_t *s, int64_t now_ms, int64_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_NEXT_DUE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, now_ms);
  int rc = 0, src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    *out = sqlite3_column_int64(st, 0);
  else if (src != SQLITE_DONE)
    rc = sqlite_fail(q, "next due job");
  sqlite3_reset(st);
  return rc;
}

/* A filter's set of projects is bound from this parameter number on, past
 * every other field's, so both listings number them alike. */
#define SQLITE_LIST_PROJECTS_PARAM 21

/* " AND project IN (?21, ?22, ...)": one parameter per project, never the
 * names in the SQL. Returns the new length of buf. */
static size_t sqlite_projects_sql(char *buf, size_t len, size_t n, size_t nprojects) {
  const char *sep = " AND project IN (";
  for (size_t i = 0; i < nprojects && n < len; i++) {
    n += (size_t)snprintf(buf + n, len - n, "%s?%zu", sep, SQLITE_LIST_PROJECTS_PARAM + i);
    sep = ", ";
  }
  if (nprojects && n < len) n += (size_t)snprintf(buf + n, len - n, ")");
  return n;
}

static void sqlite_bind_projects(sqlite3_stmt *st, const job_filter_t *f) {
  for (size_t i = 0; i < f->nprojects; i++)
    sqlite_bind_str(st, SQLITE_LIST_PROJECTS_PARAM + (int)i, f->projects[i]);
}

/* Reads a prepared listing's rows into out and finalizes st. */
static int list_read(struct sqlite_store *q, sqlite3_stmt *st, job_list_t *out) {
  struct sqlite_rows r = {0};
  int rc = sqlite_read_rows(q, st, &r, "list jobs");
  sqlite3_finalize(st);
  if (!rc) rc = job_list_append(out, r.v, r.n);
  sqlite_rows_release(&r);
  return rc;
}

/* The native API's listing: filters that vary per call, newest id first,
 * prepared per call (the API pages through, it does not poll). */
static int sqlite_jobs_list_native(struct sqlite_store *q, const job_filter_t *f,
                                   job_list_t *out) {
  char sql[4096];
  /* Running jobs are few (the nodes' slots): their partial index and a
   * sort beat walking every id down to the page's last, which the planner
   * picks without statistics. */
  int running = f->states == 1u << JOB_RUNNING;
  /* A spider's history by end time: a seek in jobs_history, whose
   * condition is spelled out so the planner sees it applies. */
  int history = f->ended_first && f->project && f->spider && f->states &&
                !(f->states & 3u) && !f->nprojects;
  /* Paused jobs too (every listjobs.json asks for them): a few rows among
   * the whole history. */
  int paused = f->states == 1u << JOB_PAUSED;
  size_t n = (size_t)snprintf(sql, sizeof(sql), "SELECT " SQLITE_JOB_COLS " FROM jobs%s WHERE 1%s",
                              running   ? " INDEXED BY jobs_running"
                              : history ? " INDEXED BY jobs_history"
                              : paused  ? " INDEXED BY jobs_paused"
                                        : "",
                              history ? " AND state >= 2" : "");
#define SQLITE_ADD(...) n += (size_t)snprintf(sql + n, sizeof(sql) - n, __VA_ARGS__)
  if (running) {
    SQLITE_ADD(" AND state = 1"); /* the index's own condition */
  } else if (paused) {
    SQLITE_ADD(" AND state = 6");
  } else if (f->states) {
    const char *sep = " AND state IN (";
    for (int i = 0; i < JOB_NSTATES; i++)
      if (f->states & (1u << i)) {
        SQLITE_ADD("%s%d", sep, i);
        sep = ", ";
      }
    SQLITE_ADD(")");
  }
  if (f->project) SQLITE_ADD(" AND project = ?1");
  n = sqlite_projects_sql(sql, sizeof(sql), n, f->nprojects);
  if (f->jobid) SQLITE_ADD(" AND jobid = ?2");
  if (f->node) SQLITE_ADD(" AND node = ?3");
  if (f->started_only) SQLITE_ADD(" AND start_ms != 0");
  if (f->spider) SQLITE_ADD(" AND spider = ?4");
  if (f->schedule_id) SQLITE_ADD(" AND schedule_id = ?5");
  if (f->test) SQLITE_ADD(" AND test = %d", f->test > 0);
  if (f->parent_id) SQLITE_ADD(" AND parent_id = ?6");
  if (f->created_from_ms) SQLITE_ADD(" AND created_ms >= ?7");
  if (f->created_to_ms) SQLITE_ADD(" AND created_ms < ?8");
  if (f->before_id) SQLITE_ADD(" AND id < ?9");
  if (f->health && !strcmp(f->health, "none")) SQLITE_ADD(" AND health IS NULL");
  else if (f->health) SQLITE_ADD(" AND health = ?12");
  /* instr, not LIKE: the user's % and _ are plain text. lower() folds
   * ASCII only, as every backend does. */
  if (f->text)
    SQLITE_ADD(" AND (instr(lower(jobid), lower(?11)) OR instr(lower(spider), lower(?11))"
               " OR instr(lower(project), lower(?11)) OR EXISTS (SELECT 1 FROM"
               " json_each(CASE WHEN json_valid(args) THEN args END) AS a"
               " WHERE a.type = 'text' AND instr(lower(a.value), lower(?11))))");
  /* A string at the key: json_extract gives SQL text only for a JSON
   * string, so a number never equals the text of its digits. */
  for (size_t i = 0; i < f->nmeta; i++)
    SQLITE_ADD(" AND json_valid(meta) AND json_type(meta, '$.\"' || ?%zu || '\"') = 'text'"
               " AND json_extract(meta, '$.\"' || ?%zu || '\"') = ?%zu",
               200 + 2 * i, 200 + 2 * i, 201 + 2 * i);
  SQLITE_ADD(history ? " ORDER BY end_ms DESC, id DESC" : " ORDER BY id DESC");
  if (f->limit) SQLITE_ADD(" LIMIT ?10");
#undef SQLITE_ADD
  if (n >= sizeof(sql)) return -EINVAL; /* never with store.c's limits */
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sqlite_fail(q, "prepare job list");
  sqlite_bind_projects(st, f);
  sqlite_bind_str(st, 1, f->project);
  sqlite_bind_str(st, 2, f->jobid);
  sqlite_bind_str(st, 3, f->node);
  sqlite_bind_str(st, 4, f->spider);
  sqlite3_bind_int64(st, 5, f->schedule_id);
  sqlite3_bind_int64(st, 6, f->parent_id);
  sqlite3_bind_int64(st, 7, f->created_from_ms);
  sqlite3_bind_int64(st, 8, f->created_to_ms);
  sqlite3_bind_int64(st, 9, f->before_id);
  sqlite3_bind_int64(st, 10, sqlite_clamp(f->limit));
  if (f->text) sqlite_bind_str(st, 11, f->text);
  if (f->health && strcmp(f->health, "none")) sqlite_bind_str(st, 12, f->health);
  for (size_t i = 0; i < f->nmeta; i++) {
    sqlite_bind_str(st, (int)(200 + 2 * i), f->meta[2 * i]);
    sqlite_bind_str(st, (int)(201 + 2 * i), f->meta[2 * i + 1]);
  }
  return list_read(q, st, out);
}

/* Writes the SQL for one filter shape into buf (with nprojects, the shape
 * of one call). Returns its length (>= len: cut short). */
static size_t sqlite_list_sql(char *buf, size_t len, unsigned states, int project,
                              size_t nprojects, int jobid, int node, int started,
                              int limit) {
  size_t n = (size_t)snprintf(buf, len, "SELECT " SQLITE_JOB_COLS " FROM jobs WHERE 1");
#define SQLITE_ADD(...) n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__)
  if (states == SQLITE_LIST_FINAL_STATES) {
    /* Spelled as the partial index's own condition so the planner uses it. */
    SQLITE_ADD(" AND state >= 2");
  } else if (states && !(states & (states - 1))) {
    /* A single state as "=", the form the partial indexes are declared
     * with; the planner does not match "IN (0)" against "state = 0". */
    SQLITE_ADD(" AND state = %d", __builtin_ctz(states));
  } else if (states != SQLITE_LIST_ALL_STATES) {
    const char *sep = " AND state IN (";
    for (int i = 0; i < JOB_NSTATES; i++)
      if (states & (1u << i)) {
        SQLITE_ADD("%s%d", sep, i);
        sep = ", ";
      }
    SQLITE_ADD(")");
  }
  if (project) SQLITE_ADD(" AND project = ?1");
  n = sqlite_projects_sql(buf, len, n, nprojects);
  if (jobid) SQLITE_ADD(" AND jobid = ?2");
  if (node) SQLITE_ADD(" AND node = ?3");
  if (started) SQLITE_ADD(" AND start_ms != 0");
  if (states == 1u << JOB_PENDING)
    SQLITE_ADD(" ORDER BY priority DESC, id");
  else if (states == 1u << JOB_RUNNING)
    SQLITE_ADD(" ORDER BY start_ms, id");
  else if (!(states & 3u))
    SQLITE_ADD(" ORDER BY end_ms DESC, id DESC");
  else
    SQLITE_ADD(" ORDER BY CASE WHEN state >= 2 THEN 2 ELSE state END, "
               "CASE state WHEN 0 THEN -priority WHEN 1 THEN start_ms "
               "ELSE -end_ms END, "
               "CASE WHEN state >= 2 THEN -id ELSE id END");
  if (limit) SQLITE_ADD(" LIMIT ?4");
#undef SQLITE_ADD
  return n;
}

/* A listing limited to a set of projects: the shape's SQL with one more
 * condition, prepared per call (how many projects varies, and the API that
 * asks pages through, it does not poll). */
static int sqlite_jobs_list_projects(struct sqlite_store *q, const job_filter_t *f,
                                     unsigned states, job_list_t *out) {
  char sql[2048];
  if (sqlite_list_sql(sql, sizeof(sql), states, !!f->project, f->nprojects, !!f->jobid,
                      !!f->node, !!f->started_only, !!f->limit) >= sizeof(sql))
    return -EINVAL; /* never with store.c's limits */
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sqlite_fail(q, "prepare job list");
  if (f->project) sqlite_bind_str(st, 1, f->project);
  if (f->jobid) sqlite_bind_str(st, 2, f->jobid);
  if (f->node) sqlite_bind_str(st, 3, f->node);
  if (f->limit) sqlite3_bind_int64(st, 4, sqlite_clamp(f->limit));
  sqlite_bind_projects(st, f);
  return list_read(q, st, out);
}

int sqlite_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out) {
  struct sqlite_store *q = SQ(s);
  struct sqlite_rows r = {0};
  if (f->spider || f->schedule_id || f->parent_id || f->created_from_ms ||
      f->created_to_ms || f->before_id || f->newest_first || f->text || f->nmeta || f->test ||
      f->health)
    return sqlite_jobs_list_native(q, f, out);
  unsigned states = f->states ? f->states : SQLITE_LIST_ALL_STATES;
  if (f->nprojects) return sqlite_jobs_list_projects(q, f, states, out);
  unsigned shape = states | (unsigned)!!f->project << JOB_NSTATES |
                   (unsigned)!!f->jobid << (JOB_NSTATES + 1) |
                   (unsigned)!!f->node << (JOB_NSTATES + 2) |
                   (unsigned)!!f->started_only << (JOB_NSTATES + 3) |
                   (unsigned)!!f->limit << (JOB_NSTATES + 4);
  if (!q->list_stmt) {
    q->list_stmt = calloc(SQLITE_LIST_SHAPES, sizeof(*q->list_stmt));
    if (!q->list_stmt) return -ENOMEM;
  }
  sqlite3_stmt *st = q->list_stmt[shape];
  if (!st) {
    char sql[1024];
    sqlite_list_sql(sql, sizeof(sql), states, !!f->project, 0, !!f->jobid, !!f->node,
                    !!f->started_only, !!f->limit);
    if (sqlite3_prepare_v3(q->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) !=
        SQLITE_OK)
      return sqlite_fail(q, "prepare job list");
    q->list_stmt[shape] = st;
  }
  if (f->project) sqlite_bind_str(st, 1, f->project);
  if (f->jobid) sqlite_bind_str(st, 2, f->jobid);
  if (f->node) sqlite_bind_str(st, 3, f->node);
  if (f->limit) sqlite3_bind_int64(st, 4, sqlite_clamp(f->limit));
  int rc = sqlite_read_rows(q, st, &r, "list jobs");
  if (!rc) rc = job_list_append(out, r.v, r.n);
  sqlite_rows_release(&r);
  return rc;
}

/* Scrapyd's groups as store_jobs_page reads them: the condition (the
 * partial index's own), the sort key and which way key and id run. */
static const struct page_group {
  const char *index, *cond, *key;
  int key_desc, id_desc;
} page_groups[JOB_NGROUPS] = {
    {"jobs_pending", "state = 0", "priority", 1, 0},
    {"jobs_running", "state = 1", "start_ms", 0, 0},
    {"jobs_ended", "state >= 2 AND start_ms != 0", "end_ms", 1, 1},
};

/* One part of a page: 0 the group from its start; 1 the jobs with the
 * cursor's key and an id past its; 2 the jobs with a key past its. Two
 * parts, not one (key, id) comparison: pending's key runs DESC and its id
 * ASC, which no row value says, and an OR of both walks every tie of the
 * key from the first (a million pending jobs share priority 0). Prepared
 * per call: one page is hundreds of rows. The group's own index, named:
 * with a project, the planner takes jobs_history and sorts every ended job
 * of the project for each page, where the walk down jobs_ended reads each
 * job once over the whole listing. */
static int sqlite_page_part(store_t *s, int group, int part, const char *project,
                            const job_page_key_t *after, size_t limit, job_list_t *out) {
  struct sqlite_store *q = SQ(s);
  const struct page_group *g = &page_groups[group];
  char sql[2048];
  size_t n = (size_t)snprintf(sql, sizeof(sql),
                              "SELECT " SQLITE_JOB_COLS " FROM jobs INDEXED BY %s WHERE %s%s",
                              g->index, g->cond, project ? " AND project = ?1" : "");
  if (part == 1)
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND %s = ?2 AND id %s ?3", g->key,
                          g->id_desc ? "<" : ">");
  else if (part == 2)
    n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND %s %s ?2", g->key,
                          g->key_desc ? "<" : ">");
  n += (size_t)snprintf(sql + n, sizeof(sql) - n, " ORDER BY %s%s, id%s LIMIT ?4", g->key,
                        g->key_desc ? " DESC" : "", g->id_desc ? " DESC" : "");
  if (n >= sizeof(sql)) return -EINVAL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sqlite_fail(q, "prepare job page");
  if (project) sqlite_bind_str(st, 1, project);
  if (part && group == JOB_GROUP_PENDING) sqlite3_bind_double(st, 2, after->priority);
  else if (part) sqlite3_bind_int64(st, 2, after->t_ms);
  if (part == 1) sqlite3_bind_int64(st, 3, after->id);
  sqlite3_bind_int64(st, 4, sqlite_clamp(limit));
  return list_read(q, st, out);
}

int sqlite_jobs_page(store_t *s, int group, const char *project, size_t limit,
                     job_page_key_t *after, job_list_t *out, int *more) {
  return store_jobs_page_parts(s, sqlite_page_part, group, project, limit, after, out, more);
}

int sqlite_job_counts(store_t *s, const char *project, int64_t ended_since_ms,
                      int64_t counts[JOB_NSTATES]) {
  struct sqlite_store *q = SQ(s);
  int slot = ended_since_ms ? (project ? SJOB_COUNTS_SINCE_PROJECT : SJOB_COUNTS_SINCE)
                            : (project ? SJOB_COUNTS_PROJECT : SJOB_COUNTS);
  sqlite3_stmt *st = jobs_stmt(q, slot);
  if (!st) return SPD_ESTORE;
  if (project) sqlite_bind_str(st, 1, project);
  if (ended_since_ms) sqlite3_bind_int64(st, 2, ended_since_ms);
  int rc = 0, src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    int state = sqlite3_column_int(st, 0);
    if (state >= 0 && state < JOB_NSTATES) counts[state] = sqlite3_column_int64(st, 1);
  }
  if (src != SQLITE_DONE) rc = sqlite_fail(q, "count jobs");
  sqlite3_reset(st);
  return rc;
}

int sqlite_job_throughput(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                          int64_t step_ms, job_bucket_t *buckets, size_t n) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, project ? SJOB_THROUGHPUT_PROJECT : SJOB_THROUGHPUT);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, from_ms);
  sqlite3_bind_int64(st, 2, to_ms);
  sqlite3_bind_int64(st, 3, step_ms);
  if (project) sqlite_bind_str(st, 4, project);
  int rc = 0, src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t i = sqlite3_column_int64(st, 0);
    if (i < 0 || (size_t)i >= n) continue;
    buckets[i].finished = sqlite3_column_int64(st, 1);
    buckets[i].failed = sqlite3_column_int64(st, 2);
    buckets[i].items = sqlite3_column_int64(st, 3);
  }
  if (src != SQLITE_DONE) rc = sqlite_fail(q, "job throughput");
  sqlite3_reset(st);
  return rc;
}

/* Finds the oldest job trimming keeps: the keep-th newest started final
 * job, or the oldest one when there are fewer. -ENOENT when none. */
static int sqlite_trim_cutoff(struct sqlite_store *q, int keep, int64_t *end_ms,
                              int64_t *id) {
  int rc = -ENOENT;
  for (int pass = 0; pass < 2 && rc == -ENOENT; pass++) {
    sqlite3_stmt *st = jobs_stmt(q, pass ? SJOB_TRIM_OLDEST : SJOB_TRIM_NTH);
    if (!st) return SPD_ESTORE;
    if (!pass) sqlite3_bind_int64(st, 1, keep - 1);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
      *end_ms = sqlite3_column_int64(st, 0);
      *id = sqlite3_column_int64(st, 1);
      rc = 0;
    } else if (src != SQLITE_DONE) {
      rc = sqlite_fail(q, "trim jobs");
    }
    sqlite3_reset(st);
  }
  return rc;
}

/* Final jobs that never started (cancelled while pending) are trimmed by the
 * same cut-off whatever their final state: lists and counts never show
 * them, so nothing is served by keeping one. */
int sqlite_keep_last_id(struct sqlite_store *q) { return jobs_run(q, SJOB_TRIM_LAST_ID); }

int sqlite_trim_finished(store_t *s, int keep, int *deleted) {
  struct sqlite_store *q = SQ(s);
  int64_t end_ms = 0, id = 0;
  int began = 0, n = 0;
  int rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  rc = sqlite_trim_cutoff(q, keep, &end_ms, &id);
  if (rc == -ENOENT) {
    rc = 0;
    goto out;
  }
  if (rc) goto out;
  if ((rc = sqlite_keep_last_id(q))) goto out;
  sqlite3_stmt *st = jobs_stmt(q, SJOB_TRIM_STARTED);
  if (!st) {
    rc = SPD_ESTORE;
    goto out;
  }
  sqlite3_bind_int64(st, 1, end_ms);
  sqlite3_bind_int64(st, 2, id);
  if ((rc = sqlite_done(q, st, "trim jobs"))) goto out;
  n += sqlite3_changes(q->db);
  if (!(st = jobs_stmt(q, SJOB_TRIM_UNSTARTED))) {
    rc = SPD_ESTORE;
    goto out;
  }
  sqlite3_bind_int64(st, 1, end_ms);
  if ((rc = sqlite_done(q, st, "trim jobs"))) goto out;
  n += sqlite3_changes(q->db);
out:
  rc = sqlite_auto_end(q, began, rc);
  if (!rc) *deleted = n;
  return rc;
}

/* The window's ended jobs down jobs_ended, only the columns the stats
 * need: no JSON column is parsed but the item count's path. */
int sqlite_job_stats_scan(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                          job_stats_row_fn fn, void *ud) {
  struct sqlite_store *q = SQ(s);
  char sql[1024];
  snprintf(sql, sizeof(sql),
           "SELECT project, spider, schedule_id, state, start_ms, end_ms, CASE "
           "WHEN json_valid(stats) AND json_type(stats, '$.items') IN ('integer', 'real') "
           "THEN CAST(json_extract(stats, '$.items') AS INTEGER) "
           "WHEN json_valid(stats) AND json_type(stats, '$.item_scraped_count') "
           "IN ('integer', 'real') "
           "THEN CAST(json_extract(stats, '$.item_scraped_count') AS INTEGER) ELSE 0 END "
           "FROM jobs INDEXED BY jobs_ended WHERE state >= 2 AND start_ms != 0 "
           "AND end_ms >= ?1 AND end_ms < ?2 AND test = 0%s",
           project ? " AND project = ?3" : "");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(q->db, sql, -1, &st, NULL) != SQLITE_OK)
    return sqlite_fail(q, "prepare job stats");
  sqlite3_bind_int64(st, 1, from_ms);
  sqlite3_bind_int64(st, 2, to_ms);
  if (project) sqlite_bind_str(st, 3, project);
  int rc = 0, src = SQLITE_DONE;
  while (!rc && (src = sqlite3_step(st)) == SQLITE_ROW) {
    job_stats_row_t row = {.project = (const char *)sqlite3_column_text(st, 0),
                           .spider = (const char *)sqlite3_column_text(st, 1),
                           .schedule_id = sqlite3_column_int64(st, 2),
                           .state = sqlite3_column_int(st, 3),
                           .start_ms = sqlite3_column_int64(st, 4),
                           .end_ms = sqlite3_column_int64(st, 5),
                           .items = sqlite3_column_int64(st, 6)};
    rc = fn(ud, &row);
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "job stats");
  sqlite3_finalize(st);
  return rc;
}

int sqlite_job_set_meta(store_t *s, int64_t id, const json_t *meta) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_SET_META);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite_bind_json(st, 2, meta);
  return sqlite_changed(q, sqlite_done(q, st, "set job meta"));
}

int sqlite_job_set_history(store_t *s, int64_t id, job_state_t state, int corrected,
                           job_state_t original, const char *note) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_SET_HISTORY);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int(st, 2, (int)state);
  if (corrected) sqlite3_bind_int(st, 3, (int)original);
  else sqlite3_bind_null(st, 3);
  sqlite_bind_str(st, 4, note);
  return sqlite_changed(q, sqlite_done(q, st, "update job history"));
}

int sqlite_job_set_health(store_t *s, int64_t id, const char *health, const json_t *reasons) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_SET_HEALTH);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite_bind_str(st, 2, health);
  sqlite_bind_json(st, 3, reasons);
  return sqlite_changed(q, sqlite_done(q, st, "set job health"));
}

int sqlite_job_set_segments(store_t *s, int64_t id, const json_t *segments) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_SET_SEGMENTS);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite_bind_json(st, 2, segments);
  return sqlite_changed(q, sqlite_done(q, st, "set job segments"));
}

int sqlite_job_resume(store_t *s, int64_t id) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_RESUME);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  return sqlite_changed(q, sqlite_done(q, st, "resume job"));
}

int sqlite_jobs_waiting(store_t *s, int64_t upstream, job_list_t *out) {
  struct sqlite_store *q = SQ(s);
  struct sqlite_rows r = {0};
  sqlite3_stmt *st = jobs_stmt(q, SJOB_WAITING);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, upstream);
  int rc = sqlite_read_rows(q, st, &r, "list waiting jobs");
  if (!rc) rc = job_list_append(out, r.v, r.n);
  sqlite_rows_release(&r);
  return rc;
}

int sqlite_job_wake(store_t *s, int64_t id, int64_t now_ms) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = jobs_stmt(q, SJOB_WAKE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, now_ms);
  return sqlite_changed(q, sqlite_done(q, st, "wake job"));
}
