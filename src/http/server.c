/* HTTP server glue: libmicrohttpd daemons in external-epoll mode, driven by
 * the libuv loop, with request state, body parsing, basic auth, routing and
 * replies (synchronous or deferred through suspend/resume).
 *
 * Request lifetime: a request object is taken from a per-server pool when MHD
 * first calls the access handler, and goes back to the pool once MHD says the
 * request is complete AND it has been replied to (or was never handed to a
 * handler). A request whose connection dies while it waits for a reply (only
 * possible at server stop, since suspended connections are not polled) is
 * kept, detached, until the handler's late http_reply frees it.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http/server_int.h"
#include "log.h"

#define ARENA_FIRST 4096      /* first arena block, kept across requests */
#define SMALL_VALUE 512       /* longer body values get their own buffer */
#define POST_BUFFER 16384     /* MHD post processor parse buffer */
#define POOL_MAX 1024         /* idle request objects kept for reuse */
#define MAX_PARAMS 10000      /* fields in one request */
#define CONN_TIMEOUT_S 300    /* idle connections are closed (http_timeout) */
#define CONN_MAX 4096         /* connections per listener (http_connections) */
/* MHD 0.9.75 zeroes a connection's whole memory pool after every request, so
 * its size is paid per request: 16 KiB instead of the default 32 KiB costs
 * ~30% less CPU per small request, and still takes ~8 KiB of request headers
 * (nginx's and Apache's default; larger get 431). */
#define CONN_MEMORY (16 * 1024)
/* Past max_body a streamed body is read and dropped so the client still gets
 * its 413; beyond this much more, it is cut off instead. */
#define DISCARD_MAX (64ULL << 20)
#define LISTEN_BACKLOG 1024

static const char not_found_page[] =
    "\n<html>\n  <head><title>404 - No Such Resource</title></head>\n  <body>\n"
    "    <h1>No Such Resource</h1>\n    <p>Sorry. No luck finding that resource.</p>\n"
    "  </body>\n</html>\n";

/* ---- arena: strings of one request, reused across requests ---- */

static arena_block *block_new(size_t cap) {
  arena_block *b = malloc(sizeof(*b) + cap);
  if (!b) return NULL;
  b->next = NULL;
  b->cap = cap;
  b->used = 0;
  return b;
}

static char *arena_alloc(http_req_t *r, size_t n) {
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

static char *arena_strndup(http_req_t *r, const char *s, size_t n) {
  char *p = arena_alloc(r, n + 1);
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

/* ---- params ---- */

static http_param_t *param_add(http_req_t *r, const char *key, size_t klen, const char *filename,
                               int from_body) {
  if (r->nparams == r->pcap) {
    size_t cap = r->pcap ? r->pcap * 2 : 16;
    http_param_t *p = realloc(r->params, cap * sizeof(*p));
    if (!p) return NULL;
    r->params = p;
    r->pcap = cap;
  }
  const char *k = arena_strndup(r, key ? key : "", key ? klen : 0);
  const char *f = filename ? arena_strndup(r, filename, strlen(filename)) : NULL;
  if (!k || (filename && !f)) return NULL;
  http_param_t *p = &r->params[r->nparams++];
  p->key = k;
  p->value = "";
  p->len = 0;
  p->filename = f;
  p->from_body = from_body;
  return p;
}

static enum MHD_Result on_query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t klen, const char *value, size_t vlen) {
  http_req_t *r = cls;
  http_param_t *p = param_add(r, key, klen, NULL, 0);
  if (!p) goto oom;
  if (value) {
    char *v = arena_strndup(r, value, vlen);
    if (!v) goto oom;
    p->value = v;
    p->len = vlen;
  }
  return MHD_YES;
oom:
  r->failed = true;
  return MHD_NO;
}

static int bigs_push(http_req_t *r, char *buf) {
  if (r->nbigs == r->bigcap) {
    size_t cap = r->bigcap ? r->bigcap * 2 : 4;
    char **b = realloc(r->bigs, cap * sizeof(*b));
    if (!b) return -ENOMEM;
    r->bigs = b;
    r->bigcap = cap;
  }
  r->bigs[r->nbigs++] = buf;
  return 0;
}

/* Appends a body chunk to the value of the current param. Small values grow
 * in place at the end of the arena; large ones move to their own buffer that
 * grows by an eighth, so memory stays close to the body size. */
static int value_append(http_req_t *r, const char *data, size_t n) {
  http_param_t *p = &r->params[r->cur];
  char *v = (char *)p->value;
  size_t need = p->len + n;
  if (r->cur_big) {
    if (need + 1 > r->cur_cap) {
      size_t cap = need + need / 8 + 1;
      char *nv = realloc(v, cap);
      if (!nv) return -ENOMEM;
      r->bigs[r->nbigs - 1] = nv;
      r->cur_cap = cap;
      v = nv;
    }
  } else {
    arena_block *b = r->arena;
    bool at_end = p->len > 0 && v + p->len + 1 == b->data + b->used;
    if (at_end && b->cap - b->used >= n) {
      b->used += n;
    } else if (need < SMALL_VALUE) {
      char *nv = arena_alloc(r, need + 1);
      if (!nv) return -ENOMEM;
      if (p->len) memcpy(nv, v, p->len);
      v = nv;
    } else {
      size_t cap = need + need / 8 + 1;
      char *nv = malloc(cap);
      if (!nv) return -ENOMEM;
      if (p->len) memcpy(nv, v, p->len);
      if (bigs_push(r, nv)) {
        free(nv);
        return -ENOMEM;
      }
      r->cur_big = true;
      r->cur_cap = cap;
      v = nv;
    }
  }
  memcpy(v + p->len, data, n);
  v[need] = '\0';
  p->value = v;
  p->len = need;
  return 0;
}

static enum MHD_Result on_post_data(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *filename, const char *content_type,
                                    const char *transfer_encoding, const char *data,
                                    uint64_t off, size_t size) {
  http_req_t *r = cls;
  /* off == 0 alone cannot tell a new field from a field whose first call
   * had no data yet (MHD calls with 0 bytes when input stops right after a
   * part's headers); the separators seen in the stream can. A nested part
   * (multipart/mixed) has no outer separator but starts at 0 after data. */
  if (r->new_part || r->cur == SIZE_MAX || (off == 0 && r->params[r->cur].len > 0)) {
    r->new_part = false;
    if (r->nparams >= MAX_PARAMS) { /* 40 bytes each: cap what tiny fields cost */
      r->too_big = true;
      return MHD_NO;
    }
    http_param_t *p = param_add(r, key, key ? strlen(key) : 0, filename, 1);
    if (!p) goto oom;
    r->cur = r->nparams - 1;
    r->cur_big = false;
  }
  if (size && value_append(r, data, size)) goto oom;
  return MHD_YES;
oom:
  r->failed = true;
  return MHD_NO;
}

/* ---- url-encoded bodies ----
 * MHD 0.9.75's url-encoded parser refuses values holding '=' ("x=a=b") and
 * drops some keys; Twisted uses Python's parse_qs, which splits each '&'
 * piece at its first '=', keeps blank values, skips empty pieces and decodes
 * '+' and %XX (an invalid escape stays as it is). The body is kept whole
 * (bounded by max_body) and parsed once it has arrived. */

static int ubuf_append(http_req_t *r, const char *data, size_t n) {
  if (r->ulen + n + 1 > r->ucap) {
    size_t cap = r->ulen + n + 1 + (r->ulen + n) / 8 + 64;
    char *nb = realloc(r->ubuf, cap);
    if (!nb) return -ENOMEM;
    if (r->ubuf) {
      r->bigs[r->ubig] = nb;
    } else if (bigs_push(r, nb)) {
      free(nb);
      return -ENOMEM;
    } else {
      r->ubig = r->nbigs - 1;
    }
    r->ubuf = nb;
    r->ucap = cap;
  }
  memcpy(r->ubuf + r->ulen, data, n);
  r->ulen += n;
  r->ubuf[r->ulen] = '\0';
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* unquote_plus in place over [s, s+n); returns the decoded length. */
static size_t unquote_plus(char *s, size_t n) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    int hi, lo;
    if (s[i] == '+') {
      s[w++] = ' ';
    } else if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 &&
               (lo = hexval(s[i + 2])) >= 0) {
      s[w++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      s[w++] = s[i];
    }
  }
  return w;
}

static int urlencoded_parse(http_req_t *r) {
  char *p = r->ubuf, *end = r->ubuf + r->ulen;
  while (p && p < end) {
    char *amp = memchr(p, '&', (size_t)(end - p));
    char *stop = amp ? amp : end;
    if (stop > p) {
      if (r->nparams >= MAX_PARAMS) {
        r->too_big = true;
        return -E2BIG;
      }
      char *eq = memchr(p, '=', (size_t)(stop - p));
      size_t klen = unquote_plus(p, (size_t)((eq ? eq : stop) - p));
      char *v = eq ? eq + 1 : stop;
      size_t vlen = eq ? unquote_plus(v, (size_t)(stop - v)) : 0;
      http_param_t *prm = param_add(r, p, klen, NULL, 1);
      char *val = prm ? arena_strndup(r, v, vlen) : NULL;
      if (!val) return -ENOMEM;
      prm->value = val;
      prm->len = vlen;
    }
    p = amp ? amp + 1 : NULL;
  }
  return 0;
}

/* ---- multipart sanity ---- */

/* MHD's multipart parser skips a preamble without a boundary, so a body
 * that is all garbage would look like an empty form; remember the boundary
 * to check that the body ended with the closing delimiter. */
static int parse_boundary(http_req_t *r, const char *ct) {
  const char *p = ct;
  while ((p = strcasestr(p, "boundary=")) != NULL) {
    if (p == ct || p[-1] == ';' || p[-1] == ' ' || p[-1] == '\t') break;
    p += 9;
  }
  if (!p) return -EINVAL;
  p += 9;
  const char *end;
  if (*p == '"') {
    end = strchr(++p, '"');
    if (!end) return -EINVAL;
  } else {
    end = p + strcspn(p, "; \t");
  }
  size_t n = (size_t)(end - p);
  if (n == 0 || n > MAX_BOUNDARY || memchr(p, '\r', n) || memchr(p, '\n', n)) return -EINVAL;
  memcpy(r->boundary, p, n);
  r->boundary[n] = '\0';
  r->blen = n;
  return 0;
}

static void tail_feed(http_req_t *r, const char *data, size_t n) {
  size_t cap = r->blen + 4 + TAIL_SLACK;
  if (n >= cap) {
    memcpy(r->tail, data + n - cap, cap);
    r->tail_len = cap;
    return;
  }
  if (r->tail_len + n > cap) {
    size_t drop = r->tail_len + n - cap;
    memmove(r->tail, r->tail + drop, r->tail_len - drop);
    r->tail_len -= drop;
  }
  memcpy(r->tail + r->tail_len, data, n);
  r->tail_len += n;
}

static bool tail_closes(const http_req_t *r) {
  size_t n = r->tail_len;
  while (n && (r->tail[n - 1] == '\r' || r->tail[n - 1] == '\n' || r->tail[n - 1] == ' ' ||
               r->tail[n - 1] == '\t'))
    n--;
  size_t want = r->blen + 4;
  if (n < want) return false;
  const char *t = r->tail + n - want;
  return t[0] == '-' && t[1] == '-' && memcmp(t + 2, r->boundary, r->blen) == 0 &&
         t[want - 2] == '-' && t[want - 1] == '-';
}

/* ---- basic auth ---- */

static int b64val(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Decodes "Basic <base64 user:password>" into out (NUL-terminated, at
 * most outlen - 1 bytes); its length, or -1 when h is not that. */
static long basic_decode(const char *h, char *out, size_t outlen) {
  while (*h == ' ' || *h == '\t') h++;
  if (strncasecmp(h, "basic", 5) != 0 || (h[5] != ' ' && h[5] != '\t')) return -1;
  h += 5;
  while (*h == ' ' || *h == '\t') h++;
  size_t n = 0;
  unsigned acc = 0;
  int bits = 0;
  for (; *h && *h != '=' && *h != ' ' && *h != '\t'; h++) {
    int v = b64val((unsigned char)*h);
    if (v < 0) return -1;
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n + 1 >= outlen) return -1;
      out[n++] = (char)(unsigned char)(acc >> bits);
    }
  }
  out[n] = '\0';
  return (long)n;
}

static bool auth_ok(const http_server_t *s, const char *h) {
  char out[512];
  long n = h ? basic_decode(h, out, sizeof(out)) : -1;
  if (n < 0 || (size_t)n != s->cred_len) return false;
  unsigned char diff = 0; /* no early exit: timing must not leak the match */
  for (size_t i = 0; i < (size_t)n; i++) diff |= (unsigned char)out[i] ^ (unsigned char)s->cred[i];
  return diff == 0;
}

/* The Authorization header as credentials; strings in the arena. */
static void credentials_of(http_req_t *r, const char *h, http_credentials_t *c) {
  memset(c, 0, sizeof(*c));
  if (!h) return;
  c->scheme = HTTP_CRED_BAD;
  while (*h == ' ' || *h == '\t') h++;
  char buf[1024];
  long n = basic_decode(h, buf, sizeof(buf));
  if (n >= 0) {
    char *colon = memchr(buf, ':', (size_t)n);
    if (!colon || memchr(buf, '\0', (size_t)n)) return;
    c->user = arena_strndup(r, buf, (size_t)(colon - buf));
    c->secret = arena_strndup(r, colon + 1, (size_t)(buf + n - colon - 1));
    if (c->user && c->secret) c->scheme = HTTP_CRED_BASIC;
    return;
  }
  if (strncasecmp(h, "bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return;
  h += 6;
  while (*h == ' ' || *h == '\t') h++;
  size_t len = strcspn(h, " \t");
  if (!len || len > 512 || h[len + strspn(h + len, " \t")]) return;
  c->secret = arena_strndup(r, h, len);
  if (c->secret) c->scheme = HTTP_CRED_BEARER;
}

/* The verdict on a request for a route that is not public. */
static int authenticate(http_req_t *r) {
  http_server_t *s = r->srv;
  const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
  if (!s->auth_fn) return auth_ok(s, h) ? HTTP_AUTH_ALLOW : HTTP_AUTH_DENY;
  http_credentials_t c;
  credentials_of(r, h, &c);
  return s->auth_fn(s->auth_ud, r, &c);
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

static void on_timer(uv_timer_t *t);

/* A resumed connection is only processed by MHD_run: make the next loop
 * iteration run it instead of waiting for unrelated I/O. */
void http_kick(struct listener *l) {
  l->kick = true;
  if (!l->in_run && !l->srv->closing) uv_timer_start(&l->timer, on_timer, 0, 0);
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
  const char *n = arena_strndup(r, name, strlen(name));
  const char *v = arena_strndup(r, value, strlen(value));
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

static void default_404(http_req_t *r, void *ud) {
  http_reply(r, 404, "text/html; charset=utf-8", not_found_page, sizeof(not_found_page) - 1);
}

/* ---- routing ---- */

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static route *exact_find(const http_server_t *s, const char *path) {
  if (!s->exact_cap) return NULL;
  size_t mask = s->exact_cap - 1;
  for (size_t i = hash_str(path) & mask;; i = (i + 1) & mask) {
    route *rt = &s->exact[i];
    if (!rt->path) return NULL;
    if (strcmp(rt->path, path) == 0) return rt;
  }
}

static int exact_insert(route *tab, size_t cap, route rt) {
  size_t mask = cap - 1;
  for (size_t i = hash_str(rt.path) & mask;; i = (i + 1) & mask) {
    if (!tab[i].path) {
      tab[i] = rt;
      return 0;
    }
  }
}

int http_route(http_server_t *s, const char *path, http_handler_fn fn, void *ud) {
  route *old = exact_find(s, path);
  if (old) {
    old->fn = fn;
    old->ud = ud;
    return 0;
  }
  if ((s->exact_n + 1) * 2 > s->exact_cap) {
    size_t cap = s->exact_cap ? s->exact_cap * 2 : 64;
    route *tab = calloc(cap, sizeof(*tab));
    if (!tab) return -ENOMEM;
    for (size_t i = 0; i < s->exact_cap; i++)
      if (s->exact[i].path) exact_insert(tab, cap, s->exact[i]);
    free(s->exact);
    s->exact = tab;
    s->exact_cap = cap;
  }
  char *copy = strdup(path);
  if (!copy) return -ENOMEM;
  exact_insert(s->exact, s->exact_cap, (route){copy, fn, ud, false, false});
  s->exact_n++;
  return 0;
}

int http_route_prefix(http_server_t *s, const char *prefix, http_handler_fn fn, void *ud) {
  size_t n = strlen(prefix);
  while (n && prefix[n - 1] == '/') n--; /* "/logs/" also matches "/logs" */
  char *copy = strndup(prefix, n);
  if (!copy) return -ENOMEM;
  route *tab = realloc(s->prefix, (s->nprefix + 1) * sizeof(*tab));
  if (!tab) {
    free(copy);
    return -ENOMEM;
  }
  s->prefix = tab;
  tab[s->nprefix++] = (route){copy, fn, ud, true, false};
  return 0;
}

void http_set_fallback(http_server_t *s, http_handler_fn fn, void *ud) {
  s->fallback = fn ? fn : default_404;
  s->fallback_ud = fn ? ud : NULL;
}

void http_set_auth(http_server_t *s, http_auth_fn check, http_auth_later_fn later,
                   http_auth_deny_fn deny, void *ud) {
  s->auth_fn = check;
  s->auth_later = later;
  s->auth_deny = deny;
  s->auth_ud = ud;
}

const char *http_server_www_auth(const http_server_t *s) { return s->www_auth; }

void http_set_access_log(http_server_t *s, http_access_fn fn, void *ud) {
  s->access = fn;
  s->access_ud = ud;
}

void http_set_observer(http_server_t *s, http_observe_fn fn, void *ud) {
  s->observe = fn;
  s->observe_ud = ud;
}

int http_route_public(http_server_t *s, const char *path) {
  route *rt = exact_find(s, path);
  if (!rt) return -ENOENT;
  rt->is_public = true;
  return 0;
}

void http_req_set_route(http_req_t *r, const char *pattern) {
  r->route_label = pattern ? arena_strndup(r, pattern, strlen(pattern)) : NULL;
}

static route *route_find(http_server_t *s, const char *path) {
  route *rt = exact_find(s, path);
  if (!rt) {
    size_t best = 0;
    for (size_t i = 0; i < s->nprefix; i++) {
      size_t n = strlen(s->prefix[i].path);
      if (strncmp(path, s->prefix[i].path, n) == 0 && (path[n] == '\0' || path[n] == '/') &&
          (!rt || n > best)) {
        rt = &s->prefix[i];
        best = n;
      }
    }
  }
  return rt;
}

static void route_request(http_req_t *r) {
  http_server_t *s = r->srv;
  route *rt = route_find(s, r->path);
  r->rt = rt;
  if (rt) rt->fn(r, rt->ud);
  else s->fallback(r, s->fallback_ud);
}

static void route_or_400(http_req_t *r) {
  if (r->body_error) {
    char msg[256];
    snprintf(msg, sizeof(msg), "Bad request: %s.", r->body_error);
    if (reply_native_error(r, 400, "SPD_EBADREQUEST", msg)) return;
    snprintf(msg, sizeof(msg), "400 Bad Request: %s.\n", r->body_error);
    reply_text(r, 400, "text/plain; charset=utf-8", msg);
  } else {
    route_request(r);
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
  char *p = arena_alloc(r, n + align);
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

/* First call, headers only: copy what must outlive the connection, collect
 * the query string, refuse a too-large declared body, set up body parsing. */
static void shed_body(http_req_t *r);

static enum MHD_Result req_begin(http_req_t *r, const char *url, const char *method,
                                 const char *version) {
  http_server_t *s = r->srv;
  struct MHD_Connection *c = r->conn;
  r->method = arena_strndup(r, method, strlen(method));
  r->path = arena_strndup(r, url, strlen(url));
  r->addr = http_client_of(r); /* every reply's log line names it, a 400 or 413 too */
  if (!r->method || !r->path) return MHD_NO;
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

  MHD_get_connection_values_n(c, MHD_GET_ARGUMENT_KIND, on_query_arg, r);
  if (r->failed) return MHD_NO;

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
      shed_body(r);
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
  r->rt = route_find(s, r->path);
  if ((s->cred || s->auth_fn) && !(r->rt && r->rt->is_public)) {
    int v = authenticate(r);
    if (v == HTTP_AUTH_LATER) {
      r->auth_later = true;
    } else if (v != HTTP_AUTH_ALLOW) {
      r->unauthorized = true;
      r->refused = v == HTTP_AUTH_THROTTLE ? v : HTTP_AUTH_DENY;
      r->discard = true; /* do not parse what a stranger sends */
      return MHD_YES;
    }
  }

  const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
  if (!ct) {
    r->raw = true;
  } else if (strncasecmp(ct, "multipart/form-data", 19) == 0) {
    r->multipart = true;
    if (parse_boundary(r, ct)) {
      r->body_error = "multipart/form-data without a valid boundary parameter";
      r->discard = true;
    } else {
      r->pp = MHD_create_post_processor(c, POST_BUFFER, on_post_data, r);
      if (!r->pp) return MHD_NO;
      r->match = 2; /* the first delimiter has no CRLF before it */
    }
  } else if (strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0) {
    r->urlencoded = true;
  } else {
    r->raw = true; /* JSON and others: Scrapyd's endpoints ignore them, the native API reads them */
  }
  return MHD_YES;
}

static void drop_body_parser(http_req_t *r) {
  if (r->pp) MHD_destroy_post_processor(r->pp);
  r->pp = NULL;
  r->discard = true;
}

/* Past the limit: free what the body already took, so memory stays bounded
 * by max_body, and read the rest without keeping it. */
static void shed_body(http_req_t *r) {
  r->too_big = true;
  drop_body_parser(r);
  for (size_t i = 0; i < r->nbigs; i++) free(r->bigs[i]);
  r->nbigs = 0;
  r->nparams = 0;
  r->ubuf = NULL;
  r->ulen = r->ucap = 0;
}

/* Feeds MHD's parser, cut right after every field separator ("&", or the
 * "\r\n--boundary" delimiter, which MHD then fully handles), so that all
 * parser callbacks between two cuts belong to one field. */
static enum MHD_Result form_feed(http_req_t *r, const char *data, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    if (r->match == 0) {
      const char *cr = memchr(data + i, '\r', n - i);
      if (!cr) break;
      i = (size_t)(cr - data);
    }
    /* '\r' occurs only first in the pattern: no KMP table needed. */
    char want = r->match < 4 ? "\r\n--"[r->match] : r->boundary[r->match - 4];
    r->match = data[i] == want ? r->match + 1 : data[i] == '\r';
    if (r->match < r->blen + 4) continue;
    r->match = 0;
    if (MHD_post_process(r->pp, data + start, i + 1 - start) != MHD_YES) return MHD_NO;
    r->new_part = true;
    start = i + 1;
  }
  if (start < n) return MHD_post_process(r->pp, data + start, n - start);
  return MHD_YES;
}

static enum MHD_Result req_body(http_req_t *r, const char *data, size_t n) {
  http_server_t *s = r->srv;
  r->body_len += n;
  uint64_t limit = s->max_body >= 0 ? (uint64_t)s->max_body : UINT64_MAX;
  if (r->too_big) /* MHD 0.9.75 takes no response in mid-body */
    return r->body_len > limit && r->body_len - limit > DISCARD_MAX ? MHD_NO : MHD_YES;
  if (r->body_len > limit) {
    shed_body(r);
    return MHD_YES;
  }
  if (r->discard) return MHD_YES;
  if (r->urlencoded || r->raw) {
    if (ubuf_append(r, data, n)) {
      r->failed = true;
      return MHD_NO;
    }
    return MHD_YES;
  }
  tail_feed(r, data, n);
  if (form_feed(r, data, n) != MHD_YES) {
    if (r->failed) return MHD_NO;
    if (r->too_big) { /* too many fields */
      shed_body(r);
      return MHD_YES;
    }
    r->body_error = "malformed multipart/form-data body";
    drop_body_parser(r);
  }
  return MHD_YES;
}

static void req_finish_body(http_req_t *r) {
  if (r->urlencoded && !r->discard && r->ubuf) {
    int rc = urlencoded_parse(r);
    if (rc == -E2BIG) shed_body(r);
    else if (rc) r->failed = true;
    return;
  }
  if (!r->pp) return;
  bool ok = MHD_destroy_post_processor(r->pp) == MHD_YES;
  r->pp = NULL;
  if (!ok || (r->body_len > 0 && !tail_closes(r)))
    r->body_error = "malformed multipart/form-data body: truncated, or no closing boundary";
}

static void req_suspend(http_req_t *r) {
  MHD_suspend_connection(r->conn);
  http_suspended_link(r);
}

static enum MHD_Result req_dispatch(http_req_t *r) {
  r->dispatched = true;
  r->in_handler = true;
  req_finish_body(r);
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

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  size_t n = strcspn(uri, "?#");
  for (size_t i = 0; i + 2 < n; i++)
    if (uri[i] == '%' && uri[i + 1] == '0' && uri[i + 2] == '0') return &nul_mark;
  return NULL;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
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
    return req_body(r, upload, n);
  }
  return req_dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
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

/* ---- the loop glue ---- */

static void listener_run(struct listener *l) {
  if (l->srv->closing) return;
  l->in_run = true;
  l->kick = false;
  MHD_run(l->mhd);
  l->in_run = false;
  if (l->srv->closing) return; /* a handler stopped the server */
  MHD_UNSIGNED_LONG_LONG to = 0;
  if (!l->kick && MHD_get_timeout(l->mhd, &to) != MHD_YES) {
    uv_timer_stop(&l->timer);
    return;
  }
  l->kick = false;
  uv_timer_start(&l->timer, on_timer, to, 0);
}

static void on_poll(uv_poll_t *h, int status, int events) { listener_run(h->data); }
static void on_timer(uv_timer_t *t) { listener_run(t->data); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  struct listener *l = cls;
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n') buf[--n] = '\0';
  if (!l->mhd)
    snprintf(l->start_log, sizeof(l->start_log), "%.*s", (int)sizeof(l->start_log) - 1, buf);
  log_debug("http", "%s: %s", l->name, buf);
}

/* ---- listeners ---- */

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static int bind_tcp(const char *addr, int port, bool *v6any, int *out, char *err, size_t errlen,
                    char *name, size_t namelen) {
  char host[INET6_ADDRSTRLEN + 2];
  if (!addr || !*addr) addr = "127.0.0.1";
  size_t n = strlen(addr);
  if (addr[0] == '[' && n > 2 && addr[n - 1] == ']') { /* "[::1]" */
    if (n - 2 >= sizeof(host)) return set_err(err, errlen, -EINVAL, "%s: bad address", addr);
    memcpy(host, addr + 1, n - 2);
    host[n - 2] = '\0';
  } else {
    snprintf(host, sizeof(host), "%s", addr);
  }
  char portstr[16];
  snprintf(portstr, sizeof(portstr), "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host, portstr, &hints, &ai);
  bool is6 = strchr(host, ':') != NULL;
  snprintf(name, namelen, is6 ? "[%s]:%d" : "%s:%d", host, port);
  if (gai) return set_err(err, errlen, -EINVAL, "%s: %s", name, gai_strerror(gai));
  int rc = 0, one = 1;
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto out;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ai->ai_family == AF_INET6) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ai->ai_addr;
    *v6any = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
    int only = *v6any ? 0 : 1; /* "::" also takes IPv4, as Twisted's does */
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
  }
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, LISTEN_BACKLOG)) {
    rc = -errno;
    goto out;
  }
  *out = fd;
  fd = -1;
out:
  if (rc) set_err(err, errlen, rc, "%s: %s", name, strerror(-rc));
  if (fd >= 0) close(fd);
  freeaddrinfo(ai);
  return rc;
}

/* A socket file nobody listens on is left over from a crash: remove it. A
 * live one, or anything that is not a socket, is an error. */
static int bind_unix(const char *path, int *out, char *err, size_t errlen) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(sa.sun_path))
    return set_err(err, errlen, -ENAMETOOLONG, "%s: socket path too long", path);
  strcpy(sa.sun_path, path);
  int rc = 0;
  int fd = -1;
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return set_err(err, errlen, -EEXIST, "%s: exists and is not a socket", path);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) {
      rc = -errno;
      goto out;
    }
    int live = connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(probe);
    if (live) return set_err(err, errlen, -EADDRINUSE, "%s: %s", path, strerror(EADDRINUSE));
    if (unlink(path) && errno != ENOENT) {
      rc = -errno;
      goto out;
    }
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto out;
  }
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
    rc = -errno;
    goto out;
  }
  if (chmod(path, 0660) || listen(fd, LISTEN_BACKLOG)) {
    rc = -errno;
    unlink(path);
    goto out;
  }
  *out = fd;
  fd = -1;
out:
  if (rc) set_err(err, errlen, rc, "%s: %s", path, strerror(-rc));
  if (fd >= 0) close(fd);
  return rc;
}

/* http_connections, but no more than the descriptors the process may open
 * (the daemon raised its soft limit to the hard one at start) less some for
 * logs, stores and crawls' pipes. */
static unsigned conn_limit(const http_server_t *s, const char *name) {
  struct rlimit rl;
  rlim_t n = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) n = rl.rlim_cur;
  n = n > 128 ? n - 64 : 64;
  if (n >= s->max_conns) return s->max_conns;
  log_warn("http", "%s: at most %u connections, not http_connections = %u: the open files "
           "limit is %llu (raise LimitNOFILE= or ulimit -n)", name, (unsigned)n, s->max_conns,
           (unsigned long long)n + 64);
  return (unsigned)n;
}

/* sendfile() may raise SIGPIPE, so MHD only uses it for fd replies when told
 * that the process ignores SIGPIPE (the daemon does; a test may not). */
static int sigpipe_ignored(void) {
  struct sigaction sa;
  return sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

/* A PEM file's whole text, NUL-terminated as MHD wants it. */
#define PEM_MAX (1 << 20)
static int read_pem(const char *key, const char *path, char **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "re");
  if (!f) return set_err(err, errlen, -errno, "%s '%s': %s", key, path, strerror(errno));
  char *buf = malloc(PEM_MAX + 1);
  size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
  int rc = 0;
  if (!buf) rc = set_err(err, errlen, -ENOMEM, "out of memory");
  else if (ferror(f)) rc = set_err(err, errlen, -EIO, "%s '%s': %s", key, path, strerror(errno));
  else if (n > PEM_MAX) rc = set_err(err, errlen, -EFBIG, "%s '%s': larger than 1 MiB", key, path);
  else if (!memmem(buf, n, "-----BEGIN ", 11))
    rc = set_err(err, errlen, -EINVAL, "%s '%s': not a PEM file (no -----BEGIN line)", key, path);
  fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  return 0;
}

static void free_secret(char *p) {
  if (!p) return;
  explicit_bzero(p, strlen(p));
  free(p);
}

/* MHD only says "Failed to initialize TLS support" when GnuTLS rejects the
 * key or certificate; loading them the same way first gives GnuTLS's reason
 * (a mismatched pair, a wrong passphrase, a damaged file). GnuTLS is already
 * in the process as MHD's own dependency, so it is looked up, not linked. */
static int tls_check(const http_options_t *o, const char *cert, const char *key, char *why,
                     size_t whylen) {
  void *lib = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return 0; /* MHD's own check still runs */
  __typeof__(gnutls_certificate_allocate_credentials) *alloc =
      (__typeof__(alloc))dlsym(lib, "gnutls_certificate_allocate_credentials");
  __typeof__(gnutls_certificate_free_credentials) *release =
      (__typeof__(release))dlsym(lib, "gnutls_certificate_free_credentials");
  __typeof__(gnutls_certificate_set_x509_key_mem2) *load =
      (__typeof__(load))dlsym(lib, "gnutls_certificate_set_x509_key_mem2");
  __typeof__(gnutls_strerror) *strerr = (__typeof__(strerr))dlsym(lib, "gnutls_strerror");
  gnutls_certificate_credentials_t cred = NULL;
  int rc = 0;
  if (alloc && release && load && strerr && alloc(&cred) == GNUTLS_E_SUCCESS) {
    gnutls_datum_t c = {(unsigned char *)cert, (unsigned)strlen(cert)};
    gnutls_datum_t k = {(unsigned char *)key, (unsigned)strlen(key)};
    const char *pw = o->https_key_password && *o->https_key_password ? o->https_key_password : NULL;
    int g = load(cred, &c, &k, GNUTLS_X509_FMT_PEM, pw, 0);
    if (g < 0) {
      snprintf(why, whylen, "%s%s", strerr(g),
               g == GNUTLS_E_DECRYPTION_FAILED ? " (a wrong or missing https_key_password?)" : "");
      rc = -EINVAL;
    }
    release(cred);
  }
  dlclose(lib);
  return rc;
}

/* MHD's TLS is GnuTLS: it reads the PEM texts and checks that the key is
 * the certificate's when the daemon starts, and says why when not. */
static int tls_options(struct listener *l, const http_options_t *o, struct MHD_OptionItem *opt,
                       char *err, size_t errlen) {
  size_t n = 0;
  if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
    return set_err(err, errlen, -ENOTSUP,
                   "https_cert: this libmicrohttpd was built without TLS (GnuTLS) support; "
                   "serve plain HTTP behind a TLS reverse proxy instead");
  int rc = read_pem("https_cert", o->https_cert, &l->tls_cert, err, errlen);
  if (!rc) rc = read_pem("https_key", o->https_key, &l->tls_key, err, errlen);
  if (rc) return rc;
  char why[256];
  if (tls_check(o, l->tls_cert, l->tls_key, why, sizeof(why)))
    return set_err(err, errlen, -EINVAL, "%s: cannot serve HTTPS with https_cert '%s' and "
                   "https_key '%s': %s", l->name, o->https_cert, o->https_key, why);
  opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, l->tls_cert};
  opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, l->tls_key};
  if (o->https_key_password && *o->https_key_password)
    opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_KEY_PASSWORD, 0,
                                       (void *)o->https_key_password};
  const char *prio = o->https_priorities && *o->https_priorities
                         ? o->https_priorities
                         : "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1";
  opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)prio};
  opt[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  return 0;
}

static int listener_start(http_server_t *s, int fd, unsigned extra_flags, const char *name,
                          const http_options_t *tls, char *err, size_t errlen) {
  struct listener *l = calloc(1, sizeof(*l));
  if (!l) {
    close(fd);
    return set_err(err, errlen, -ENOMEM, "%s: out of memory", name);
  }
  l->srv = s;
  snprintf(l->name, sizeof(l->name), "%s", name);
  s->lsn[s->nlsn++] = l;
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO | MHD_USE_ERROR_LOG |
                   extra_flags;
  struct MHD_OptionItem tlsopt[6] = {{MHD_OPTION_END, 0, NULL}};
  if (tls) {
    int rc = tls_options(l, tls, tlsopt, err, errlen);
    if (rc) {
      close(fd);
      return rc;
    }
    flags |= MHD_USE_TLS;
  }
  l->conn_max = conn_limit(s, name);
  l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_access, l,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, l,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, l,
                            MHD_OPTION_NOTIFY_CONNECTION, http_conn_notify, l,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                            MHD_OPTION_CONNECTION_LIMIT, l->conn_max,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, l,
                            MHD_OPTION_SIGPIPE_HANDLED_BY_APP, sigpipe_ignored(),
                            MHD_OPTION_ARRAY, tlsopt,
                            MHD_OPTION_END);
  if (!l->mhd) {
    close(fd);
    if (tls)
      return set_err(err, errlen, -EINVAL, "%s: cannot serve HTTPS with https_cert '%s' and "
                     "https_key '%s': %s", name, tls->https_cert, tls->https_key,
                     l->start_log[0] ? l->start_log : "libmicrohttpd failed to start");
    return set_err(err, errlen, -EIO, "%s: libmicrohttpd failed to start%s%s", name,
                   l->start_log[0] ? ": " : "", l->start_log);
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) return set_err(err, errlen, -EIO, "%s: no epoll descriptor", name);
  int rc = uv_poll_init(s->loop, &l->poll, info->epoll_fd);
  if (rc) return set_err(err, errlen, rc, "%s: %s", name, uv_strerror(rc));
  uv_timer_init(s->loop, &l->timer);
  l->poll.data = l->timer.data = l;
  http_conn_init(l);
  l->handles_open = true;
  s->open_handles += 3;
  rc = uv_poll_start(&l->poll, UV_READABLE, on_poll);
  if (rc) return set_err(err, errlen, rc, "%s: %s", name, uv_strerror(rc));
  uv_timer_start(&l->timer, on_timer, 0, 0);
  return 0;
}

int http_server_start(uv_loop_t *loop, const http_options_t *o, http_server_t **out, char *err,
                      size_t errlen) {
  int rc = 0;
  *out = NULL;
  http_server_t *s = calloc(1, sizeof(*s));
  if (!s) return set_err(err, errlen, -ENOMEM, "out of memory");
  s->loop = loop;
  s->fallback = default_404;
  s->max_body = o->max_body > 0 ? o->max_body : -1;
  s->timeout_s = o->timeout > 0 ? o->timeout : CONN_TIMEOUT_S;
  s->max_conns = o->max_connections > 0 ? (unsigned)o->max_connections : CONN_MAX;
  const char *realm = o->realm && *o->realm ? o->realm : "Scrapyd";
  if (asprintf(&s->www_auth, "basic realm=\"%s\"", realm) < 0) s->www_auth = NULL;
  if (o->username && *o->username && o->password && *o->password) {
    if (asprintf(&s->cred, "%s:%s", o->username, o->password) < 0) s->cred = NULL;
    if (s->cred) s->cred_len = strlen(s->cred);
  }
  if (!s->www_auth || (o->username && *o->username && o->password && *o->password && !s->cred)) {
    rc = set_err(err, errlen, -ENOMEM, "out of memory");
    goto out;
  }
  char why[200];
  rc = http_trust_parse(o->trusted_proxies, &s->trust, why, sizeof(why));
  if (rc) {
    set_err(err, errlen, rc, "trusted_proxies: %s", why);
    goto out;
  }
  if (o->port <= 0 && !(o->unix_socket_path && *o->unix_socket_path)) {
    rc = set_err(err, errlen, -EINVAL, "no listener: set a port or a unix socket path");
    goto out;
  }
  if (o->port > 65535) {
    rc = set_err(err, errlen, -EINVAL, "port %d out of range", o->port);
    goto out;
  }
  /* Bind everything before opening any uv handle, so that the common
   * failures (address in use) clean up synchronously. */
  int tcp_fd = -1, unix_fd = -1;
  bool v6any = false;
  char tcp_name[128];
  if (o->port > 0) {
    rc = bind_tcp(o->bind_address, o->port, &v6any, &tcp_fd, err, errlen, tcp_name,
                  sizeof(tcp_name));
    if (rc) goto out;
  }
  if (o->unix_socket_path && *o->unix_socket_path) {
    rc = bind_unix(o->unix_socket_path, &unix_fd, err, errlen);
    if (rc) {
      if (tcp_fd >= 0) close(tcp_fd);
      goto out;
    }
    s->unix_path = strdup(o->unix_socket_path);
    if (!s->unix_path) {
      unlink(o->unix_socket_path);
      close(unix_fd);
      if (tcp_fd >= 0) close(tcp_fd);
      rc = set_err(err, errlen, -ENOMEM, "out of memory");
      goto out;
    }
  }
  if (tcp_fd >= 0) {
    bool https = o->https_cert && *o->https_cert && o->https_key && *o->https_key;
    rc = listener_start(s, tcp_fd, v6any ? MHD_USE_DUAL_STACK : 0, tcp_name, https ? o : NULL,
                        err, errlen);
    if (rc) {
      if (unix_fd >= 0) close(unix_fd);
      goto out;
    }
  }
  if (unix_fd >= 0) {
    rc = listener_start(s, unix_fd, 0, o->unix_socket_path, NULL, err, errlen);
    if (rc) goto out;
  }
  *out = s;
out:
  if (rc) http_server_stop(s);
  return rc;
}

/* ---- stopping ---- */

static void server_free(http_server_t *s) {
  for (int i = 0; i < s->nlsn; i++) {
    struct listener *l = s->lsn[i];
    if (!l->mhd) continue;
    /* MHD refuses to stop with suspended connections: resume them all; the
     * handlers' late replies find their requests detached. */
    for (http_req_t *r = s->suspended; r; r = r->next)
      if (r->lsn == l) {
        r->dropped = true;
        MHD_resume_connection(r->conn);
      }
    MHD_stop_daemon(l->mhd);
    l->mhd = NULL;
    http_conn_free_all(l);
  }
  for (int i = 0; i < s->nlsn; i++) {
    free(s->lsn[i]->tls_cert);
    free_secret(s->lsn[i]->tls_key);
    free(s->lsn[i]);
  }
  while (s->pool) {
    http_req_t *r = s->pool;
    s->pool = r->next;
    http_req_free(r);
  }
  if (s->unix_path) unlink(s->unix_path);
  for (size_t i = 0; i < s->exact_cap; i++) free(s->exact[i].path);
  for (size_t i = 0; i < s->nprefix; i++) free(s->prefix[i].path);
  free(s->exact);
  free(s->prefix);
  free(s->cred);
  free(s->www_auth);
  free(s->unix_path);
  http_trust_release(&s->trust);
  free(s);
}

static void on_handle_closed(uv_handle_t *h) {
  struct listener *l = h->data;
  http_server_t *s = l->srv;
  if (--s->open_handles == 0) server_free(s);
}

void http_server_stop(http_server_t *s) {
  if (!s || s->closing) return;
  s->closing = true;
  /* MHD is stopped from the close callbacks: never from inside MHD_run,
   * where a handler may call this. */
  bool any = false;
  for (int i = 0; i < s->nlsn; i++) {
    struct listener *l = s->lsn[i];
    if (!l->handles_open) continue;
    any = true;
    uv_close((uv_handle_t *)&l->poll, on_handle_closed);
    uv_close((uv_handle_t *)&l->timer, on_handle_closed);
    uv_close((uv_handle_t *)&l->sweep, on_handle_closed);
  }
  if (!any) server_free(s);
}
