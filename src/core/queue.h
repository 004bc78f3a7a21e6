/* Task queues: named queues of unique elements, each due at a time and with a
 * priority, delivered at least once under a lease (see docs/queues.md).
 *
 * An element is an opaque byte string (at most QUEUE_ELEMENT_MAX bytes),
 * unique within its queue. It is in one state at a time:
 *
 *   waiting   due in the future, or due and ready to be taken
 *   inflight  taken under a lease until lease_until_ms; ack ends it, nack or
 *             an expired lease makes it waiting again (or dead)
 *   dead      delivered max_deliveries times without an ack; kept until
 *             requeued or purged
 *   done      acked in a queue with keep_done set: a tombstone that remembers
 *             the element was seen (a crawl's dupefilter)
 *
 * Elements carry a key (a politeness domain, e.g. the URL's host): limits
 * on concurrency and rate apply per key.
 *
 * Ownership: a queue_item_t / queue_conf_t owns its strings; the *_release
 * functions free them (not the struct); list releases free the array too.
 */
#ifndef SPIDERD_CORE_QUEUE_H
#define SPIDERD_CORE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#define QUEUE_ELEMENT_MAX 65536 /* bytes */
#define QUEUE_KEY_MAX 255       /* bytes */
#define QUEUE_BATCH_MAX 1000    /* elements per put/take/ack call of the API */

typedef enum queue_state {
  QSTATE_WAITING = 0,
  QSTATE_INFLIGHT,
  QSTATE_DEAD,
  QSTATE_DONE,
  QSTATE_N
} queue_state_t;

/* What a put does to an element the queue already holds. */
typedef enum queue_policy {
  QPOLICY_OVERWRITE = 0, /* move it: the new due time and priority win */
  QPOLICY_KEEP_EARLIEST, /* the earlier due time wins (priority: the higher) */
  QPOLICY_KEEP_EXISTING, /* leave it as it is */
  QPOLICY_N
} queue_policy_t;

/* What a put did (queue_put_t.result). */
typedef enum queue_put_result {
  QPUT_ADDED = 0, /* a new element */
  QPUT_MOVED,     /* it was there; its due time and/or priority changed */
  QPUT_KEPT,      /* it was there and stays as it was */
  QPUT_DEFERRED   /* it is in flight; the new due time applies after its ack */
} queue_put_result_t;

/* How an element's key is found when a put gives none. */
typedef enum queue_key_mode {
  QKEY_NONE = 0, /* no key: "" (one politeness domain for the queue) */
  QKEY_HOST,     /* the host of the element read as a URL ("" if it is not one) */
  QKEY_N
} queue_key_mode_t;

/* A queue's settings and counters. Counters are kept up to date by every
 * operation (never counted by a scan). */
typedef struct queue_conf {
  int64_t id;
  char *name;
  int64_t created_ms;
  int paused;               /* take returns nothing while paused */
  int keep_done;            /* ack leaves a done tombstone (see above) */
  int64_t visibility_ms;    /* default lease length of take */
  int max_deliveries;       /* the delivery after which nack/expiry kills it; 0 = never */
  int64_t backoff_ms;       /* nack without a delay: backoff_ms * 2^(deliveries-1) */
  int64_t backoff_max_ms;   /* ... capped here, with +-25% jitter */
  int max_inflight;         /* elements in flight in the whole queue; 0 = no limit */
  queue_key_mode_t key_mode;
  int key_inflight;         /* elements in flight per key; 0 = no limit */
  double key_rate;          /* takes per second per key (token bucket); 0 = no limit */
  double key_burst;         /* bucket size; below 1 counts as 1 */
  /* counters */
  int64_t n_waiting;        /* waiting, due or not */
  int64_t n_inflight;
  int64_t n_dead;
  int64_t n_done;
  int64_t n_put;            /* puts that added an element, ever */
  int64_t n_acked;          /* acks, ever */
} queue_conf_t;

/* Introspection of one queue at a time now_ms. */
typedef struct queue_stats {
  int64_t size;          /* waiting + inflight */
  int64_t waiting;
  int64_t past_due;      /* waiting with due_ms <= now */
  int64_t inflight;
  int64_t dead;
  int64_t done;
  int64_t oldest_due_ms; /* the earliest due_ms of a waiting element; 0 = none */
  int64_t keys;          /* politeness keys holding state: due or in-flight elements,
                            a partly spent token bucket or a Retry-After block */
} queue_stats_t;

/* One element of a put. */
typedef struct queue_put {
  const char *element;
  size_t len;
  const char *key;        /* NULL = derived by the queue's key_mode */
  int64_t due_ms;         /* absolute; <= now means due now */
  int priority;           /* higher first */
  queue_policy_t policy;
  queue_put_result_t result; /* out */
  int64_t id;                /* out: the element's id */
} queue_put_t;

/* A lease presented to ack / nack / extend. */
typedef struct queue_lease {
  int64_t id;             /* element id */
  int64_t token;          /* the delivery's lease token */
  /* nack only: */
  int64_t delay_ms;       /* < 0: the queue's backoff */
  int64_t retry_after_ms; /* > 0: the key takes nothing for this long, and the
                             element is due no sooner */
  const char *error;      /* kept with the element (last error); may be NULL */
  int release;            /* give it back without counting this delivery (a
                             worker that stops before trying): never dead */
  int result;             /* out: 0, or -ENOENT when the lease is not held
                             (expired and taken again, acked, unknown) */
  int dead;               /* out (nack): it went to the dead letters */
} queue_lease_t;

typedef struct queue_item {
  int64_t id;
  char *element;          /* NUL-terminated too; len bytes */
  size_t len;
  char *key;
  queue_state_t state;
  int priority;
  int64_t due_ms;         /* waiting: when due; inflight: lease end; dead/done: when it got there */
  int deliveries;
  int64_t token;          /* inflight: the lease token */
  int64_t created_ms;
  char *error;            /* last nack's error, or NULL */
} queue_item_t;

typedef struct queue_item_list {
  queue_item_t *v;
  size_t n, cap;
} queue_item_list_t;

typedef struct queue_conf_list {
  queue_conf_t *v;
  size_t n, cap;
} queue_conf_list_t;

/* A selection for bulk requeue / purge / listing. */
typedef struct queue_filter {
  unsigned states;        /* bit mask of (1u << queue_state_t); 0 = all */
  const char *key;        /* NULL = any key */
  const char *prefix;     /* element starts with these bytes; NULL = any */
  const int64_t *ids;     /* these elements only; NULL = any */
  size_t nids;
  int64_t after_id;       /* id > after_id (listing cursor) */
  size_t limit;           /* listing only; 0 = no limit */
} queue_filter_t;

void queue_conf_defaults(queue_conf_t *c); /* everything but id/name/counters */
void queue_conf_release(queue_conf_t *c);
void queue_conf_list_release(queue_conf_list_t *l);
void queue_item_release(queue_item_t *it);
void queue_item_list_release(queue_item_list_t *l);
/* Appends a zeroed item; NULL when out of memory. */
queue_item_t *queue_item_list_add(queue_item_list_t *l);
queue_conf_t *queue_conf_list_add(queue_conf_list_t *l);

const char *queue_state_name(queue_state_t s);
int queue_state_parse(const char *s, queue_state_t *out);     /* -EINVAL */
const char *queue_policy_name(queue_policy_t p);
int queue_policy_parse(const char *s, queue_policy_t *out);   /* -EINVAL */
const char *queue_key_mode_name(queue_key_mode_t m);
int queue_key_mode_parse(const char *s, queue_key_mode_t *out); /* -EINVAL */

/* Queue names follow project names (letters, digits, '_', '-', '.', at most
 * 200 bytes, not "." or ".."). 0 or -EINVAL. */
int queue_name_valid(const char *name);

/* The key of an element under mode: for QKEY_HOST the lower-cased host of
 * "scheme://[user@]host[:port]/..." ("" when the element is not such a URL).
 * Writes at most cap-1 bytes and a NUL into out. */
void queue_key_derive(queue_key_mode_t mode, const char *element, size_t len,
                      char *out, size_t cap);

/* A 64-bit hash of an element (the store's uniqueness index). */
uint64_t queue_hash(const char *element, size_t len);

#endif
