/* /logs/ and /items/ of jobs that ran on another node: logs and items stay
 * on the node that ran the job, and any node serves them by fetching them
 * from it (api/proxy.h). The file is copied into an unlinked temporary file
 * on the thread pool (libcurl, blocking there), then sent like a local one,
 * so a large log costs disk, not memory. */
#include "api/proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/objserve.h"
#include "clock.h"
#include "error.h"
#include "net/curl_lazy.h"
#include "log.h"

#define PROXY_HEADER "X-Spiderd-Proxied"

typedef struct proxy {
  app_t *app;
  http_req_t *req;
  char *project, *jobid;
  char *rel;      /* the path under the mount */
  char *url_path; /* the request's path, e.g. "/logs/p/s/j.log" */
  char *root;    /* the local directory of the mount */
  char *node;    /* the job's node */
  char *url;     /* the full upstream URL */
  uv_work_t work;
  api_fetch_cb cb; /* api_proxy_get: the body goes to cb, not to req */
  void *ud;
  int fd;
  long status;
  char ctype[128];
  char err[CURL_ERROR_SIZE + 64];
} proxy_t;

static void proxy_free(proxy_t *p) {
  if (p->fd >= 0) close(p->fd);
  free(p->project);
  free(p->jobid);
  free(p->rel);
  free(p->url_path);
  free(p->root);
  free(p->node);
  free(p->url);
  free(p);
}

static void local(proxy_t *p) {
  http_serve_tree(p->req, p->root, p->rel, p->url_path);
  proxy_free(p);
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud) {
  proxy_t *p = ud;
  size_t len = size * n;
  if (len > 13 && !strncasecmp(buf, "Content-Type:", 13)) {
    const char *v = buf + 13;
    while (*v == ' ') v++;
    size_t vl = len - (size_t)(v - buf);
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n')) vl--;
    if (vl >= sizeof(p->ctype)) vl = sizeof(p->ctype) - 1;
    memcpy(p->ctype, v, vl);
    p->ctype[vl] = '\0';
  }
  return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud) {
  proxy_t *p = ud;
  size_t len = size * n, off = 0;
  while (off < len) {
    ssize_t w = write(p->fd, buf + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      return 0; /* curl fails the transfer */
    }
    off += (size_t)w;
  }
  return len;
}

static void fetch_work(uv_work_t *w) {
  proxy_t *p = w->data;
  if (curl_lazy_load(p->err, sizeof(p->err))) return;
  p->fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (p->fd < 0) {
    snprintf(p->err, sizeof(p->err), "no temporary file: %s", strerror(errno));
    return;
  }
  CURL *h = curl_easy_init();
  if (!h) {
    snprintf(p->err, sizeof(p->err), "libcurl failed to start");
    return;
  }
  char cerr[CURL_ERROR_SIZE] = "";
  struct curl_slist *hdrs = curl_slist_append(NULL, PROXY_HEADER ": 1");
  curl_easy_setopt(h, CURLOPT_URL, p->url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, p);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, p);
  /* Another node's HTTPS certificate may come from a private CA: libcurl
   * has its own bundle path, so honour the variables OpenSSL programs and
   * the curl tool read. */
  const char *ca = getenv("CURL_CA_BUNDLE");
  if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
  if (ca && *ca) curl_easy_setopt(h, CURLOPT_CAINFO, ca);
  /* Nodes of one cluster share their Scrapyd credentials, or else the
   * job secret in the store, which signs a node token for this path. */
  const config_t *cfg = &p->app->cfg;
  char userpwd[512], bearer[160];
  if (cfg->username[0] && cfg->password[0]) {
    snprintf(userpwd, sizeof(userpwd), "%s:%s", cfg->username, cfg->password);
    curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
  } else if (!auth_node_token(p->app->job_secret, p->url_path, clock_wall_ms(), bearer + 22)) {
    memcpy(bearer, "Authorization: Bearer ", 22);
    hdrs = curl_slist_append(hdrs, bearer);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  }
  CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK)
    snprintf(p->err, sizeof(p->err), "%s", cerr[0] ? cerr : curl_easy_strerror(rc));
  else
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &p->status);
  curl_easy_cleanup(h);
  curl_slist_free_all(hdrs);
}

/* api_proxy_get's end: the body read back from the temporary file. */
static void get_done(proxy_t *p, int status) {
  struct stat st;
  char *body = NULL;
  size_t len = 0;
  int rc = status ? status : p->err[0] || !p->status ? SPD_ENOFILE : 0;
  if (!rc && (fstat(p->fd, &st) || !(body = malloc((size_t)st.st_size + 1)))) rc = -ENOMEM;
  if (!rc) {
    len = (size_t)st.st_size;
    if (pread(p->fd, body, len, 0) != (ssize_t)len) rc = -EIO;
    else body[len] = '\0';
  }
  if (rc && p->err[0])
    log_warn("webservice", "%s from node '%s': %s", p->url, p->node, p->err);
  p->cb(p->ud, rc, rc ? 0 : p->status, rc ? NULL : body, rc ? 0 : len);
  free(body);
  proxy_free(p);
}

static void fetch_done(uv_work_t *w, int status) {
  proxy_t *p = w->data;
  if (p->cb) {
    get_done(p, status);
    return;
  }
  if (status || p->err[0] || !p->status) {
    char msg[sizeof(p->err) + 256];
    int n = snprintf(msg, sizeof(msg), "the file is on node '%s', which did not answer: %s\n",
                     p->node, status ? uv_strerror(status) : p->err);
    log_warn("webservice", "%s from node '%s' (%s): %s", p->url_path, p->node, p->url, p->err);
    http_reply(p->req, 502, "text/plain", msg, (size_t)n);
    proxy_free(p);
    return;
  }
  struct stat st;
  uint64_t size = fstat(p->fd, &st) ? 0 : (uint64_t)st.st_size;
  int fd = p->fd;
  p->fd = -1;
  http_reply_fd(p->req, (int)p->status, p->ctype[0] ? p->ctype : "text/plain", fd, 0, size);
  proxy_free(p);
}

/* On a store thread: which node ran the job (unless given), and where it
 * is. */
static int find_fn(store_t *s, void *arg) {
  proxy_t *p = arg;
  int rc = 0;
  if (!p->node) {
    job_list_t jobs = {0};
    job_filter_t f = {.project = p->project, .jobid = p->jobid, .started_only = 1};
    rc = store_jobs_list(s, &f, &jobs);
    for (size_t i = 0; !rc && i < jobs.n && !p->node; i++)
      if (jobs.v[i].node && (p->node = strdup(jobs.v[i].node)) == NULL) rc = -ENOMEM;
    job_list_release(&jobs);
  }
  if (rc || !p->node || !strcmp(p->node, p->app->cfg.node_name)) return rc;
  node_list_t nodes = {0};
  rc = store_nodes_list(s, &nodes);
  for (size_t i = 0; !rc && i < nodes.n; i++)
    if (!strcmp(nodes.v[i].name, p->node) && nodes.v[i].url &&
        asprintf(&p->url, "%s%s", nodes.v[i].url, p->url_path) < 0) {
      p->url = NULL;
      rc = -ENOMEM;
    }
  node_list_release(&nodes);
  return rc;
}

static void find_done(void *arg, int rc) {
  proxy_t *p = arg;
  if (p->cb && (rc || !p->url)) {
    p->cb(p->ud, rc ? rc : -ENOENT, 0, NULL, 0);
    proxy_free(p);
    return;
  }
  if (rc || !p->url) {
    local(p); /* unknown here and elsewhere: the local 404 */
    return;
  }
  p->work.data = p;
  if (uv_queue_work(p->app->loop, &p->work, fetch_work, fetch_done)) {
    http_reply(p->req, 503, "text/plain", "busy\n", 5);
    proxy_free(p);
  }
}

/* project/spider/<jobid>.<ext>: the job's names, or 0 when rel is not a
 * job's file (a directory listing, say). */
static int job_of(const char *rel, char **project, char **jobid) {
  const char *a = strchr(rel, '/');
  const char *b = a ? strchr(a + 1, '/') : NULL;
  if (!a || !b || strchr(b + 1, '/')) return 0;
  const char *dot = strrchr(b + 1, '.');
  if (!dot || dot == b + 1) return 0;
  *project = strndup(rel, (size_t)(a - rel));
  *jobid = strndup(b + 1, (size_t)(dot - b - 1));
  return *project && *jobid;
}

void api_proxy_serve(app_t *app, http_req_t *req, const char *root, const char *rel,
                     const char *url_path) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", root, rel);
  struct stat st;
  if (app->s3 && !http_req_header(req, PROXY_HEADER) && stat(path, &st) != 0) {
    api_objstore_serve(app, req, root, rel, url_path); /* then api_proxy_node */
    return;
  }
  api_proxy_node(app, req, root, rel, url_path);
}

void api_proxy_node(app_t *app, http_req_t *req, const char *root, const char *rel,
                    const char *url_path) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", root, rel);
  struct stat st;
  proxy_t *p = NULL;
  if (!store_pool_shared(app->store) || http_req_header(req, PROXY_HEADER) ||
      stat(path, &st) == 0 || !(p = calloc(1, sizeof(*p)))) {
    http_serve_tree(req, root, rel, url_path);
    return;
  }
  p->fd = -1;
  p->app = app;
  p->req = req;
  p->rel = strdup(rel);
  p->url_path = strdup(url_path);
  p->root = strdup(root);
  if (!p->rel || !p->url_path || !p->root || !job_of(rel, &p->project, &p->jobid) ||
      store_submit(app->store, STORE_READ, find_fn, p, find_done)) {
    local(p);
    return;
  }
}

int api_proxy_get(app_t *app, const char *node, const char *path, api_fetch_cb cb, void *ud) {
  proxy_t *p = calloc(1, sizeof(*p));
  if (!p) return -ENOMEM;
  p->fd = -1;
  p->app = app;
  p->cb = cb;
  p->ud = ud;
  p->node = strdup(node);
  p->url_path = strdup(path);
  if (!p->node || !p->url_path) {
    proxy_free(p);
    return -ENOMEM;
  }
  int rc = store_submit(app->store, STORE_READ, find_fn, p, find_done);
  if (rc) proxy_free(p);
  return rc;
}
