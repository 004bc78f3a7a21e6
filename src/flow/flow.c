#include "flow/flow.h"

#include <errno.h>

#include "metrics.h"

void flow_dispatch(const flow_hooks_t *h) {
  if (h->dispatch) h->dispatch(h->launcher);
}

int flow_signal(const flow_hooks_t *h, const char *project, const char *jobid, int sig,
                int *found) {
  *found = 0;
  return h->signal ? h->signal(h->launcher, project, jobid, sig, found) : 0;
}

int flow_after_ends(const flow_hooks_t *h, void (*cb)(void *ud), void *ud) {
  return h->after_ends && h->after_ends(h->launcher, cb, ud) == 0 ? 0 : 1;
}

int flow_running_here(const flow_hooks_t *h, int64_t id) {
  return h->running_here ? h->running_here(h->launcher, id) : 0;
}

void flow_schedules_changed(const flow_hooks_t *h) {
  if (h->schedules_changed) h->schedules_changed(h->scheduler);
}

int64_t flow_last_beat(const flow_hooks_t *h) {
  return h->last_beat ? h->last_beat(h->cluster) : 0;
}

int flow_drain(const flow_hooks_t *h, int on) {
  return h->drain ? h->drain(h->node, on) : -ENOTSUP;
}

void flow_apply(const flow_hooks_t *h, const flow_change_t *c) {
  job_counters_t *n = h->counters;
  if (n) {
    n->pending += c->queued - c->unqueued;
    if (n->pending < 0) n->pending = 0;
    n->finished += c->finished;
    if (n->finished < 0) n->finished = 0;
    if (c->has_pending) n->pending = c->pending_count;
    if (c->has_finished) n->finished = c->finished_count;
  }
  if (c->queued > 0 && h->metrics) metrics_inc(h->metrics, &h->metrics->jobs_queued, (uint64_t)c->queued);
  if (c->schedules) flow_schedules_changed(h);
  if (c->woken && h->dispatch_due) h->dispatch_due(h->launcher);
  else if (c->dispatch) flow_dispatch(h);
}

void flow_running(const flow_hooks_t *h, int64_t n) {
  if (h->counters) h->counters->running = n;
}

int64_t flow_pending(const flow_hooks_t *h) { return h->counters ? h->counters->pending : 0; }

int flow_pause(const flow_hooks_t *h, const char *project, const char *jobid, int *found) {
  *found = 0;
  return h->pause ? h->pause(h->launcher, project, jobid, found) : 0;
}
