/* Rendering shared by the API faces: Python-compatible JSON, Scrapyd's time
 * format and job listings.
 *
 * Ownership: every char* returned is malloc'd (caller frees); json_t*
 * returned carry one reference for the caller.
 */
#ifndef SPIDERD_API_RENDER_H
#define SPIDERD_API_RENDER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "core/job.h"
#include "store/store.h"

/* json.dumps(o) + "\n" as Python writes it: ", " and ": " separators,
 * non-ASCII as lower-case \uXXXX. *len gets the length. NULL on failure. */
char *render_json(const json_t *o, size_t *len);

/* One JSON string literal ("..." with Python's escapes). */
char *render_json_string(const char *s);

/* Python's str(datetime) of naive local time: "YYYY-MM-DD HH:MM:SS.ffffff",
 * without the fraction when it is zero; micro = 0 always omits it. */
void render_time(int64_t ms, int micro, char out[32]);

/* Python's str(timedelta) without the fraction: "H:MM:SS", "2 days, H:MM:SS". */
void render_runtime(int64_t ms, char out[32]);

/* Reads Scrapyd's three job lists (for one project, or all when NULL):
 * lists[0] pending, lists[1] running, lists[2] ended (started jobs only, as
 * Scrapyd's "finished"). Runs on a store thread. */
int render_read_jobs(store_t *s, const char *project, job_list_t lists[3]);

/* Adds spiderd's fields of an ended job to o: exit_code, signal, stats
 * (items, requests, responses, errors, finish_reason, elapsed), end_reason
 * ("timeout", "heartbeat" or null: why the daemon ended it) and the retry
 * policy fields every listjobs entry has (attempt, max_retries, retry_of,
 * timeout, not_before). */
void render_job_end(json_t *o, const job_t *j);

/* Scrapyd's listjobs object (pending, running, finished) plus spiderd's
 * fields, from lists[0] pending, lists[1] running, lists[2] finished.
 * log_url / items_url are set only when the file exists now (stat). */
/* listjobs.json's whole answer: {"pending": [...], "running": [...],
 * "finished": [...], "status": "ok", "node_name": ...} as render_json
 * writes it, newline included; releases each job of lists once written.
 * NULL when out of memory. */
char *render_listjobs_text(const config_t *cfg, job_list_t lists[3], const char *node_name,
                           size_t *len);

/* "/logs/P/S/J.log" or "/items/P/S/J.jl" when that file exists, else NULL. */
char *render_log_url(const config_t *cfg, const job_t *j);
char *render_items_url(const config_t *cfg, const job_t *j);

#endif
