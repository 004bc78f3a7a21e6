/* Task queues on SQLite (store.h, core/queue.h, docs/queues.md).
 *
 * Layout (schema migration 4):
 *
 *   queues       one row per queue: settings, the lease token sequence and
 *                the counters (waiting, ready, in flight, dead, done), moved
 *                by deltas in the transaction of every change.
 *   queue_items  one row per element. state 0 = waiting, not yet due;
 *                4 = waiting and due ("ready"); 1 = in flight (due_ms is
 *                the lease end); 2 = dead; 3 = done. Indexes:
 *                  qi_hash  (queue, hash)            uniqueness lookups
 *                  qi_time  (queue, state, due_ms)   what becomes due next:
 *                           promotion of state 0, expired leases, oldest due
 *                  qi_ready (queue, key, priority DESC, due_ms), state 4:
 *                           the take order within one key
 *   queue_keys   one row per politeness key with ready or in-flight
 *                elements (or a bucket or block still in effect): ready
 *                count, in flight, token bucket, Retry-After block, and its
 *                best ready element (head). A key is "open" when something
 *                can be taken from it now; qk_open orders open keys by
 *                head, qk_wake finds closed keys whose time has come.
 *
 * So take never scans elements it cannot deliver: elements not yet due sit
 * in state 0 until a take promotes them (an index range of exactly those
 * now due), and a blocked key's elements are never visited — take walks
 * open keys best head first, and within a key the elements in order.
 * Every operation keeps a per-call cache of the keys it touches and writes
 * each back once (settled: open or closed, and until when).
 *
 * The ops and their policy (puts, leases, backoff, dead letters, keys, the
 * take order, counters) are queue_engine.c's, shared with pg/queue.c; this
 * file gives it SQLite's row reads and writes (queue_rows_t) and has only
 * store_queue_extend and store_queues_list of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core/array.h"
#include "error.h"
#include "log.h"
#include "store/queue_engine.h"
#include "store/sqlite/internal.h"

/* Rows promoted or expired per take, so one take stays short however much
 * became due at once; the next take goes on. */
#define QUEUE_SWEEP_MAX 5000

#define QUEUE_COLS                                                               \
  "id, name, created_ms, paused, keep_done, visibility_ms, max_deliveries, "     \
  "backoff_ms, backoff_max_ms, max_inflight, key_mode, key_inflight, key_rate, " \
  "key_burst, lease_seq, n_waiting, n_ready, n_inflight, n_dead, n_done, n_put, n_acked"
#define ITEM_COLS \
  "id, state, priority, due_ms, key, deliveries, token, created_ms, error, element"

enum {
  QS_GET,
  QS_CREATE,
  QS_SET,
  QS_LIST,
  QS_COUNTERS,
  QS_DEL_ITEMS,
  QS_DEL_KEYS,
  QS_DEL,
  QS_FIND,
  QS_INSERT,
  QS_REDUE,
  QS_STATE,
  QS_PROMOTE,
  QS_EXPIRED,
  QS_HEAD,
  QS_PICK,
  QS_TAKE,
  QS_LEASE,
  QS_DELETE,
  QS_EXTEND,
  QS_TIMES,
  QS_PASTDUE,
  QS_KEY_GET,
  QS_KEY_PUT,
  QS_KEY_DEL,
  QS_KEY_BEST,
  QS_KEY_WAKE,
  QS_KEY_COUNT,
  QS_KEY_ALL,
  QS_KEY_LIST,
  QS_COUNT
};

_Static_assert(QS_COUNT <= SQLITE_QUEUE_SLOTS, "grow SQLITE_QUEUE_SLOTS");

static const char *const queue_sql[QS_COUNT] = {
    [QS_GET] = "SELECT " QUEUE_COLS " FROM queues WHERE name = ?1",
    [QS_CREATE] = "INSERT INTO queues (name, created_ms, paused, keep_done, visibility_ms, "
                  "max_deliveries, backoff_ms, backoff_max_ms, max_inflight, key_mode, "
                  "key_inflight, key_rate, key_burst) VALUES "
                  "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [QS_SET] = "UPDATE queues SET paused = ?3, keep_done = ?4, visibility_ms = ?5, "
               "max_deliveries = ?6, backoff_ms = ?7, backoff_max_ms = ?8, "
               "max_inflight = ?9, key_mode = ?10, key_inflight = ?11, key_rate = ?12, "
               "key_burst = ?13 WHERE name = ?1",
    [QS_LIST] = "SELECT " QUEUE_COLS " FROM queues WHERE name > ?1 ORDER BY name LIMIT ?2",
    [QS_COUNTERS] = "UPDATE queues SET n_waiting = n_waiting + ?2, n_ready = n_ready + ?3, "
                    "n_inflight = n_inflight + ?4, n_dead = n_dead + ?5, "
                    "n_done = n_done + ?6, n_put = n_put + ?7, n_acked = n_acked + ?8, "
                    "lease_seq = max(lease_seq, ?9) WHERE id = ?1",
    [QS_DEL_ITEMS] = "DELETE FROM queue_items WHERE queue_id = ?1",
    [QS_DEL_KEYS] = "DELETE FROM queue_keys WHERE queue_id = ?1",
    [QS_DEL] = "DELETE FROM queues WHERE id = ?1",
    [QS_FIND] = "SELECT id, state, priority, due_ms, key, redue_ms, redue_pri "
                "FROM queue_items WHERE queue_id = ?1 AND hash = ?2 AND element = ?3",
    [QS_INSERT] = "INSERT INTO queue_items (queue_id, hash, state, priority, due_ms, key, "
                  "created_ms, element) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [QS_REDUE] = "UPDATE queue_items SET redue_ms = ?2, redue_pri = ?3 WHERE id = ?1",
    /* A QWRITE_STATE: state, due, priority, out of any lease; the error
     * when ?5 is not NULL. ?6 = a fresh start: deliveries and a deferred due
     * time go too (otherwise a due time a put deferred waits for the next
     * ack); ?7 = the last delivery is given back. */
    [QS_STATE] = "UPDATE queue_items SET state = ?2, due_ms = ?3, priority = ?4, "
                 "error = coalesce(?5, error), token = 0, "
                 "deliveries = CASE WHEN ?6 THEN 0 ELSE max(deliveries - ?7, 0) END, "
                 "redue_ms = CASE WHEN ?6 THEN 0 ELSE redue_ms END, "
                 "redue_pri = CASE WHEN ?6 THEN 0 ELSE redue_pri END WHERE id = ?1",
    [QS_PROMOTE] = "UPDATE queue_items SET state = 4 WHERE id IN (SELECT id FROM queue_items "
                   "WHERE queue_id = ?1 AND state = 0 AND due_ms <= ?2 ORDER BY due_ms "
                   "LIMIT ?3) RETURNING key, priority, due_ms",
    [QS_EXPIRED] = "SELECT id, key, deliveries, priority FROM queue_items WHERE queue_id = ?1 "
                   "AND state = 1 AND due_ms <= ?2 ORDER BY due_ms LIMIT ?3",
    [QS_HEAD] = "SELECT priority, due_ms FROM queue_items WHERE queue_id = ?1 AND key = ?2 "
                "AND state = 4 ORDER BY priority DESC, due_ms LIMIT 1",
    [QS_PICK] = "SELECT id, priority, due_ms, deliveries, created_ms, error, element "
                "FROM queue_items WHERE queue_id = ?1 AND key = ?2 AND state = 4 "
                "ORDER BY priority DESC, due_ms LIMIT ?3",
    /* No RETURNING: it buffers rows in a temporary b-tree (a large
     * allocation per statement); the pick read the columns already. */
    [QS_TAKE] = "UPDATE queue_items SET state = 1, due_ms = ?2, token = ?3, "
                "deliveries = deliveries + 1 WHERE id = ?1",
    [QS_LEASE] = "SELECT key, deliveries, priority, redue_ms, redue_pri FROM queue_items "
                 "WHERE id = ?1 AND queue_id = ?2 AND state = 1 AND token = ?3",
    [QS_DELETE] = "DELETE FROM queue_items WHERE id = ?1",
    [QS_EXTEND] = "UPDATE queue_items SET due_ms = ?4 "
                  "WHERE id = ?1 AND queue_id = ?2 AND state = 1 AND token = ?3",
    /* When the next thing happens, by kind: the first element not yet due,
     * the first lease end, the first key wake-up, the earliest ready due
     * time. States are literals: a bound state would make SQLite prepare
     * the statement again at every bind (the plan depends on it through
     * qi_ready's condition). */
    [QS_TIMES] =
        "SELECT (SELECT due_ms FROM queue_items WHERE queue_id = ?1 AND state = 0 "
        "ORDER BY due_ms LIMIT 1), (SELECT due_ms FROM queue_items WHERE queue_id = ?1 "
        "AND state = 1 ORDER BY due_ms LIMIT 1), (SELECT wake_ms FROM queue_keys "
        "WHERE queue_id = ?1 AND open = 0 AND wake_ms > 0 ORDER BY wake_ms LIMIT 1), "
        "(SELECT due_ms FROM queue_items WHERE queue_id = ?1 AND state = 4 "
        "ORDER BY due_ms LIMIT 1)",
    [QS_PASTDUE] = "SELECT count(*) FROM queue_items WHERE queue_id = ?1 AND state = 0 "
                   "AND due_ms <= ?2",
    [QS_KEY_GET] = "SELECT n_ready, inflight, tokens, tokens_ms, block_ms, head_pri, "
                   "head_due, open, wake_ms FROM queue_keys WHERE queue_id = ?1 AND key = ?2",
    [QS_KEY_PUT] = "INSERT INTO queue_keys (queue_id, key, n_ready, inflight, tokens, "
                   "tokens_ms, block_ms, head_pri, head_due, open, wake_ms) VALUES "
                   "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
                   "ON CONFLICT (queue_id, key) DO UPDATE SET n_ready = excluded.n_ready, "
                   "inflight = excluded.inflight, tokens = excluded.tokens, "
                   "tokens_ms = excluded.tokens_ms, block_ms = excluded.block_ms, "
                   "head_pri = excluded.head_pri, head_due = excluded.head_due, "
                   "open = excluded.open, wake_ms = excluded.wake_ms",
    [QS_KEY_DEL] = "DELETE FROM queue_keys WHERE queue_id = ?1 AND key = ?2",
    [QS_KEY_BEST] = "SELECT key, n_ready, inflight, tokens, tokens_ms, block_ms, head_pri, "
                    "head_due, open, wake_ms FROM queue_keys WHERE queue_id = ?1 "
                    "AND open = 1 ORDER BY head_pri DESC, head_due LIMIT 2",
    [QS_KEY_WAKE] = "SELECT key FROM queue_keys WHERE queue_id = ?1 AND open = 0 "
                    "AND wake_ms > 0 AND wake_ms <= ?2 ORDER BY wake_ms LIMIT ?3",
    [QS_KEY_COUNT] = "SELECT count(*) FROM queue_keys WHERE queue_id = ?1",
    [QS_KEY_ALL] = "SELECT key FROM queue_keys WHERE queue_id = ?1",
    /* A range of the primary key: a page costs its rows only. */
    [QS_KEY_LIST] = "SELECT key, n_ready, inflight, tokens, tokens_ms, block_ms, head_pri, "
                    "head_due, open, wake_ms FROM queue_keys WHERE queue_id = ?1 "
                    "AND key > ?2 ORDER BY key LIMIT ?3",
};

static sqlite3_stmt *qstmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->queue_stmt[id], queue_sql[id]);
}

/* ---- queue rows ---- */

/* The element in column i: a NUL-terminated copy of its bytes in it. */
static int col_element(sqlite3_stmt *st, int i, queue_item_t *it) {
  const void *blob = sqlite3_column_blob(st, i);
  it->len = (size_t)sqlite3_column_bytes(st, i);
  if (!(it->element = malloc(it->len + 1))) return -ENOMEM;
  if (it->len) memcpy(it->element, blob, it->len);
  it->element[it->len] = '\0';
  return 0;
}

static void row_queue(sqlite3_stmt *st, queue_conf_t *c, int64_t *lease_seq) {
  c->id = sqlite3_column_int64(st, 0);
  c->created_ms = sqlite3_column_int64(st, 2);
  c->paused = sqlite3_column_int(st, 3);
  c->keep_done = sqlite3_column_int(st, 4);
  c->visibility_ms = sqlite3_column_int64(st, 5);
  c->max_deliveries = sqlite3_column_int(st, 6);
  c->backoff_ms = sqlite3_column_int64(st, 7);
  c->backoff_max_ms = sqlite3_column_int64(st, 8);
  c->max_inflight = sqlite3_column_int(st, 9);
  c->key_mode = (queue_key_mode_t)sqlite3_column_int(st, 10);
  c->key_inflight = sqlite3_column_int(st, 11);
  c->key_rate = sqlite3_column_double(st, 12);
  c->key_burst = sqlite3_column_double(st, 13);
  if (lease_seq) *lease_seq = sqlite3_column_int64(st, 14);
  c->n_waiting = sqlite3_column_int64(st, 15);
  c->n_inflight = sqlite3_column_int64(st, 17);
  c->n_dead = sqlite3_column_int64(st, 18);
  c->n_done = sqlite3_column_int64(st, 19);
  c->n_put = sqlite3_column_int64(st, 20);
  c->n_acked = sqlite3_column_int64(st, 21);
}

/* Reads queue `name` into c (name not copied) and its ready count and
 * lease sequence. -ENOENT when there is none. */
static int queue_load(struct sqlite_store *q, const char *name, queue_conf_t *c,
                      int64_t *n_ready, int64_t *lease_seq) {
  sqlite3_stmt *st = qstmt(q, QS_GET);
  int rc;
  if (!st) return SPD_ESTORE;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    row_queue(st, c, lease_seq);
    if (n_ready) *n_ready = sqlite3_column_int64(st, 16);
    rc = 0;
  } else {
    rc = src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, "queue get");
  }
  sqlite3_reset(st);
  return rc;
}

static int bind_settings(sqlite3_stmt *st, const char *name, int64_t now_ms,
                         const queue_conf_t *c) {
  int b = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  b |= sqlite3_bind_int64(st, 2, now_ms);
  b |= sqlite3_bind_int(st, 3, c->paused ? 1 : 0);
  b |= sqlite3_bind_int(st, 4, c->keep_done ? 1 : 0);
  b |= sqlite3_bind_int64(st, 5, c->visibility_ms);
  b |= sqlite3_bind_int(st, 6, c->max_deliveries);
  b |= sqlite3_bind_int64(st, 7, c->backoff_ms);
  b |= sqlite3_bind_int64(st, 8, c->backoff_max_ms);
  b |= sqlite3_bind_int(st, 9, c->max_inflight);
  b |= sqlite3_bind_int(st, 10, (int)c->key_mode);
  b |= sqlite3_bind_int(st, 11, c->key_inflight);
  b |= sqlite3_bind_double(st, 12, c->key_rate);
  b |= sqlite3_bind_double(st, 13, c->key_burst);
  return b;
}

/* The queue for a put: loaded, or created with the defaults. */
static int queue_open(struct sqlite_store *q, const char *name, int64_t now_ms,
                      queue_conf_t *c, int64_t *lease_seq) {
  int rc = queue_load(q, name, c, NULL, lease_seq);
  if (rc != -ENOENT) return rc;
  sqlite3_stmt *st = qstmt(q, QS_CREATE);
  if (!st) return SPD_ESTORE;
  memset(c, 0, sizeof(*c));
  queue_conf_defaults(c);
  bind_settings(st, name, now_ms, c);
  if ((rc = sqlite_done(q, st, "queue create"))) return rc;
  c->id = sqlite3_last_insert_rowid(q->db);
  c->created_ms = now_ms;
  *lease_seq = 0;
  return 0;
}

/* The connection of an engine call. */
#define QX(x) SQ((x)->s)

/* Reads a key row's state from st's columns col.. (QS_KEY_GET's order). */
static void key_row(queue_key_t *e, sqlite3_stmt *st, int col) {
  e->exists = 1;
  e->n_ready = sqlite3_column_int64(st, col);
  e->inflight = sqlite3_column_int64(st, col + 1);
  e->tokens = sqlite3_column_double(st, col + 2);
  e->tokens_ms = sqlite3_column_int64(st, col + 3);
  e->block_ms = sqlite3_column_int64(st, col + 4);
  e->head_pri = sqlite3_column_int64(st, col + 5);
  e->head_due = sqlite3_column_int64(st, col + 6);
  e->open = sqlite3_column_int(st, col + 7);
  e->wake_ms = sqlite3_column_int64(st, col + 8);
}

/* ---- the engine's row access (queue_rows_t) ---- */

/* Steps st, bound to (queue id, key), to its one row: 0 with the row
 * under st (reset it after reading), -ENOENT, or a failure. */
static int key_step(struct sqlite_store *q, sqlite3_stmt *st, int64_t qid, const char *key,
                    const char *what) {
  sqlite3_bind_int64(st, 1, qid);
  sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) return 0;
  sqlite3_reset(st);
  return src == SQLITE_DONE ? -ENOENT : sqlite_fail(q, what);
}

static int rows_key_get(queue_call_t *x, const char *key, queue_key_t *k) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_KEY_GET);
  if (!st) return SPD_ESTORE;
  int rc = key_step(q, st, x->c.id, key, "queue key get");
  if (rc) return rc;
  key_row(k, st, 0);
  sqlite3_reset(st);
  return 0;
}

static int rows_key_head(queue_call_t *x, const char *key, int64_t *pri, int64_t *due) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_HEAD);
  if (!st) return SPD_ESTORE;
  int rc = key_step(q, st, x->c.id, key, "queue key head");
  if (rc) return rc;
  *pri = sqlite3_column_int64(st, 0);
  *due = sqlite3_column_int64(st, 1);
  sqlite3_reset(st);
  return 0;
}

static int rows_key_put(queue_call_t *x, const queue_key_t *k) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_KEY_PUT);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_text(st, 2, k->key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, k->n_ready);
  sqlite3_bind_int64(st, 4, k->inflight);
  sqlite3_bind_double(st, 5, k->tokens);
  sqlite3_bind_int64(st, 6, k->tokens_ms);
  sqlite3_bind_int64(st, 7, k->block_ms);
  sqlite3_bind_int64(st, 8, k->head_pri);
  sqlite3_bind_int64(st, 9, k->head_due);
  sqlite3_bind_int(st, 10, k->open);
  sqlite3_bind_int64(st, 11, k->wake_ms);
  return sqlite_done(q, st, "queue key put");
}

static int rows_key_delete(queue_call_t *x, const char *key) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_KEY_DEL);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
  return sqlite_done(q, st, "queue key delete");
}

static int rows_counters(queue_call_t *x) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_COUNTERS);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_int64(st, 2, x->d.waiting);
  sqlite3_bind_int64(st, 3, x->d.ready);
  sqlite3_bind_int64(st, 4, x->d.inflight);
  sqlite3_bind_int64(st, 5, x->d.dead);
  sqlite3_bind_int64(st, 6, x->d.done);
  sqlite3_bind_int64(st, 7, x->d.put);
  sqlite3_bind_int64(st, 8, x->d.acked);
  sqlite3_bind_int64(st, 9, x->lease_seq);
  return sqlite_done(q, st, "queue counters");
}

/* The cached state of key k: from the row under `row` (columns from col
 * on) when given, else read from the store on first use. */
static int ctx_key_at(queue_call_t *x, const char *k, sqlite3_stmt *row, int col,
                      queue_key_t **out) {
  queue_key_t stored;
  if (!row) return queue_call_key(x, k, QUEUE_KEY_READ, out);
  key_row(&stored, row, col);
  return queue_call_key(x, k, &stored, out);
}

static int ctx_key(queue_call_t *x, const char *k, queue_key_t **out) {
  return queue_call_key(x, k, QUEUE_KEY_READ, out);
}

/* Copies the text of column i into key (QUEUE_KEY_MAX bytes at most). */
static void col_key(sqlite3_stmt *st, int i, char key[QUEUE_KEY_MAX + 1]) {
  snprintf(key, QUEUE_KEY_MAX + 1, "%s", (const char *)sqlite3_column_text(st, i));
}

static int rows_write(queue_call_t *e, const queue_write_t *w) {
  struct sqlite_store *q = QX(e);
  static const int ids[] = {[QWRITE_STATE] = QS_STATE, [QWRITE_DELETE] = QS_DELETE,
                            [QWRITE_REDUE] = QS_REDUE};
  sqlite3_stmt *st = qstmt(q, ids[w->kind]);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, w->id);
  if (w->kind == QWRITE_REDUE) {
    sqlite3_bind_int64(st, 2, w->due);
    sqlite3_bind_int64(st, 3, w->pri);
  } else if (w->kind == QWRITE_STATE) {
    sqlite3_bind_int(st, 2, w->state);
    sqlite3_bind_int64(st, 3, w->due);
    sqlite3_bind_int64(st, 4, w->pri);
    sqlite_bind_str(st, 5, w->error);
    sqlite3_bind_int(st, 6, w->reset);
    sqlite3_bind_int(st, 7, w->uncount);
  }
  return sqlite_done(q, st, "queue item write");
}

/* ---- put ---- */

static int rows_put(queue_call_t *e, const queue_put_t *p, uint64_t hash, const char *key,
                    int state, queue_elem_t *el) {
  struct sqlite_store *q = QX(e);
  sqlite3_stmt *st = qstmt(q, QS_FIND);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, e->c.id);
  sqlite3_bind_int64(st, 2, (int64_t)hash);
  sqlite3_bind_blob(st, 3, p->element, (int)p->len, SQLITE_STATIC);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    el->id = sqlite3_column_int64(st, 0);
    el->state = sqlite3_column_int(st, 1);
    el->pri = sqlite3_column_int64(st, 2);
    el->due = sqlite3_column_int64(st, 3);
    col_key(st, 4, el->key);
    el->redue_ms = sqlite3_column_int64(st, 5);
    el->redue_pri = sqlite3_column_int64(st, 6);
  }
  sqlite3_reset(st);
  if (src == SQLITE_ROW) return 0;
  if (src != SQLITE_DONE) return sqlite_fail(q, "queue find");
  if (!(st = qstmt(q, QS_INSERT))) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, e->c.id);
  sqlite3_bind_int64(st, 2, (int64_t)hash);
  sqlite3_bind_int(st, 3, state);
  sqlite3_bind_int64(st, 4, p->priority);
  sqlite3_bind_int64(st, 5, p->due_ms);
  sqlite3_bind_text(st, 6, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 7, e->now);
  sqlite3_bind_blob(st, 8, p->element, (int)p->len, SQLITE_STATIC);
  int rc = sqlite_done(q, st, "queue put");
  if (rc) return rc;
  el->id = sqlite3_last_insert_rowid(q->db);
  el->inserted = 1;
  return 0;
}

/* ---- take ---- */

/* QS_TIMES of queue x->c.id: 0 where there is none. */
static int rows_times(queue_call_t *x, int64_t t[QUEUE_NEXT_N]) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_TIMES);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  int src = sqlite3_step(st);
  for (int i = 0; i < QUEUE_NEXT_N; i++) t[i] = src == SQLITE_ROW ? sqlite3_column_int64(st, i) : 0;
  sqlite3_reset(st);
  return src == SQLITE_ROW ? 0 : sqlite_fail(q, "queue times");
}

/* Elements not yet due whose time has come become ready. */
static int rows_promote(queue_call_t *x) {
  int rc = 0, src;
  sqlite3_stmt *st = qstmt(QX(x), QS_PROMOTE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_int64(st, 2, x->now);
  sqlite3_bind_int64(st, 3, QUEUE_SWEEP_MAX);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    queue_key_t *k;
    if ((rc = ctx_key(x, (const char *)sqlite3_column_text(st, 0), &k))) break;
    queue_key_ready_add(k, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
    x->d.ready++;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(QX(x), "queue promote");
  sqlite3_reset(st);
  return rc;
}

typedef struct {
  int64_t id, deliveries, priority;
  char *key;
} expired_t;

/* Leases that ran out: the element is due again, or dead after its last
 * delivery. Read first, then changed (no writes under a live cursor). */
static int rows_expire(queue_call_t *x) {
  sqlite3_stmt *st = qstmt(QX(x), QS_EXPIRED);
  expired_t *v = NULL;
  size_t n = 0, cap = 0;
  int rc = 0, src;
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_int64(st, 2, x->now);
  sqlite3_bind_int64(st, 3, QUEUE_SWEEP_MAX);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = array_reserve((void **)&v, &cap, n + 1, sizeof(*v)))) break;
    v[n].id = sqlite3_column_int64(st, 0);
    v[n].key = strdup((const char *)sqlite3_column_text(st, 1));
    v[n].deliveries = sqlite3_column_int64(st, 2);
    v[n].priority = sqlite3_column_int64(st, 3);
    if (!v[n].key) {
      rc = -ENOMEM;
      break;
    }
    n++;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(QX(x), "queue expired");
  sqlite3_reset(st);
  for (size_t i = 0; !rc && i < n; i++)
    rc = queue_call_expired(x, v[i].id, v[i].key, v[i].deliveries, v[i].priority);
  for (size_t i = 0; i < n; i++) free(v[i].key);
  free(v);
  return rc;
}

/* Marks for settling every key named by column 0 of the rows of st (bound
 * by the caller): read first, then loaded (no other statement runs under a
 * live cursor). */
static int touch_keys(queue_call_t *x, sqlite3_stmt *st, const char *what) {
  char **keys = NULL;
  size_t n = 0, cap = 0;
  int rc = 0, src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if ((rc = array_reserve((void **)&keys, &cap, n + 1, sizeof(*keys)))) break;
    if (!(keys[n] = strdup((const char *)sqlite3_column_text(st, 0)))) {
      rc = -ENOMEM;
      break;
    }
    n++;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(QX(x), what);
  sqlite3_reset(st);
  for (size_t i = 0; !rc && i < n; i++) {
    queue_key_t *k;
    if (!(rc = ctx_key(x, keys[i], &k))) k->dirty = 1;
  }
  for (size_t i = 0; i < n; i++) free(keys[i]);
  free(keys);
  return rc;
}

/* Closed keys whose block, bucket or wait has run out are settled again. */
static int rows_wake(queue_call_t *x) {
  sqlite3_stmt *st = qstmt(QX(x), QS_KEY_WAKE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_int64(st, 2, x->now);
  sqlite3_bind_int64(st, 3, QUEUE_SWEEP_MAX);
  return touch_keys(x, st, "queue wake");
}

/* Leases up to `room` of open key k's ready elements (queue_rows_t.pick). */
static int rows_pick(queue_call_t *e, const queue_key_t *k, size_t room, int has2, int64_t p2,
                     int64_t d2, int64_t lease_end, int64_t token, queue_item_list_t *out,
                     int *next, int64_t *next_pri, int64_t *next_due) {
  queue_call_t *x = e;
  struct sqlite_store *q = QX(x);
  const char *key = k->key;
  size_t first = out->n;
  int rc = 0, src;

  sqlite3_stmt *st = qstmt(q, QS_PICK);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
  /* One row more than room: the first one left is the key's next head. */
  sqlite3_bind_int64(st, 3, (int64_t)room + 1);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t pri = sqlite3_column_int64(st, 1), due = sqlite3_column_int64(st, 2);
    /* Full, or another key's head comes first: leave the rest for later. */
    if (out->n - first == room || (out->n > first && has2 && queue_take_before(p2, d2, pri, due))) {
      *next = 1;
      *next_pri = pri;
      *next_due = due;
      break;
    }
    queue_item_t *it = queue_item_list_add(out);
    if (!it) {
      rc = -ENOMEM;
      break;
    }
    it->id = sqlite3_column_int64(st, 0);
    it->state = QSTATE_INFLIGHT;
    it->priority = (int)pri;
    it->due_ms = lease_end;
    it->token = token;
    it->deliveries = sqlite3_column_int(st, 3) + 1;
    it->created_ms = sqlite3_column_int64(st, 4);
    if (col_element(st, 6, it) || !(it->key = strdup(key)) ||
        sqlite_col_str(st, 5, &it->error)) {
      rc = -ENOMEM;
      break;
    }
  }
  if (!rc && src != SQLITE_ROW && src != SQLITE_DONE) rc = sqlite_fail(q, "queue pick");
  sqlite3_reset(st);
  for (size_t i = first; !rc && i < out->n; i++) {
    if (!(st = qstmt(q, QS_TAKE))) {
      rc = SPD_ESTORE;
      break;
    }
    sqlite3_bind_int64(st, 1, out->v[i].id);
    sqlite3_bind_int64(st, 2, lease_end);
    sqlite3_bind_int64(st, 3, token);
    rc = sqlite_done(q, st, "queue take");
  }
  return rc;
}

static int rows_best_key(queue_call_t *x, queue_key_t **k, int *has2, int64_t *p2,
                         int64_t *d2) {
  sqlite3_stmt *st = qstmt(QX(x), QS_KEY_BEST);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  int rc = 0, src = sqlite3_step(st);
  if (src != SQLITE_ROW) {
    sqlite3_reset(st);
    return src == SQLITE_DONE ? 0 : sqlite_fail(QX(x), "queue best key");
  }
  if (!(rc = ctx_key_at(x, (const char *)sqlite3_column_text(st, 0), st, 1, k)) &&
      sqlite3_step(st) == SQLITE_ROW) {
    *has2 = 1;
    *p2 = sqlite3_column_int64(st, 6);
    *d2 = sqlite3_column_int64(st, 7);
  }
  sqlite3_reset(st);
  return rc;
}

/* ---- ack, nack, extend ---- */

/* Looks up each lease (queue_rows_t.leases). */
static int rows_leases(queue_call_t *x, const queue_lease_t *l, size_t n, queue_elem_t *h) {
  struct sqlite_store *q = QX(x);
  for (size_t i = 0; i < n; i++) {
    sqlite3_stmt *st = qstmt(q, QS_LEASE);
    if (!st) return SPD_ESTORE;
    sqlite3_bind_int64(st, 1, l[i].id);
    sqlite3_bind_int64(st, 2, x->c.id);
    sqlite3_bind_int64(st, 3, l[i].token);
    int src = sqlite3_step(st);
    if (src == SQLITE_ROW) {
      h[i].id = l[i].id;
      h[i].state = QITEM_INFLIGHT;
      col_key(st, 0, h[i].key);
      h[i].deliveries = sqlite3_column_int64(st, 1);
      h[i].pri = sqlite3_column_int64(st, 2);
      h[i].redue_ms = sqlite3_column_int64(st, 3);
      h[i].redue_pri = sqlite3_column_int64(st, 4);
    }
    sqlite3_reset(st);
    if (src != SQLITE_ROW && src != SQLITE_DONE) return sqlite_fail(q, "queue lease");
  }
  return 0;
}

int sqlite_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                        int64_t visibility_ms, int64_t now_ms) {
  struct sqlite_store *q = SQ(s);
  queue_conf_t c = {0};
  int began, rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  rc = queue_load(q, name, &c, NULL, NULL);
  int64_t until = now_ms + (visibility_ms ? visibility_ms : c.visibility_ms);
  for (size_t i = 0; !rc && i < n; i++) {
    sqlite3_stmt *st = qstmt(q, QS_EXTEND);
    if (!st) {
      rc = SPD_ESTORE;
      break;
    }
    sqlite3_bind_int64(st, 1, leases[i].id);
    sqlite3_bind_int64(st, 2, c.id);
    sqlite3_bind_int64(st, 3, leases[i].token);
    sqlite3_bind_int64(st, 4, until);
    if ((rc = sqlite_done(q, st, "queue extend"))) break;
    leases[i].result = sqlite3_changes(q->db) ? 0 : -ENOENT;
  }
  return sqlite_auto_end(q, began, rc);
}

/* ---- settings, listing, stats ---- */

static int rows_begin(queue_call_t *x, int *began) { return sqlite_auto_begin(QX(x), began); }
static int rows_end(queue_call_t *x, int began, int rc) { return sqlite_auto_end(QX(x), began, rc); }

/* One connection writes at a time (BEGIN IMMEDIATE): no row lock to take. */
static int rows_load(queue_call_t *x, const char *name, int how) {
  if (how == QUEUE_LOAD_OPEN) return queue_open(QX(x), name, x->now, &x->c, &x->lease_seq);
  return queue_load(QX(x), name, &x->c, NULL, &x->lease_seq);
}

static int rows_conf_write(queue_call_t *x, const queue_conf_t *c, int create) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, create ? QS_CREATE : QS_SET);
  int rc;
  if (!st) return SPD_ESTORE;
  bind_settings(st, c->name, create ? x->now : 0, c);
  if ((rc = sqlite_done(q, st, create ? "queue create" : "queue set"))) return rc;
  return queue_load(q, c->name, &x->c, NULL, &x->lease_seq);
}

static int rows_keys_touch(queue_call_t *x) {
  sqlite3_stmt *st = qstmt(QX(x), QS_KEY_ALL);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  return touch_keys(x, st, "queue keys");
}

int sqlite_queues_list(store_t *s, const char *after, size_t limit,
                       queue_conf_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = qstmt(q, QS_LIST);
  int rc = 0, src;
  if (!st) return SPD_ESTORE;
  sqlite3_bind_text(st, 1, after ? after : "", -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, limit ? sqlite_clamp(limit) : -1);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    queue_conf_t *c = queue_conf_list_add(out);
    if (!c) {
      rc = -ENOMEM;
      break;
    }
    row_queue(st, c, NULL);
    if ((rc = sqlite_col_str(st, 1, &c->name))) break;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "queue list");
  sqlite3_reset(st);
  return rc;
}

static int rows_drop(queue_call_t *x) {
  static const int steps[] = {QS_DEL_ITEMS, QS_DEL_KEYS, QS_DEL};
  int rc = 0;
  for (size_t i = 0; !rc && i < sizeof(steps) / sizeof(steps[0]); i++) {
    sqlite3_stmt *st = qstmt(QX(x), steps[i]);
    if (!st) return SPD_ESTORE;
    sqlite3_bind_int64(st, 1, x->c.id);
    rc = sqlite_done(QX(x), st, "queue delete");
  }
  return rc;
}

/* The first column of statement id's one row (?1 = a, and ?2 = b when it
 * has one); 0 when there is no row. */
static int one_int64(struct sqlite_store *q, int id, int64_t a, int64_t b, int64_t *out) {
  sqlite3_stmt *st = qstmt(q, id);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, a);
  if (sqlite3_bind_parameter_count(st) > 1) sqlite3_bind_int64(st, 2, b);
  int src = sqlite3_step(st);
  *out = src == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  return src == SQLITE_ROW || src == SQLITE_DONE ? 0 : sqlite_fail(q, queue_sql[id]);
}

static int rows_stats(queue_call_t *x, const char *name, queue_stats_row_t *out) {
  struct sqlite_store *q = QX(x);
  int rc = queue_load(q, name, &out->c, &out->ready, NULL);
  x->c.id = out->c.id;
  if (rc || (rc = one_int64(q, QS_PASTDUE, out->c.id, x->now, &out->delayed_due)) ||
      (rc = rows_times(x, out->t)))
    return rc;
  return one_int64(q, QS_KEY_COUNT, out->c.id, 0, &out->keys);
}

static int rows_key_page(queue_call_t *x, const char *after, size_t limit,
                         queue_key_list_t *out) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st = qstmt(q, QS_KEY_LIST);
  int rc = 0, src;
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, x->c.id);
  sqlite3_bind_text(st, 2, after, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, limit ? sqlite_clamp(limit) : -1);
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    queue_key_t k = {0};
    key_row(&k, st, 1);
    if ((rc = queue_call_key_info(x, out, (const char *)sqlite3_column_text(st, 0),
                                  (size_t)sqlite3_column_bytes(st, 0), &k)))
      break;
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "queue keys");
  sqlite3_reset(st);
  return rc;
}

/* ---- selections: items, requeue, purge ---- */

/* The WHERE clause of filter f (queue ?1, then numbered parameters from ?2
 * on, bound by filter_bind in the same order). */
static int filter_sql(const queue_filter_t *f, char *buf, size_t len) {
  size_t o = 0;
  int p = 2;
#define ADD(...)                                                \
  do {                                                          \
    int w_ = snprintf(buf + o, len - o, __VA_ARGS__);           \
    if (w_ < 0 || (size_t)w_ >= len - o) return -EINVAL;        \
    o += (size_t)w_;                                            \
  } while (0)
  ADD("queue_id = ?1 AND id > ?%d", p++);
  if (f->states) {
    const char *sep = "";
    ADD(" AND state IN (");
    for (int st = 0; st < QSTATE_N; st++) {
      if (!(f->states & (1u << st))) continue;
      if (st == QSTATE_WAITING)
        ADD("%s%d, %d", sep, QITEM_DELAYED, QITEM_READY);
      else
        ADD("%s%d", sep, qitem_stored_state((queue_state_t)st));
      sep = ", ";
    }
    ADD(")");
  }
  if (f->key) ADD(" AND key = ?%d", p++);
  if (f->prefix) {
    ADD(" AND substr(element, 1, ?%d) = ?%d", p, p + 1);
    p += 2;
  }
  if (f->nids) {
    ADD(" AND id IN (");
    for (size_t i = 0; i < f->nids; i++) ADD("%s?%d", i ? ", " : "", p++);
    ADD(")");
  }
#undef ADD
  return 0;
}

static void filter_bind(sqlite3_stmt *st, int64_t queue_id, const queue_filter_t *f,
                        int64_t after_id) {
  int p = 1;
  sqlite3_bind_int64(st, p++, queue_id);
  sqlite3_bind_int64(st, p++, after_id);
  if (f->key) sqlite3_bind_text(st, p++, f->key, -1, SQLITE_STATIC);
  if (f->prefix) {
    int n = (int)strlen(f->prefix);
    sqlite3_bind_int(st, p++, n);
    sqlite3_bind_blob(st, p++, f->prefix, n, SQLITE_STATIC);
  }
  for (size_t i = 0; i < f->nids; i++) sqlite3_bind_int64(st, p++, f->ids[i]);
}

/* Prepares `SELECT cols FROM queue_items WHERE <f> ORDER BY id LIMIT n`
 * with f bound after after_id. */
static int filter_prepare(struct sqlite_store *q, int64_t queue_id, const queue_filter_t *f,
                          const char *cols, int64_t after_id, size_t limit,
                          sqlite3_stmt **out) {
  size_t len = 512 + f->nids * 16;
  char *where = malloc(len), *sql = NULL;
  int rc;
  *out = NULL;
  if (!where) return -ENOMEM;
  if ((rc = filter_sql(f, where, len))) goto out;
  if (asprintf(&sql, "SELECT %s FROM queue_items WHERE %s ORDER BY id LIMIT %lld", cols,
               where, limit ? (long long)sqlite_clamp(limit) : -1LL) < 0) {
    sql = NULL;
    rc = -ENOMEM;
    goto out;
  }
  if (sqlite3_prepare_v2(q->db, sql, -1, out, NULL) != SQLITE_OK) {
    rc = sqlite_fail(q, "queue select");
    sqlite3_finalize(*out);
    *out = NULL;
    goto out;
  }
  filter_bind(*out, queue_id, f, after_id);
out:
  free(sql);
  free(where);
  return rc;
}

static int rows_items(queue_call_t *x, const queue_filter_t *f, queue_item_list_t *out) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st;
  int src, rc = filter_prepare(q, x->c.id, f, ITEM_COLS, f->after_id, f->limit, &st);
  if (rc) return rc;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    queue_item_t *it = queue_item_list_add(out);
    if (!it) {
      rc = -ENOMEM;
      break;
    }
    it->id = sqlite3_column_int64(st, 0);
    it->state = qitem_public_state(sqlite3_column_int(st, 1));
    it->priority = sqlite3_column_int(st, 2);
    it->due_ms = sqlite3_column_int64(st, 3);
    it->deliveries = sqlite3_column_int(st, 5);
    it->token = it->state == QSTATE_INFLIGHT ? sqlite3_column_int64(st, 6) : 0;
    it->created_ms = sqlite3_column_int64(st, 7);
    if (col_element(st, 9, it) || sqlite_col_str(st, 4, &it->key) ||
        sqlite_col_str(st, 8, &it->error)) {
      rc = -ENOMEM;
      break;
    }
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "queue items");
  sqlite3_finalize(st);
  return rc;
}

#define BULK_CHUNK 2000

/* A chunk read, for the engine to change (queue_rows_t.bulk). */
static int rows_bulk(queue_call_t *x, const queue_filter_t *f, int requeue, int state,
                     int64_t due_ms, int64_t after, queue_elem_t *v, size_t *n, int *applied) {
  struct sqlite_store *q = QX(x);
  sqlite3_stmt *st;
  int src, rc = filter_prepare(q, x->c.id, f, "id, state, key, priority", after, BULK_CHUNK,
                               &st);
  (void)requeue, (void)state, (void)due_ms;
  *applied = 0;
  if (rc) return rc;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    queue_elem_t *e = &v[(*n)++];
    e->id = sqlite3_column_int64(st, 0);
    e->state = sqlite3_column_int(st, 1);
    col_key(st, 2, e->key);
    e->pri = sqlite3_column_int64(st, 3);
  }
  if (src != SQLITE_DONE) rc = sqlite_fail(q, "queue select");
  sqlite3_finalize(st);
  return rc;
}

static const queue_rows_t sqlite_rows = {QUEUE_ROWS(rows_), .bulk_chunk = BULK_CHUNK};

QUEUE_ENGINE_OPS(sqlite_, sqlite_rows)
