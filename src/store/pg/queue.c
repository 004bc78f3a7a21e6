/* Task queues on PostgreSQL (store.h, core/queue.h, docs/queues.md): a port
 * of sqlite/queue.c, whose comments explain the model. Same tables, same
 * states, the same ops and policy (queue_engine.c, given this file's row
 * reads and writes through queue_rows_t); what differs:
 *
 *   - Nodes share the store: every operation that changes a queue first
 *     locks its row in `queues` (SELECT ... FOR UPDATE), so one queue's
 *     changes are serialized across connections and each statement after
 *     the lock sees the previous holder's commit (READ COMMITTED takes a
 *     snapshot per statement). A take therefore never hands one element to
 *     two takers, and counters and key state stay exact.
 *   - Round trips, not page reads, are the cost: a take picks and leases a
 *     key's elements in one statement, expiry and promotion are one UPDATE
 *     each, acks and nacks look up all their leases at once (with their
 *     keys' rows) and write back with one UPDATE from arrays, requeue and
 *     purge change a chunk per statement, stats are one statement.
 *   - Elements and keys are bytea (a derived key is bytes of the element,
 *     not necessarily UTF-8); results are read in binary format.
 *
 * States: 0 = waiting, not yet due; 4 = waiting and due ("ready"); 1 = in
 * flight (due_ms is the lease end); 2 = dead; 3 = done. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "store/pg/internal.h"
#include "store/queue_engine.h"
#include "strbuf.h"

/* Rows promoted or expired per take (see sqlite/queue.c). */
#define QUEUE_SWEEP_MAX 5000
/* Rows per statement of a requeue or purge. */
#define BULK_CHUNK 5000

const char pg_schema_queue[] =
    "CREATE TABLE queues ("
    "  id BIGSERIAL PRIMARY KEY,"
    "  name TEXT COLLATE \"C\" NOT NULL UNIQUE,"
    "  created_ms BIGINT NOT NULL,"
    "  paused SMALLINT NOT NULL DEFAULT 0,"
    "  keep_done SMALLINT NOT NULL DEFAULT 0,"
    "  visibility_ms BIGINT NOT NULL,"
    "  max_deliveries INTEGER NOT NULL,"
    "  backoff_ms BIGINT NOT NULL,"
    "  backoff_max_ms BIGINT NOT NULL,"
    "  max_inflight INTEGER NOT NULL DEFAULT 0,"
    "  key_mode SMALLINT NOT NULL DEFAULT 0,"
    "  key_inflight INTEGER NOT NULL DEFAULT 0,"
    "  key_rate DOUBLE PRECISION NOT NULL DEFAULT 0,"
    "  key_burst DOUBLE PRECISION NOT NULL DEFAULT 1,"
    "  lease_seq BIGINT NOT NULL DEFAULT 0,"
    "  n_waiting BIGINT NOT NULL DEFAULT 0,"
    "  n_ready BIGINT NOT NULL DEFAULT 0,"
    "  n_inflight BIGINT NOT NULL DEFAULT 0,"
    "  n_dead BIGINT NOT NULL DEFAULT 0,"
    "  n_done BIGINT NOT NULL DEFAULT 0,"
    "  n_put BIGINT NOT NULL DEFAULT 0,"
    "  n_acked BIGINT NOT NULL DEFAULT 0"
    ");"
    "CREATE TABLE queue_items ("
    "  id BIGSERIAL PRIMARY KEY,"
    "  queue_id BIGINT NOT NULL,"
    "  hash BIGINT NOT NULL,"
    "  state SMALLINT NOT NULL,"
    "  priority INTEGER NOT NULL,"
    "  due_ms BIGINT NOT NULL,"
    "  key BYTEA NOT NULL,"
    "  deliveries INTEGER NOT NULL DEFAULT 0,"
    "  token BIGINT NOT NULL DEFAULT 0,"
    "  created_ms BIGINT NOT NULL,"
    "  redue_ms BIGINT NOT NULL DEFAULT 0,"
    "  redue_pri INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT,"
    "  element BYTEA NOT NULL"
    ");"
    "CREATE INDEX qi_hash ON queue_items (queue_id, hash);"
    "CREATE INDEX qi_time ON queue_items (queue_id, state, due_ms);"
    "CREATE INDEX qi_ready ON queue_items (queue_id, key, priority DESC, due_ms, id) "
    "WHERE state = 4;"
    "CREATE TABLE queue_keys ("
    "  queue_id BIGINT NOT NULL,"
    "  key BYTEA NOT NULL,"
    "  n_ready BIGINT NOT NULL DEFAULT 0,"
    "  inflight BIGINT NOT NULL DEFAULT 0,"
    "  tokens DOUBLE PRECISION NOT NULL DEFAULT 0,"
    "  tokens_ms BIGINT NOT NULL DEFAULT 0,"
    "  block_ms BIGINT NOT NULL DEFAULT 0,"
    "  head_pri BIGINT NOT NULL DEFAULT 0,"
    "  head_due BIGINT NOT NULL DEFAULT 0,"
    "  open SMALLINT NOT NULL DEFAULT 0,"
    "  wake_ms BIGINT NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (queue_id, key)"
    ");"
    "CREATE INDEX qk_open ON queue_keys (queue_id, head_pri DESC, head_due, key) "
    "WHERE open = 1;"
    "CREATE INDEX qk_wake ON queue_keys (queue_id, wake_ms) WHERE open = 0 AND wake_ms > 0;";

#define QUEUE_COLS                                                               \
  "id, name, created_ms, paused, keep_done, visibility_ms, max_deliveries, "     \
  "backoff_ms, backoff_max_ms, max_inflight, key_mode, key_inflight, key_rate, " \
  "key_burst, lease_seq, n_waiting, n_ready, n_inflight, n_dead, n_done, n_put, n_acked"
#define QUEUE_NCOLS 22
#define ITEM_COLS \
  "id, state, priority, due_ms, key, deliveries, token, created_ms, error, element"
#define KEY_COLS "n_ready, inflight, tokens, tokens_ms, block_ms, head_pri, head_due, open, wake_ms"
#define KEY_COLS_K                                                              \
  "k.n_ready, k.inflight, k.tokens, k.tokens_ms, k.block_ms, k.head_pri, "     \
  "k.head_due, k.open, k.wake_ms"

enum {
  QS_GET,
  QS_LOCK,
  QS_CREATE,
  QS_SET,
  QS_LIST,
  QS_COUNTERS,
  QS_DEL_ALL,
  QS_PUT,
  QS_REDUE,
  QS_STATE,
  QS_PROMOTE,
  QS_EXPIRE,
  QS_HEAD,
  QS_TAKE,
  QS_LEASES,
  QS_APPLY,
  QS_DELETE_IDS,
  QS_EXTEND,
  QS_TIMES,
  QS_STATS,
  QS_KEY_GET,
  QS_KEY_PUT,
  QS_KEY_DEL,
  QS_KEY_BEST,
  QS_KEY_WAKE,
  QS_KEY_ALL,
  QS_KEY_LIST,
  QS_COUNT
};

_Static_assert(PG_SLOT_QUEUE + QS_COUNT <= PG_SLOTS, "pg/queue.c's slots: 192..319");

/* The first unlocked statement of each take: when the next thing happens,
 * by kind (the first element not yet due, the first lease end, the first
 * key wake-up, the earliest ready due time). */
#define TIMES_SQL(q)                                                                        \
  "(SELECT due_ms FROM queue_items WHERE queue_id = " q " AND state = 0 "                   \
  "ORDER BY due_ms LIMIT 1), (SELECT due_ms FROM queue_items WHERE queue_id = " q " "       \
  "AND state = 1 ORDER BY due_ms LIMIT 1), (SELECT wake_ms FROM queue_keys "                \
  "WHERE queue_id = " q " AND open = 0 AND wake_ms > 0 ORDER BY wake_ms LIMIT 1), "         \
  "(SELECT due_ms FROM queue_items WHERE queue_id = " q " AND state = 4 "                   \
  "ORDER BY due_ms LIMIT 1)"

static const char *const queue_sql[QS_COUNT] = {
    [QS_GET] = "SELECT " QUEUE_COLS " FROM queues WHERE name = $1",
    [QS_LOCK] = "SELECT " QUEUE_COLS " FROM queues WHERE name = $1 FOR UPDATE",
    [QS_CREATE] = "INSERT INTO queues (name, created_ms, paused, keep_done, visibility_ms, "
                  "max_deliveries, backoff_ms, backoff_max_ms, max_inflight, key_mode, "
                  "key_inflight, key_rate, key_burst) VALUES "
                  "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) "
                  "ON CONFLICT (name) DO NOTHING RETURNING " QUEUE_COLS,
    [QS_SET] = "UPDATE queues SET paused = $2, keep_done = $3, visibility_ms = $4, "
               "max_deliveries = $5, backoff_ms = $6, backoff_max_ms = $7, "
               "max_inflight = $8, key_mode = $9, key_inflight = $10, key_rate = $11, "
               "key_burst = $12 WHERE id = $1 RETURNING " QUEUE_COLS,
    [QS_LIST] = "SELECT " QUEUE_COLS " FROM queues WHERE name > $1 ORDER BY name LIMIT $2",
    [QS_COUNTERS] = "UPDATE queues SET n_waiting = n_waiting + $2, n_ready = n_ready + $3, "
                    "n_inflight = n_inflight + $4, n_dead = n_dead + $5, "
                    "n_done = n_done + $6, n_put = n_put + $7, n_acked = n_acked + $8, "
                    "lease_seq = greatest(lease_seq, $9) WHERE id = $1",
    [QS_DEL_ALL] = "WITH i AS (DELETE FROM queue_items WHERE queue_id = $1), "
                   "k AS (DELETE FROM queue_keys WHERE queue_id = $1) "
                   "DELETE FROM queues WHERE id = $1",
    /* Finds the element, or inserts it when it is not there: one round
     * trip either way. Row kind 0 = found (its columns), 1 = inserted. */
    [QS_PUT] = "WITH f AS (SELECT id, state, priority, due_ms, key, redue_ms, redue_pri "
               "FROM queue_items WHERE queue_id = $1::bigint AND hash = $2::bigint "
               "AND element = $8::bytea LIMIT 1), "
               "i AS (INSERT INTO queue_items (queue_id, hash, state, priority, due_ms, key, "
               "created_ms, element) SELECT $1::bigint, $2::bigint, $3::smallint, $4::int, "
               "$5::bigint, $6::bytea, $7::bigint, $8::bytea WHERE NOT EXISTS (SELECT 1 FROM f) "
               "RETURNING id) "
               "SELECT 0 AS kind, id, state, priority, due_ms, key, redue_ms, redue_pri FROM f "
               "UNION ALL SELECT 1, id, 0::smallint, 0, 0::bigint, ''::bytea, 0::bigint, 0 "
               "FROM i",
    [QS_REDUE] = "UPDATE queue_items SET redue_ms = $2, redue_pri = $3 WHERE id = $1",
    /* As sqlite/queue.c's QS_STATE: $6 = 1: a fresh start; $7 = 1: the
     * last delivery is given back. */
    [QS_STATE] = "UPDATE queue_items SET state = $2, due_ms = $3, priority = $4, "
                 "error = coalesce($5::text, error), token = 0, "
                 "deliveries = CASE WHEN $6::int = 1 THEN 0 "
                 "ELSE greatest(deliveries - $7::int, 0) END, "
                 "redue_ms = CASE WHEN $6::int = 1 THEN 0 ELSE redue_ms END, "
                 "redue_pri = CASE WHEN $6::int = 1 THEN 0 ELSE redue_pri END WHERE id = $1",
    /* Conditions on the target row itself too, so they are checked again
     * on a row changed since the statement began. */
    [QS_PROMOTE] = "UPDATE queue_items SET state = 4 WHERE queue_id = $1 AND state = 0 "
                   "AND due_ms <= $2 AND id IN (SELECT id FROM queue_items "
                   "WHERE queue_id = $1 AND state = 0 AND due_ms <= $2 ORDER BY due_ms "
                   "LIMIT $3) RETURNING key, priority, due_ms",
    /* Leases that ran out: due again, or dead after the last delivery ($3). */
    [QS_EXPIRE] = "UPDATE queue_items SET "
                  "state = CASE WHEN $3::int > 0 AND deliveries >= $3::int THEN 2 ELSE 4 END, "
                  "due_ms = $2, token = 0, "
                  "error = CASE WHEN $3::int > 0 AND deliveries >= $3::int "
                  "THEN '" QUEUE_EXPIRED_ERROR "' ELSE error END "
                  "WHERE queue_id = $1 AND state = 1 AND due_ms <= $2 AND id IN "
                  "(SELECT id FROM queue_items WHERE queue_id = $1 AND state = 1 "
                  "AND due_ms <= $2 ORDER BY due_ms LIMIT $4) RETURNING key, state, priority",
    [QS_HEAD] = "SELECT priority, due_ms FROM queue_items WHERE queue_id = $1 AND key = $2 "
                "AND state = 4 ORDER BY priority DESC, due_ms, id LIMIT 1",
    /* Picks up to $3 ready elements of key $2 in order, stopping before the
     * first (after the first) that another key's head ($4: there is one,
     * $5, $6) goes before, and leases them: kind 1 rows. The first element
     * left (kind 0) is the key's next head. */
    [QS_TAKE] =
        "WITH c AS (SELECT id, priority, due_ms, "
        "row_number() OVER (ORDER BY priority DESC, due_ms, id) AS rn FROM "
        "(SELECT id, priority, due_ms FROM queue_items WHERE queue_id = $1 AND key = $2 "
        "AND state = 4 ORDER BY priority DESC, due_ms, id LIMIT $3::bigint + 1) s), "
        "t AS (SELECT id, rn FROM c WHERE rn <= $3::bigint AND (rn = 1 OR $4::int = 0 "
        "OR NOT ($5::bigint > priority OR ($5::bigint = priority AND $6::bigint < due_ms)))), "
        "u AS (UPDATE queue_items i SET state = 1, due_ms = $7, token = $8, "
        "deliveries = i.deliveries + 1 FROM t WHERE i.id = t.id AND i.state = 4 "
        "RETURNING i.id, t.rn, i.priority, i.deliveries, i.created_ms, i.error, i.element) "
        "SELECT 1 AS kind, rn, id, priority, deliveries, created_ms, error, element, "
        "0::bigint AS due FROM u UNION ALL (SELECT 0, rn, id, priority, 0, 0::bigint, NULL, "
        "NULL, due_ms FROM c WHERE rn NOT IN (SELECT rn FROM t) ORDER BY rn LIMIT 1) "
        "ORDER BY kind DESC, rn",
    /* The leases of an ack or nack among $2, with their keys' rows. */
    [QS_LEASES] = "SELECT i.id, i.token, i.key, i.deliveries, i.priority, i.redue_ms, "
                  "i.redue_pri, " KEY_COLS_K " FROM queue_items i LEFT JOIN queue_keys k "
                  "ON k.queue_id = i.queue_id AND k.key = i.key WHERE i.queue_id = $1 "
                  "AND i.state = 1 AND i.id = ANY ($2::bigint[])",
    /* Elements leave their leases, each for its state (QS_STATE of many;
     * unc = 1: the delivery is given back). */
    [QS_APPLY] =
        "UPDATE queue_items i SET state = v.state, due_ms = v.due, priority = v.pri, "
        "error = coalesce(v.err, i.error), token = 0, "
        "deliveries = CASE WHEN v.reset = 1 THEN 0 ELSE greatest(i.deliveries - v.unc, 0) END, "
        "redue_ms = CASE WHEN v.reset = 1 THEN 0 ELSE i.redue_ms END, "
        "redue_pri = CASE WHEN v.reset = 1 THEN 0 ELSE i.redue_pri END "
        "FROM unnest($1::bigint[], $2::smallint[], $3::bigint[], $4::int[], $5::text[], "
        "$6::int[], $7::int[]) AS v (id, state, due, pri, err, reset, unc) WHERE i.id = v.id",
    [QS_DELETE_IDS] = "DELETE FROM queue_items WHERE id = ANY ($1::bigint[])",
    /* One statement: the queue's lock (taken before any element is read),
     * then the leases held among ($4, $5) move to $2 + ($3 or the queue's
     * visibility). Kind 0: the queue exists; kind 1: extended. */
    [QS_EXTEND] =
        "WITH qq AS (SELECT id, visibility_ms FROM queues WHERE name = $1 FOR UPDATE), "
        "u AS (UPDATE queue_items SET due_ms = $2::bigint + CASE WHEN $3::bigint > 0 "
        "THEN $3::bigint ELSE (SELECT visibility_ms FROM qq) END "
        "WHERE queue_id = (SELECT id FROM qq) AND state = 1 AND (id, token) IN "
        "(SELECT a, b FROM unnest($4::bigint[], $5::bigint[]) AS v (a, b)) "
        "RETURNING id, token) "
        "SELECT 0 AS kind, 0::bigint AS id, 0::bigint AS token FROM qq "
        "UNION ALL SELECT 1, id, token FROM u",
    [QS_TIMES] = "SELECT " TIMES_SQL("$1"),
    [QS_STATS] = "SELECT " QUEUE_COLS ", (SELECT count(*) FROM queue_items "
                 "WHERE queue_id = queues.id AND state = 0 AND due_ms <= $2), " TIMES_SQL(
                     "queues.id") ", (SELECT count(*) FROM queue_keys "
                                  "WHERE queue_id = queues.id) FROM queues WHERE name = $1",
    [QS_KEY_GET] = "SELECT " KEY_COLS " FROM queue_keys WHERE queue_id = $1 AND key = $2",
    [QS_KEY_PUT] = "INSERT INTO queue_keys (queue_id, key, n_ready, inflight, tokens, "
                   "tokens_ms, block_ms, head_pri, head_due, open, wake_ms) VALUES "
                   "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
                   "ON CONFLICT (queue_id, key) DO UPDATE SET n_ready = excluded.n_ready, "
                   "inflight = excluded.inflight, tokens = excluded.tokens, "
                   "tokens_ms = excluded.tokens_ms, block_ms = excluded.block_ms, "
                   "head_pri = excluded.head_pri, head_due = excluded.head_due, "
                   "open = excluded.open, wake_ms = excluded.wake_ms",
    [QS_KEY_DEL] = "DELETE FROM queue_keys WHERE queue_id = $1 AND key = $2",
    [QS_KEY_BEST] = "SELECT key, " KEY_COLS " FROM queue_keys WHERE queue_id = $1 "
                    "AND open = 1 ORDER BY head_pri DESC, head_due, key LIMIT 2",
    [QS_KEY_WAKE] = "SELECT key FROM queue_keys WHERE queue_id = $1 AND open = 0 "
                    "AND wake_ms > 0 AND wake_ms <= $2 ORDER BY wake_ms LIMIT $3",
    [QS_KEY_ALL] = "SELECT key, " KEY_COLS " FROM queue_keys WHERE queue_id = $1",
    /* A range of the primary key (bytea: byte order, as SQLite's). */
    [QS_KEY_LIST] = "SELECT key, " KEY_COLS " FROM queue_keys WHERE queue_id = $1 "
                    "AND key > $2::bytea ORDER BY key LIMIT $3",
};

/* Runs statement id (binary results); NULL and *rc on failure. */
static PGresult *qrun(struct pg_store *q, int id, pg_params_t *p, int *rc, const char *what) {
  return pg_run(q, PG_SLOT_QUEUE + id, queue_sql[id], p, 1, rc, what);
}

static int qcmd(struct pg_store *q, int id, pg_params_t *p, const char *what) {
  return pg_cmd(q, PG_SLOT_QUEUE + id, queue_sql[id], p, 0, what);
}

/* ---- binary result readers (NULL reads as 0 / NULL) ---- */

/* The first (at most 8) bytes of a binary column as a big-endian number,
 * and in *n how many bytes the column has (0 for NULL). */
static uint64_t bbe(const PGresult *r, int row, int col, int *n) {
  *n = PQgetisnull(r, row, col) ? 0 : PQgetlength(r, row, col);
  const unsigned char *v = (const unsigned char *)PQgetvalue(r, row, col);
  uint64_t u = 0;
  for (int i = 0; i < *n && i < 8; i++) u = (u << 8) | v[i];
  return u;
}

static int64_t bi64(const PGresult *r, int row, int col) {
  int n;
  uint64_t u = bbe(r, row, col, &n);
  switch (n) {
  case 1:
    return (int64_t)u;
  case 2:
    return (int16_t)(uint16_t)u;
  case 4:
    return (int32_t)(uint32_t)u;
  case 8:
    return (int64_t)u;
  default:
    return 0;
  }
}

static double bdbl(const PGresult *r, int row, int col) {
  int n;
  uint64_t u = bbe(r, row, col, &n);
  if (n == 8) {
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
  }
  if (n == 4) {
    uint32_t u32 = (uint32_t)u;
    float fl;
    memcpy(&fl, &u32, sizeof(fl));
    return fl;
  }
  return 0;
}

/* A NUL-terminated copy of the bytes of a column (NULL stays NULL unless
 * must: then ""). */
static int bbytes(const PGresult *r, int row, int col, int must, char **out, size_t *len) {
  *out = NULL;
  if (len) *len = 0;
  if (PQgetisnull(r, row, col) && !must) return 0;
  size_t n = PQgetisnull(r, row, col) ? 0 : (size_t)PQgetlength(r, row, col);
  if (!(*out = malloc(n + 1))) return -ENOMEM;
  if (n) memcpy(*out, PQgetvalue(r, row, col), n);
  (*out)[n] = '\0';
  if (len) *len = n;
  return 0;
}

/* Array literals for unnest / ANY. */
typedef struct {
  strbuf_t b;
  int n;
} arr_t;

static void arr_i64(arr_t *a, int64_t v) {
  strbuf_addf(&a->b, "%s%" PRId64, a->n++ ? "," : "{", v);
}

static void arr_text(arr_t *a, const char *s) {
  strbuf_adds(&a->b, a->n++ ? "," : "{");
  if (!s) {
    strbuf_adds(&a->b, "NULL");
    return;
  }
  strbuf_add(&a->b, "\"", 1);
  for (const char *c = s; *c; c++) {
    if (*c == '"' || *c == '\\') strbuf_add(&a->b, "\\", 1);
    strbuf_add(&a->b, c, 1);
  }
  strbuf_add(&a->b, "\"", 1);
}

/* Closes the literal: its text, or NULL when out of memory. */
static const char *arr_end(arr_t *a) {
  if (!a->n) strbuf_adds(&a->b, "{");
  strbuf_adds(&a->b, "}");
  return a->b.failed ? NULL : a->b.p;
}

static void p_key(pg_params_t *p, const char *key) { pg_p_bin(p, key, strlen(key)); }

/* ---- queue rows ---- */

static void row_queue(const PGresult *r, int row, queue_conf_t *c, int64_t *lease_seq,
                      int64_t *n_ready) {
  c->id = bi64(r, row, 0);
  c->created_ms = bi64(r, row, 2);
  c->paused = (int)bi64(r, row, 3);
  c->keep_done = (int)bi64(r, row, 4);
  c->visibility_ms = bi64(r, row, 5);
  c->max_deliveries = (int)bi64(r, row, 6);
  c->backoff_ms = bi64(r, row, 7);
  c->backoff_max_ms = bi64(r, row, 8);
  c->max_inflight = (int)bi64(r, row, 9);
  c->key_mode = (queue_key_mode_t)bi64(r, row, 10);
  c->key_inflight = (int)bi64(r, row, 11);
  c->key_rate = bdbl(r, row, 12);
  c->key_burst = bdbl(r, row, 13);
  if (lease_seq) *lease_seq = bi64(r, row, 14);
  c->n_waiting = bi64(r, row, 15);
  if (n_ready) *n_ready = bi64(r, row, 16);
  c->n_inflight = bi64(r, row, 17);
  c->n_dead = bi64(r, row, 18);
  c->n_done = bi64(r, row, 19);
  c->n_put = bi64(r, row, 20);
  c->n_acked = bi64(r, row, 21);
}

/* Runs statement id, which returns the queue's row, into c: `none` when it
 * returns no row. */
static int queue_row_run(struct pg_store *q, int id, pg_params_t *p, const char *what, int none,
                         queue_conf_t *c, int64_t *lease_seq) {
  int rc;
  PGresult *r = qrun(q, id, p, &rc, what);
  if (!r) return rc;
  if (PQntuples(r) == 1)
    row_queue(r, 0, c, lease_seq, NULL);
  else
    rc = none;
  PQclear(r);
  return rc;
}

/* Reads (lock: and locks) queue `name` into c (name not copied). -ENOENT
 * when there is none. */
static int queue_load(struct pg_store *q, const char *name, int lock, queue_conf_t *c,
                      int64_t *lease_seq) {
  pg_params_t p = {0};
  pg_p_str(&p, name);
  return queue_row_run(q, lock ? QS_LOCK : QS_GET, &p, "queue get", -ENOENT, c, lease_seq);
}

/* The 11 settings of c, in QS_CREATE's ($3..$13) and QS_SET's ($2..$12) order. */
static void p_settings(pg_params_t *p, const queue_conf_t *c) {
  pg_p_i64(p, c->paused ? 1 : 0);
  pg_p_i64(p, c->keep_done ? 1 : 0);
  pg_p_i64(p, c->visibility_ms);
  pg_p_i64(p, c->max_deliveries);
  pg_p_i64(p, c->backoff_ms);
  pg_p_i64(p, c->backoff_max_ms);
  pg_p_i64(p, c->max_inflight);
  pg_p_i64(p, (int64_t)c->key_mode);
  pg_p_i64(p, c->key_inflight);
  pg_p_dbl(p, c->key_rate);
  pg_p_dbl(p, c->key_burst);
}

/* Creates queue `name` with settings c; -EEXIST when another connection
 * created it first (lock it then). Fills out. */
static int queue_create(struct pg_store *q, const char *name, int64_t now_ms,
                        const queue_conf_t *c, queue_conf_t *out, int64_t *lease_seq) {
  pg_params_t p = {0};
  pg_p_str(&p, name);
  pg_p_i64(&p, now_ms);
  p_settings(&p, c);
  return queue_row_run(q, QS_CREATE, &p, "queue create", -EEXIST, out, lease_seq);
}

/* The queue for a put: locked, or created with the defaults. */
static int queue_open(struct pg_store *q, const char *name, int64_t now_ms, queue_conf_t *c,
                      int64_t *lease_seq) {
  int rc = queue_load(q, name, 1, c, lease_seq);
  if (rc != -ENOENT) return rc;
  queue_conf_t d;
  memset(&d, 0, sizeof(d));
  queue_conf_defaults(&d);
  rc = queue_create(q, name, now_ms, &d, c, lease_seq);
  if (rc == -EEXIST) rc = queue_load(q, name, 1, c, lease_seq);
  return rc;
}

/* ---- one call's working state: the engine's, and the connection ---- */

/* An ack or nack's writes to leased elements, held to its end (x->own). */
typedef struct lease_writes lease_writes_t;

/* The connection of an engine call. */
#define QX(x) PGQ((x)->s)

/* Reads a key row's state from r's columns col.. (KEY_COLS' order). */
static void key_row(queue_key_t *e, const PGresult *r, int row, int col) {
  e->exists = 1;
  e->n_ready = bi64(r, row, col);
  e->inflight = bi64(r, row, col + 1);
  e->tokens = bdbl(r, row, col + 2);
  e->tokens_ms = bi64(r, row, col + 3);
  e->block_ms = bi64(r, row, col + 4);
  e->head_pri = bi64(r, row, col + 5);
  e->head_due = bi64(r, row, col + 6);
  e->open = (int)bi64(r, row, col + 7);
  e->wake_ms = bi64(r, row, col + 8);
}

/* ---- the engine's row access (queue_rows_t) ---- */

/* Runs statement id on (queue id, key): its result, NULL with *rc set. */
static PGresult *key_run(queue_call_t *x, int id, const char *key, int *rc, const char *what) {
  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  p_key(&p, key);
  return qrun(QX(x), id, &p, rc, what);
}

static int rows_key_get(queue_call_t *x, const char *key, queue_key_t *k) {
  int rc;
  PGresult *r = key_run(x, QS_KEY_GET, key, &rc, "queue key get");
  if (!r) return rc;
  rc = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? 0 : -ENOENT;
  if (!rc) key_row(k, r, 0, 0);
  PQclear(r);
  return rc;
}

static int rows_key_head(queue_call_t *x, const char *key, int64_t *pri, int64_t *due) {
  int rc;
  PGresult *r = key_run(x, QS_HEAD, key, &rc, "queue key head");
  if (!r) return rc;
  rc = PQntuples(r) > 0 ? 0 : -ENOENT;
  if (!rc) {
    *pri = bi64(r, 0, 0);
    *due = bi64(r, 0, 1);
  }
  PQclear(r);
  return rc;
}

static int rows_key_put(queue_call_t *x, const queue_key_t *k) {
  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  p_key(&p, k->key);
  pg_p_i64(&p, k->n_ready);
  pg_p_i64(&p, k->inflight);
  pg_p_dbl(&p, k->tokens);
  pg_p_i64(&p, k->tokens_ms);
  pg_p_i64(&p, k->block_ms);
  pg_p_i64(&p, k->head_pri);
  pg_p_i64(&p, k->head_due);
  pg_p_i64(&p, k->open);
  pg_p_i64(&p, k->wake_ms);
  return qcmd(QX(x), QS_KEY_PUT, &p, "queue key put");
}

static int rows_key_delete(queue_call_t *x, const char *key) {
  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  p_key(&p, key);
  return qcmd(QX(x), QS_KEY_DEL, &p, "queue key delete");
}

static int rows_counters(queue_call_t *x) {
  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  pg_p_i64(&p, x->d.waiting);
  pg_p_i64(&p, x->d.ready);
  pg_p_i64(&p, x->d.inflight);
  pg_p_i64(&p, x->d.dead);
  pg_p_i64(&p, x->d.done);
  pg_p_i64(&p, x->d.put);
  pg_p_i64(&p, x->d.acked);
  pg_p_i64(&p, x->lease_seq);
  return qcmd(QX(x), QS_COUNTERS, &p, "queue counters");
}

/* The cached state of key k: on first use, from r's row (columns from col
 * on; all NULL = no stored row) when r is given, else read from the store. */
static int ctx_key_at(queue_call_t *x, const char *k, const PGresult *r, int row, int col,
                      queue_key_t **out) {
  queue_key_t stored;
  if (!r) return queue_call_key(x, k, QUEUE_KEY_READ, out);
  if (row >= PQntuples(r) || PQgetisnull(r, row, col)) return queue_call_key(x, k, NULL, out);
  key_row(&stored, r, row, col);
  return queue_call_key(x, k, &stored, out);
}

static int ctx_key(queue_call_t *x, const char *k, queue_key_t **out) {
  return queue_call_key(x, k, QUEUE_KEY_READ, out);
}

/* Elements may be taken: every node's takers look (LISTEN/NOTIFY). */
static int rows_woken(queue_call_t *x) { return pg_note(QX(x), STORE_NOTE_QUEUES); }

/* Copies the bytes of r's column (row, col) into key (QUEUE_KEY_MAX at most). */
static void col_key(const PGresult *r, int row, int col, char key[QUEUE_KEY_MAX + 1]) {
  size_t n = (size_t)PQgetlength(r, row, col);
  if (n > QUEUE_KEY_MAX) n = QUEUE_KEY_MAX;
  memcpy(key, PQgetvalue(r, row, col), n);
  key[n] = '\0';
}

static int batch_add(lease_writes_t *w, const queue_write_t *qw);

static int rows_write(queue_call_t *x, const queue_write_t *w) {
  pg_params_t p = {0};
  if (x->own && w->kind != QWRITE_REDUE) return batch_add(x->own, w);
  pg_p_i64(&p, w->id);
  switch (w->kind) {
  case QWRITE_REDUE:
    pg_p_i64(&p, w->due);
    pg_p_i64(&p, w->pri);
    return qcmd(QX(x), QS_REDUE, &p, "queue put redue");
  case QWRITE_STATE:
    pg_p_i64(&p, w->state);
    pg_p_i64(&p, w->due);
    pg_p_i64(&p, w->pri);
    pg_p_str(&p, w->error);
    pg_p_i64(&p, w->reset ? 1 : 0);
    pg_p_i64(&p, w->uncount ? 1 : 0);
    return qcmd(QX(x), QS_STATE, &p, "queue item state");
  case QWRITE_DELETE:
    break;
  }
  char ids[32];
  snprintf(ids, sizeof(ids), "{%" PRId64 "}", w->id);
  pg_params_release(&p);
  pg_p_str(&p, ids);
  return qcmd(QX(x), QS_DELETE_IDS, &p, "queue delete");
}

/* ---- put ---- */

/* Finds or inserts the element: one round trip either way (QS_PUT). */
static int rows_put(queue_call_t *e, const queue_put_t *p, uint64_t hash, const char *key,
                    int state, queue_elem_t *el) {
  pg_params_t pp = {0};
  int rc;
  pg_p_i64(&pp, e->c.id);
  pg_p_i64(&pp, (int64_t)hash);
  pg_p_i64(&pp, state);
  pg_p_i64(&pp, p->priority);
  pg_p_i64(&pp, p->due_ms);
  p_key(&pp, key);
  pg_p_i64(&pp, e->now);
  pg_p_bin(&pp, p->element, p->len);
  PGresult *r = qrun(QX(e), QS_PUT, &pp, &rc, "queue put");
  if (!r) return rc;
  if (PQntuples(r) != 1) {
    PQclear(r);
    log_error("store", "queue put: no row found or inserted");
    return SPD_ESTORE;
  }
  el->id = bi64(r, 0, 1);
  el->inserted = bi64(r, 0, 0) == 1;
  if (!el->inserted) {
    el->state = (int)bi64(r, 0, 2);
    el->pri = bi64(r, 0, 3);
    el->due = bi64(r, 0, 4);
    col_key(r, 0, 5, el->key);
    el->redue_ms = bi64(r, 0, 6);
    el->redue_pri = bi64(r, 0, 7);
  }
  PQclear(r);
  return 0;
}

/* ---- take ---- */

static int rows_times(queue_call_t *x, int64_t t[QUEUE_NEXT_N]) {
  pg_params_t p = {0};
  int rc;
  pg_p_i64(&p, x->c.id);
  PGresult *r = qrun(QX(x), QS_TIMES, &p, &rc, "queue times");
  if (!r) return rc;
  for (int i = 0; i < QUEUE_NEXT_N; i++) t[i] = PQntuples(r) ? bi64(r, 0, i) : 0;
  PQclear(r);
  return 0;
}

/* Runs a sweep of the queue as of now (parameters: queue, now, at most
 * QUEUE_SWEEP_MAX rows). */
static PGresult *sweep_run(queue_call_t *x, int id, int *rc, const char *what) {
  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  pg_p_i64(&p, x->now);
  pg_p_i64(&p, QUEUE_SWEEP_MAX);
  return qrun(QX(x), id, &p, rc, what);
}

/* Elements not yet due whose time has come become ready. */
static int rows_promote(queue_call_t *x) {
  int rc;
  PGresult *r = sweep_run(x, QS_PROMOTE, &rc, "queue promote");
  if (!r) return rc;
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    queue_key_t *k;
    char *key;
    if ((rc = bbytes(r, i, 0, 1, &key, NULL))) break;
    rc = ctx_key(x, key, &k);
    free(key);
    if (rc) break;
    queue_key_ready_add(k, bi64(r, i, 1), bi64(r, i, 2));
    x->d.ready++;
  }
  PQclear(r);
  return rc;
}

/* Leases that ran out: the element is due again, or dead after its last
 * delivery. */
static int rows_expire(queue_call_t *x) {
  pg_params_t p = {0};
  int rc;
  pg_p_i64(&p, x->c.id);
  pg_p_i64(&p, x->now);
  pg_p_i64(&p, x->c.max_deliveries);
  pg_p_i64(&p, QUEUE_SWEEP_MAX);
  PGresult *r = qrun(QX(x), QS_EXPIRE, &p, &rc, "queue expire");
  if (!r) return rc;
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    char key[QUEUE_KEY_MAX + 1];
    col_key(r, i, 0, key);
    rc = queue_call_moved(x, key, QITEM_INFLIGHT, (int)bi64(r, i, 1), bi64(r, i, 2),
                          x->now);
  }
  PQclear(r);
  return rc;
}

/* Marks for settling every key of r's rows (key in column 0, its state
 * from column 1 on when withrow). */
static int touch_keys(queue_call_t *x, PGresult *r, int withrow) {
  int rc = 0;
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    queue_key_t *k;
    char *key;
    if ((rc = bbytes(r, i, 0, 1, &key, NULL))) break;
    rc = withrow ? ctx_key_at(x, key, r, i, 1, &k) : ctx_key(x, key, &k);
    free(key);
    if (!rc) k->dirty = 1;
  }
  return rc;
}

/* Closed keys whose block, bucket or wait has run out are settled again. */
static int rows_wake(queue_call_t *x) {
  int rc;
  PGresult *r = sweep_run(x, QS_KEY_WAKE, &rc, "queue wake");
  if (!r) return rc;
  rc = touch_keys(x, r, 0);
  PQclear(r);
  return rc;
}

/* Leases up to `room` of open key k's ready elements (queue_rows_t.pick):
 * one statement does the choice and the leases. */
static int rows_pick(queue_call_t *e, const queue_key_t *k, size_t room, int has2, int64_t p2,
                     int64_t d2, int64_t lease_end, int64_t token, queue_item_list_t *out,
                     int *next, int64_t *next_pri, int64_t *next_due) {
  queue_call_t *x = e;
  int rc = 0;

  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  p_key(&p, k->key);
  pg_p_i64(&p, (int64_t)room);
  pg_p_i64(&p, has2 ? 1 : 0);
  pg_p_i64(&p, p2);
  pg_p_i64(&p, d2);
  pg_p_i64(&p, lease_end);
  pg_p_i64(&p, token);
  PGresult *r = qrun(QX(x), QS_TAKE, &p, &rc, "queue take");
  if (!r) return rc;
  for (int i = 0; i < PQntuples(r); i++) {
    if (bi64(r, i, 0) == 0) {
      *next = 1;
      *next_pri = bi64(r, i, 3);
      *next_due = bi64(r, i, 8);
      continue;
    }
    queue_item_t *it = queue_item_list_add(out);
    if (!it) {
      rc = -ENOMEM;
      break;
    }
    it->id = bi64(r, i, 2);
    it->state = QSTATE_INFLIGHT;
    it->priority = (int)bi64(r, i, 3);
    it->due_ms = lease_end;
    it->token = token;
    it->deliveries = (int)bi64(r, i, 4);
    it->created_ms = bi64(r, i, 5);
    if (bbytes(r, i, 7, 1, &it->element, &it->len) || !(it->key = strdup(k->key)) ||
        bbytes(r, i, 6, 0, &it->error, NULL)) {
      rc = -ENOMEM;
      break;
    }
  }
  PQclear(r);
  return rc;
}

static int rows_best_key(queue_call_t *x, queue_key_t **k, int *has2, int64_t *p2,
                         int64_t *d2) {
  pg_params_t p = {0};
  int rc;
  char *key;
  pg_p_i64(&p, x->c.id);
  PGresult *r = qrun(QX(x), QS_KEY_BEST, &p, &rc, "queue best key");
  if (!r) return rc;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return 0;
  }
  if ((rc = bbytes(r, 0, 0, 1, &key, NULL))) {
    PQclear(r);
    return rc;
  }
  rc = ctx_key_at(x, key, r, 0, 1, k);
  free(key);
  if (!rc && PQntuples(r) > 1) {
    *has2 = 1;
    *p2 = bi64(r, 1, 6);
    *d2 = bi64(r, 1, 7);
  }
  PQclear(r);
  return rc;
}

/* ---- ack, nack, extend ---- */

/* The writes of an ack or nack call, applied at its end. */
struct lease_writes {
  arr_t id, state, due, pri, err, reset, unc; /* QS_APPLY's arrays */
  arr_t del;                                  /* deleted */
};

static void writes_release(lease_writes_t *w) {
  arr_t *a[] = {&w->id, &w->state, &w->due, &w->pri, &w->err, &w->reset, &w->unc, &w->del};
  for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) strbuf_release(&a[i]->b);
}

static int batch_add(lease_writes_t *w, const queue_write_t *qw) {
  if (qw->kind == QWRITE_DELETE) {
    arr_i64(&w->del, qw->id);
    return 0;
  }
  arr_i64(&w->id, qw->id);
  arr_i64(&w->state, qw->state);
  arr_i64(&w->due, qw->due);
  arr_i64(&w->pri, qw->pri);
  arr_text(&w->err, qw->error);
  arr_i64(&w->reset, qw->reset ? 1 : 0);
  arr_i64(&w->unc, qw->uncount ? 1 : 0);
  return 0;
}

/* The lookup of every lease in one statement (queue_rows_t.leases), each
 * with its key's row: the engine reads no key of its own. Its writes are
 * held to the end of the call (rows_flush). */
static int rows_leases(queue_call_t *x, const queue_lease_t *l, size_t n, queue_elem_t *h) {
  PGresult *r = NULL;
  unsigned char *used = NULL;
  arr_t ids = {0};
  pg_params_t p = {0};
  int rc = 0;
  if (!(x->own = calloc(1, sizeof(lease_writes_t)))) return -ENOMEM;
  for (size_t i = 0; i < n; i++) arr_i64(&ids, l[i].id);
  const char *idv = arr_end(&ids);
  if (!idv) {
    rc = -ENOMEM;
    goto out;
  }
  pg_p_i64(&p, x->c.id);
  pg_p_str(&p, idv);
  if (!(r = qrun(QX(x), QS_LEASES, &p, &rc, "queue leases"))) goto out;
  int nrows = PQntuples(r);
  if (!(used = calloc((size_t)nrows + 1, 1))) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; !rc && i < n; i++) {
    int row = -1;
    for (int j = 0; j < nrows && row < 0; j++)
      if (!used[j] && bi64(r, j, 0) == l[i].id && bi64(r, j, 1) == l[i].token) row = j;
    if (row < 0) continue; /* not held (or repeated in this call) */
    used[row] = 1;
    h[i].id = l[i].id;
    h[i].state = QITEM_INFLIGHT;
    col_key(r, row, 2, h[i].key);
    h[i].deliveries = bi64(r, row, 3);
    h[i].pri = bi64(r, row, 4);
    h[i].redue_ms = bi64(r, row, 5);
    h[i].redue_pri = bi64(r, row, 6);
    queue_key_t *k;
    rc = ctx_key_at(x, h[i].key, r, row, 7, &k);
  }
out:
  PQclear(r);
  free(used);
  strbuf_release(&ids.b);
  return rc;
}

/* The held writes of an ack or nack: one UPDATE from arrays, one DELETE. */
static int rows_flush(queue_call_t *x) {
  lease_writes_t *w = x->own;
  int rc = 0;
  if (!w) return 0;
  if (w->id.n) {
    arr_t *a[] = {&w->id, &w->state, &w->due, &w->pri, &w->err, &w->reset, &w->unc};
    pg_params_t p = {0};
    for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
      const char *v = arr_end(a[i]);
      if (!v) rc = -ENOMEM;
      pg_p_str(&p, v);
    }
    if (rc) {
      pg_params_release(&p);
      return rc;
    }
    if ((rc = qcmd(QX(x), QS_APPLY, &p, "queue lease end"))) return rc;
  }
  if (w->del.n) {
    const char *v = arr_end(&w->del);
    if (!v) return -ENOMEM;
    pg_params_t p = {0};
    pg_p_str(&p, v);
    rc = qcmd(QX(x), QS_DELETE_IDS, &p, "queue delete");
  }
  return rc;
}

static void rows_release(queue_call_t *x) {
  if (!x->own) return;
  writes_release(x->own);
  free(x->own);
  x->own = NULL;
}

int pg_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t visibility_ms, int64_t now_ms) {
  struct pg_store *q = PGQ(s);
  arr_t ids = {0}, toks = {0};
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    arr_i64(&ids, leases[i].id);
    arr_i64(&toks, leases[i].token);
  }
  const char *idv = arr_end(&ids), *tokv = arr_end(&toks);
  if (!idv || !tokv) {
    rc = -ENOMEM;
    goto out;
  }
  pg_params_t p = {0};
  pg_p_str(&p, name);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, visibility_ms);
  pg_p_str(&p, idv);
  pg_p_str(&p, tokv);
  PGresult *r = qrun(q, QS_EXTEND, &p, &rc, "queue extend");
  if (!r) goto out;
  int nrows = PQntuples(r), exists = 0;
  for (int j = 0; j < nrows; j++)
    if (bi64(r, j, 0) == 0) exists = 1;
  if (!exists) rc = -ENOENT;
  for (size_t i = 0; !rc && i < n; i++) {
    leases[i].result = -ENOENT;
    for (int j = 0; j < nrows; j++)
      if (bi64(r, j, 0) == 1 && bi64(r, j, 1) == leases[i].id &&
          bi64(r, j, 2) == leases[i].token)
        leases[i].result = 0;
  }
  PQclear(r);
out:
  strbuf_release(&ids.b);
  strbuf_release(&toks.b);
  return rc;
}

/* ---- settings, listing, stats ---- */

static int rows_begin(queue_call_t *x, int *began) { return pg_auto_begin(QX(x), began); }
static int rows_end(queue_call_t *x, int began, int rc) { return pg_auto_end(QX(x), began, rc); }

/* Locked: SELECT ... FOR UPDATE serializes one queue's changes across
 * connections. */
static int rows_load(queue_call_t *x, const char *name, int how) {
  if (how == QUEUE_LOAD_OPEN) return queue_open(QX(x), name, x->now, &x->c, &x->lease_seq);
  return queue_load(QX(x), name, how == QUEUE_LOAD_LOCK, &x->c, &x->lease_seq);
}

static int rows_conf_write(queue_call_t *x, const queue_conf_t *c, int create) {
  pg_params_t p = {0};
  if (create) return queue_create(QX(x), c->name, x->now, c, &x->c, &x->lease_seq);
  pg_p_i64(&p, x->c.id);
  p_settings(&p, c);
  return queue_row_run(QX(x), QS_SET, &p, "queue set", -ENOENT, &x->c, &x->lease_seq);
}

/* The key rows come with their state: no read of their own. */
static int rows_keys_touch(queue_call_t *x) {
  pg_params_t p = {0};
  int rc;
  pg_p_i64(&p, x->c.id);
  PGresult *r = qrun(QX(x), QS_KEY_ALL, &p, &rc, "queue keys");
  if (!r) return rc;
  rc = touch_keys(x, r, 1);
  PQclear(r);
  return rc;
}

int pg_queues_list(store_t *s, const char *after, size_t limit, queue_conf_list_t *out) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  int rc;
  pg_p_str(&p, after ? after : "");
  if (limit)
    pg_p_i64(&p, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
  else
    pg_p_str(&p, NULL);
  PGresult *r = qrun(q, QS_LIST, &p, &rc, "queue list");
  if (!r) return rc;
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    queue_conf_t *c = queue_conf_list_add(out);
    if (!c) {
      rc = -ENOMEM;
      break;
    }
    row_queue(r, i, c, NULL, NULL);
    rc = bbytes(r, i, 1, 1, &c->name, NULL);
  }
  PQclear(r);
  return rc;
}

static int rows_drop(queue_call_t *x) {
  pg_params_t p = {0};
  pg_p_i64(&p, x->c.id);
  return qcmd(QX(x), QS_DEL_ALL, &p, "queue delete");
}

/* One statement: the queue's row and every count. */
static int rows_stats(queue_call_t *x, const char *name, queue_stats_row_t *out) {
  pg_params_t p = {0};
  int rc;
  pg_p_str(&p, name);
  pg_p_i64(&p, x->now);
  PGresult *r = qrun(QX(x), QS_STATS, &p, &rc, "queue stats");
  if (!r) return rc;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return -ENOENT;
  }
  row_queue(r, 0, &out->c, NULL, &out->ready);
  int col = QUEUE_NCOLS;
  out->delayed_due = bi64(r, 0, col);
  for (int i = 0; i < QUEUE_NEXT_N; i++) out->t[i] = bi64(r, 0, col + 1 + i);
  out->keys = bi64(r, 0, col + 1 + QUEUE_NEXT_N);
  PQclear(r);
  return 0;
}

static int rows_key_page(queue_call_t *x, const char *after, size_t limit,
                         queue_key_list_t *out) {
  pg_params_t p = {0};
  int rc;
  pg_p_i64(&p, x->c.id);
  p_key(&p, after);
  pg_p_i64(&p, limit && limit < (size_t)INT64_MAX ? (int64_t)limit : INT64_MAX);
  PGresult *r = qrun(QX(x), QS_KEY_LIST, &p, &rc, "queue keys");
  if (!r) return rc;
  for (int i = 0; !rc && i < PQntuples(r); i++) {
    queue_key_t k = {0};
    key_row(&k, r, i, 1);
    rc = queue_call_key_info(x, out, PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0), &k);
  }
  PQclear(r);
  return rc;
}

/* ---- selections: items, requeue, purge ---- */

/* The WHERE clause of filter f, its parameters pushed onto p in order
 * (queue, after_id first). ids (an array literal) must outlive p's use. */
static int filter_sql(strbuf_t *b, pg_params_t *p, int64_t queue_id, const queue_filter_t *f,
                      int64_t after_id, arr_t *ids) {
  pg_p_i64(p, queue_id);
  pg_p_i64(p, after_id);
  strbuf_adds(b, "queue_id = $1 AND id > $2");
  if (f->states) {
    const char *sep = "";
    strbuf_adds(b, " AND state IN (");
    for (int st = 0; st < QSTATE_N; st++) {
      if (!(f->states & (1u << st))) continue;
      if (st == QSTATE_WAITING)
        strbuf_addf(b, "%s%d, %d", sep, QITEM_DELAYED, QITEM_READY);
      else
        strbuf_addf(b, "%s%d", sep, qitem_stored_state((queue_state_t)st));
      sep = ", ";
    }
    strbuf_adds(b, ")");
  }
  if (f->key) {
    p_key(p, f->key);
    strbuf_addf(b, " AND key = $%d::bytea", p->n);
  }
  if (f->prefix) {
    size_t n = strlen(f->prefix);
    pg_p_i64(p, (int64_t)n);
    pg_p_bin(p, f->prefix, n);
    strbuf_addf(b, " AND substr(element, 1, $%d::int) = $%d::bytea", p->n - 1, p->n);
  }
  if (f->nids) {
    for (size_t i = 0; i < f->nids; i++) arr_i64(ids, f->ids[i]);
    const char *v = arr_end(ids);
    if (!v) return -ENOMEM;
    pg_p_str(p, v);
    strbuf_addf(b, " AND id = ANY ($%d::bigint[])", p->n);
  }
  return b->failed ? -ENOMEM : 0;
}

static int rows_items(queue_call_t *x, const queue_filter_t *f, queue_item_list_t *out) {
  struct pg_store *q = QX(x);
  strbuf_t b = {0};
  arr_t ids = {0};
  pg_params_t p = {0};
  PGresult *r = NULL;
  int rc;
  strbuf_adds(&b, "SELECT " ITEM_COLS " FROM queue_items WHERE ");
  if ((rc = filter_sql(&b, &p, x->c.id, f, f->after_id, &ids))) goto out;
  strbuf_adds(&b, " ORDER BY id");
  if (f->limit)
    strbuf_addf(&b, " LIMIT %" PRId64,
                f->limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)f->limit);
  if (b.failed) {
    rc = -ENOMEM;
    goto out;
  }
  if (!(r = pg_run(q, -1, b.p, &p, 1, &rc, "queue items"))) goto out;
  for (int i = 0; i < PQntuples(r); i++) {
    queue_item_t *it = queue_item_list_add(out);
    if (!it) {
      rc = -ENOMEM;
      break;
    }
    it->id = bi64(r, i, 0);
    it->state = qitem_public_state((int)bi64(r, i, 1));
    it->priority = (int)bi64(r, i, 2);
    it->due_ms = bi64(r, i, 3);
    it->deliveries = (int)bi64(r, i, 5);
    it->token = it->state == QSTATE_INFLIGHT ? bi64(r, i, 6) : 0;
    it->created_ms = bi64(r, i, 7);
    if (bbytes(r, i, 9, 1, &it->element, &it->len) || bbytes(r, i, 4, 1, &it->key, NULL) ||
        bbytes(r, i, 8, 0, &it->error, NULL)) {
      rc = -ENOMEM;
      break;
    }
  }
out:
  PQclear(r);
  pg_params_release(&p);
  strbuf_release(&b);
  strbuf_release(&ids.b);
  return rc;
}

/* Requeue or purge a chunk in one statement, which returns the rows it
 * changed (id, old state, key, priority) for the engine's bookkeeping
 * (queue_rows_t.bulk). */
static int rows_bulk(queue_call_t *x, const queue_filter_t *f, int requeue, int state,
                     int64_t due_ms, int64_t after, queue_elem_t *v, size_t *n, int *applied) {
  strbuf_t b = {0}, w = {0};
  arr_t ids = {0};
  pg_params_t p = {0};
  PGresult *r = NULL;
  int rc;
  *applied = 1;
  if ((rc = filter_sql(&w, &p, x->c.id, f, after, &ids))) goto out;
  if (!requeue) {
    strbuf_addf(&b,
                "DELETE FROM queue_items WHERE id IN (SELECT id FROM queue_items WHERE %s "
                "ORDER BY id LIMIT %d) RETURNING id, state, key, priority",
                w.p, BULK_CHUNK);
  } else {
    pg_p_i64(&p, state);
    pg_p_i64(&p, due_ms);
    strbuf_addf(&b,
                "UPDATE queue_items i SET state = $%d::smallint, due_ms = $%d::bigint, "
                "token = 0, deliveries = 0, redue_ms = 0, redue_pri = 0 FROM (SELECT id, "
                "state FROM queue_items WHERE %s ORDER BY id LIMIT %d) o WHERE i.id = o.id "
                "RETURNING i.id, o.state, i.key, i.priority",
                p.n - 1, p.n, w.p, BULK_CHUNK);
  }
  if (b.failed || w.failed) {
    rc = -ENOMEM;
    goto out;
  }
  if (!(r = pg_run(QX(x), -1, b.p, &p, 1, &rc, requeue ? "queue requeue" : "queue purge")))
    goto out;
  for (int i = 0; i < PQntuples(r); i++) {
    queue_elem_t *e = &v[(*n)++];
    e->id = bi64(r, i, 0);
    e->state = (int)bi64(r, i, 1);
    col_key(r, i, 2, e->key);
    e->pri = bi64(r, i, 3);
  }
out:
  PQclear(r);
  pg_params_release(&p);
  strbuf_release(&b);
  strbuf_release(&w);
  strbuf_release(&ids.b);
  return rc;
}

static const queue_rows_t pg_rows = {QUEUE_ROWS(rows_), .woken = rows_woken,
                                     .flush = rows_flush, .release = rows_release,
                                     .bulk_chunk = BULK_CHUNK};

QUEUE_ENGINE_OPS(pg_, pg_rows)
