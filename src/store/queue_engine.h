/* One queue engine for the stores that speak SQL (sqlite/queue.c,
 * pg/queue.c): every queue op's orchestration — its transaction, which
 * rows it reads and in what order — and the task queues' policy — what a
 * put does to an element already stored, what an ack or nack does to a
 * lease (done, due again, backoff with jitter, dead letters, Retry-After),
 * politeness keys (ready count and best ready element, leases in flight,
 * token bucket, block), the take order and the counters — over a small
 * table of row reads and writes each backend fills with its statements
 * (queue_rows_t). A backend's queue ops are the engine's (QUEUE_ENGINE_OPS)
 * but for store_queue_extend and store_queues_list, plain row writes and
 * reads. Redis's scripts (redis/lua/queue.lua, called by redis/queue.c),
 * which run inside Redis to be atomic, keep their own copy of the policy
 * over the same stored states; the same contract tests
 * (tests/unit/test_store_queue.c, tests/integration/test_queue*.py) hold
 * all three stores to it. Store-private (not part of store.h).
 *
 * Ownership as in store.h: a call's key cache owns its entries and their
 * key strings (queue_call_release frees them); every other pointer is
 * borrowed.
 */
#ifndef SPIDERD_STORE_QUEUE_ENGINE_H
#define SPIDERD_STORE_QUEUE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Stored element states (the state column of queue_items; the same
 * numbers in Redis). */
enum { QITEM_DELAYED = 0, QITEM_INFLIGHT = 1, QITEM_DEAD = 2, QITEM_DONE = 3, QITEM_READY = 4 };

/* The kinds of "when the next thing happens" (a queue's times probe): the
 * first element not yet due, the first lease end, the first key wake-up,
 * the earliest ready due time. */
enum { QUEUE_NEXT_DELAYED, QUEUE_NEXT_LEASE, QUEUE_NEXT_WAKE, QUEUE_NEXT_READY, QUEUE_NEXT_N };

/* One politeness key's state, as cached by one call. */
typedef struct queue_key {
  char *key;
  int exists;     /* a row is stored */
  int dirty;
  int head_stale; /* head must be read again before use */
  int64_t n_ready, inflight;
  double tokens;
  int64_t tokens_ms, block_ms;
  int64_t head_pri, head_due;
  int open;
  int64_t wake_ms;
} queue_key_t;

/* A call's counter deltas, written to the queue's row at its end. */
typedef struct queue_deltas {
  int64_t waiting, ready, inflight, dead, done, put, acked;
} queue_deltas_t;

/* A call's keys: an array, and an open-addressing index over it. */
typedef struct queue_key_cache {
  queue_key_t *keys;
  size_t nkeys, capkeys;
  uint32_t *slot; /* open addressing: index + 1 into keys, 0 = free */
  size_t nslot;   /* power of two */
} queue_key_cache_t;

/* The smaller and the larger of a and b. */
static inline int64_t queue_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t queue_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* Is (p1, d1) taken before (p2, d2)? Higher priority first, then the
 * earlier due time. */
int queue_take_before(int64_t p1, int64_t d1, int64_t p2, int64_t d2);

/* The public state of stored state s (QITEM_DELAYED and QITEM_READY are both
 * waiting). */
queue_state_t qitem_public_state(int s);

/* The stored state of public state st other than QSTATE_WAITING (which
 * stands for QITEM_DELAYED and QITEM_READY). */
int qitem_stored_state(queue_state_t st);

/* The stored state of a waiting element due at due: ready when due <= now. */
int qitem_waiting_state(int64_t due, int64_t now);

/* A ready element (pri, due) joins key k. */
void queue_key_ready_add(queue_key_t *k, int64_t pri, int64_t due);

/* A factor in [0.75, 1.25), different at every call (thread-safe). */
double queue_jitter(void);

/* Fills out's counts and oldest due time from c's counters, past_due and
 * the first due times of waiting elements not yet due and ready (0 =
 * none); out->keys is left alone. */
void queue_stats_fill(queue_stats_t *out, const queue_conf_t *c, int64_t past_due,
                      int64_t first_delayed, int64_t first_ready);

/* Appends an empty entry to l; NULL when out of memory. */
queue_key_info_t *queue_key_list_add(queue_key_list_t *l);

/* Fills out (but its key) from stored key k of queue c as it stands at
 * now: the bucket refilled, open and wake time decided again. */
void queue_key_info_fill(queue_key_info_t *out, const queue_key_t *k, const queue_conf_t *c,
                         int64_t now);

/* Releases out's items from index first on (a call that failed drops
 * what it added). */
void queue_items_drop(queue_item_list_t *out, size_t first);

/* ---- one call on one queue ----
 * An op opens a queue_call_t on the queue's row (its settings, its lease
 * sequence), moves elements with the backend's SQL while the engine keeps
 * the keys and counters they touch, and ends with queue_call_finish, which
 * writes each touched key and the counters back once. */

typedef struct queue_call queue_call_t;

/* One stored element as a put finds it or an ack or nack holds it. */
typedef struct queue_elem {
  int64_t id;
  int inserted; /* put: it was not stored, and now is (nothing else is filled) */
  int state;
  int64_t pri, due, deliveries, redue_ms, redue_pri;
  char key[QUEUE_KEY_MAX + 1];
} queue_elem_t;

/* A change to one stored element, as the engine decides it. */
typedef enum {
  QWRITE_STATE,  /* state, due, pri; error when not NULL; out of any lease (token 0) */
  QWRITE_DELETE, /* the row goes */
  QWRITE_REDUE   /* in flight: due, pri wait for the lease's end (a put deferred) */
} queue_write_kind_t;

typedef struct queue_write {
  queue_write_kind_t kind;
  int64_t id;
  int state;
  int64_t due, pri;
  const char *error;
  int reset;   /* QWRITE_STATE: a fresh start: deliveries and a deferred due time go */
  int uncount; /* QWRITE_STATE: the last delivery is given back (a release) */
} queue_write_t;

/* The error an element that went dead by its lease running out records. */
#define QUEUE_EXPIRED_ERROR "lease expired after the last delivery"

/* How rows->load reads a queue's row: as it stands; locked for the call
 * (where connections share rows); locked, and created with the defaults
 * when there is none (a put). */
enum { QUEUE_LOAD_READ, QUEUE_LOAD_LOCK, QUEUE_LOAD_OPEN };

/* What store_queue_stats is made of, as a backend reads it. */
typedef struct queue_stats_row {
  queue_conf_t c;          /* the queue's row (name not set) */
  int64_t ready;           /* its ready counter */
  int64_t delayed_due;     /* elements not yet promoted whose time has come */
  int64_t t[QUEUE_NEXT_N]; /* as rows->times */
  int64_t keys;            /* stored key rows */
} queue_stats_row_t;

/* Row access a backend gives the engine, each inside the call's
 * transaction; x->s is the backend's connection. 0 or the store's error
 * codes. Optional entries may be NULL. */
typedef struct queue_rows {
  /* ---- a call's frame ---- */
  /* The call's transaction: begun unless the caller holds one (*began);
   * end commits or rolls back by rc and answers the call's result. */
  int (*begin)(queue_call_t *x, int *began);
  int (*end)(queue_call_t *x, int began, int rc);
  /* Reads queue name's row into x->c (but c.name) and x->lease_seq
   * (QUEUE_LOAD_*); -ENOENT when there is none. */
  int (*load)(queue_call_t *x, const char *name, int how);
  /* Writes settings c (and c->name): a new queue when create (-EEXIST when
   * another connection made it first), else queue x->c.id's; x->c and
   * x->lease_seq then hold the stored row. */
  int (*conf_write)(queue_call_t *x, const queue_conf_t *c, int create);
  /* Deletes queue x->c.id with its elements and keys. */
  int (*drop)(queue_call_t *x);
  /* Marks every key of the queue for settling again (queue_call_key'd,
   * dirty). */
  int (*keys_touch)(queue_call_t *x);
  /* Optional: at the end of a call after which elements may be taken
   * (x->woke), so that takers elsewhere look. */
  int (*woken)(queue_call_t *x);
  /* Optional: frees x->own at the end of a call. */
  void (*release)(queue_call_t *x);

  /* Reads key's stored row into k's state fields (n_ready .. wake_ms) and
   * sets k->exists; -ENOENT when none is stored. */
  int (*key_get)(queue_call_t *x, const char *key, queue_key_t *k);
  /* The priority and due time of key's best ready element; -ENOENT: none. */
  int (*key_head)(queue_call_t *x, const char *key, int64_t *pri, int64_t *due);
  /* Writes k's row (inserted or replaced) / deletes key's row. */
  int (*key_put)(queue_call_t *x, const queue_key_t *k);
  int (*key_delete)(queue_call_t *x, const char *key);
  /* Adds x->d to the queue's counters and stores x->lease_seq. */
  int (*counters)(queue_call_t *x);

  /* ---- take ---- */
  /* The queue's next times (QUEUE_NEXT_*: 0 = none). */
  int (*times)(queue_call_t *x, int64_t t[QUEUE_NEXT_N]);
  /* The sweeps a take runs first, each when its time has come: leases that
   * ran out come back (or go dead), delayed elements now due become ready,
   * closed keys whose wake time passed are settled again. */
  int (*expire)(queue_call_t *x);
  int (*promote)(queue_call_t *x);
  int (*wake)(queue_call_t *x);
  /* The open key with the best head (*k NULL: none; queue_call_key'd)
   * and, when there is one (*has2), the next open key's head (p2, d2). */
  int (*best_key)(queue_call_t *x, queue_key_t **k, int *has2, int64_t *p2, int64_t *d2);
  /* Leases up to `room` of open key k's ready elements in take order until
   * one comes after (p2, d2) when has2, appending them to out as in flight
   * until lease_end under token; *next (with next_pri/next_due) tells
   * whether one was left, and which is then the key's head. */
  int (*pick)(queue_call_t *x, const queue_key_t *k, size_t room, int has2, int64_t p2,
              int64_t d2, int64_t lease_end, int64_t token, queue_item_list_t *out,
              int *next, int64_t *next_pri, int64_t *next_due);

  /* ---- put, ack, nack, requeue ---- */
  /* Finds element p (its hash, then its bytes) and fills *e with its row;
   * when it is not stored, inserts it as `state` under key with p's
   * priority and due time, and sets e->inserted and e->id. */
  int (*put)(queue_call_t *x, const queue_put_t *p, uint64_t hash, const char *key, int state,
             queue_elem_t *e);
  /* Applies w. A backend may hold writes to leased elements until the end
   * of the call (an ack or nack reads no element it wrote): flush. */
  int (*write)(queue_call_t *x, const queue_write_t *w);
  /* Looks up leases l[0..n): h[i] filled as an element held by l[i], or
   * left with id 0 when l[i] is not held. May give the engine the leases'
   * key rows (queue_call_key). */
  int (*leases)(queue_call_t *x, const queue_lease_t *l, size_t n, queue_elem_t *h);
  /* Optional: applies the writes held by write. */
  int (*flush)(queue_call_t *x);
  /* Up to bulk_chunk elements of selection f with ids after `after`, in id
   * order, into v[0..*n) as they were (id, state, key, pri). *applied: the
   * backend changed them itself, to `state` from due_ms with a fresh start
   * (requeue) or deleted; else the engine writes each. */
  int (*bulk)(queue_call_t *x, const queue_filter_t *f, int requeue, int state, int64_t due_ms,
              int64_t after, queue_elem_t *v, size_t *n, int *applied);
  size_t bulk_chunk;

  /* ---- reads ---- */
  /* Queue name's statistics (x->now is the time); -ENOENT. */
  int (*stats)(queue_call_t *x, const char *name, queue_stats_row_t *out);
  /* Up to limit (0: all) key rows of queue x->c.id after `after`, in byte
   * order, each appended with queue_call_key_info. */
  int (*key_page)(queue_call_t *x, const char *after, size_t limit, queue_key_list_t *out);
  /* Selection f of queue x->c.id appended to out (store_queue_items). */
  int (*items)(queue_call_t *x, const queue_filter_t *f, queue_item_list_t *out);
} queue_rows_t;

/* The entries of a queue_rows_t named PREFIXbegin, PREFIXend, ...; a
 * backend adds its optional ones and bulk_chunk. */
#define QUEUE_ROWS(prefix)                                                            \
  .begin = prefix##begin, .end = prefix##end, .load = prefix##load,                   \
  .conf_write = prefix##conf_write, .drop = prefix##drop,                             \
  .keys_touch = prefix##keys_touch, .key_get = prefix##key_get,                       \
  .key_head = prefix##key_head, .key_put = prefix##key_put,                           \
  .key_delete = prefix##key_delete, .counters = prefix##counters,                     \
  .times = prefix##times, .expire = prefix##expire, .promote = prefix##promote,       \
  .wake = prefix##wake, .best_key = prefix##best_key, .pick = prefix##pick,           \
  .put = prefix##put, .write = prefix##write, .leases = prefix##leases,               \
  .bulk = prefix##bulk, .stats = prefix##stats, .key_page = prefix##key_page,         \
  .items = prefix##items

struct queue_call {
  const queue_rows_t *rows;
  store_t *s;          /* the backend's connection */
  void *own;           /* the backend's own state for this call (rows->release) */
  queue_conf_t c;      /* the queue's row (c.id, settings, counters) */
  int64_t lease_seq;   /* the queue's lease sequence, as this call moves it */
  int64_t lease_seq0;  /* as it was read */
  int64_t now;
  queue_deltas_t d;    /* this call's counter deltas */
  queue_key_cache_t kc;
  int woke;            /* elements became waiting (takers elsewhere may look) */
};

/* Read it from the store (queue_call_key's `row`). */
#define QUEUE_KEY_READ ((const queue_key_t *)1)

/* The cached state of key k, on first use taken from row (the stored
 * state a backend read with other columns), NULL (no row is stored: a new
 * key) or QUEUE_KEY_READ (rows->key_get). The pointer is valid until the
 * next queue_call_key. */
int queue_call_key(queue_call_t *x, const char *k, const queue_key_t *row, queue_key_t **out);

/* Writes key k back when the call changed it: settled, its row deleted
 * when it holds nothing worth remembering. */
int queue_call_flush_key(queue_call_t *x, queue_key_t *k);
/* queue_call_flush_key for every key of the call. */
int queue_call_flush_keys(queue_call_t *x);

/* Writes back every key the call changed and the counters, when they
 * moved: the end of every call that changed something. */
int queue_call_finish(queue_call_t *x);

/* A take of up to max elements (store_queue_take) on the call's loaded,
 * unpaused queue: the sweeps whose time has come, then the best open key's
 * head first, key after key, under the queue's and each key's limits;
 * appends to out and adds how many to *taken. The caller finishes the call
 * (queue_call_finish). */
int queue_call_take(queue_call_t *x, size_t max, int64_t visibility_ms,
                    queue_item_list_t *out, size_t *taken);

/* Puts element p (store_queue_put): adds it, or applies p's policy to the
 * stored one; fills p->id and p->result. */
int queue_call_put(queue_call_t *x, queue_put_t *p);

/* Ends held lease l of element h: an ack (ack != 0) makes it done, gone or
 * due again at a time a put deferred; a nack makes it due again after its
 * delay or backoff, or dead after its last delivery (l->dead), and a
 * Retry-After blocks its key. Sets l->result to 0. */
int queue_call_lease_end(queue_call_t *x, int ack, queue_lease_t *l, const queue_elem_t *h);

/* Key and counter bookkeeping of an element of key that moved from stored
 * state `from` to `to` (< 0: deleted) with (pri, due), whoever wrote it. */
int queue_call_moved(queue_call_t *x, const char *key, int from, int to, int64_t pri,
                     int64_t due);

/* Lease `id` of an element of key, delivered `deliveries` times, ran out:
 * the element is ready again, or dead after its last delivery (with
 * QUEUE_EXPIRED_ERROR). PostgreSQL's expiry is one UPDATE whose CASE says
 * the same. */
int queue_call_expired(queue_call_t *x, int64_t id, const char *key, int64_t deliveries,
                       int64_t pri);

/* Requeue (requeue != 0: waiting again from due_ms, a fresh start) or purge
 * element e of a selection: writes it and keeps its key and counters. */
int queue_call_requeue(queue_call_t *x, int requeue, const queue_elem_t *e, int64_t due_ms);

/* Did the key limits of b change from a's (every key must decide again
 * whether it is open)? */
int queue_limits_changed(const queue_conf_t *a, const queue_conf_t *b);

/* When something may become takeable next: the next due time, lease end
 * or key wake-up (0: nothing pending). */
int queue_call_next(queue_call_t *x, int64_t *next_ms);

/* Appends key's entry to out, filled from its stored row k as it stands at
 * x->now (rows->key_page). */
int queue_call_key_info(queue_call_t *x, queue_key_list_t *out, const char *key, size_t len,
                        const queue_key_t *k);

/* Frees the call's key cache (and the backend's state: rows->release). */
void queue_call_release(queue_call_t *x);

/* ---- the queue ops of store.h, over a backend's rows ----
 * Each as its store_queue_* (store.c has checked the arguments). */
int queue_op_put(const queue_rows_t *r, store_t *s, const char *name, queue_put_t *items,
                 size_t n, int64_t now_ms);
int queue_op_take(const queue_rows_t *r, store_t *s, const char *name, size_t max,
                  int64_t visibility_ms, int64_t now_ms, queue_item_list_t *out,
                  int64_t *next_ms);
int queue_op_leases(const queue_rows_t *r, store_t *s, const char *name, int ack,
                    queue_lease_t *leases, size_t n, int64_t now_ms);
int queue_op_set(const queue_rows_t *r, store_t *s, queue_conf_t *c);
int queue_op_get(const queue_rows_t *r, store_t *s, const char *name, queue_conf_t *out);
int queue_op_delete(const queue_rows_t *r, store_t *s, const char *name);
int queue_op_stats(const queue_rows_t *r, store_t *s, const char *name, int64_t now_ms,
                   queue_stats_t *out);
int queue_op_keys(const queue_rows_t *r, store_t *s, const char *name, const char *after,
                  size_t limit, int64_t now_ms, queue_key_list_t *out);
int queue_op_items(const queue_rows_t *r, store_t *s, const char *name,
                   const queue_filter_t *f, queue_item_list_t *out);
int queue_op_bulk(const queue_rows_t *r, store_t *s, const char *name, const queue_filter_t *f,
                  int requeue, int64_t due_ms, int64_t now_ms, int64_t *count);

/* Defines a backend's store ops PREFIXqueue_put, ... (those of ops.h but
 * queue_extend and queues_list) as the engine's over rows. */
#define QUEUE_ENGINE_OPS(prefix, rows)                                                      \
  int prefix##queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,         \
                        int64_t now_ms) {                                                   \
    return queue_op_put(&rows, s, name, items, n, now_ms);                                  \
  }                                                                                         \
  int prefix##queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,   \
                         int64_t now_ms, queue_item_list_t *out, int64_t *next_ms) {        \
    return queue_op_take(&rows, s, name, max, visibility_ms, now_ms, out, next_ms);         \
  }                                                                                         \
  int prefix##queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,      \
                        int64_t now_ms) {                                                   \
    return queue_op_leases(&rows, s, name, 1, leases, n, now_ms);                           \
  }                                                                                         \
  int prefix##queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,     \
                         int64_t now_ms) {                                                  \
    return queue_op_leases(&rows, s, name, 0, leases, n, now_ms);                           \
  }                                                                                         \
  int prefix##queue_set(store_t *s, queue_conf_t *c) { return queue_op_set(&rows, s, c); }  \
  int prefix##queue_get(store_t *s, const char *name, queue_conf_t *out) {                  \
    return queue_op_get(&rows, s, name, out);                                               \
  }                                                                                         \
  int prefix##queue_delete(store_t *s, const char *name) {                                  \
    return queue_op_delete(&rows, s, name);                                                 \
  }                                                                                         \
  int prefix##queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out) { \
    return queue_op_stats(&rows, s, name, now_ms, out);                                     \
  }                                                                                         \
  int prefix##queue_keys(store_t *s, const char *name, const char *after, size_t limit,     \
                         int64_t now_ms, queue_key_list_t *out) {                           \
    return queue_op_keys(&rows, s, name, after, limit, now_ms, out);                        \
  }                                                                                         \
  int prefix##queue_items(store_t *s, const char *name, const queue_filter_t *f,            \
                          queue_item_list_t *out) {                                         \
    return queue_op_items(&rows, s, name, f, out);                                          \
  }                                                                                         \
  int prefix##queue_requeue(store_t *s, const char *name, const queue_filter_t *f,          \
                            int64_t due_ms, int64_t now_ms, int64_t *count) {               \
    return queue_op_bulk(&rows, s, name, f, 1, due_ms, now_ms, count);                      \
  }                                                                                         \
  int prefix##queue_purge(store_t *s, const char *name, const queue_filter_t *f,            \
                          int64_t now_ms, int64_t *count) {                                 \
    return queue_op_bulk(&rows, s, name, f, 0, 0, now_ms, count);                           \
  }

#endif
