/* What a job is expected to need (flow/memfit.h). */
#include "flow/memfit.h"

#include <jansson.h>

#include "core/limits.h"

int memfit_recent_peak(store_t *s, const char *project, const char *spider, int64_t *out) {
  job_list_t l = {0};
  job_filter_t f = {.project = project, .spider = spider,
                    .states = 1u << JOB_FINISHED | 1u << JOB_FAILED, .started_only = 1,
                    .newest_first = 1, .ended_first = 1, .limit = MEMFIT_RECENT};
  int rc = store_jobs_list(s, &f, &l);
  *out = 0;
  for (size_t i = 0; !rc && i < l.n; i++) {
    json_t *v = json_object_get(l.v[i].stats, "peak_memory_bytes");
    int64_t peak = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
    if (peak > *out) *out = peak;
  }
  job_list_release(&l);
  return rc;
}

int memfit_expected(store_t *s, const config_t *cfg, const job_t *j, int64_t *out) {
  job_limits_t defaults = {.memory = cfg->job_memory_limit}, lim;
  char why[128];
  /* A bad limit was refused when the job was queued; were one stored, the
   * crawl fails at its start anyway: it is expected to need no more. */
  if (!limits_resolve(j->args, &defaults, &lim, why, sizeof(why)) && lim.memory > 0) {
    *out = lim.memory;
    return 0;
  }
  int rc = memfit_recent_peak(s, j->project, j->spider, out);
  if (!rc && *out <= 0) *out = cfg->job_memory_default;
  return rc;
}
