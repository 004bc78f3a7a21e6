/* A request's life on libmicrohttpd: its object (pooled, with an arena for
 * its strings), the access handler that takes it from its headers through
 * its body to its handler, the refusals made before any handler runs (413,
 * 400, 401/429), and the replies, synchronous or deferred through
 * suspend/resume. Its body is body.c's, its route router.c's, its
 * credentials credentials.c's; the sockets and the loop are listen.c's.
 *
 * Request lifetime: a request object is taken from a per-server pool when MHD
 * first calls the access handler, and goes back to the pool once MHD says the
 * request is complete AND it has been replied to (or was never handed to a
 * handler). A request whose connection dies while it waits for a reply (only
 * possible at server stop, since suspended connections are not polled) is
 * kept, detached, until the handler's late http_reply frees it.
 */
#include "http/http.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/server_int.h"
#include "log.h"

#define ARENA_FIRST 4096      /* first arena block, kept across requests */
#define POOL_MAX 1024         /* idle request objects kept for reuse */

/* ---- arena: strings of one request, reused across requests ---- */

static arena_block *block_new(size_t cap) {
  arena_block *b = malloc(sizeof(*b) + cap);
  if (!b) return NULL;
  b->next = NULL;
  b->cap = cap;
  b->used = 0;
  return b;
}

char *http_arena_alloc(http_req_t *r, size_t n) {
  arena_block *b = r->arena;
  if (b->cap - b->used < n) {
    size_t cap = b->cap * 2;
    if (cap < n) cap = n;
    arena_block *nb = block_new(cap);
    if (!nb) return NULL;
    nb->next = b;
    r->arena = b = nb;
  }
  char *p = b->data + b->used;
  b->used += n;
  return p;
}

char *http_arena_strndup(http_req_t *r, const char *s, size_t n) {
  char *p = http_arena_alloc(r, n + 1);
  if (!p) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* ---- request pool ---- */

static http_req_t *req_new(void) {
  http_req_t *r = calloc(1, sizeof(*r));
  if (!r) return NULL;
  r->arena = block_new(ARENA_FIRST);
  if (!r->arena) {
    free(r);
    return NULL;
  }
  return r;
}

/* Returns the request to its just-allocated state, keeping the first arena
 * block and the arrays so a keep-alive stream of requests allocates nothing. */
static void req_reset(http_req_t *r) {
  http_watches_end(r, false);
  if (r->pp) MHD_destroy_post_processor(r->pp);
  if (r->pending) MHD_destroy_response(r->pending);
  while (r->arena->next) {
    arena_block *b = r->arena;
    r->arena = b->next;
    free(b);
  }
  r->arena->used = 0;
  for (size_t i = 0; i < r->nbigs; i++) free(r->bigs[i]);
  http_param_t *params = r->params;
  reply_header *hdrs = r->hdrs;
  char **bigs = r->bigs;
  size_t pcap = r->pcap, hcap = r->hcap, bigcap = r->bigcap;
  arena_block *arena = r->arena;
  memset(r, 0, offsetof(http_req_t, boundary));
  r->params = params;
  r->pcap = pcap;
  r->hdrs = hdrs;
  r->hcap = hcap;
  r->bigs = bigs;
  r->bigcap = bigcap;
  r->arena = arena;
  r->blen = 0;
  r->tail_len = 0;
}

void http_req_free(http_req_t *r) {
  req_reset(r);
  free(r->arena);
  free(r->params);
  free(r->hdrs);
  free(r->bigs);
  free(r);
}

static http_req_t *req_get(http_server_t *s) {
  http_req_t *r = s->pool;
  if (r) {
    s->pool = r->next;
    s->npool--;
    r->next = NULL;
  } else {
    r = req_new();
    if (!r) return NULL;
  }
  r->srv = s;
  return r;
}

static void req_release(http_req_t *r) {
  http_server_t *s = r->srv;
  if (!s || s->npool >= POOL_MAX) {
    http_req_free(r);
    return;
  }
  req_reset(r);
  r->next = s->pool;
  s->pool = r;
  s->npool++;
}

void http_suspended_link(http_req_t *r) {
  http_server_t *s = r->srv;
  r->suspended = true;
  r->prev = NULL;
  r->next = s->suspended;
  if (s->suspended) s->suspended->prev = r;
  s->suspended = r;
}

void http_suspended_unlink(http_req_t *r) {
  if (!r->suspended) return;
  if (r->prev) r->prev->next = r->next;
  else if (r->srv) r->srv->suspended = r->next;
  if (r->next) r->next->prev = r->prev;
  r->next = r->prev = NULL;
  r->suspended = false;
}

/* ---- replies ---- */

static void access_log(http_req_t *r, unsigned status, uint64_t bytes) {
  http_server_t *s = r->srv;
  /* a 304 carries its file's length but sends no body (http_serve_asset) */
  bool bodyless = r->is_head || status == 204 || status == 304;
  log_debug("http", "%s \"%s %s\" %u %" PRIu64, r->addr ? r->addr : "?", r->method, r->path,
            status, bodyless ? 0 : bytes);
  if (s && s->access)
    s->access(s->access_ud, r->method, r->path, (int)status, bodyless ? 0 : bytes);
  if (s && s->observe) {
    char label[256];
    const char *label_ = r->route_label;
    if (!label_ && r->rt && r->rt->prefix) {
      snprintf(label, sizeof(label), "%s/", r->rt->path);
      label_ = label;
    } else if (!label_ && r->rt) {
      label_ = r->rt->path;
    }
    double secs = r->t0 ? (double)(uv_hrtime() - r->t0) / 1e9 : 0;
    s->observe(s->observe_ud, r->method, label_ ? label_ : "other", (int)status, secs);
  }
}

int http_add_headers(http_req_t *r, struct MHD_Response *resp, const char *ct) {
  enum MHD_ResponseFlags flags = r->keepalive10 ? MHD_RF_SEND_KEEP_ALIVE_HEADER : MHD_RF_NONE;
  /* A handler may set Content-Length itself where MHD would leave it out
   * (Twisted sends "Content-Length: 0" on a 204). */
  for (size_t i = 0; i < r->nhdrs; i++)
    if (strcasecmp(r->hdrs[i].name, "Content-Length") == 0)
      flags |= MHD_RF_INSANITY_HEADER_CONTENT_LENGTH;
  if (flags != MHD_RF_NONE) MHD_set_response_options(resp, flags, MHD_RO_END);
  if (ct && MHD_add_response_header(resp, "Content-Type", ct) != MHD_YES) return -EINVAL;
  for (size_t i = 0; i < r->nhdrs; i++)
    if (MHD_add_response_header(resp, r->hdrs[i].name, r->hdrs[i].value) != MHD_YES)
      log_warn("http", "header %s rejected by libmicrohttpd", r->hdrs[i].name);
  return 0;
}

static void queue_now(http_req_t *r, struct MHD_Response *resp, unsigned status, uint64_t bytes) {
  if (MHD_queue_response(r->conn, status, resp) != MHD_YES) r->failed = true;
  MHD_destroy_response(resp);
  access_log(r, status, bytes);
}

/* Takes resp: queues it now if the handler is still running, else hands it
 * to the suspended connection and resumes it. */
void http_deliver(http_req_t *r, struct MHD_Response *resp, unsigned status, uint64_t bytes) {
  r->replied = true;
  http_watches_end(r, false);
  if (!r->conn) { /* the connection died while waiting; we owned r */
    MHD_destroy_response(resp);
    http_req_free(r);
    return;
  }
  if (r->in_handler) {
    queue_now(r, resp, status, bytes);
    return;
  }
  r->pending = resp;
  r->pending_status = status;
  r->pending_bytes = bytes;
  http_suspended_unlink(r);
  MHD_resume_connection(r->conn);
  http_kick(r->lsn);
}

void http_reply_failed(http_req_t *r) {
  r->replied = true;
  http_watches_end(r, false);
  if (!r->conn) {
    http_req_free(r);
  } else if (r->in_handler) {
    r->failed = true;
  } else {
    r->dropped = true; /* the resumed connection is closed */
    http_suspended_unlink(r);
    MHD_resume_connection(r->conn);
    http_kick(r->lsn);
  }
}

void *http_req_calloc(http_req_t *r, size_t size) {
  void *p = calloc(1, size);
  if (!p) http_reply(r, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
  return p;
}

void http_reply(http_req_t *r, int status, const char *content_type, const void *body,
                size_t len) {
  if (r->replied) {
    log_warn("http", "second reply to %s %s ignored", r->method, r->path);
    return;
  }
  struct MHD_Response *resp = http_response_from_buffer(r, status, content_type, body, len);
  if (!resp || http_add_headers(r, resp, content_type)) {
    if (resp) MHD_destroy_response(resp);
    http_reply_failed(r);
    return;
  }
  http_deliver(r, resp, (unsigned)status, len);
}

void http_reply_fd(http_req_t *r, int status, const char *content_type, int fd, uint64_t offset,
                   uint64_t len) {
  if (r->replied) {
    log_warn("http", "second reply to %s %s ignored", r->method, r->path);
    close(fd);
    return;
  }
  struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, fd, offset);
  if (!resp) {
    close(fd);
    http_reply_failed(r);
    return;
  }
  if (http_add_headers(r, resp, content_type)) {
    MHD_destroy_response(resp);
    http_reply_failed(r);
    return;
  }
  http_deliver(r, resp, (unsigned)status, len);
}

int http_reply_header(http_req_t *r, const char *name, const char *value) {
  if (r->nhdrs == r->hcap) {
    size_t cap = r->hcap ? r->hcap * 2 : 8;
    reply_header *h = realloc(r->hdrs, cap * sizeof(*h));
    if (!h) return -ENOMEM;
    r->hdrs = h;
    r->hcap = cap;
  }
  const char *n = http_arena_strndup(r, name, strlen(name));
  const char *v = http_arena_strndup(r, value, strlen(value));
  if (!n || !v) return -ENOMEM;
  r->hdrs[r->nhdrs].name = n;
  r->hdrs[r->nhdrs].value = v;
  r->nhdrs++;
  return 0;
}

static void reply_text(http_req_t *r, int status, const char *ct, const char *text) {
  http_reply(r, status, ct, text, strlen(text));
}

static void reply_refused(http_req_t *r) {
  http_server_t *s = r->srv;
  r->nhdrs = 0;
  if (s->auth_deny) {
    s->auth_deny(s->auth_ud, r, r->refused);
    return;
  }
  if (r->refused == HTTP_AUTH_THROTTLE) {
    http_reply_header(r, "Retry-After", "60");
    reply_text(r, 429, "text/plain; charset=utf-8", "Too many failed logins: try again later.\n");
    return;
  }
  http_reply_header(r, "WWW-Authenticate", s->www_auth);
  reply_text(r, 401, "text/html", "Unauthorized");
}

/* The native API (REST and JSON-RPC) answers every error in its error
 * shape; a request refused before any route runs gets it here. Returns
 * false for other paths. msg holds no '"' or '\\'. */
static bool reply_native_error(http_req_t *r, int status, const char *code, const char *msg) {
  char json[512];
  if (!r->path || strncmp(r->path, "/api/", 5)) return false;
  snprintf(json, sizeof(json),
           "{\"error\": {\"code\": \"%s\", \"message\": \"%s\", \"details\": {}}}", code,
           msg);
  reply_text(r, status, "application/json", json);
  return true;
}

static void reply_413(http_req_t *r) {
  char msg[128];
  if (r->srv->max_body >= 0)
    snprintf(msg, sizeof(msg), "Request body too large: the limit is %lld bytes and %d fields.",
             r->srv->max_body, MAX_PARAMS);
  else
    snprintf(msg, sizeof(msg), "Request body too large: the limit is %d fields.", MAX_PARAMS);
  if (reply_native_error(r, 413, "SPD_ETOOBIG", msg)) return;
  strcat(msg, "\n");
  reply_text(r, 413, "text/plain; charset=utf-8", msg);
}

/* ---- routing, once the request is let in ---- */

static void route_or_400(http_req_t *r) {
  if (r->body_error) {
    char msg[256];
    snprintf(msg, sizeof(msg), "Bad request: %s.", r->body_error);
    if (reply_native_error(r, 400, "SPD_EBADREQUEST", msg)) return;
    snprintf(msg, sizeof(msg), "400 Bad Request: %s.\n", r->body_error);
    reply_text(r, 400, "text/plain; charset=utf-8", msg);
  } else {
    http_route_request(r);
  }
}

void http_req_auth_done(http_req_t *r, int verdict) {
  if (r->replied) return;
  if (!r->srv) { /* the server stopped meanwhile */
    http_reply_failed(r);
    return;
  }
  if (verdict == HTTP_AUTH_ALLOW) {
    route_or_400(r);
  } else {
    r->refused = verdict == HTTP_AUTH_THROTTLE ? verdict : HTTP_AUTH_DENY;
    reply_refused(r);
  }
}

/* ---- the request accessors ---- */

const char *http_req_method(const http_req_t *r) { return r->method; }
const char *http_req_path(const http_req_t *r) { return r->path; }
int http_req_is_head(const http_req_t *r) { return r->is_head; }
void http_req_set_auth(http_req_t *r, void *who) { r->who = who; }
void *http_req_auth(const http_req_t *r) { return r->who; }
const char *http_req_addr(const http_req_t *r) { return r->addr ? r->addr : "?"; }

void *http_req_alloc(http_req_t *r, size_t n) {
  /* the arena packs strings: align what may hold any type */
  const size_t align = _Alignof(max_align_t);
  char *p = http_arena_alloc(r, n + align);
  if (!p) return NULL;
  p += (align - (uintptr_t)p % align) % align;
  memset(p, 0, n ? n : 1);
  return p;
}

const char *http_req_header(const http_req_t *r, const char *name) {
  if (!r->conn) return NULL;
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const void *http_req_body(const http_req_t *r, size_t *len) {
  *len = r->raw && !r->discard && r->ubuf ? r->ulen : 0;
  return *len ? r->ubuf : NULL;
}

const http_param_t *http_req_params(const http_req_t *r, size_t *n) {
  *n = r->nparams;
  return r->params;
}

const http_param_t *http_req_param(const http_req_t *r, const char *key) {
  const http_param_t *query = NULL;
  for (size_t i = 0; i < r->nparams; i++) {
    const http_param_t *p = &r->params[i];
    if (strcmp(p->key, key) != 0) continue;
    if (p->from_body) return p;
    if (!query) query = p;
  }
  return query;
}

/* ---- the access handler ---- */

static bool token_in_list(const char *list, const char *token) {
  size_t n = strlen(token);
  for (const char *p = list; p && *p;) {
    p += strspn(p, " \t,");
    size_t len = strcspn(p, ",");
    size_t t = len;
    while (t && (p[t - 1] == ' ' || p[t - 1] == '\t')) t--;
    if (t == n && strncasecmp(p, token, n) == 0) return true;
    p += len;
  }
  return false;
}

/* "//listprojects.json" is "/listprojects.json", as nginx's merge_slashes
 * has it. scrapyd-client joins the url of scrapy.cfg, which `scrapy
 * startproject` writes with a trailing slash, and the call name with a '/':
 * Scrapyd answers such paths 404, so its commands fail with that url. */
static void merge_slashes(char *path) {
  char *w = path;
  for (const char *p = path; *p; p++)
    if (!(*p == '/' && w > path && w[-1] == '/')) *w++ = *p;
  *w = '\0';
}

/* First call, headers only: copy what must outlive the connection, collect
 * the query string, refuse a too-large declared body, set up body parsing. */
static enum MHD_Result req_begin(http_req_t *r, const char *url, const char *method,
                                 const char *version) {
  http_server_t *s = r->srv;
  struct MHD_Connection *c = r->conn;
  r->method = http_arena_strndup(r, method, strlen(method));
  char *path = http_arena_strndup(r, url, strlen(url));
  r->path = path;
  r->addr = http_client_of(r); /* every reply's log line names it, a 400 or 413 too */
  if (!r->method || !path) return MHD_NO;
  merge_slashes(path);
  r->is_head = strcmp(method, "HEAD") == 0;
  if (r->nul_in_path) {
    r->body_error = "the path holds a NUL byte (%00)";
    r->discard = true;
    return MHD_YES;
  }
  if (strcmp(version, MHD_HTTP_VERSION_1_0) == 0)
    r->keepalive10 =
        token_in_list(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connection"), "keep-alive");
  r->cur = SIZE_MAX;

  if (http_query_args(r)) return MHD_NO;

  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
  if (cl) {
    errno = 0;
    unsigned long long v = strtoull(cl, NULL, 10);
    int over = errno == ERANGE || (s->max_body >= 0 && v > (unsigned long long)s->max_body);
    /* A client that sends the body without waiting for an answer (no
     * "Expect: 100-continue", as Python's requests) would see its upload
     * cut by a reset instead of the 413: a body at most DISCARD_MAX over the
     * limit is read and thrown away first (memory stays bounded), and the
     * 413 comes at its end. */
    const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
    if (over && errno != ERANGE && !(expect && strcasecmp(expect, "100-continue") == 0) &&
        v - (unsigned long long)s->max_body <= DISCARD_MAX) {
      http_body_shed(r);
      return MHD_YES;
    }
    if (over) {
      r->too_big = true;
      r->dispatched = true;
      r->in_handler = true;
      reply_413(r);
      r->in_handler = false;
      return r->failed ? MHD_NO : MHD_YES;
    }
  }

  r->t0 = uv_hrtime();
  r->rt = http_route_find(s, r->path);
  if (s->auth_fn && !(r->rt && r->rt->is_public)) {
    int v = http_authenticate(r);
    if (v == HTTP_AUTH_LATER) {
      r->auth_later = true;
    } else if (v != HTTP_AUTH_ALLOW) {
      r->unauthorized = true;
      r->refused = v == HTTP_AUTH_THROTTLE ? v : HTTP_AUTH_DENY;
      r->discard = true; /* do not parse what a stranger sends */
      return MHD_YES;
    }
  }

  return http_body_begin(r, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"));
}

static void req_suspend(http_req_t *r) {
  MHD_suspend_connection(r->conn);
  http_suspended_link(r);
}

static enum MHD_Result req_dispatch(http_req_t *r) {
  r->dispatched = true;
  r->in_handler = true;
  http_body_finish(r);
  if (r->failed) {
    r->in_handler = false;
    return MHD_NO;
  }
  if (r->too_big) {
    reply_413(r);
  } else if (r->unauthorized) {
    reply_refused(r);
  } else if (r->auth_later) {
    r->auth_later = false;
    r->srv->auth_later(r->srv->auth_ud, r);
  } else {
    route_or_400(r);
  }
  r->in_handler = false;
  if (r->failed) return MHD_NO;
  if (!r->replied) req_suspend(r);
  return MHD_YES;
}

/* libmicrohttpd decodes the path into a C string, so a %00 would cut it
 * short and the handler would see another path than the one asked for
 * ("/ui/x%00.js" as "/ui/x"). The raw request line is only seen here; its
 * answer becomes the request's initial *con_cls, a mark read by on_access. */
static char nul_mark;

void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  size_t n = strcspn(uri, "?#");
  for (size_t i = 0; i + 2 < n; i++)
    if (uri[i] == '%' && uri[i + 1] == '0' && uri[i + 2] == '0') return &nul_mark;
  return NULL;
}

enum MHD_Result http_on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  struct listener *l = cls;
  bool nul = *con_cls == &nul_mark;
  http_req_t *r = nul ? NULL : *con_cls;
  if (!r) {
    r = req_get(l->srv);
    if (!r) return MHD_NO;
    *con_cls = r;
    r->conn = c;
    r->lsn = l;
    r->nul_in_path = nul;
    http_conn_headers_done(c);
    return req_begin(r, url, method, version);
  }
  if (r->dispatched) { /* resumed: the deferred reply is ready */
    if (r->dropped || !r->pending) return MHD_NO;
    struct MHD_Response *resp = r->pending;
    r->pending = NULL;
    r->in_handler = true;
    queue_now(r, resp, r->pending_status, r->pending_bytes);
    r->in_handler = false;
    return r->failed ? MHD_NO : MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    return http_body_feed(r, upload, n);
  }
  return req_dispatch(r);
}

void http_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  http_conn_request_done(cls, c);
  if (*con_cls == &nul_mark) *con_cls = NULL; /* gone before on_access */
  http_req_t *r = *con_cls;
  if (!r) return;
  *con_cls = NULL;
  http_suspended_unlink(r);
  if (r->stream) { /* its response may outlive r inside MHD */
    r->stream->req = NULL;
    r->stream = NULL;
  }
  if (r->dispatched && !r->replied) {
    /* The handler still holds r and will reply later: detach it. */
    r->conn = NULL;
    r->lsn = NULL;
    r->srv = NULL;
    http_watches_end(r, true); /* last: a watcher's reply may free r */
    return;
  }
  r->conn = NULL;
  req_release(r);
}
