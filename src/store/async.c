/* The store pool: a writer thread with group commit, a reader thread, and
 * one uv_async that carries completions back to the loop (and a uv_prepare
 * that may wait for a lone op's completion instead: store_pool_prepare_cb).
 *
 * One mutex guards the two submit queues, the completion queue and the free
 * list of ops. Every critical section is a few pointer moves, so a single
 * lock costs less than the extra wake-ups finer locking would need on a
 * two-core machine. Threads are woken only when they sleep (idle flag), and
 * the loop only when the completion queue goes from empty to non-empty, so
 * a busy pool makes no redundant futex or eventfd calls.
 */
#include "store/async.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "metrics.h"

/* Ops are recycled rather than freed: a steady stream of submits then
 * costs no malloc. The cap bounds what a burst leaves behind. */
#define STORE_POOL_FREE_MAX 4096

struct store_op {
  struct store_op *next;
  store_fn fn;
  void *arg;
  store_done_cb done;
  int rc;
  int kind;
  uint64_t t0; /* uv_hrtime at submit: op latency (metrics) */
  char actor[STORE_ACTOR_MAX]; /* store_submit_as: who asked ("" = nobody) */
  char addr[STORE_ADDR_MAX];
};

/* fn(s, arg) with the op's actor set on s for the events it records. */
static int store_op_run(store_t *s, struct store_op *op) {
  if (!op->actor[0]) return op->fn(s, op->arg);
  store_set_actor(s, op->actor, op->addr);
  int rc = op->fn(s, op->arg);
  store_set_actor(s, NULL, NULL);
  return rc;
}

struct store_queue {
  struct store_op *head, *tail;
};

struct store_worker {
  struct store_pool *pool;
  store_t *store;
  int kind;
  uv_thread_t thread;
  uv_cond_t cond;
  struct store_queue q; /* guarded by pool->lock */
  int idle;             /* waiting on cond; guarded by pool->lock */
  int queued;           /* q is non-empty: atomic, read without the lock */
  int stop;             /* guarded by pool->lock */
  int started;
  uint64_t rng;         /* the retries' jitter (this thread only) */
};

struct store_pool {
  uv_loop_t *loop;
  uv_async_t async;
  uv_mutex_t lock;
  struct store_worker w[2]; /* [STORE_READ], [STORE_WRITE] */
  struct store_queue done;  /* completed ops; guarded by lock */
  struct store_op *free;    /* guarded by lock */
  size_t nfree;
  struct store_op *delivering; /* loop thread only: taken, not yet delivered */
  int stopping;                /* guarded by lock */
  metrics_t *metrics;          /* set before the first submit; NULL = none */
  uint64_t retries;            /* writes run again after -EAGAIN (atomic) */
  uv_prepare_t prep;           /* store_pool_prepare_cb */
  int outstanding;             /* atomic: ops submitted, not delivered */
  int ready;                   /* atomic: done has ops */
  int handles;                 /* open ones of async and prep */
};

static void store_queue_push(struct store_queue *q, struct store_op *first,
                             struct store_op *last) {
  last->next = NULL;
  if (q->tail)
    q->tail->next = first;
  else
    q->head = first;
  q->tail = last;
}

/* Hands finished ops (a linked run first..last) to the loop. */
static void store_pool_complete(struct store_pool *p, struct store_op *first,
                                struct store_op *last) {
  metrics_t *m = __atomic_load_n(&p->metrics, __ATOMIC_ACQUIRE);
  if (m) {
    uint64_t now = uv_hrtime();
    for (struct store_op *op = first;; op = op->next) {
      if (op->t0)
        metrics_hist_observe(&m->store_op[op->kind == STORE_WRITE],
                           (double)(now - op->t0) / 1e9);
      if (op == last) break;
    }
  }
  uv_mutex_lock(&p->lock);
  int was_empty = p->done.head == NULL;
  store_queue_push(&p->done, first, last);
  __atomic_store_n(&p->ready, 1, __ATOMIC_RELEASE);
  uv_mutex_unlock(&p->lock);
  /* A non-empty queue already has a send in flight that the loop has not
   * acted on yet; it will take these too. */
  if (was_empty) uv_async_send(&p->async);
}

/* What the ops of a batch whose transaction failed are told: a full disk
 * as it is (the caller says so, and tries again later), anything else a
 * store failure. */
static int batch_error(int rc) { return rc == -ENOSPC ? rc : SPD_ESTORE; }

static void store_pool_fail_all(struct store_op *batch, int rc) {
  for (struct store_op *op = batch; op; op = op->next) op->rc = rc;
}

/* ---- writes that collide: -EAGAIN ----
 *
 * -EAGAIN from a write is PostgreSQL's serialization failure (40001) or
 * deadlock (40P01): the server rolled the op back to save another
 * transaction, and the same op asked again a moment later usually goes
 * through. So the pool runs it again, each time in a transaction of its
 * own after the rollback, up to STORE_RETRY_MAX times, after a short
 * randomized pause on this (the store's) thread, never on the loop; only
 * the last -EAGAIN reaches the done callback. SQLite never answers
 * -EAGAIN (writes begin IMMEDIATE, so two writers never deadlock; a busy
 * file waits out the busy timeout and then fails as SPD_ESTORE), and
 * Redis's transactions take turns under one lock (redis/redis.c), so
 * there it does not arise either.
 *
 * Every write fn may therefore run twice, the first run rolled back.
 * Audit of what each keeps between runs (store/ops.h, every backend's
 * implementation, and every STORE_WRITE fn in api/ and run/):
 * - Ops append to the caller's lists (claim, prune, reap, take, list,
 *   ...): each fn that gathers a list empties it, and zeroes its counters
 *   and flags, before its first statement (launcher claim_fn, scheduler
 *   tick_fn, janitor batch_fn, cluster beat_fn, webhooks lease_fn, the
 *   queue take, the job cancel); those that build everything fresh per
 *   run need nothing.
 * - Ops that write into their input overwrite it on every run: job_insert
 *   (id; created_ms kept, so a rerun stamps the same time), schedule_insert
 *   (id), event_add (id), queue_put (each item's result and id),
 *   queue_ack/nack/extend (each lease's result and dead), lease_acquire
 *   (token out: webhooks keeps the token it held apart from it).
 * - Notices (pg: NOTIFY) are sent at COMMIT only; a rolled-back run leaves
 *   at most one spare wake-up. store_principal_put/delete's auth.gen is a
 *   fresh random value per run, as it must be.
 * - Outside the transaction: a job's end reads its stats file once and
 *   keeps them (the file is gone after the first run), and unlinks its
 *   heartbeat file (again: ENOENT, ignored); a claim copies missing eggs
 *   to disk (a rerun finds them there); an egg upload reads its temporary
 *   file (kept until the callback). All harmless twice.
 * - A users.update run fills the fields not given from the stored user;
 *   a rerun keeps the first run's copy, which is what the user read
 *   anyway (the list is read without a row lock: the same race as before).
 * A fn that returns 0 after a failed statement (an event it does not
 * insist on) wrote nothing: in a batch its savepoint's RELEASE fails, and
 * after a collision it is rolled back and run again like any other; alone,
 * pg_tx_commit reports the rolled-back transaction as failed rather than
 * committed, and it is not run again (its result may be built already). */
#define STORE_RETRY_MAX 5

/* Sleeps 2^(attempt-1)..2^attempt ms (attempt 1..): the colliding
 * transaction commits meanwhile, and two victims of one deadlock do not
 * come back in step. */
static void store_retry_pause(struct store_worker *w, int attempt) {
  w->rng ^= w->rng << 13;
  w->rng ^= w->rng >> 7;
  w->rng ^= w->rng << 17;
  long base_us = 1000L << (attempt - 1);
  long us = base_us + (long)(w->rng % (uint64_t)base_us);
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

static void store_rollback_logged(store_t *s) {
  int rc = store_tx_rollback(s);
  if (rc && rc != -EINVAL) log_error("store", "group commit: ROLLBACK failed (%s)", spd_strerror(rc));
}

/* op alone in a transaction of its own, run again while it meets -EAGAIN
 * (ran: how many runs it has had already). */
static void store_pool_write_one(struct store_worker *w, struct store_op *op, int ran) {
  store_t *s = w->store;
  for (;;) {
    if (ran) {
      store_retry_pause(w, ran);
      __atomic_add_fetch(&w->pool->retries, 1, __ATOMIC_RELAXED);
    }
    int rc = store_tx_begin(s);
    if (rc) {
      log_error("store", "group commit: cannot begin a transaction (%s)", spd_strerror(rc));
      op->rc = SPD_ESTORE;
      return;
    }
    op->rc = store_op_run(s, op);
    ran++;
    if (!op->rc) {
      if ((rc = store_tx_commit(s))) {
        log_error("store", "group commit: COMMIT failed (%s)", spd_strerror(rc));
        op->rc = batch_error(rc);
      }
      return;
    }
    store_rollback_logged(s);
    if (op->rc != -EAGAIN) return;
    if (ran > STORE_RETRY_MAX) {
      log_warn("store", "a write collided with other writes %d times in a row "
               "(deadlock or serialization failure): giving up", ran);
      return;
    }
  }
}

/* One transaction for the ops of a batch from `from` on, one savepoint per
 * op. Any failure that leaves the transaction unusable fails every op
 * left: their writes are gone with it, so none may report success. An op
 * that met -EAGAIN was rolled back to its savepoint alone (a retry inside
 * this transaction would see the same snapshot and wait on the same
 * locks): the ops before it commit, it runs again alone, and the rest of
 * the batch follows in a new transaction, so writes still commit in the
 * order they were submitted (a job's start is never recorded after its
 * end). Returns the first op not run yet, NULL when none is left. */
static struct store_op *store_pool_write_run(struct store_worker *w, struct store_op *from) {
  store_t *s = w->store;
  struct store_op *collided = NULL;
  int rc = store_tx_begin(s);
  if (rc) {
    log_error("store", "group commit: cannot begin a transaction (%s)",
              spd_strerror(rc));
    store_pool_fail_all(from, SPD_ESTORE);
    return NULL;
  }
  int broken = 0;
  for (struct store_op *op = from; op && !broken && !collided; op = op->next) {
    if ((rc = store_sp_begin(s))) {
      broken = 1;
      break;
    }
    op->rc = store_op_run(s, op);
    rc = op->rc ? store_sp_rollback(s) : store_sp_release(s);
    /* An op that went on past a collision it did not report: undone like
     * one that did, and run again. */
    if (rc == -EAGAIN && !op->rc && !(rc = store_sp_rollback(s))) op->rc = -EAGAIN;
    if (rc) broken = 1;
    else if (op->rc == -EAGAIN) collided = op;
  }
  if (broken) {
    log_error("store", "group commit: an op broke the transaction (%s); "
              "failing its batch", spd_strerror(rc));
    store_tx_rollback(s);
    /* (SQLite ends the transaction itself on a full disk: the op that met
     * it knows why, the savepoint calls after it only that it is gone) */
    for (struct store_op *op = from; op; op = op->next)
      if (op->rc == -ENOSPC) rc = op->rc;
    store_pool_fail_all(from, batch_error(rc));
    return NULL;
  }
  if ((rc = store_tx_commit(s))) {
    log_error("store", "group commit: COMMIT failed (%s)", spd_strerror(rc));
    store_pool_fail_all(from, batch_error(rc));
    return NULL;
  }
  if (!collided) return NULL;
  store_pool_write_one(w, collided, 1);
  return collided->next;
}

static void store_pool_write_batch(struct store_worker *w, struct store_op *batch) {
  /* A batch of one needs no savepoint: rolling back the transaction is the
   * same as rolling back the savepoint and committing nothing, and it
   * saves two statements on the latency-bound path of a lone client. */
  if (!batch->next) {
    store_pool_write_one(w, batch, 0);
    return;
  }
  for (struct store_op *op = batch; op;) op = store_pool_write_run(w, op);
}

/* After a batch, a worker watches its queue for a short while before it
 * sleeps. A lone client's next request arrives tens of microseconds after
 * its answer; catching it here saves the futex sleep and wake-up, which on
 * two cores cost more than the SQLite commit itself (schedule.json on one
 * connection: ~9,000 -> ~12,000/s). Bounded, and only after real work, so an
 * idle pool never spins. */
#define STORE_SPIN_NS 60000

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static void store_pool_spin(struct store_worker *w) {
  uint64_t until = uv_hrtime() + STORE_SPIN_NS;
  while (!__atomic_load_n(&w->queued, __ATOMIC_ACQUIRE)) {
    for (int i = 0; i < 64; i++) cpu_relax();
    if (uv_hrtime() >= until) return;
  }
}

static void store_pool_worker_main(void *arg) {
  struct store_worker *w = arg;
  struct store_pool *p = w->pool;
  int worked = 0;
  /* Named, so top -H and /proc/PID/task tell the store's CPU apart. */
  pthread_setname_np(pthread_self(), w->kind == STORE_WRITE ? "spiderd-writer" : "spiderd-reader");
  w->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)w) | 1;
  uv_mutex_lock(&p->lock);
  for (;;) {
    if (!w->q.head && !w->stop && worked) {
      worked = 0;
      uv_mutex_unlock(&p->lock);
      store_pool_spin(w);
      uv_mutex_lock(&p->lock);
    }
    while (!w->q.head && !w->stop) {
      w->idle = 1;
      uv_cond_wait(&w->cond, &p->lock);
      w->idle = 0;
    }
    if (!w->q.head) break; /* stopping, and everything queued has run */
    struct store_op *batch = w->q.head, *last = w->q.tail;
    w->q.head = w->q.tail = NULL;
    __atomic_store_n(&w->queued, 0, __ATOMIC_RELAXED);
    worked = 1;
    uv_mutex_unlock(&p->lock);
    if (w->kind == STORE_WRITE) {
      store_pool_write_batch(w, batch);
      store_pool_complete(p, batch, last);
    } else {
      /* Reads complete one by one: a quick read queued behind a slow one
       * should not wait for it to be delivered. */
      while (batch) {
        struct store_op *op = batch;
        batch = op->next;
        op->rc = store_op_run(w->store, op);
        store_pool_complete(p, op, op);
      }
    }
    uv_mutex_lock(&p->lock);
  }
  uv_mutex_unlock(&p->lock);
}

/* Loop thread: runs done callbacks in completion order. Re-entrant: a
 * callback may call store_pool_stop, which delivers the rest from here. */
static void store_pool_deliver(struct store_pool *p) {
  for (;;) {
    struct store_op *op = p->delivering;
    uv_mutex_lock(&p->lock);
    if (!op) {
      op = p->done.head;
      p->done.head = p->done.tail = NULL;
      __atomic_store_n(&p->ready, 0, __ATOMIC_RELAXED);
    }
    if (op) {
      p->delivering = op->next;
      store_done_cb done = op->done;
      void *arg = op->arg;
      int rc = op->rc;
      if (p->nfree < STORE_POOL_FREE_MAX) {
        op->next = p->free;
        p->free = op;
        p->nfree++;
        op = NULL;
      }
      uv_mutex_unlock(&p->lock);
      free(op);
      __atomic_sub_fetch(&p->outstanding, 1, __ATOMIC_RELAXED);
      if (done) done(arg, rc);
      continue;
    }
    uv_mutex_unlock(&p->lock);
    return;
  }
}

static void store_pool_async_cb(uv_async_t *h) { store_pool_deliver(h->data); }

/* Before the loop would sleep with one op out, it watches for that op's
 * completion a short while: a lone client's write (schedule.json on one
 * keep-alive connection) is answered in tens of microseconds, and waiting
 * for it here saves waking a sleeping loop thread, which on two cores costs
 * more than the commit (one connection: ~10,500 -> ~12,000/s; sixteen:
 * ~35,000 -> ~34,000/s, the price). Only with exactly one op out: a busy
 * loop has more to do than wait. */
#define STORE_LOOP_SPIN_NS 40000

static void store_pool_prepare_cb(uv_prepare_t *h) {
  struct store_pool *p = h->data;
  if (__atomic_load_n(&p->outstanding, __ATOMIC_RELAXED) != 1) return;
  uint64_t until = uv_hrtime() + STORE_LOOP_SPIN_NS;
  while (!__atomic_load_n(&p->ready, __ATOMIC_ACQUIRE)) {
    for (int i = 0; i < 64; i++) cpu_relax();
    if (uv_hrtime() >= until) return;
  }
  store_pool_deliver(p);
}

static void store_pool_free(struct store_pool *p) {
  while (p->free) {
    struct store_op *op = p->free;
    p->free = op->next;
    free(op);
  }
  for (int i = 0; i < 2; i++) uv_cond_destroy(&p->w[i].cond);
  uv_mutex_destroy(&p->lock);
  free(p);
}

static void store_pool_closed(uv_handle_t *h) {
  struct store_pool *p = h->data;
  if (--p->handles == 0) store_pool_free(p);
}

/* Stops and joins the threads that were started, closes the stores. */
static void store_pool_join(struct store_pool *p) {
  uv_mutex_lock(&p->lock);
  for (int i = 0; i < 2; i++) p->w[i].stop = 1;
  uv_mutex_unlock(&p->lock);
  for (int i = 0; i < 2; i++) {
    struct store_worker *w = &p->w[i];
    if (!w->started) continue;
    uv_cond_signal(&w->cond);
    uv_thread_join(&w->thread);
    w->started = 0;
  }
}

static void store_pool_close_stores(struct store_pool *p) {
  for (int i = 0; i < 2; i++) {
    store_close(p->w[i].store);
    p->w[i].store = NULL;
  }
}

int store_pool_start(uv_loop_t *loop, const char *url, store_pool_t **out,
                     char *err, size_t errlen) {
  int rc;
  if (err && errlen) err[0] = '\0';
  if (!loop || !url || !out) return -EINVAL;
  *out = NULL;
  struct store_pool *p = calloc(1, sizeof(*p));
  if (!p) return -ENOMEM;
  p->loop = loop;
  if ((rc = uv_mutex_init(&p->lock))) {
    free(p);
    return rc;
  }
  for (int i = 0; i < 2; i++) {
    struct store_worker *w = &p->w[i];
    w->pool = p;
    w->kind = i;
    if ((rc = uv_cond_init(&w->cond))) {
      snprintf(err, errlen, "store pool: %s", uv_strerror(rc));
      if (i) uv_cond_destroy(&p->w[0].cond);
      uv_mutex_destroy(&p->lock);
      free(p);
      return rc;
    }
  }
  /* The writer opens first so that it alone runs any migration. */
  if ((rc = store_open(url, &p->w[STORE_WRITE].store, err, errlen))) goto fail;
  if ((rc = store_open(url, &p->w[STORE_READ].store, err, errlen))) goto fail;
  if ((rc = uv_async_init(loop, &p->async, store_pool_async_cb))) {
    snprintf(err, errlen, "store pool: %s", uv_strerror(rc));
    goto fail;
  }
  p->async.data = p;
  uv_prepare_init(loop, &p->prep); /* cannot fail */
  p->prep.data = p;
  p->handles = 2;
  uv_prepare_start(&p->prep, store_pool_prepare_cb);
  uv_unref((uv_handle_t *)&p->prep); /* it alone never keeps the loop running */
  for (int i = 0; i < 2; i++) {
    if ((rc = uv_thread_create(&p->w[i].thread, store_pool_worker_main, &p->w[i]))) {
      snprintf(err, errlen, "store pool: cannot start a thread: %s", uv_strerror(rc));
      log_error("store", "%s", err);
      store_pool_join(p);
      store_pool_close_stores(p);
      uv_close((uv_handle_t *)&p->async, store_pool_closed);
      uv_close((uv_handle_t *)&p->prep, store_pool_closed);
      return rc;
    }
    p->w[i].started = 1;
  }
  *out = p;
  return 0;
fail:
  store_pool_close_stores(p);
  store_pool_free(p);
  return rc;
}

int store_pool_shared(const store_pool_t *p) {
  return p && store_shared(p->w[STORE_WRITE].store);
}

int store_submit(store_pool_t *p, int kind, store_fn fn, void *arg,
                 store_done_cb done) {
  return store_submit_as(p, kind, fn, arg, done, NULL, NULL);
}

int store_submit_as(store_pool_t *p, int kind, store_fn fn, void *arg, store_done_cb done,
                    const char *actor, const char *addr) {
  if (!p || !fn || (kind != STORE_READ && kind != STORE_WRITE)) return -EINVAL;
  struct store_worker *w = &p->w[kind];
  uv_mutex_lock(&p->lock);
  if (p->stopping) {
    uv_mutex_unlock(&p->lock);
    return SPD_ESHUTDOWN;
  }
  struct store_op *op = p->free;
  if (op) {
    p->free = op->next;
    p->nfree--;
  } else if (!(op = malloc(sizeof(*op)))) {
    uv_mutex_unlock(&p->lock);
    return -ENOMEM;
  }
  op->fn = fn;
  op->arg = arg;
  op->done = done;
  op->rc = 0;
  op->kind = kind;
  snprintf(op->actor, sizeof(op->actor), "%s", actor ? actor : "");
  snprintf(op->addr, sizeof(op->addr), "%s", addr ? addr : "");
  op->t0 = __atomic_load_n(&p->metrics, __ATOMIC_RELAXED) ? uv_hrtime() : 0;
  store_queue_push(&w->q, op, op);
  __atomic_store_n(&w->queued, 1, __ATOMIC_RELEASE);
  int wake = w->idle;
  uv_mutex_unlock(&p->lock);
  __atomic_add_fetch(&p->outstanding, 1, __ATOMIC_RELAXED);
  if (wake) uv_cond_signal(&w->cond);
  return 0;
}

void store_pool_stop(store_pool_t *p) {
  if (!p) return;
  uv_mutex_lock(&p->lock);
  int again = p->stopping;
  p->stopping = 1;
  uv_mutex_unlock(&p->lock);
  if (again) return;
  /* The threads run everything already queued before they exit. */
  store_pool_join(p);
  store_pool_deliver(p);
  store_pool_close_stores(p);
  uv_close((uv_handle_t *)&p->async, store_pool_closed);
  uv_close((uv_handle_t *)&p->prep, store_pool_closed);
}

uint64_t store_pool_retries(const store_pool_t *p) {
  return p ? __atomic_load_n(&p->retries, __ATOMIC_RELAXED) : 0;
}

void store_pool_set_metrics(store_pool_t *p, metrics_t *m) {
  if (p) __atomic_store_n(&p->metrics, m, __ATOMIC_RELEASE);
}
