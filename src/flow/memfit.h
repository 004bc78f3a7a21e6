/* Slots by memory: what a job is expected to need, so that a node starts
 * it only when that fits in its free memory (run/memory.h says what is
 * free). A job's expected memory is its memory limit (its own
 * _memory_limit, else [spiderd] job_memory_limit), else the highest peak
 * of its spider's recent runs (the peak_memory_bytes of their stats), else
 * [spiderd] job_memory_default.
 *
 * Ownership: nothing here allocates what the caller keeps.
 */
#ifndef SPIDERD_FLOW_MEMFIT_H
#define SPIDERD_FLOW_MEMFIT_H

#include <stdint.h>

#include "config.h"
#include "core/job.h"
#include "store/store.h"

/* A node's memory for crawls, now (run/launcher.c measures it). */
typedef struct memfit_node {
  int64_t available;  /* bytes free on the machine, or under the daemon's cgroup */
  const char *source; /* "meminfo" or "cgroup"; NULL = unreadable */
  int64_t reserve;    /* memory_reserve */
  int64_t reserved;   /* the crawls here: each the larger of its expected memory and its peak */
  int64_t free;       /* what one more job may take: available less the reserve and
                       * what the crawls are expected to use still; no more than
                       * jobs_memory less reserved when that is set; >= 0 */
  int64_t waiting;    /* the least expected memory of a job left for want of it; 0 = none */
} memfit_node_t;
/* Runs of a spider whose peaks are looked at. */
#define MEMFIT_RECENT 5

/* j's expected memory in bytes into *out (on a store thread). */
int memfit_expected(store_t *s, const config_t *cfg, const job_t *j, int64_t *out);

/* The highest peak_memory_bytes among the last MEMFIT_RECENT ended runs of
 * project/spider into *out (0 = none known). */
int memfit_recent_peak(store_t *s, const char *project, const char *spider, int64_t *out);

#endif
