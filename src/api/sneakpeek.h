/* Sneakpeek's JSON-RPC API (its version 0.2) at /api/v1/jsonrpc, beside
 * spiderd's own dotted methods: get_scrapers, get_scraper, create_scraper,
 * update_scraper, delete_scraper, enqueue_scraper, get_task_instances,
 * get_task_instance, get_task_logs, get_scraper_handlers, get_schedules,
 * get_priorities, is_read_only, run_ephemeral, and set_scraper_state (a
 * running crawl's, with its job token).
 *
 * A Sneakpeek scraper is a schedule; its handler is a spider named
 * PROJECT/SPIDER; a task is a job. Each method is an operation (api/ops.h)
 * of this face's own table: the same validation, roles and store paths as
 * the native ones, answered in Sneakpeek's shapes and error codes.
 *
 * Loop thread only. Ownership: the error object returned is the caller's.
 */
#ifndef SPIDERD_API_SNEAKPEEK_H
#define SPIDERD_API_SNEAKPEEK_H

#include <jansson.h>

#include "api/ops.h"

/* The operation of Sneakpeek's method name, or NULL when it is none. */
const op_def_t *sneakpeek_find(const char *method);

/* 1 when a job's token may call def (the crawl's own state). */
int sneakpeek_for_jobs(const op_def_t *def);

/* The JSON-RPC error object of a failed Sneakpeek call: Sneakpeek's code
 * and message where it has one (5000 scraper not found, 5001 task not
 * found, 10000 concurrent execution, 10004 unknown task handler), else
 * spiderd's; spiderd's code, message and details under data. */
json_t *sneakpeek_error(const op_def_t *def, const op_result_t *r);

#endif
