/* Grepsr's scheduler calls at /api/v1/jsonrpc (OneTimeRun, Schedule,
 * GetTaskStatus, ...): each is one of spiderd's operations (api/ops.h)
 * under Grepsr's name, with parameters in spiderd's own words (docs/api.md,
 * "Grepsr's calls"). A call only renames parameters and adds the fixed ones
 * it stands for (GetActiveTasksV2 is jobs.list of pending and running
 * jobs), so the native op's validation, roles, project limits and answer
 * are the call's.
 *
 * The native op is looked up by name when called: a call whose op this
 * node lacks, or that spiderd cannot do at all, is a clear "not available"
 * (JSON-RPC -32601) naming what is missing.
 *
 * Loop thread only.
 */
#ifndef SPIDERD_API_GREPSR_H
#define SPIDERD_API_GREPSR_H

#include <jansson.h>
#include <stddef.h>

#include "api/ops.h"

/* 1 when method is one of Grepsr's calls. */
int grepsr_is(const char *method);

/* Turns a Grepsr call's params (the caller's, changed in place) into those
 * of its native op: 0 and *def, or SPD_ENOROUTE (not available here) /
 * SPD_EBADPARAM with a message in err and *details (the caller's). */
int grepsr_map(const char *method, json_t *params, const op_def_t **def, char *err,
               size_t errlen, json_t **details);

#endif
