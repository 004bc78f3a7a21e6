/* JSON-RPC 2.0 over HTTP POST at /api/v1/jsonrpc, onto the operations of
 * api/ops.h: single calls, batches (at most JSONRPC_BATCH_MAX calls) and
 * notifications. Every error carries spiderd's registry code in
 * error.data.code (e.g. "SPD_ENOJOB") and the details in error.data.details.
 * Sneakpeek's method names go to its face (api/sneakpeek.h), which answers
 * in Sneakpeek's shapes and error codes; the dotted names to api/ops.h.
 *
 * Loop thread only.
 */
#ifndef SPIDERD_API_JSONRPC_H
#define SPIDERD_API_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#include "app.h"

#define JSONRPC_BATCH_MAX 100

/* Handles one POST (the caller has checked the method and added CORS). */
void jsonrpc_handle(app_t *app, http_req_t *req);

typedef struct jsonrpc_call {
  const char *method;  /* borrowed from the request object */
  json_t *params;      /* borrowed; NULL when absent */
  json_t *id;          /* borrowed; NULL for a notification, json null allowed */
} jsonrpc_call_t;

/* Checks one request object of the envelope (not its params' contents).
 * 0 and *out, or SPD_EBADREQUEST with a message in err; out->id is then
 * the id when it could be read (for the error response), else NULL. */
int jsonrpc_check(const json_t *req, jsonrpc_call_t *out, char *err, size_t errlen);

#endif
