/* The event log: one row per change worth telling (a job queued, started,
 * ended or retried; a schedule created; a run missed ...), appended in the
 * transaction of the change it records, read by the SSE hub, the webhook
 * deliverer and GET /api/v1/events on every node.
 *
 * Ownership: an event_t owns its type and data; event_release frees them
 * (not the struct), event_list_release frees the array too.
 */
#ifndef SPIDERD_CORE_EVENT_H
#define SPIDERD_CORE_EVENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct event {
  int64_t id;         /* increasing: the cursor of /api/v1/events */
  int64_t ts_ms;
  char *type;         /* "schedule.created", "job.finished", "run.missed", ... */
  int64_t schedule_id;
  int64_t job_id;
  json_t *data;       /* object or NULL */
} event_t;

typedef struct event_list {
  event_t *v;
  size_t n;
} event_list_t;

void event_release(event_t *e);
void event_list_release(event_list_t *l);

#endif
