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

/* api_proxy_serve without the object store: local, else the job's node. */
void api_proxy_node(app_t *app, http_req_t *req, const char *root, const char *rel,
                    const char *url_path);

/* GETs path (with its query) from another node of the shared store: looks
 * its url up, fetches with this node's credentials on the thread pool,
 * and calls cb(ud, rc, http_status, body, len) once on the loop (rc
 * -ENOENT: no such node; SPD_ENOFILE: it did not answer; body is
 * NUL-terminated and only borrowed). 0, or the reason cb never runs. */
typedef void (*api_fetch_cb)(void *ud, int rc, long status, const char *body, size_t len);
int api_proxy_get(app_t *app, const char *node, const char *path, api_fetch_cb cb, void *ud);

#endif
