/* The PostgreSQL backend's private header, shared by pg.c (connection,
 * reconnects, schema migrations, transactions, meta, notifications),
 * pg/jobs.c (jobs, nodes, eggs, history retention), pg/sched.c (schedules,
 * runs, events, leases) and pg/queue.c (task queues).
 *
 * Statements are prepared once per connection under a slot number (each
 * file owns a range) and run with text parameters, except bytea (binary).
 * Ownership as in store.h; a PGresult returned here is the caller's to
 * PQclear. */
#ifndef SPIDERD_STORE_PG_INT_H
#define SPIDERD_STORE_PG_INT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <stdint.h>

#include "store/store_impl.h"

/* Slot ranges: pg.c 0..31, pg/jobs.c 32..127, pg/sched.c 128..191,
 * pg/queue.c 192..319. */
#define PG_SLOT_CORE 0
#define PG_SLOT_JOBS 32
#define PG_SLOT_SCHED 128
#define PG_SLOT_QUEUE 192
#define PG_SLOTS 320

struct pg_store {
  struct store base;
  PGconn *conn;
  char *conninfo;     /* the URL without spiderd's own parameters */
  char *schema;       /* quoted-safe name ([A-Za-z0-9_]), NULL = public */
  char channel[96];   /* LISTEN/NOTIFY channel of this schema */
  int in_tx;          /* inside store_tx_begin .. commit/rollback */
  int sp_depth;       /* open savepoints */
  int tx_broken;      /* the connection dropped inside a transaction */
  unsigned notes;     /* STORE_NOTE_* to send at the end of this transaction */
  unsigned char prepared[PG_SLOTS]; /* slot prepared on this connection */
};

#define PGQ(s) ((struct pg_store *)(s))

/* Parameters of one statement: text values (NULL = SQL NULL) or binary. */
#define PG_MAXPARAMS 40
typedef struct pg_params {
  int n;
  const char *v[PG_MAXPARAMS];
  int len[PG_MAXPARAMS];
  int fmt[PG_MAXPARAMS];
  char num[PG_MAXPARAMS][32]; /* numbers' text */
  char *owned[PG_MAXPARAMS];  /* freed by pg_params_release */
} pg_params_t;

void pg_p_str(pg_params_t *p, const char *v);           /* NULL -> NULL */
void pg_p_i64(pg_params_t *p, int64_t v);
void pg_p_dbl(pg_params_t *p, double v);
void pg_p_json(pg_params_t *p, const json_t *v);         /* NULL -> NULL */
void pg_p_bin(pg_params_t *p, const void *data, size_t len); /* bytea */
void pg_params_release(pg_params_t *p);

/* Runs statement `slot` (prepared from sql on first use on this
 * connection). Returns the result when its status is COMMAND_OK or
 * TUPLES_OK, else NULL (logged; *rc = SPD_ESTORE, SPD_ECONFLICT on a
 * unique violation, -EAGAIN on a serialization failure or deadlock).
 * Outside a transaction a lost connection is re-established and the
 * statement tried once more. Releases p. binary_result: 1 for bytea. */
PGresult *pg_run(struct pg_store *q, int slot, const char *sql, pg_params_t *p,
                 int binary_result, int *rc, const char *what);
/* pg_run for a statement that returns no rows: 0, or -ENOENT when it
 * changed no row and must_change, or the error. */
int pg_cmd(struct pg_store *q, int slot, const char *sql, pg_params_t *p, int must_change,
           const char *what);
/* Runs one-off SQL text (not prepared; several statements allowed). */
int pg_exec(struct pg_store *q, const char *sql, const char *what);

/* A transaction of its own unless the caller opened one. */
int pg_auto_begin(struct pg_store *q, int *began);
int pg_auto_end(struct pg_store *q, int began, int rc);

/* Queues notices to send when the current transaction commits (at once
 * outside one). */
int pg_note(struct pg_store *q, unsigned what);

/* Result readers: NULL columns read as 0 / NULL. */
int64_t pg_i64(const PGresult *r, int row, int col);
double pg_dbl(const PGresult *r, int row, int col);
int pg_str(const PGresult *r, int row, int col, char **out);   /* strdup */
int pg_json(const PGresult *r, int row, int col, json_t **out); /* parsed */

/* pg/jobs.c */
extern const char pg_schema_jobs[];
int pg_job_insert(store_t *s, job_t *j);
int pg_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms, job_list_t *out);
int pg_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                      const job_key_t *skip, size_t nskip, job_list_t *out);
int pg_job_started(store_t *s, int64_t id, int pid, int64_t pid_start);
int pg_job_requeue(store_t *s, int64_t id);
int pg_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms, int exit_code,
                  int term_signal, const json_t *stats);
int pg_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                          int64_t now_ms, int *count);
int pg_job_get(store_t *s, int64_t id, job_t *out);
int pg_job_status(store_t *s, const char *project, const char *jobid, job_state_t *out);
int pg_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out);
int pg_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]);
int pg_trim_finished(store_t *s, int keep, int *deleted);
int pg_job_heartbeat(store_t *s, int64_t id, int64_t now_ms);
int pg_job_next_due(store_t *s, int64_t now_ms, int64_t *out);
int pg_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules, int keep_default,
                  int64_t ended_before_default_ms, size_t max, job_list_t *deleted);
int pg_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead);
int pg_nodes_list(store_t *s, node_list_t *out);
int pg_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                  job_list_t *lost);
int pg_node_delete(store_t *s, const char *name);
int pg_job_cancel_request(store_t *s, int64_t id, int64_t now_ms);
int pg_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out);
int pg_egg_put(store_t *s, const char *project, const char *version, const void *data,
               size_t len, int64_t now_ms);
int pg_egg_get(store_t *s, const char *project, const char *version, void **data,
               size_t *len);
int pg_eggs_list(store_t *s, egg_list_t *out);
int pg_egg_delete(store_t *s, const char *project, const char *version, int *count);

/* pg/sched.c */
extern const char pg_schema_sched[];
int pg_schedule_insert(store_t *s, schedule_t *sc);
int pg_schedule_update(store_t *s, const schedule_t *sc);
int pg_schedule_delete(store_t *s, int64_t id);
int pg_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out);
int pg_schedules_list(store_t *s, int64_t after_id, size_t limit, schedule_list_t *out);
int pg_runs_add(store_t *s, int64_t schedule_id, const int64_t *due, const int64_t *fire,
                size_t n, int64_t horizon_ms, int64_t refill_ms);
int pg_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms);
int pg_schedules_refill(store_t *s, int64_t now_ms, size_t limit, schedule_list_t *out);
int pg_run_defer(store_t *s, int64_t run_id, const char *reason);
int pg_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out);
int pg_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out);
int pg_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
               const char *reason, int64_t now_ms);
int pg_run_add_ended(store_t *s, sched_run_t *r);
int pg_event_add(store_t *s, event_t *e);
int pg_events_list(store_t *s, const event_filter_t *f, event_list_t *out);
int pg_events_head(store_t *s, int64_t *id);
int pg_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted);
int pg_lease_acquire(store_t *s, const char *name, const char *holder, int64_t now_ms,
                     int64_t ttl_ms, int64_t *token);
int pg_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms);
int pg_lease_release(store_t *s, const char *name, const char *holder, int64_t token);
int pg_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                 int64_t *expires_ms);

/* pg/queue.c */
extern const char pg_schema_queue[];
int pg_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n, int64_t now_ms);
int pg_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                  int64_t now_ms, queue_item_list_t *out, int64_t *next_ms);
int pg_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                 int64_t now_ms);
int pg_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                  int64_t now_ms);
int pg_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t visibility_ms, int64_t now_ms);
int pg_queue_set(store_t *s, queue_conf_t *c);
int pg_queue_get(store_t *s, const char *name, queue_conf_t *out);
int pg_queues_list(store_t *s, const char *after, size_t limit, queue_conf_list_t *out);
int pg_queue_delete(store_t *s, const char *name);
int pg_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out);
int pg_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                   queue_item_list_t *out);
int pg_queue_requeue(store_t *s, const char *name, const queue_filter_t *f, int64_t due_ms,
                     int64_t now_ms, int64_t *count);
int pg_queue_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                   int64_t *count);

#endif
