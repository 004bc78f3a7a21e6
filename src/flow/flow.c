#include "flow/flow.h"

#include <errno.h>

void flow_dispatch(const flow_hooks_t *h) {
  if (h->dispatch) h->dispatch(h->launcher);
}

int flow_signal(const flow_hooks_t *h, const char *project, const char *jobid, int sig,
                int *found) {
  *found = 0;
  return h->signal ? h->signal(h->launcher, project, jobid, sig, found) : 0;
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
