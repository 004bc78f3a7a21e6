/* The event log: one row per change worth telling (a job queued, started,
 * ended or retried; a schedule created; a run missed ...), appended in the
 * transaction of the change it records, read by the SSE hub, the webhook
 * deliverer and GET /api/v1/events on every node.
 *
 * Ownership: an event_t owns its type and data; event_release frees them
 * (not the struct), event_list_release frees the array too. The type names
 * and the table of event types are static: nothing to free.
 */
#ifndef SPIDERD_CORE_EVENT_H
#define SPIDERD_CORE_EVENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Every event type spiderd records, each once: X(ID, "type", "meaning").
 * This list is the one source of the types: the console's build reads it
 * (ui/build.mjs), tests/unit/test_event.c holds the OpenAPI document's enum
 * and the table in docs/api.md to it, and tests/events.sh fails on a type
 * written in src/ that is not here. Keep one entry a line, as those readers
 * expect; a meaning says what happened, in one line, without a '"'. */
#define EVENT_TYPES(X) \
  X(JOB_QUEUED, "job.queued", "a job was queued (by a call, a schedule's run or a retry)") \
  X(JOB_STARTED, "job.started", "a job's process was started on a node") \
  X(JOB_FINISHED, "job.finished", "a job ended well: its process exited 0 (or its crawl said it finished)") \
  X(JOB_FAILED, "job.failed", "a job ended badly: an exit status or signal, a timeout, or no start at all") \
  X(JOB_CANCELLED, "job.cancelled", "a pending or running job was cancelled (its reason 'upstream JOBID STATE' when a job it waited for did not finish)") \
  X(JOB_LOST, "job.lost", "a running job vanished: its node stopped heartbeating, or restarted without it") \
  X(JOB_TIMEOUT, "job.timeout", "a job ran past its timeout and was stopped; its job.failed follows") \
  X(JOB_RETRIED, "job.retried", "a failed or lost job was queued again, as a new job") \
  X(JOB_HISTORY_UPDATED, "job.history_updated", "an ended job's note or state was changed by a review (before and after, and who)") \
  X(JOB_DEGRADED, "job.degraded", "an ended job yielded clearly less or worse than the runs like it (its reasons say how)") \
  X(JOB_BROKEN, "job.broken", "an ended job failed, or yielded nothing or next to nothing of what the runs like it did") \
  X(JOB_PAUSED, "job.paused", "a running job stopped with its state kept, to be resumed (its segments so far)") \
  X(JOB_RESUMED, "job.resumed", "a paused job was queued again, to go on from its state") \
  X(RUN_MISSED, "run.missed", "a schedule's run was not fired in time and will not be") \
  X(RUN_SKIPPED, "run.skipped", "a schedule's run was skipped: its overlap policy, a pause, or one of its calendars") \
  X(SCHEDULE_CREATED, "schedule.created", "a schedule was created") \
  X(SCHEDULE_UPDATED, "schedule.updated", "a schedule was changed") \
  X(SCHEDULE_PAUSED, "schedule.paused", "a schedule was paused") \
  X(SCHEDULE_RESUMED, "schedule.resumed", "a paused schedule was resumed") \
  X(SCHEDULE_DELETED, "schedule.deleted", "a schedule was deleted") \
  X(QUEUE_UPDATED, "queue.updated", "a task queue's settings were set") \
  X(QUEUE_PAUSED, "queue.paused", "a task queue was paused") \
  X(QUEUE_RESUMED, "queue.resumed", "a paused task queue was resumed") \
  X(QUEUE_REQUEUED, "queue.requeued", "a task queue's elements were made due again") \
  X(QUEUE_PURGED, "queue.purged", "a task queue's elements were removed") \
  X(QUEUE_DELETED, "queue.deleted", "a task queue was deleted") \
  X(VERSION_ADDED, "version.added", "a project's version (an egg) was added") \
  X(VERSION_DELETED, "version.deleted", "a project's version was deleted") \
  X(PROJECT_DELETED, "project.deleted", "a project was deleted with all its versions") \
  X(USER_CREATED, "user.created", "a user was created") \
  X(USER_UPDATED, "user.updated", "a user was changed") \
  X(USER_DELETED, "user.deleted", "a user was deleted") \
  X(USER_UPDATE_REFUSED, "user.update_refused", "a change to a user that would leave no admin was refused") \
  X(USER_DELETE_REFUSED, "user.delete_refused", "deleting the last admin user was refused") \
  X(TOKEN_CREATED, "token.created", "an API token was created") \
  X(TOKEN_REVOKED, "token.revoked", "an API token was revoked") \
  X(TOKEN_REVOKE_REFUSED, "token.revoke_refused", "revoking the last admin token was refused") \
  X(ACCOUNT_CREATED, "account.created", "an account was created") \
  X(ACCOUNT_UPDATED, "account.updated", "an account's description or job limit was changed") \
  X(ACCOUNT_DELETED, "account.deleted", "an account was deleted") \
  X(ACCOUNT_ASSIGNED, "account.assigned", "a project, user or token was put in an account") \
  X(ACCOUNT_UNASSIGNED, "account.unassigned", "a project, user or token was taken out of an account") \
  X(BACKFILL_STARTED, "backfill.started", "a backfill of a schedule over a past window started") \
  X(BACKFILL_PAUSED, "backfill.paused", "a backfill was paused: no new run of it starts") \
  X(BACKFILL_RESUMED, "backfill.resumed", "a paused backfill was resumed") \
  X(BACKFILL_FINISHED, "backfill.finished", "a backfill ended: all its runs ended, or it was cancelled") \
  X(CALENDAR_CREATED, "calendar.created", "an exclusion calendar was created") \
  X(CALENDAR_UPDATED, "calendar.updated", "an exclusion calendar was changed") \
  X(CALENDAR_DELETED, "calendar.deleted", "an exclusion calendar was deleted")

/* EV_JOB_QUEUED is "job.queued", and so on: the names to record events by. */
#define EVENT_DECLARE_(id, name, meaning) extern const char EV_##id[];
EVENT_TYPES(EVENT_DECLARE_)
#undef EVENT_DECLARE_

typedef struct event_type {
  const char *name;    /* "job.queued" */
  const char *meaning; /* one line, for people */
} event_type_t;

/* The table of every type, in EVENT_TYPES' order; *n gets its length. */
const event_type_t *event_types(size_t *n);

/* 1 when type is one of EVENT_TYPES, else 0 (NULL included). */
int event_type_valid(const char *type);

typedef struct event {
  int64_t id;         /* increasing: the cursor of /api/v1/events */
  int64_t ts_ms;
  char *type;         /* one of EVENT_TYPES */
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
