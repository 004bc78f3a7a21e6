/* A queue's policy changes and their events (flow/queues.h). */
#include "flow/queues.h"

#include <errno.h>
#include <string.h>

#include "clock.h"

/* The audit trail of a change to a queue (its elements' traffic is counted
 * by /metrics, not recorded). data is taken (NULL: none but the name). */
static int queue_event(store_t *s, const char *name, const char *type, json_t *data) {
  if (!data) data = json_object();
  if (!data) return -ENOMEM;
  json_object_set_new(data, "queue", json_string(name));
  event_t e = {.type = (char *)type, .ts_ms = clock_wall_ms(), .data = data};
  int rc = store_event_add(s, &e);
  json_decref(data);
  return rc;
}

void queues_settings_apply(const queues_settings_t *set, queue_conf_t *q) {
  const queue_conf_t *v = &set->v;
  unsigned g = set->given;
  if (g & QUEUES_VISIBILITY) q->visibility_ms = v->visibility_ms;
  if (g & QUEUES_BACKOFF) q->backoff_ms = v->backoff_ms;
  if (g & QUEUES_BACKOFF_MAX) q->backoff_max_ms = v->backoff_max_ms;
  if (g & QUEUES_PAUSED) q->paused = v->paused;
  if (g & QUEUES_KEEP_DONE) q->keep_done = v->keep_done;
  if (g & QUEUES_MAX_DELIVERIES) q->max_deliveries = v->max_deliveries;
  if (g & QUEUES_MAX_INFLIGHT) q->max_inflight = v->max_inflight;
  if (g & QUEUES_KEY_INFLIGHT) q->key_inflight = v->key_inflight;
  if (g & QUEUES_KEY_MODE) q->key_mode = v->key_mode;
  if (g & QUEUES_KEY_RATE) q->key_rate = v->key_rate;
  if (g & QUEUES_KEY_BURST) q->key_burst = v->key_burst;
}

/* The queue as stored into *q, or, when there is none and make is set, a
 * new one with the defaults (not yet written). */
static int queue_read(store_t *s, const char *name, int make, queue_conf_t *q) {
  memset(q, 0, sizeof(*q));
  int rc = store_queue_get(s, name, q);
  if (rc != -ENOENT || !make) return rc;
  queue_conf_release(q);
  memset(q, 0, sizeof(*q));
  queue_conf_defaults(q);
  return (q->name = strdup(name)) ? 0 : -ENOMEM;
}

/* Writes q (read by queue_read) with its event; hands it to *out (may be
 * NULL) on success. */
static int queue_write(store_t *s, queue_conf_t *q, const char *type, queue_conf_t *out) {
  int rc = store_queue_set(s, q);
  if (!rc) rc = queue_event(s, q->name, type, NULL);
  if (rc || !out) {
    queue_conf_release(q);
    return rc;
  }
  *out = *q;
  return 0;
}

int queues_set(store_t *s, const char *name, const queues_settings_t *set, queue_conf_t *out) {
  queue_conf_t q;
  int rc = queue_read(s, name, 1, &q);
  if (rc) {
    queue_conf_release(&q);
    return rc;
  }
  queues_settings_apply(set, &q);
  return queue_write(s, &q, "queue.updated", out);
}

int queues_pause(store_t *s, const char *name, int pause, queue_conf_t *out) {
  queue_conf_t q;
  int rc = queue_read(s, name, 0, &q);
  if (rc) {
    queue_conf_release(&q);
    return rc;
  }
  q.paused = pause;
  return queue_write(s, &q, pause ? "queue.paused" : "queue.resumed", out);
}

int queues_delete(store_t *s, const char *name) {
  int rc = store_queue_delete(s, name);
  return rc ? rc : queue_event(s, name, "queue.deleted", NULL);
}

int queues_requeue(store_t *s, const char *name, const queue_filter_t *f, int64_t due_ms,
                   int64_t now_ms, int64_t *count) {
  int rc = store_queue_requeue(s, name, f, due_ms, now_ms, count);
  return rc ? rc
            : queue_event(s, name, "queue.requeued", json_pack("{s:I}", "count", (json_int_t)*count));
}

int queues_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                 int64_t *count) {
  int rc = store_queue_purge(s, name, f, now_ms, count);
  return rc ? rc
            : queue_event(s, name, "queue.purged", json_pack("{s:I}", "count", (json_int_t)*count));
}
