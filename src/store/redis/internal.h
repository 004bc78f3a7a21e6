/* The Redis backend's private header, shared by redis.c (connection,
 * reconnects, script loading, transactions, meta, notifications),
 * jobs.c (jobs, nodes, eggs, history retention), sched.c
 * (schedules, runs, events, leases), queue.c (task queues) and auth.c
 * (users and API tokens); their Lua is in lua/NAME.lua, one file per C
 * file (REDIS_SCRIPTS below, read from the Lua at build time).
 *
 * Every store op is one Lua script run with EVALSHA: Redis runs a script
 * alone, so each op is atomic, and each script checks everything before it
 * writes anything, so an op that fails has changed nothing. Scripts are
 * loaded (SCRIPT LOAD) at open and again when the server answers NOSCRIPT
 * (a restart, SCRIPT FLUSH). Several ops in one store transaction are all
 * or nothing too: lua/prelude.lua journals every write of a transaction
 * and holds a lock for it (the top of redis.c).
 *
 * A script's first argument is the key prefix ("NAME:") and it builds its
 * keys from it, so one server (not a Redis Cluster) can hold several
 * stores; its KEYS are PREFIX "tx:" and the connection's open transaction
 * (nothing after "tx:" outside one), then PREFIX "tx:begin" for the first
 * script of a transaction (which takes the lock), else PREFIX "tx:". A script answers an error "CODE[ detail]" for the
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

/* The scripts, one per op (some ops have two, some none), in the order of
 * the files they live in: src/store/redis/lua/NAME.lua, where
 * "-- @script name" starts the script of X(NAME). The build reads those
 * lines into store/redis/scripts.h (cmake/redis_scripts.cmake): REDIS_SCRIPTS
 * and REDIS_LUA_FILES, the files that hold scripts. The files themselves are
 * embedded at build time too (CMakeLists.txt); redis.c puts lua/prelude.lua
 * and the file's helpers (what comes before its first script) before each
 * script. */
#include "store/redis/scripts.h"

enum redis_script {
#define X(name) RS_##name,
  REDIS_SCRIPTS(X)
#undef X
  RS_COUNT
};

/* Savepoints nested in one transaction (async.c uses one). */
#define REDIS_SP_MAX 32

struct redis_store {
  struct store base;
  redisContext *c;
  char *host;        /* NULL with a Unix socket */
  char *sock;        /* Unix socket path, or NULL */
  int port;
  int db;
  char *password;    /* AUTH, or NULL */
  char *user;        /* ACL user for AUTH user password, or NULL */
  char prefix[200];  /* every key starts with this (ends in ':') */
  char channel[210]; /* pub/sub channel of this prefix */
  int in_tx;         /* inside store_tx_begin .. commit/rollback */
  int sp_depth;      /* open savepoints */
  int64_t sp_mark[REDIS_SP_MAX]; /* each savepoint's length of the undo log */
  char tx[64];       /* the open transaction's token (KEYS[1]), "" outside one */
  int tx_begun;      /* a script of it ran: it holds the lock */
  uint64_t tx_seq;   /* transactions begun on this connection */
  char conn_id[24];  /* random: tokens differ across connections and nodes */
  long long client_id; /* the server's CLIENT ID of c (0: unknown) */
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

/* Runs script id (no arguments) and hands each element of its array reply
 * to item(e, out), which appends it to out; stops at the first error. */
int redis_list(struct redis_store *q, int id, const char *what,
               int (*item)(const redisReply *e, void *out), void *out);

/* Queues notices to publish when the current transaction commits (at once
 * outside one). */
void redis_note(struct redis_store *q, unsigned what);

/* Reply readers. */
int64_t rr_i64(const redisReply *r);          /* integer or numeric string; else 0 */
double rr_dbl(const redisReply *r);
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
/* Each record of array reply r decoded (redis_decode) onto the end of the
 * array *v of *n elements of elem bytes; a record that fails is released
 * (release) and ends it. */
int redis_decode_rows(const redisReply *r, const struct redis_field *f, size_t nf, void **v,
                      size_t *n, size_t elem, void (*release)(void *obj));

/* redis/jobs.c: a job from a flat [field, value, ...] array. */
int redis_row_job(const redisReply *r, job_t *j);
/* An array of such rows appended to out (all or nothing). */
int redis_rows_jobs(const redisReply *r, job_list_t *out);

/* Every op of store/ops.h as redis_<op>, spread over this folder's files. */
#define STORE_OP(op, params) int redis_##op params;
#include "store/ops.h"

#endif
