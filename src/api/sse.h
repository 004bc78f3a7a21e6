/* Server-Sent Events of the store's event log (api/sse.c).
 *
 * Loop thread only. The hub is owned by app (app->sse); sse_hub_stop ends
 * every stream and frees the hub once its timer is closed.
 */
#ifndef SPIDERD_API_SSE_H
#define SPIDERD_API_SSE_H

#include "app.h"

typedef struct sse_hub sse_hub_t;

int sse_hub_init(app_t *app, sse_hub_t **out);
void sse_hub_stop(sse_hub_t *h);

/* Answers req with an event stream. Query: after (event id), type (a type
 * prefix such as "job."), schedule, job; a Last-Event-ID header takes
 * precedence over after. Returns 0 (the stream is on, or the client is
 * already gone), or SPD_EBADPARAM / SPD_ESHUTDOWN / -ENOMEM with a reason
 * in err and nothing sent. */
int sse_hub_open(sse_hub_t *h, http_req_t *req, char *err, size_t errlen);

#endif
