/* The SQLite backend's private header, shared by the files of this folder:
 * sqlite.c (connection, schema, transactions, meta, the ops table), jobs.c
 * (jobs), sched.c (schedules, runs, events, leases), janitor.c (history
 * retention), nodes.c (nodes, cancel requests, the shared-store ops a single
 * node answers -ENOTSUP), queue.c (task queues) and auth.c (users and API
 * tokens).
 * Ownership as in store.h. */
#ifndef SPIDERD_STORE_SQLITE_INT_H
#define SPIDERD_STORE_SQLITE_INT_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "store/store_impl.h"

/* Statement slots of sqlite/jobs.c (sqlite_jobs_sql[]). */
#define SQLITE_JOBS_SLOTS 32
/* Statement slots of sqlite/sched.c (sqlite_sched_sql[]). */
#define SQLITE_SCHED_SLOTS 40
/* Statement slots of sqlite/janitor.c. */
#define SQLITE_JANITOR_SLOTS 8
/* Statement slots of sqlite/queue.c. */
#define SQLITE_QUEUE_SLOTS 64
/* Statement slots of sqlite/nodes.c. */
#define SQLITE_NODES_SLOTS 8
/* Statement slots of sqlite/auth.c. */
#define SQLITE_AUTH_SLOTS 8

/* store_jobs_list builds its SQL from the filter's shape (which fields are
 * set, which states) so each shape gets a plan that can use an index; one
 * cached statement per shape: 6 state bits + project, jobid, node,
 * started_only and limit. */
#define SQLITE_LIST_ALL_STATES ((1u << JOB_NSTATES) - 1)
#define SQLITE_LIST_FINAL_STATES (SQLITE_LIST_ALL_STATES & ~3u)
#define SQLITE_LIST_SHAPES (1u << (JOB_NSTATES + 5))

struct sqlite_store {
  struct store base;
  sqlite3 *db;
  int in_tx;    /* inside store_tx_begin .. commit/rollback */
  int sp_depth; /* open savepoints */
  sqlite3_stmt **stmt;          /* sqlite.c's statements, prepared on first use */
  sqlite3_stmt **list_stmt;     /* job list shapes, allocated on first list */
  sqlite3_stmt *jobs_stmt[SQLITE_JOBS_SLOTS];
  sqlite3_stmt *sched_stmt[SQLITE_SCHED_SLOTS];
  sqlite3_stmt *janitor_stmt[SQLITE_JANITOR_SLOTS];
  sqlite3_stmt *queue_stmt[SQLITE_QUEUE_SLOTS];
  sqlite3_stmt *nodes_stmt[SQLITE_NODES_SLOTS];
  sqlite3_stmt *auth_stmt[SQLITE_AUTH_SLOTS];
};

#define SQ(s) ((struct sqlite_store *)(s))

/* Logs the connection's last error; returns SPD_ESTORE. */
int sqlite_fail(struct sqlite_store *q, const char *what);
/* Prepares (once) sql into *slot; NULL on failure (logged). */
sqlite3_stmt *sqlite_prepare_slot(struct sqlite_store *q, sqlite3_stmt **slot,
                                  const char *sql);
/* Steps a statement that returns no rows and resets it. */
int sqlite_done(struct sqlite_store *q, sqlite3_stmt *st, const char *what);
/* Steps st (bound) to its end, row(st, ud) on each row until one fails;
 * resets st. 0, row's failure, or a step's (logged as what). */
int sqlite_each_row(struct sqlite_store *q, sqlite3_stmt *st,
                    int (*row)(sqlite3_stmt *st, void *ud), void *ud, const char *what);
/* rc, or -ENOENT when the last statement changed no row. */
int sqlite_changed(struct sqlite_store *q, int rc);
int sqlite_bind_str(sqlite3_stmt *st, int i, const char *v);
int sqlite_bind_json(sqlite3_stmt *st, int i, const json_t *v);
int sqlite_col_str(sqlite3_stmt *st, int i, char **out);
int sqlite_col_json(sqlite3_stmt *st, int i, json_t **out);
/* A transaction of its own unless the caller opened one. */
int sqlite_auto_begin(struct sqlite_store *q, int *began);
int sqlite_auto_end(struct sqlite_store *q, int began, int rc);
int64_t sqlite_clamp(size_t v);

/* A growable array of jobs read from a statement, handed to the caller's
 * list in one piece so a failure halfway leaves the list untouched. */
struct sqlite_rows {
  job_t *v;
  size_t n, cap;
};

#define SQLITE_JOB_COLS                                                      \
  "id, jobid, project, spider, version, args, settings, priority, state, " \
  "node, pid, pid_start, created_ms, start_ms, end_ms, exit_code, "        \
  "term_signal, stats, schedule_id, parent_id, retry_of, attempt, "        \
  "max_retries, retry_backoff_ms, timeout_ms, not_before_ms, heartbeat_ms, " \
  "unique_key, meta, original_state, note, test, health, health_reasons, segments, cancel_ms, " \
  "\"after\""

/* Reads one row of SQLITE_JOB_COLS into j (initialised here). */
int sqlite_row_job(sqlite3_stmt *st, job_t *j);
/* Steps st to the end, reading every row into r; resets st. */
int sqlite_read_rows(struct sqlite_store *q, sqlite3_stmt *st, struct sqlite_rows *r,
                     const char *what);
void sqlite_rows_release(struct sqlite_rows *r);

/* Raises meta 'jobs.last_id' to the highest job id: run it before deleting
 * jobs, so the next insert still gets an id never given before. */
int sqlite_keep_last_id(struct sqlite_store *q);

/* Every op of store/ops.h as sqlite_<op>, spread over this folder's files. */
#define STORE_OP(op, params) int sqlite_##op params;
#include "store/ops.h"
int sqlite_watch_open(const char *url, const char *rest, store_watch_t **out, char *err,
                      size_t errlen);

#endif
