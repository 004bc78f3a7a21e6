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

/* Every op of store/ops.h as redis_<op>, spread over this folder's files. */
#define STORE_OP(op, params) int redis_##op params;
#include "store/ops.h"

#endif
