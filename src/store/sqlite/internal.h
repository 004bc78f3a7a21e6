/* The SQLite backend's private header, shared by sqlite.c (connection,
 * schema, jobs), sqlite/sched.c (schedules, runs, events, leases) and
 * sqlite/janitor.c (history retention).
 * Ownership as in store.h. */
#ifndef SPIDERD_STORE_SQLITE_INT_H
#define SPIDERD_STORE_SQLITE_INT_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdint.h>

#include "store/store_impl.h"

/* Statement slots of sqlite/sched.c (sqlite_sched_sql[]). */
#define SQLITE_SCHED_SLOTS 40
/* Statement slots of sqlite/janitor.c. */
#define SQLITE_JANITOR_SLOTS 8
/* Statement slots of sqlite/queue.c. */
#define SQLITE_QUEUE_SLOTS 64
/* Statement slots of sqlite/nodes.c. */
#define SQLITE_NODES_SLOTS 8

struct sqlite_store {
  struct store base;
  sqlite3 *db;
  int in_tx;    /* inside store_tx_begin .. commit/rollback */
  int sp_depth; /* open savepoints */
  sqlite3_stmt **stmt;          /* sqlite.c's statements, prepared on first use */
  sqlite3_stmt **list_stmt;     /* job list shapes, allocated on first list */
  sqlite3_stmt *sched_stmt[SQLITE_SCHED_SLOTS];
  sqlite3_stmt *janitor_stmt[SQLITE_JANITOR_SLOTS];
  sqlite3_stmt *queue_stmt[SQLITE_QUEUE_SLOTS];
  sqlite3_stmt *nodes_stmt[SQLITE_NODES_SLOTS];
};

#define SQ(s) ((struct sqlite_store *)(s))

/* Logs the connection's last error; returns SPD_ESTORE. */
int sqlite_fail(struct sqlite_store *q, const char *what);
/* Prepares (once) sql into *slot; NULL on failure (logged). */
sqlite3_stmt *sqlite_prepare_slot(struct sqlite_store *q, sqlite3_stmt **slot,
                                  const char *sql);
/* Steps a statement that returns no rows and resets it. */
int sqlite_done(struct sqlite_store *q, sqlite3_stmt *st, const char *what);
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
  "unique_key"

/* Reads one row of SQLITE_JOB_COLS into j (initialised here). */
int sqlite_row_job(sqlite3_stmt *st, job_t *j);
/* Steps st to the end, reading every row into r; resets st. */
int sqlite_read_rows(struct sqlite_store *q, sqlite3_stmt *st, struct sqlite_rows *r,
                     const char *what);
void sqlite_rows_release(struct sqlite_rows *r);

/* sqlite/nodes.c's ops. */
int sqlite_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead);
int sqlite_nodes_list(store_t *s, node_list_t *out);
int sqlite_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                      job_list_t *lost);
int sqlite_node_delete(store_t *s, const char *name);
int sqlite_job_cancel_request(store_t *s, int64_t id, int64_t now_ms);
int sqlite_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out);
void sqlite_nodes_close(struct sqlite_store *q);

/* sqlite/sched.c's ops, filled into store_sqlite_ops. */
int sqlite_schedule_insert(store_t *s, schedule_t *sc);
int sqlite_schedule_update(store_t *s, const schedule_t *sc);
int sqlite_schedule_delete(store_t *s, int64_t id);
int sqlite_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out);
int sqlite_schedules_list(store_t *s, int64_t after_id, size_t limit,
                          schedule_list_t *out);
int sqlite_runs_add(store_t *s, int64_t schedule_id, const int64_t *due,
                    const int64_t *fire, size_t n, int64_t horizon_ms, int64_t refill_ms);
int sqlite_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms);
int sqlite_schedules_refill(store_t *s, int64_t now_ms, size_t limit,
                            schedule_list_t *out);
int sqlite_run_defer(store_t *s, int64_t run_id, const char *reason);
int sqlite_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out);
int sqlite_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out);
int sqlite_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                   const char *reason, int64_t now_ms);
int sqlite_run_add_ended(store_t *s, sched_run_t *r);
int sqlite_event_add(store_t *s, event_t *e);
int sqlite_events_list(store_t *s, const event_filter_t *f, event_list_t *out);
int sqlite_events_head(store_t *s, int64_t *id);
int sqlite_lease_acquire(store_t *s, const char *name, const char *holder,
                         int64_t now_ms, int64_t ttl_ms, int64_t *token);
int sqlite_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms);
int sqlite_lease_release(store_t *s, const char *name, const char *holder,
                         int64_t token);
int sqlite_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                     int64_t *expires_ms);
void sqlite_sched_close(struct sqlite_store *q);

/* Raises meta 'jobs.last_id' to the highest job id: run it before deleting
 * jobs, so the next insert still gets an id never given before. */
int sqlite_keep_last_id(struct sqlite_store *q);

/* sqlite/janitor.c's ops. */
int sqlite_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                      int keep_default, int64_t ended_before_default_ms, size_t max,
                      job_list_t *deleted);
int sqlite_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted);
void sqlite_janitor_close(struct sqlite_store *q);

/* sqlite/queue.c's ops. */
int sqlite_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                     int64_t now_ms);
int sqlite_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                      int64_t now_ms, queue_item_list_t *out, int64_t *next_ms);
int sqlite_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms);
int sqlite_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                      int64_t now_ms);
int sqlite_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                        int64_t visibility_ms, int64_t now_ms);
int sqlite_queue_set(store_t *s, queue_conf_t *c);
int sqlite_queue_get(store_t *s, const char *name, queue_conf_t *out);
int sqlite_queues_list(store_t *s, const char *after, size_t limit,
                       queue_conf_list_t *out);
int sqlite_queue_delete(store_t *s, const char *name);
int sqlite_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out);
int sqlite_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                       queue_item_list_t *out);
int sqlite_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                         int64_t due_ms, int64_t now_ms, int64_t *count);
int sqlite_queue_purge(store_t *s, const char *name, const queue_filter_t *f,
                       int64_t now_ms, int64_t *count);
void sqlite_queue_close(struct sqlite_store *q);

#endif
