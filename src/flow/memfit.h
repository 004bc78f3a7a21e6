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

/* Runs of a spider whose peaks are looked at. */
#define MEMFIT_RECENT 5

/* j's expected memory in bytes into *out (on a store thread). */
int memfit_expected(store_t *s, const config_t *cfg, const job_t *j, int64_t *out);

/* The highest peak_memory_bytes among the last MEMFIT_RECENT ended runs of
 * project/spider into *out (0 = none known). */
int memfit_recent_peak(store_t *s, const char *project, const char *spider, int64_t *out);

#endif
