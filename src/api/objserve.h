/* Logs and items of jobs whose files are not on this node's disk, read
 * from the object store ([spiderd] object_store; run/objstore.h puts them
 * there): for /logs/ and /items/ (with Range) and the REST log and items
 * endpoints. */
#ifndef SPIDERD_API_OBJSERVE_H
#define SPIDERD_API_OBJSERVE_H

#include <stdint.h>

#include "app.h"
#include "strbuf.h"

/* Blocking (the thread pool): a temporary file as long as the object key
 * (logs/P/S/J.log, or its parts joined), holding bytes [off, off+len) at
 * their own offsets (a sparse file elsewhere); off < 0 counts from the
 * end. The fd, or -1 when the store has no such object or does not
 * answer. */
int api_objstore_fetch(const struct s3 *s3, const char *key, int64_t off, int64_t len);

/* Serves mount ("logs" or "items") / rel from the object store, with a
 * Range; when the store has no such file, api_proxy_node goes on. */
void api_objstore_serve(app_t *app, http_req_t *req, const char *root, const char *rel,
                        const char *url_path);

/* /metrics: spiderd_object_store_backlog_bytes, _backlog_objects,
 * _oldest_seconds and _failures_total. */
void api_objstore_metrics(struct s3 *s3, strbuf_t *b);
/* /readyz's detail: the store's last failure while it fails, else "". */
void api_objstore_problem(struct s3 *s3, char *out, size_t outlen);

#endif
