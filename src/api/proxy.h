/* Files of jobs that ran on another node of a shared store. */
#ifndef SPIDERD_API_PROXY_H
#define SPIDERD_API_PROXY_H

#include "app.h"

/* Serves root/rel as http_serve_tree does (url_path: the request's path);
 * on a shared store a job's file that is not here is fetched from the node
 * that ran the job (its status and content type passed on; 502 when that
 * node does not answer). A request already proxied is never proxied again. */
void api_proxy_serve(app_t *app, http_req_t *req, const char *root, const char *rel,
                     const char *url_path);

#endif
