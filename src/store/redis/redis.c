/* The Redis backend: connection, reconnects, script loading, transactions,
 * meta and notifications. Jobs, schedules, queues and principals are in
 * redis/jobs.c, redis/sched.c, redis/queue.c and redis/auth.c
 * (store/redis/internal.h).
 *
 * URL: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB][?prefix=NAME], or
 * redis:///PATH/TO/SOCKET[?db=DB&prefix=NAME] for a Unix socket. Every key
 * starts with "NAME:" (default "spiderd:"), so several clusters or test runs
 * can share one server; notices travel on the channel "NAME:notes" as a
 * decimal STORE_NOTE_* mask. A password may also come as ?password=
 * (spiderd's store_password_file puts it there). TLS (rediss://) is not
 * offered: Debian 12's hiredis 0.14 has no hiredis_ssl.
 *
 * Atomicity. Each op is one Lua script, which Redis runs alone, and which
 * validates everything before it writes, so an op is all or nothing. A
 * store transaction (store_tx_*) is all or nothing as well, across its ops
 * and across nodes: lua/prelude.lua wraps every script's writes. A
 * transaction's first script takes one lock per store (P:tx:lock, a token
 * that expires 5 s after the transaction's last script), so transactions take turns as SQLite's BEGIN
 * IMMEDIATE makes them, and a write outside a transaction waits for it too;
 * every write inside one first logs the command that undoes it. Commit
 * drops the log; rollback, a savepoint's rollback (store_sp_*), and the
 * next writer after a holder that died or stalled past the lock's expiry
 * apply it newest first; a waiter that finds the holder's connection gone
 * (CLIENT LIST ID: a kill -9 closes it) breaks its lock at once. A holder
 * that comes back to find its transaction rolled back fails its next
 * script and its commit (SPD_ESTORE). So no half of a transaction survives
 * a kill -9 between its ops: a job's end with its retry and events, a claim
 * under [concurrency] limits, a scheduler tick's fires, a cancel with its
 * family, a retention pass.
 * Reads on other connections do not wait for the lock: they may see a
 * transaction's writes before it commits (or before a dead holder's are
 * undone, within the lock's 5 s), as READ UNCOMMITTED would. Three reads
 * that may cover a long history (a native job listing, ended-job counts
 * over a window, throughput buckets) run as several scripts of bounded work
 * each (redis/jobs.c), so Redis is never held long: what they read is not
 * one snapshot.
 *
 * Reconnects: an op whose connection is broken, or breaks before the reply
 * arrives, reconnects (redisReconnect, AUTH, SELECT) and runs once more. A
 * script the server no longer has (NOSCRIPT: a restart, SCRIPT FLUSH) is
 * loaded again and the op run once more. A client cannot tell a request
 * lost on the way from a reply lost on the way back, so an op whose server
 * ran it and then dropped the connection runs twice; a reply that timed
 * out (REDIS_COMMAND_TIMEOUT_S) is not retried for that reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "store/redis/internal.h"

/* The data layout version; a store written by a newer build is refused. */
#define REDIS_SCHEMA_VERSION 1
#define REDIS_CONNECT_TIMEOUT_S 5
#define REDIS_COMMAND_TIMEOUT_S 30
/* How long a write waits for another transaction's lock (ELOCKED) before
 * it gives up: far more than the lock's 5 s expiry (lua/prelude.lua). */
#define REDIS_LOCK_WAIT_MS 30000

/* ---- arguments ---- */

static int ra_slot(redis_args_t *a) {
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 16;
    const char **v = realloc(a->v, (size_t)cap * sizeof(*v));
    if (v) a->v = v;
    size_t *len = realloc(a->len, (size_t)cap * sizeof(*len));
    if (len) a->len = len;
    char **owned = realloc(a->owned, (size_t)cap * sizeof(*owned));
    if (owned) a->owned = owned;
    if (!v || !len || !owned) {
      a->oom = 1;
      return -1;
    }
    a->cap = cap;
  }
  int i = a->n++;
  a->owned[i] = NULL;
  a->v[i] = "";
  a->len[i] = 0;
  return i;
}

void ra_bin(redis_args_t *a, const void *data, size_t len) {
  int i = ra_slot(a);
  if (i < 0) return;
  a->v[i] = data ? data : "";
  a->len[i] = data ? len : 0;
}

void ra_str(redis_args_t *a, const char *s) { ra_bin(a, s, s ? strlen(s) : 0); }

static void ra_own(redis_args_t *a, char *s) {
  int i = ra_slot(a);
  if (i < 0 || !s) {
    if (!s) a->oom = 1;
    free(s);
    return;
  }
  a->v[i] = a->owned[i] = s;
  a->len[i] = strlen(s);
}

void ra_i64(redis_args_t *a, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%" PRId64, v);
  ra_own(a, strdup(buf));
}

void ra_dbl(redis_args_t *a, double v) {
  char buf[40];
  if (isnan(v)) v = 0;
  snprintf(buf, sizeof(buf), "%.17g", v);
  ra_own(a, strdup(buf));
}

void ra_json(redis_args_t *a, const json_t *v) {
  if (!v) {
    ra_str(a, "");
    return;
  }
  ra_own(a, json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY));
}

void ra_kv_str(redis_args_t *a, const char *k, const char *v) {
  if (!v) return;
  ra_str(a, k);
  ra_str(a, v);
}

void ra_kv_i64(redis_args_t *a, const char *k, int64_t v) {
  if (!v) return;
  ra_str(a, k);
  ra_i64(a, v);
}

void ra_kv_json(redis_args_t *a, const char *k, const json_t *v) {
  if (!v) return;
  ra_str(a, k);
  ra_json(a, v);
}

void ra_release(redis_args_t *a) {
  for (int i = 0; i < a->n; i++) free(a->owned[i]);
  free(a->v);
  free(a->len);
  free(a->owned);
  memset(a, 0, sizeof(*a));
}

/* ---- replies ---- */

int64_t rr_i64(const redisReply *r) {
  if (!r) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS)
    return strtoll(r->str, NULL, 10);
  return 0;
}

double rr_dbl(const redisReply *r) {
  if (!r) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return (double)r->integer;
  if (r->type == REDIS_REPLY_STRING) return strtod(r->str, NULL);
  return 0;
}

int rr_strz(const redisReply *r, char **out) {
  *out = NULL;
  if (!r || r->type != REDIS_REPLY_STRING) return 0;
  *out = malloc(r->len + 1);
  if (!*out) return -ENOMEM;
  memcpy(*out, r->str, r->len);
  (*out)[r->len] = '\0';
  return 0;
}

int rr_json(const redisReply *r, json_t **out) {
  *out = NULL;
  if (!r || r->type != REDIS_REPLY_STRING || r->len == 0) return 0;
  json_error_t jerr;
  *out = json_loadb(r->str, r->len, JSON_DECODE_ANY, &jerr);
  if (!*out) {
    log_error("store", "redis: a stored JSON value is malformed: %s", jerr.text);
    return SPD_ESTORE;
  }
  return 0;
}

int redis_list(struct redis_store *q, int id, const char *what,
               int (*item)(const redisReply *e, void *out), void *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  int rc = redis_eval(q, id, &a, &r, what);
  for (size_t i = 0; !rc && i < r->elements; i++) rc = item(r->element[i], out);
  if (r) freeReplyObject(r);
  return rc;
}

const redisReply *rr_field(const redisReply *r, const char *name) {
  if (!r || r->type != REDIS_REPLY_ARRAY) return NULL;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const redisReply *k = r->element[i];
    if (k->type == REDIS_REPLY_STRING && !strcmp(k->str, name)) return r->element[i + 1];
  }
  return NULL;
}

int redis_decode(const redisReply *r, const struct redis_field *f, size_t nf, void *obj) {
  if (!r || r->type != REDIS_REPLY_ARRAY) {
    log_error("store", "redis: a record came back as reply type %d", r ? r->type : -1);
    return SPD_ESTORE;
  }
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const redisReply *k = r->element[i], *v = r->element[i + 1];
    if (k->type != REDIS_REPLY_STRING) continue;
    for (size_t x = 0; x < nf; x++) {
      if (strcmp(k->str, f[x].name)) continue;
      char *p = (char *)obj + f[x].off;
      int rc = 0;
      switch (f[x].type) {
      case RF_STR:
        free(*(char **)p);
        rc = rr_strz(v, (char **)p);
        break;
      case RF_JSON:
        json_decref(*(json_t **)p);
        rc = rr_json(v, (json_t **)p);
        break;
      case RF_I64: *(int64_t *)p = rr_i64(v); break;
      case RF_INT: *(int *)p = (int)rr_i64(v); break;
      case RF_DBL: *(double *)p = rr_dbl(v); break;
      }
      if (rc) return rc;
      break;
    }
  }
  return 0;
}

int redis_decode_rows(const redisReply *r, const struct redis_field *f, size_t nf, void **v,
                      size_t *n, size_t elem, void (*release)(void *obj)) {
  if (r->type != REDIS_REPLY_ARRAY) return SPD_ESTORE;
  if (!r->elements) return 0;
  void *nv = realloc(*v, (*n + r->elements) * elem);
  if (!nv) return -ENOMEM;
  *v = nv;
  for (size_t i = 0; i < r->elements; i++) {
    void *obj = (char *)*v + *n * elem;
    memset(obj, 0, elem);
    int rc = redis_decode(r->element[i], f, nf, obj);
    if (rc) {
      release(obj);
      return rc;
    }
    (*n)++;
  }
  return 0;
}

/* ---- scripts ---- */

/* The Lua files (src/store/redis/lua/), embedded at build time. */
extern const unsigned char redis_lua_prelude[];
#define X(file) extern const unsigned char redis_lua_##file[];
REDIS_LUA_FILES(X)
#undef X

static const char *const redis_script_names[RS_COUNT] = {
#define X(name) #name,
    REDIS_SCRIPTS(X)
#undef X
};

/* Every script's full text, built once. */
static char *redis_text[RS_COUNT];
static pthread_once_t redis_text_once = PTHREAD_ONCE_INIT;
static int redis_text_ok;

#define REDIS_MARK "-- @script "

/* The script named by the marker line at p ("-- @script name\n"), or -1. */
static int redis_script_id(const char *p) {
  const char *name = p + strlen(REDIS_MARK), *end = strchr(name, '\n');
  size_t n = end ? (size_t)(end - name) : strlen(name);
  for (int i = 0; i < RS_COUNT; i++)
    if (strlen(redis_script_names[i]) == n && !strncasecmp(redis_script_names[i], name, n))
      return i;
  return -1;
}

/* The next marker line at or after p (at a line start), or NULL. */
static const char *redis_next_mark(const char *text, const char *p) {
  for (; (p = strstr(p, REDIS_MARK)); p++)
    if (p == text || p[-1] == '\n') return p;
  return NULL;
}

/* Splits one file into its scripts: each becomes prelude + the file's
 * helpers + its own text. 0, or -1 (logged) for an unknown or repeated
 * name. */
static int redis_split(const char *file, const char *text) {
  const char *prelude = (const char *)redis_lua_prelude;
  const char *mark = redis_next_mark(text, text);
  size_t lp = strlen(prelude), lh = mark ? (size_t)(mark - text) : strlen(text);
  while (mark) {
    int id = redis_script_id(mark);
    const char *body = strchr(mark, '\n');
    body = body ? body + 1 : mark + strlen(mark);
    const char *next = redis_next_mark(text, body);
    size_t lb = next ? (size_t)(next - body) : strlen(body);
    if (id < 0 || redis_text[id]) {
      log_error("store", "redis: lua/%s.lua: %s script %.*s", file,
                id < 0 ? "unknown" : "repeated", (int)strcspn(mark, "\n"), mark);
      return -1;
    }
    char *t = malloc(lp + lh + lb + 1);
    if (!t) return -1;
    memcpy(t, prelude, lp);
    memcpy(t + lp, text, lh);
    memcpy(t + lp + lh, body, lb);
    t[lp + lh + lb] = '\0';
    redis_text[id] = t;
    mark = next;
  }
  return 0;
}

static void redis_text_build(void) {
  redis_text_ok = 1;
#define X(file) \
  if (redis_text_ok && redis_split(#file, (const char *)redis_lua_##file)) redis_text_ok = 0;
  REDIS_LUA_FILES(X)
#undef X
  for (int i = 0; i < RS_COUNT; i++) {
    if (!redis_text[i]) {
      log_error("store", "redis: script %s has no source", redis_script_names[i]);
      redis_text_ok = 0;
    }
  }
}

/* Loads one script (or all, id < 0, pipelined) on q's connection. */
static int redis_load(struct redis_store *q, int id, char *err, size_t errlen) {
  int from = id < 0 ? 0 : id, to = id < 0 ? RS_COUNT : id + 1, rc = 0;
  for (int i = from; i < to; i++) {
    const char *argv[] = {"SCRIPT", "LOAD", redis_text[i]};
    size_t lens[] = {6, 4, strlen(redis_text[i])};
    if (redisAppendCommandArgv(q->c, 3, argv, lens) != REDIS_OK) {
      snprintf(err, errlen, "redis: %s", q->c->errstr);
      return SPD_ESTORE;
    }
  }
  for (int i = from; i < to; i++) {
    redisReply *r = NULL;
    if (redisGetReply(q->c, (void **)&r) != REDIS_OK || !r) {
      snprintf(err, errlen, "redis: %s", q->c->errstr);
      return SPD_ESTORE;
    }
    if (r->type == REDIS_REPLY_STRING && r->len == 40) {
      memcpy(q->sha[i], r->str, 40);
      q->sha[i][40] = '\0';
    } else if (!rc) {
      snprintf(err, errlen, "redis: cannot load script %s: %s", redis_script_names[i],
               r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
      rc = SPD_ESTORE;
    }
    freeReplyObject(r);
  }
  return rc;
}

/* ---- connection ---- */

/* A command whose reply is only checked; err gets the reason. */
static int redis_simple(redisContext *c, char *err, size_t errlen, int argc,
                        const char **argv) {
  redisReply *r = redisCommandArgv(c, argc, argv, NULL);
  int rc = 0;
  if (!r) {
    snprintf(err, errlen, "redis: %s", c->errstr);
    rc = SPD_ESTORE;
  } else if (r->type == REDIS_REPLY_ERROR) {
    snprintf(err, errlen, "redis %s: %s", argv[0], r->str);
    rc = SPD_ESTORE;
  }
  if (r) freeReplyObject(r);
  return rc;
}

/* AUTH and SELECT on a fresh connection. */
static int redis_session(struct redis_store *q, redisContext *c, char *err, size_t errlen) {
  int rc = 0;
  /* hiredis opens its socket without close-on-exec: every crawl and
   * template the daemon starts would hold the store's connection (and a
   * warm template, finding a socket open, would refuse to start warm). */
  int fl = fcntl(c->fd, F_GETFD);
  if (fl < 0 || fcntl(c->fd, F_SETFD, fl | FD_CLOEXEC) < 0) {
    snprintf(err, errlen, "Redis connection: cannot set close-on-exec: %s", strerror(errno));
    return SPD_ESTORE;
  }
  if (q->password) {
    const char *argv[] = {"AUTH", q->user ? q->user : q->password, q->password};
    if ((rc = redis_simple(c, err, errlen, q->user ? 3 : 2, argv))) return rc;
  }
  if (q->db) {
    char db[16];
    snprintf(db, sizeof(db), "%d", q->db);
    const char *argv[] = {"SELECT", db};
    if ((rc = redis_simple(c, err, errlen, 2, argv))) return rc;
  }
  /* A transaction's token names its connection, so a waiter can tell a
   * dead holder from a slow one (redis_holder_gone). */
  redisReply *r = redisCommand(c, "CLIENT ID");
  q->client_id = r && r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
  if (r) freeReplyObject(r);
  return 0;
}

static redisContext *redis_dial(struct redis_store *q, char *err, size_t errlen) {
  struct timeval tv = {REDIS_CONNECT_TIMEOUT_S, 0};
  redisContext *c = q->sock ? redisConnectUnixWithTimeout(q->sock, tv)
                            : redisConnectWithTimeout(q->host, q->port, tv);
  if (!c || c->err) {
    if (q->sock)
      snprintf(err, errlen, "cannot connect to Redis at %s: %s", q->sock,
               c ? c->errstr : "out of memory");
    else
      snprintf(err, errlen, "cannot connect to Redis at %s:%d: %s", q->host, q->port,
               c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return NULL;
  }
  struct timeval ctv = {REDIS_COMMAND_TIMEOUT_S, 0};
  redisSetTimeout(c, ctv);
  if (redis_session(q, c, err, errlen)) {
    redisFree(c);
    return NULL;
  }
  return c;
}

/* The connection broke: make a new one. */
static int redis_reconnect(struct redis_store *q) {
  char err[256];
  if (q->c && redisReconnect(q->c) == REDIS_OK) {
    struct timeval ctv = {REDIS_COMMAND_TIMEOUT_S, 0};
    redisSetTimeout(q->c, ctv);
    if (!redis_session(q, q->c, err, sizeof(err))) {
      log_info("store", "reconnected to Redis");
      return 0;
    }
  } else {
    if (q->c) redisFree(q->c);
    q->c = redis_dial(q, err, sizeof(err));
    if (q->c) {
      log_info("store", "reconnected to Redis");
      return 0;
    }
  }
  log_error("store", "%s", err);
  return SPD_ESTORE;
}

static int redis_code(const char *msg, size_t len) {
  static const struct {
    const char *name;
    int code;
  } codes[] = {
      {"ENOENT", -ENOENT},    {"EINVAL", -EINVAL},         {"EBUSY", -EBUSY},
      {"EEXIST", -EEXIST},    {"ECONFLICT", SPD_ECONFLICT}, {"EFENCED", SPD_EFENCED},
      {"ENOTSUP", -ENOTSUP},
  };
  for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
    size_t n = strlen(codes[i].name);
    if (len >= n && !strncmp(msg, codes[i].name, n) && (len == n || msg[n] == ' '))
      return codes[i].code;
  }
  return 0;
}

/* The reply is "ELOCKED": another transaction holds the store's lock. */
static int redis_locked(const redisReply *r) {
  return r && r->type == REDIS_REPLY_ERROR &&
         (!strncmp(r->str, "ELOCKED", 7) || !strncmp(r->str, "ERR ELOCKED", 11));
}

/* The holder of the lock named in an ELOCKED reply ("ELOCKED TOKEN ...",
 * the token starting with its CLIENT ID) has no connection any more: it
 * died, and its lock need not wait for its expiry. 0 when alive, unknown,
 * or the server will not say (CLIENT LIST refused to this user). */
static int redis_holder_gone(struct redis_store *q, const redisReply *locked,
                             char *token, size_t len) {
  const char *sp = strchr(locked->str, ' ');
  if (!sp) return 0;
  snprintf(token, len, "%.*s", (int)strcspn(sp + 1, " "), sp + 1);
  long long id = strtoll(token, NULL, 10);
  if (id <= 0) return 0;
  redisReply *r = redisCommand(q->c, "CLIENT LIST ID %lld", id);
  int gone = r && r->type == REDIS_REPLY_STRING && r->len == 0;
  if (r) freeReplyObject(r);
  return gone;
}

/* Breaks the lock of a holder that died (lua/core.lua: tx_break; it never
 * answers ELOCKED, so the eval does not come back here). */
static void redis_break(struct redis_store *q, const char *token) {
  redis_args_t a = {0};
  char tx[sizeof(q->tx)];
  memcpy(tx, q->tx, sizeof(tx));
  q->tx[0] = '\0'; /* outside the waiting transaction, which has no lock yet */
  ra_str(&a, token);
  redis_eval(q, RS_TX_BREAK, &a, NULL, "break a dead holder's lock");
  memcpy(q->tx, tx, sizeof(tx));
}

/* Sleeps a little longer each time (0.5 ms doubling to 16 ms, jittered) and
 * says whether the wait may go on. */
static int redis_lock_backoff(int *round, int64_t *waited_ms) {
  static __thread unsigned seed;
  if (!seed) seed = (unsigned)(uintptr_t)&seed ^ (unsigned)time(NULL);
  if (*waited_ms >= REDIS_LOCK_WAIT_MS) return 0;
  int64_t us = 500LL << (*round < 5 ? *round : 5);
  us += rand_r(&seed) % (us / 2 + 1);
  (*round)++;
  struct timespec ts = {0, (long)(us * 1000)};
  nanosleep(&ts, NULL);
  *waited_ms += us / 1000 + 1;
  return 1;
}

/* Sends argv until a reply comes: reconnects once, loads a missing script
 * once. NULL when the connection failed. */
static redisReply *redis_send(struct redis_store *q, int id, int argc, const char **argv,
                              const size_t *lens, const char *what, int *rc) {
  int reconnected = 0, reloaded = 0;
  for (;;) {
    if (!q->c || q->c->err) {
      if (reconnected++ || (*rc = redis_reconnect(q))) {
        *rc = SPD_ESTORE;
        return NULL;
      }
    }
    redisReply *r = redisCommandArgv(q->c, argc, argv, lens);
    if (!r) {
      /* A timeout is no dropped connection: the script may still be
       * running, so it is not sent again (the next op reconnects). */
      int timed_out = q->c->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      log_warn("store", "redis %s: %s", what, q->c->errstr);
      if (reconnected || timed_out) {
        *rc = SPD_ESTORE;
        return NULL;
      }
      continue; /* reconnect and run once more */
    }
    if (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8) && !reloaded++) {
      char err[256];
      freeReplyObject(r);
      if ((*rc = redis_load(q, id, err, sizeof(err)))) {
        log_error("store", "%s", err);
        return NULL;
      }
      continue;
    }
    return r;
  }
}

int redis_eval(struct redis_store *q, int id, redis_args_t *a, redisReply **out,
               const char *what) {
  int rc = 0;
  redisReply *r = NULL;
  const char **argv = NULL;
  size_t *lens = NULL;
  if (out) *out = NULL;
  if (a->oom) {
    rc = -ENOMEM;
    goto done;
  }
  int argc = a->n + 6;
  argv = malloc((size_t)argc * sizeof(*argv));
  lens = malloc((size_t)argc * sizeof(*lens));
  if (!argv || !lens) {
    rc = -ENOMEM;
    goto done;
  }
  argv[0] = "EVALSHA";
  lens[0] = 7;
  argv[1] = q->sha[id];
  lens[1] = 40;
  char txkey[sizeof(q->prefix) + sizeof(q->tx) + 4], begin[sizeof(q->prefix) + 8];
  int first = q->tx[0] && !q->tx_begun;
  argv[2] = "2";
  lens[2] = 1;
  argv[3] = txkey;
  lens[3] = (size_t)snprintf(txkey, sizeof(txkey), "%stx:%s", q->prefix, q->tx);
  argv[4] = begin;
  lens[4] = (size_t)snprintf(begin, sizeof(begin), "%stx:%s", q->prefix, first ? "begin" : "");
  argv[5] = q->prefix;
  lens[5] = strlen(q->prefix);
  for (int i = 0; i < a->n; i++) {
    argv[i + 6] = a->v[i];
    lens[i + 6] = a->len[i];
  }
  int round = 0;
  int64_t waited = 0;
  char holder[64];
  while ((r = redis_send(q, id, argc, argv, lens, what, &rc)) && redis_locked(r)) {
    if (redis_holder_gone(q, r, holder, sizeof(holder))) {
      log_warn("store", "redis: the transaction %s lost its connection: rolling it back", holder);
      redis_break(q, holder);
    } else if (!redis_lock_backoff(&round, &waited)) {
      break;
    }
    freeReplyObject(r);
    r = NULL;
  }
  /* Any answer but ELOCKED: the transaction's first script took the lock. */
  if (first && r && !redis_locked(r)) q->tx_begun = 1;
  if (r && r->type == REDIS_REPLY_ERROR) {
    /* A script's own code comes back as "CODE detail"; anything else is
     * the server's complaint (OOM, a script bug, a transaction rolled back
     * by another writer, ...). */
    const char *msg = r->str;
    if (!strncmp(msg, "ERR ", 4) && redis_code(msg + 4, r->len - 4)) msg += 4;
    rc = redis_code(msg, strlen(msg));
    if (!rc) {
      if (strstr(r->str, "ETXLOST"))
        log_error("store", "redis %s: the transaction outlived its lock and was rolled back",
                  what);
      else
        log_error("store", "redis %s: %s", what, r->str);
      rc = SPD_ESTORE;
    } else if (out) {
      *out = r; /* the caller may read the detail */
      r = NULL;
    }
  }
  if (!rc && out) {
    *out = r;
    r = NULL;
  }
  if (r) freeReplyObject(r);
done:
  free(argv);
  free(lens);
  ra_release(a);
  return rc;
}

/* ---- notifications ---- */

static int redis_publish(struct redis_store *q, unsigned what) {
  char payload[16];
  snprintf(payload, sizeof(payload), "%u", what);
  const char *argv[] = {"PUBLISH", q->channel, payload};
  for (int attempt = 0; attempt < 2; attempt++) {
    if ((!q->c || q->c->err) && redis_reconnect(q)) return SPD_ESTORE;
    redisReply *r = redisCommandArgv(q->c, 3, argv, NULL);
    if (r) {
      int rc = r->type == REDIS_REPLY_ERROR ? SPD_ESTORE : 0;
      if (rc) log_error("store", "redis publish: %s", r->str);
      freeReplyObject(r);
      return rc;
    }
  }
  return SPD_ESTORE;
}

void redis_note(struct redis_store *q, unsigned what) {
  if (q->in_tx) {
    q->notes |= what;
    return;
  }
  redis_publish(q, what); /* a hint: a lost one costs only latency */
}

int redis_notify(store_t *s, unsigned what) {
  struct redis_store *q = RQ(s);
  if (q->in_tx) {
    q->notes |= what;
    return 0;
  }
  return redis_publish(q, what);
}

/* ---- transactions (see the top of this file) ---- */

/* The lock is taken by the transaction's first script (lua/prelude.lua), so
 * a transaction costs one round trip more than its ops (the commit), and
 * one that ran nothing costs none. */
int redis_tx_begin(store_t *s) {
  struct redis_store *q = RQ(s);
  if (q->in_tx) return -EINVAL;
  snprintf(q->tx, sizeof(q->tx), "%lld.%s.%" PRIu64, q->client_id, q->conn_id, ++q->tx_seq);
  q->tx_begun = 0;
  q->in_tx = 1;
  q->sp_depth = 0;
  q->notes = 0;
  return 0;
}

/* Ends the transaction on this side, whatever the server said. */
static void redis_tx_forget(struct redis_store *q) {
  q->in_tx = 0;
  q->tx_begun = 0;
  q->sp_depth = 0;
  q->notes = 0;
  q->tx[0] = '\0';
}

int redis_tx_commit(store_t *s) {
  struct redis_store *q = RQ(s);
  if (!q->in_tx) return -EINVAL;
  unsigned notes = q->notes;
  redis_args_t a = {0};
  int rc = q->tx_begun ? redis_eval(q, RS_TX_COMMIT, &a, NULL, "commit") : 0;
  ra_release(&a);
  redis_tx_forget(q);
  if (rc) return SPD_ESTORE;
  if (notes) redis_publish(q, notes);
  return 0;
}

int redis_tx_rollback(store_t *s) {
  struct redis_store *q = RQ(s);
  if (!q->in_tx) return -EINVAL;
  redis_args_t a = {0};
  ra_i64(&a, 0);
  ra_str(&a, "end");
  /* A rollback that fails leaves the log to the next writer (the lock
   * expires): the writes are undone either way. */
  int rc = q->tx_begun ? redis_eval(q, RS_TX_ROLLBACK, &a, NULL, "rollback") : 0;
  ra_release(&a);
  redis_tx_forget(q);
  return rc ? SPD_ESTORE : 0;
}

int redis_sp_begin(store_t *s) {
  struct redis_store *q = RQ(s);
  if (!q->in_tx || q->sp_depth >= REDIS_SP_MAX) return -EINVAL;
  redis_args_t a = {0};
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_TX_MARK, &a, &r, "savepoint");
  if (!rc) q->sp_mark[q->sp_depth++] = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc ? SPD_ESTORE : 0;
}

int redis_sp_release(store_t *s) {
  struct redis_store *q = RQ(s);
  if (!q->in_tx || q->sp_depth <= 0) return -EINVAL;
  q->sp_depth--;
  return 0;
}

int redis_sp_rollback(store_t *s) {
  struct redis_store *q = RQ(s);
  if (!q->in_tx || q->sp_depth <= 0) return -EINVAL;
  redis_args_t a = {0};
  ra_i64(&a, q->sp_mark[--q->sp_depth]);
  ra_str(&a, "");
  return redis_eval(q, RS_TX_ROLLBACK, &a, NULL, "rollback to savepoint") ? SPD_ESTORE : 0;
}

/* ---- meta ---- */

int redis_meta_get(store_t *s, const char *key, char **value) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, key);
  int rc = redis_eval(RQ(s), RS_META_GET, &a, &r, "read meta");
  if (!rc) rc = rr_strz(r, value);
  if (r) freeReplyObject(r);
  return rc;
}

int redis_meta_set(store_t *s, const char *key, const char *value) {
  redis_args_t a = {0};
  ra_str(&a, key);
  ra_str(&a, value);
  return redis_eval(RQ(s), RS_META_SET, &a, NULL, "write meta");
}

/* ---- URL ---- */

static void redis_free_url(struct redis_store *q) {
  free(q->host);
  free(q->sock);
  if (q->password) explicit_bzero(q->password, strlen(q->password));
  free(q->password);
  free(q->user);
  q->host = q->sock = q->password = q->user = NULL;
}

static int redis_hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s[0..n) into a new string. */
static char *redis_unescape(const char *s, size_t n) {
  char *out = malloc(n + 1), *o = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && redis_hexval(s[i + 1]) >= 0 &&
        redis_hexval(s[i + 2]) >= 0) {
      *o++ = (char)(redis_hexval(s[i + 1]) * 16 + redis_hexval(s[i + 2]));
      i += 2;
    } else {
      *o++ = s[i];
    }
  }
  *o = '\0';
  return out;
}

static int redis_name_ok(const char *s) {
  if (!*s || strlen(s) > 100) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '-' || *s == '.'))
      return 0;
  return 1;
}

/* Fills q's host/port/socket/db/password and prefix from the URL's rest
 * (after "redis://"). */
static int redis_parse_url(struct redis_store *q, const char *url, const char *rest, char *err,
                           size_t errlen) {
  char prefix[128] = "spiderd";
  const char *query = strchr(rest, '?');
  size_t mainlen = query ? (size_t)(query - rest) : strlen(rest);
  q->port = 6379;
  q->db = 0;
  if (strncmp(url, "rediss", 6) == 0) {
    /* hiredis 0.14 (Debian 12) has no TLS: hiredis_ssl came with 1.0 */
    snprintf(err, errlen, "store URL: rediss:// (TLS) is not supported: this build's hiredis "
             "has no TLS support; reach Redis through a TLS tunnel (stunnel, spiped) on "
             "127.0.0.1 with redis://");
    return -EINVAL;
  }
  if (query) {
    const char *p = query + 1;
    while (*p) {
      const char *amp = strchr(p, '&');
      size_t n = amp ? (size_t)(amp - p) : strlen(p);
      if (n > 7 && !strncmp(p, "prefix=", 7)) {
        snprintf(prefix, sizeof(prefix), "%.*s", (int)(n - 7), p + 7);
        if (n - 7 >= sizeof(prefix) || !redis_name_ok(prefix)) {
          snprintf(err, errlen,
                   "store URL: prefix must be 1-100 letters, digits, '_', '-' or '.'");
          return -EINVAL;
        }
      } else if (n > 3 && !strncmp(p, "db=", 3)) {
        q->db = atoi(p + 3);
      } else if (n > 9 && !strncmp(p, "password=", 9)) {
        free(q->password);
        q->password = redis_unescape(p + 9, n - 9);
      } else if (n) {
        snprintf(err, errlen, "store URL: unknown parameter '%.*s'", (int)n, p);
        return -EINVAL;
      }
      p = amp ? amp + 1 : p + n;
    }
  }
  if (mainlen && rest[0] == '/') {
    q->sock = strndup(rest, mainlen);
    if (!q->sock) return -ENOMEM;
  } else {
    const char *hp = rest, *end = rest + mainlen;
    const char *at = memchr(rest, '@', mainlen);
    if (at) {
      /* user:password@ is an ACL user (AUTH user password, Redis 6);
       * :password@ or password@ the default user's requirepass */
      const char *colon = memchr(rest, ':', (size_t)(at - rest));
      const char *pw = colon ? colon + 1 : rest;
      free(q->password);
      q->password = redis_unescape(pw, (size_t)(at - pw));
      if (!q->password) return -ENOMEM;
      if (!*q->password) {
        free(q->password);
        q->password = NULL;
      }
      free(q->user);
      q->user = colon && colon > rest ? redis_unescape(rest, (size_t)(colon - rest)) : NULL;
      if (colon && colon > rest && !q->user) return -ENOMEM;
      hp = at + 1;
    }
    const char *slash = memchr(hp, '/', (size_t)(end - hp));
    const char *hend = slash ? slash : end;
    const char *colon = memchr(hp, ':', (size_t)(hend - hp));
    if (colon) {
      char *e = NULL;
      long port = strtol(colon + 1, &e, 10);
      if (e != hend || port <= 0 || port > 65535) {
        snprintf(err, errlen, "store URL: bad port '%.*s'", (int)(hend - colon - 1), colon + 1);
        return -EINVAL;
      }
      q->port = (int)port;
    }
    const char *hostend = colon ? colon : hend;
    q->host = hostend > hp ? strndup(hp, (size_t)(hostend - hp)) : strdup("127.0.0.1");
    if (!q->host) return -ENOMEM;
    if (slash && slash + 1 < end) {
      char *e = NULL;
      long db = strtol(slash + 1, &e, 10);
      if (e != end || db < 0) {
        snprintf(err, errlen, "store URL: bad database number '%.*s'", (int)(end - slash - 1),
                 slash + 1);
        return -EINVAL;
      }
      q->db = (int)db;
    }
  }
  snprintf(q->prefix, sizeof(q->prefix), "%s:", prefix);
  snprintf(q->channel, sizeof(q->channel), "%s:notes", prefix);
  return 0;
}

/* ---- open, close ---- */

static void redis_close(store_t *s) {
  struct redis_store *q = RQ(s);
  if (!q) return;
  if (q->in_tx && q->c) redis_tx_rollback(s);
  if (q->c) redisFree(q->c);
  redis_free_url(q);
  free(q);
}

static int redis_open(const char *url, const char *rest, store_t **out, char *err,
                      size_t errlen) {
  struct redis_store *q = calloc(1, sizeof(*q));
  if (!q) return -ENOMEM;
  q->base.ops = &store_redis_ops;
  int rc = redis_parse_url(q, url, rest, err, errlen);
  if (rc) goto out;
  pthread_once(&redis_text_once, redis_text_build);
  if (!redis_text_ok) {
    snprintf(err, errlen, "redis: cannot build the scripts");
    rc = -ENOMEM;
    goto out;
  }
  if (!(q->c = redis_dial(q, err, errlen))) {
    rc = SPD_ESTORE;
    goto out;
  }
  if ((rc = redis_load(q, -1, err, errlen))) goto out;
  /* The job tokens' secret, made once: HSETNX in the open script, so
   * nodes starting together agree on the first one written. */
  unsigned char raw[32 + 8];
  char secret[65];
  if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
    snprintf(err, errlen, "no randomness for the job secret");
    rc = SPD_ESTORE;
    goto out;
  }
  for (size_t i = 0; i < 32; i++) sprintf(secret + 2 * i, "%02x", raw[i]);
  for (size_t i = 0; i < 8; i++) sprintf(q->conn_id + 2 * i, "%02x", raw[32 + i]);
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, REDIS_SCHEMA_VERSION);
  ra_str(&a, secret);
  rc = redis_eval(q, RS_OPEN, &a, &r, "open");
  if (rc) {
    snprintf(err, errlen, "redis: the store's layout version %s is newer than this build's (%d)",
             r && r->type == REDIS_REPLY_ERROR && strchr(r->str, ' ') ? strchr(r->str, ' ') + 1
                                                                      : "?",
             REDIS_SCHEMA_VERSION);
    if (rc != -ENOENT && !(r && r->type == REDIS_REPLY_ERROR))
      snprintf(err, errlen, "redis: cannot open the store");
    rc = SPD_ESTORE;
  }
  if (r) freeReplyObject(r);
  if (rc) goto out;
  *out = &q->base;
out:
  if (rc) redis_close(&q->base);
  return rc;
}

/* ---- watch: SUBSCRIBE on a connection of its own ---- */

struct redis_watch {
  struct store_watch base;
  struct redis_store q; /* only the connection and URL fields are used */
};

static int redis_watch_subscribe(struct redis_watch *w, char *err, size_t errlen) {
  if (w->q.c) redisFree(w->q.c);
  w->q.c = redis_dial(&w->q, err, errlen);
  if (!w->q.c) return SPD_ESTORE;
  const char *argv[] = {"SUBSCRIBE", w->q.channel};
  redisReply *r = redisCommandArgv(w->q.c, 2, argv, NULL);
  int ok = r && r->type == REDIS_REPLY_ARRAY;
  if (r) freeReplyObject(r);
  if (!ok) {
    snprintf(err, errlen, "redis SUBSCRIBE failed: %s", w->q.c->errstr);
    redisFree(w->q.c);
    w->q.c = NULL;
    return SPD_ESTORE;
  }
  return 0;
}

static int redis_watch_fd(store_watch_t *ww) {
  struct redis_watch *w = (struct redis_watch *)ww;
  if (!w->q.c || w->q.c->err) return -1;
  return w->q.c->fd;
}

/* Connects and subscribes again; notices sent meanwhile are lost, so the
 * caller hears that everything may have changed. */
static int redis_watch_resubscribe(struct redis_watch *w, unsigned *what) {
  char err[256];
  if (redis_watch_subscribe(w, err, sizeof(err))) {
    log_warn("store", "notifications: %s", err);
    return SPD_ESTORE;
  }
  log_info("store", "notifications: reconnected to Redis");
  *what |= STORE_NOTE_RECONNECT | STORE_NOTE_JOBS | STORE_NOTE_EGGS | STORE_NOTE_CANCEL |
           STORE_NOTE_QUEUES | STORE_NOTE_NODES;
  return 0;
}

/* The connection broke: one reconnect at once (SPD_ESTORE when it fails;
 * the next read tries again). */
static int redis_watch_drop(struct redis_watch *w, unsigned *what) {
  log_warn("store", "notifications: connection to Redis lost: %s",
           w->q.c ? w->q.c->errstr : "");
  if (w->q.c) redisFree(w->q.c);
  w->q.c = NULL;
  return redis_watch_resubscribe(w, what);
}

static int redis_watch_read(store_watch_t *ww, unsigned *what) {
  struct redis_watch *w = (struct redis_watch *)ww;
  if (!w->q.c || w->q.c->err) return redis_watch_resubscribe(w, what);
  /* Only what already arrived: poll without waiting, then parse. */
  for (;;) {
    struct pollfd p = {.fd = w->q.c->fd, .events = POLLIN};
    int n = poll(&p, 1, 0);
    if (n <= 0) break;
    if (redisBufferRead(w->q.c) != REDIS_OK) return redis_watch_drop(w, what);
    if (p.revents & (POLLHUP | POLLERR)) break;
  }
  for (;;) {
    redisReply *r = NULL;
    if (redisGetReplyFromReader(w->q.c, (void **)&r) != REDIS_OK)
      return redis_watch_drop(w, what);
    if (!r) break;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
        r->element[0]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "message") &&
        r->element[2]->type == REDIS_REPLY_STRING)
      *what |= (unsigned)strtoul(r->element[2]->str, NULL, 10);
    freeReplyObject(r);
  }
  return 0;
}

static void redis_watch_close(store_watch_t *ww) {
  struct redis_watch *w = (struct redis_watch *)ww;
  if (!w) return;
  if (w->q.c) redisFree(w->q.c);
  redis_free_url(&w->q);
  free(w);
}

static int redis_watch_open(const char *url, const char *rest, store_watch_t **out, char *err,
                            size_t errlen) {
  struct redis_watch *w = calloc(1, sizeof(*w));
  if (!w) return -ENOMEM;
  w->base.fd = redis_watch_fd;
  w->base.read = redis_watch_read;
  w->base.close = redis_watch_close;
  int rc = redis_parse_url(&w->q, url, rest, err, errlen);
  if (!rc) rc = redis_watch_subscribe(w, err, errlen);
  if (rc) {
    redis_watch_close(&w->base);
    return rc;
  }
  *out = &w->base;
  return 0;
}

const struct store_ops store_redis_ops = {
    .name = "redis",
    .shared = 1,
    .open = redis_open,
    .close = redis_close,
    .watch_open = redis_watch_open,
#define STORE_OP(op, params) .op = redis_##op,
#include "store/ops.h"
};
