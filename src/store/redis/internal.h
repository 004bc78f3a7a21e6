/* The Redis backend's private header, shared by redis.c (connection,
 * reconnects, script loading, transactions, meta, notifications),
 * redis/jobs.c (jobs, nodes, eggs, history retention), redis/sched.c
 * (schedules, runs, events, leases) and redis/queue.c (task queues).
 *
 * Every store op is one Lua script run with EVALSHA: Redis runs a script
 * alone, so each op is atomic, and each script checks everything before it
 * writes anything, so an op that fails has changed nothing. Scripts are
 * loaded (SCRIPT LOAD) at open and again when the server answers NOSCRIPT
 * (a restart, SCRIPT FLUSH).
 *
 * A script gets no KEYS: its first argument is the key prefix ("NAME:")
 * and it builds its keys from it, so one server (not a Redis Cluster) can
 * hold several stores. A script answers an error "CODE[ detail]" for the
 * store's codes (ENOENT, EINVAL, EBUSY, EEXIST, ECONFLICT, EFENCED), which
 * redis_eval turns into -ENOENT, ..., SPD_ECONFLICT.
 *
 * Ownership as in store.h; a redisReply returned here is the caller's to
 * freeReplyObject. */
#ifndef SPIDERD_STORE_REDIS_INT_H
#define SPIDERD_STORE_REDIS_INT_H

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdint.h>

#include "store/store_impl.h"

extern const struct store_ops store_redis_ops;

/* Scripts, one per op (some ops have two); each file fills its own range
 * of sources (redis_*_scripts). */
enum redis_script {
  /* redis.c */
  RS_OPEN,
  RS_META_GET,
  RS_META_SET,
  /* redis/jobs.c */
  RS_JOB_INSERT,
  RS_JOB_CLAIM,
  RS_JOB_STARTED,
  RS_JOB_REQUEUE,
  RS_JOB_FINISH,
  RS_JOB_CANCEL_PENDING,
  RS_JOB_GET,
  RS_JOB_STATUS,
  RS_JOBS_LIST,
  RS_JOB_COUNTS,
  RS_TRIM_FINISHED,
  RS_JOB_HEARTBEAT,
  RS_JOB_NEXT_DUE,
  RS_JOBS_PRUNE,
  RS_NODE_BEAT,
  RS_NODES_LIST,
  RS_NODES_REAP,
  RS_NODE_DELETE,
  RS_JOB_CANCEL_REQUEST,
  RS_JOBS_CANCEL_REQUESTED,
  RS_EGG_PUT,
  RS_EGG_GET,
  RS_EGGS_LIST,
  RS_EGG_DELETE,
  /* redis/sched.c */
  RS_SCHEDULE_PUT,
  RS_SCHEDULE_DELETE,
  RS_SCHEDULE_GET,
  RS_SCHEDULES_LIST,
  RS_SCHEDULES_REFILL,
  RS_RUNS_ADD,
  RS_RUNS_CLEAR,
  RS_RUN_DEFER,
  RS_RUNS_DUE,
  RS_RUNS_LIST,
  RS_RUN_END,
  RS_RUN_ADD_ENDED,
  RS_EVENT_ADD,
  RS_EVENTS_LIST,
  RS_EVENTS_HEAD,
  RS_EVENTS_PRUNE,
  RS_LEASE_ACQUIRE,
  RS_LEASE_CHECK,
  RS_LEASE_RELEASE,
  RS_LEASE_GET,
  /* redis/queue.c */
  RS_QUEUE_PUT,
  RS_QUEUE_TAKE,
  RS_QUEUE_ACK,
  RS_QUEUE_NACK,
  RS_QUEUE_EXTEND,
  RS_QUEUE_SET,
  RS_QUEUE_GET,
  RS_QUEUES_LIST,
  RS_QUEUE_DELETE,
  RS_QUEUE_STATS,
  RS_QUEUE_ITEMS,
  RS_QUEUE_REQUEUE,
  RS_QUEUE_PURGE,
  RS_COUNT
};

/* Each file's scripts: src[id] = the script's Lua (after the shared
 * prelude and the file's helpers, *helpers). */
void redis_jobs_scripts(const char **src, const char **helpers);
void redis_sched_scripts(const char **src, const char **helpers);
void redis_queue_scripts(const char **src, const char **helpers);

struct redis_store {
  struct store base;
  redisContext *c;
  char *host;        /* NULL with a Unix socket */
  char *sock;        /* Unix socket path, or NULL */
  int port;
  int db;
  char *password;    /* AUTH, or NULL */
  char prefix[200];  /* every key starts with this (ends in ':') */
  char channel[210]; /* pub/sub channel of this prefix */
  int in_tx;         /* inside store_tx_begin .. commit/rollback */
  int sp_depth;      /* open savepoints */
  unsigned notes;    /* STORE_NOTE_* to publish at commit */
  char sha[RS_COUNT][41];
};

#define RQ(s) ((struct redis_store *)(s))

/* The arguments of one script call after the prefix: binary-safe strings,
 * numbers as decimal text. Grows as needed; an allocation failure is
 * remembered and reported by redis_eval (-ENOMEM). */
typedef struct redis_args {
  int n, cap;
  const char **v;
  size_t *len;
  char **owned;
  int oom;
} redis_args_t;

void ra_str(redis_args_t *a, const char *s);                 /* NULL -> "" */
void ra_bin(redis_args_t *a, const void *data, size_t len);  /* borrowed */
void ra_i64(redis_args_t *a, int64_t v);
void ra_dbl(redis_args_t *a, double v);                      /* NaN -> 0 */
void ra_json(redis_args_t *a, const json_t *v);              /* NULL -> "" */
/* A field/value pair, only when the value is set (NULL / 0 leave it out). */
void ra_kv_str(redis_args_t *a, const char *k, const char *v);
void ra_kv_i64(redis_args_t *a, const char *k, int64_t v);
void ra_kv_json(redis_args_t *a, const char *k, const json_t *v);
void ra_release(redis_args_t *a);

/* Runs script id with the prefix and a's arguments (released here).
 * Returns 0 and *out (may be NULL when the caller wants no reply), or a
 * store code: the script's own error code, SPD_ESTORE (logged) for a
 * failure of the server or the connection. A connection that failed
 * before the reply is reconnected and the call tried once more. */
int redis_eval(struct redis_store *q, int id, redis_args_t *a, redisReply **out,
               const char *what);

/* Queues notices to publish when the current transaction commits (at once
 * outside one). */
void redis_note(struct redis_store *q, unsigned what);

/* Reply readers. */
int64_t rr_i64(const redisReply *r);          /* integer or numeric string; else 0 */
double rr_dbl(const redisReply *r);
int rr_str(const redisReply *r, char **out);  /* strdup; nil / "" -> NULL */
int rr_strz(const redisReply *r, char **out); /* strdup; nil -> NULL, "" kept */
int rr_json(const redisReply *r, json_t **out); /* nil / "" -> NULL */
/* Field value of a flat [field, value, ...] array, or NULL. */
const redisReply *rr_field(const redisReply *r, const char *name);

/* Table-driven decoding of a flat [field, value, ...] array into a struct:
 * fields absent from the array keep the struct's values. */
enum { RF_STR, RF_JSON, RF_I64, RF_INT, RF_DBL };
struct redis_field {
  const char *name;
  int type;
  size_t off;
};
int redis_decode(const redisReply *r, const struct redis_field *f, size_t nf, void *obj);

/* redis/jobs.c: a job from a flat [field, value, ...] array. */
int redis_row_job(const redisReply *r, job_t *j);
/* An array of such rows appended to out (all or nothing). */
int redis_rows_jobs(const redisReply *r, job_list_t *out);

/* redis/jobs.c */
int redis_job_insert(store_t *s, job_t *j);
int redis_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms,
                    job_list_t *out);
int redis_job_started(store_t *s, int64_t id, int pid, int64_t pid_start);
int redis_job_requeue(store_t *s, int64_t id);
int redis_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                     int exit_code, int term_signal, const json_t *stats);
int redis_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                             int64_t now_ms, int *count);
int redis_job_get(store_t *s, int64_t id, job_t *out);
int redis_job_status(store_t *s, const char *project, const char *jobid, job_state_t *out);
int redis_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out);
int redis_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]);
int redis_trim_finished(store_t *s, int keep, int *deleted);
int redis_job_heartbeat(store_t *s, int64_t id, int64_t now_ms);
int redis_job_next_due(store_t *s, int64_t now_ms, int64_t *out);
int redis_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                     int keep_default, int64_t ended_before_default_ms, size_t max,
                     job_list_t *deleted);
int redis_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead);
int redis_nodes_list(store_t *s, node_list_t *out);
int redis_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                     job_list_t *lost);
int redis_node_delete(store_t *s, const char *name);
int redis_job_cancel_request(store_t *s, int64_t id, int64_t now_ms);
int redis_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out);
int redis_egg_put(store_t *s, const char *project, const char *version, const void *data,
                  size_t len, int64_t now_ms);
int redis_egg_get(store_t *s, const char *project, const char *version, void **data,
                  size_t *len);
int redis_eggs_list(store_t *s, egg_list_t *out);
int redis_egg_delete(store_t *s, const char *project, const char *version, int *count);

/* redis/sched.c */
int redis_schedule_insert(store_t *s, schedule_t *sc);
int redis_schedule_update(store_t *s, const schedule_t *sc);
int redis_schedule_delete(store_t *s, int64_t id);
int redis_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out);
int redis_schedules_list(store_t *s, int64_t after_id, size_t limit, schedule_list_t *out);
int redis_runs_add(store_t *s, int64_t schedule_id, const int64_t *due, const int64_t *fire,
                   size_t n, int64_t horizon_ms, int64_t refill_ms);
int redis_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms);
int redis_schedules_refill(store_t *s, int64_t now_ms, size_t limit, schedule_list_t *out);
int redis_run_defer(store_t *s, int64_t run_id, const char *reason);
int redis_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out);
int redis_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out);
int redis_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                  const char *reason, int64_t now_ms);
int redis_run_add_ended(store_t *s, sched_run_t *r);
int redis_event_add(store_t *s, event_t *e);
int redis_events_list(store_t *s, const event_filter_t *f, event_list_t *out);
int redis_events_head(store_t *s, int64_t *id);
int redis_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted);
int redis_lease_acquire(store_t *s, const char *name, const char *holder, int64_t now_ms,
                        int64_t ttl_ms, int64_t *token);
int redis_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms);
int redis_lease_release(store_t *s, const char *name, const char *holder, int64_t token);
int redis_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                    int64_t *expires_ms);

/* redis/queue.c */
int redis_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                    int64_t now_ms);
int redis_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                     int64_t now_ms, queue_item_list_t *out, int64_t *next_ms);
int redis_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms);
int redis_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms);
int redis_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                       int64_t visibility_ms, int64_t now_ms);
int redis_queue_set(store_t *s, queue_conf_t *c);
int redis_queue_get(store_t *s, const char *name, queue_conf_t *out);
int redis_queues_list(store_t *s, const char *after, size_t limit, queue_conf_list_t *out);
int redis_queue_delete(store_t *s, const char *name);
int redis_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out);
int redis_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                      queue_item_list_t *out);
int redis_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                        int64_t due_ms, int64_t now_ms, int64_t *count);
int redis_queue_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                      int64_t *count);

#endif
