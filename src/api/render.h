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
#include "strbuf.h"

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

/* Adds spiderd's fields of an ended job to o: exit_code, signal, stats
 * (items, requests, responses, errors, finish_reason, elapsed), end_reason
 * ("timeout", "heartbeat" or null: why the daemon ended it) and the retry
 * policy fields every listjobs entry has (attempt, max_retries, retry_of,
 * timeout, not_before). */
void render_job_end(json_t *o, const job_t *j);

/* listjobs.json's answer in the pieces a streamed listing writes
 * (api/listing.h): {"pending": [...], "running": [...], "finished": [...],
 * "status": "ok", "node_name": ...} plus a newline, as render_json writes
 * it. group 0 pending, 1 running, 2 finished (JOB_GROUP_*): _open before a
 * group's first entry; _row the entry of job j, the i-th of its group (from
 * 0), with Scrapyd's fields and spiderd's (log_url / items_url only when
 * the file exists now: a stat); _tail after the last group. A failed
 * append sets b->failed. Any thread. */
void render_listjobs_open(int group, strbuf_t *b);
void render_listjobs_row(const config_t *cfg, int group, size_t i, const job_t *j, strbuf_t *b);
void render_listjobs_tail(const char *node_name, strbuf_t *b);

/* "/logs/P/S/J.log" or "/items/P/S/J.jl" when that file exists, else NULL. */
char *render_log_url(const config_t *cfg, const job_t *j);
char *render_items_url(const config_t *cfg, const job_t *j);

#endif
