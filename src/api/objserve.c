/* See objserve.h. */
#include "api/objserve.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/proxy.h"
#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "net/s3.h"

int api_objstore_fetch(const s3_t *s3, const char *key, int64_t off, int64_t len) {
  int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  s3_res_t r;
  int64_t total = 0;
  int rc = 0;
  if (off < 0) { /* from the end: the size first */
    rc = s3_read_joined(s3, key, 0, 0, fd, &total, &r);
    off = total + off < 0 ? 0 : total + off;
  }
  if (!rc && lseek(fd, off, SEEK_SET) < 0) rc = -errno;
  if (!rc) rc = s3_read_joined(s3, key, off, len, fd, &total, &r);
  if (!rc && ftruncate(fd, total)) rc = -errno;
  if (rc) {
    if (rc != -ENOENT) log_warn("objstore", "%s", r.err[0] ? r.err : strerror(-rc));
    close(fd);
    return -1;
  }
  return fd;
}

typedef struct serve {
  app_t *app;
  http_req_t *req;
  char *key, *root, *rel, *url_path;
  int64_t off, len; /* the range asked; len -1: to the end */
  int ranged, suffix;
  int fd;
  int64_t total;
  uv_work_t work;
} serve_t;

static void serve_free(serve_t *s) {
  free(s->key);
  free(s->root);
  free(s->rel);
  free(s->url_path);
  free(s);
}

/* One range of the forms bytes=A-B, bytes=A- and bytes=-N; else the whole
 * file (as Twisted does with what it does not understand). */
static void parse_range(serve_t *s, const char *h) {
  long long a = -1, b = -1;
  if (!h || strncmp(h, "bytes=", 6) || strchr(h, ',')) return;
  if (h[6] == '-' && sscanf(h + 7, "%lld", &b) == 1 && b > 0) {
    s->ranged = s->suffix = 1;
    s->off = -b;
    s->len = b;
  } else if (sscanf(h + 6, "%lld-%lld", &a, &b) >= 1 && a >= 0 && (b < 0 || b >= a)) {
    s->ranged = 1;
    s->off = a;
    s->len = b < 0 ? -1 : b - a + 1;
  }
}

static void fetch_work(uv_work_t *w) {
  serve_t *s = w->data;
  s->fd = api_objstore_fetch(s->app->s3, s->key, s->off, s->len);
  struct stat st;
  s->total = s->fd >= 0 && !fstat(s->fd, &st) ? st.st_size : 0;
}

static void fetch_done(uv_work_t *w, int status) {
  serve_t *s = w->data;
  if (status || s->fd < 0) { /* not in the store: the node that ran it */
    api_proxy_node(s->app, s->req, s->root, s->rel, s->url_path);
    serve_free(s);
    return;
  }
  int64_t off = s->off < 0 ? (s->total + s->off < 0 ? 0 : s->total + s->off) : s->off;
  if (s->ranged && off >= s->total && !(s->suffix && s->total == 0)) {
    char cr[64];
    snprintf(cr, sizeof(cr), "bytes */%" PRId64, s->total);
    http_reply_header(s->req, "Content-Range", cr);
    close(s->fd);
    http_reply(s->req, 416, "text/plain", "", 0);
    serve_free(s);
    return;
  }
  int64_t len = s->len < 0 || off + s->len > s->total ? s->total - off : s->len;
  http_reply_header(s->req, "Accept-Ranges", "bytes");
  if (s->ranged) {
    char cr[96];
    snprintf(cr, sizeof(cr), "bytes %" PRId64 "-%" PRId64 "/%" PRId64, off, off + len - 1,
             s->total);
    http_reply_header(s->req, "Content-Range", cr);
  }
  http_reply_fd(s->req, s->ranged ? 206 : 200, "text/plain", s->fd, (uint64_t)off,
                (uint64_t)len);
  serve_free(s);
}

void api_objstore_serve(app_t *app, http_req_t *req, const char *root, const char *rel,
                        const char *url_path) {
  serve_t *s = calloc(1, sizeof(*s));
  const char *mount = !strncmp(url_path, "/items", 6) ? "items" : "logs";
  if (!s || asprintf(&s->key, "%s/%s", mount, rel) < 0 || !(s->root = strdup(root)) ||
      !(s->rel = strdup(rel)) || !(s->url_path = strdup(url_path))) {
    if (s) serve_free(s);
    http_reply(req, 500, "text/plain", "out of memory\n", 14);
    return;
  }
  s->app = app;
  s->req = req;
  s->fd = -1;
  s->len = -1;
  parse_range(s, http_req_header(req, "Range"));
  s->work.data = s;
  /* A directory's listing stays the local one. */
  size_t n = strlen(rel);
  if (!n || rel[n - 1] == '/' ||
      uv_queue_work(app->loop, &s->work, fetch_work, fetch_done)) {
    api_proxy_node(app, req, root, rel, url_path);
    serve_free(s);
  }
}

void api_objstore_metrics(s3_t *s3, strbuf_t *b) {
  pthread_mutex_lock(&s3->status.mu);
  s3_status_t st = s3->status;
  pthread_mutex_unlock(&s3->status.mu);
  int64_t now = clock_wall_ms();
  metrics_family(b, "spiderd_object_store_backlog_bytes", "gauge",
                 "Bytes of logs and items written on this node and not yet in the object "
                 "store.");
  metrics_sample(b, "spiderd_object_store_backlog_bytes", NULL, 0, (double)st.backlog_bytes);
  metrics_family(b, "spiderd_object_store_backlog_objects", "gauge",
                 "Log and items files of this node with bytes waiting for the object store.");
  metrics_sample(b, "spiderd_object_store_backlog_objects", NULL, 0,
                 (double)st.backlog_objects);
  metrics_family(b, "spiderd_object_store_oldest_seconds", "gauge",
                 "Age of the oldest byte waiting for the object store (0: none waits).");
  metrics_sample(b, "spiderd_object_store_oldest_seconds", NULL, 0,
                 st.oldest_ms && now > st.oldest_ms ? (double)(now - st.oldest_ms) / 1000.0 : 0);
  metrics_family(b, "spiderd_object_store_failures_total", "counter",
                 "Requests to the object store that failed (each retry counts).");
  metrics_sample(b, "spiderd_object_store_failures_total", NULL, 0, (double)st.failures);
}

void api_objstore_problem(s3_t *s3, char *out, size_t outlen) {
  pthread_mutex_lock(&s3->status.mu);
  snprintf(out, outlen, "%s", s3->status.problem);
  pthread_mutex_unlock(&s3->status.mu);
}
