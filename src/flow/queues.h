/* A queue's policy changes in one place: its settings set (queue.updated;
 * the queue is made when it does not exist), paused and resumed
 * (queue.paused, queue.resumed), deleted (queue.deleted), and an operator's
 * bulk moves of its elements: requeued (queue.requeued) and purged
 * (queue.purged). Each writes its event, the audit trail, in the same
 * transaction, on a store thread inside the caller's store op.
 *
 * What stays out (flow/flow.h says the rule): an element's own traffic --
 * put, take, ack, nack, extend and a taker's give-back -- is the queue's
 * data path, records no event and changes no setting: api/ calls the store
 * for it directly, one store call per request.
 *
 * Nothing here changes the loop's job state, so none fills a
 * flow_change_t; waking the takers parked on the queue is the caller's
 * (api/ keeps them). Errors as store.h's: -ENOENT for a queue that does
 * not exist (pause, resume, delete, requeue, purge). Ownership: inputs are
 * borrowed; *out (may be NULL) is the caller's (queue_conf_release).
 */
#ifndef SPIDERD_FLOW_QUEUES_H
#define SPIDERD_FLOW_QUEUES_H

#include <stdint.h>

#include "core/queue.h"
#include "store/store.h"

/* Which settings a change gives (queues_settings_t.given). */
enum {
  QUEUES_VISIBILITY = 1u << 0,
  QUEUES_BACKOFF = 1u << 1,
  QUEUES_BACKOFF_MAX = 1u << 2,
  QUEUES_PAUSED = 1u << 3,
  QUEUES_KEEP_DONE = 1u << 4,
  QUEUES_MAX_DELIVERIES = 1u << 5,
  QUEUES_MAX_INFLIGHT = 1u << 6,
  QUEUES_KEY_INFLIGHT = 1u << 7,
  QUEUES_KEY_MODE = 1u << 8,
  QUEUES_KEY_RATE = 1u << 9,
  QUEUES_KEY_BURST = 1u << 10,
};

/* Settings to change: those of `given` take their value from v (checked by
 * the caller); the others stay as they are (a new queue's: the defaults). */
typedef struct queues_settings {
  unsigned given;
  queue_conf_t v; /* only the settings' members are read */
} queues_settings_t;

/* Applies set to q. Pure. */
void queues_settings_apply(const queues_settings_t *set, queue_conf_t *q);

/* Sets the queue's settings, making the queue with the defaults first when
 * there is none, with queue.updated. *out: the queue as it now is. */
int queues_set(store_t *s, const char *name, const queues_settings_t *set, queue_conf_t *out);

/* Pauses (pause = 1) or resumes (0) an existing queue, with queue.paused or
 * queue.resumed (written even when it was so already). */
int queues_pause(store_t *s, const char *name, int pause, queue_conf_t *out);

/* Deletes the queue and its elements, with queue.deleted. */
int queues_delete(store_t *s, const char *name);

/* Makes the elements f selects waiting again, due at due_ms, with
 * queue.requeued; *count = how many. */
int queues_requeue(store_t *s, const char *name, const queue_filter_t *f, int64_t due_ms,
                   int64_t now_ms, int64_t *count);

/* Deletes the elements f selects, with queue.purged; *count = how many. */
int queues_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                 int64_t *count);

#endif
