/* The HTTP layer against a real socket: the server runs on this thread's uv
 * loop and a client thread speaks raw HTTP to it, recording the responses;
 * assertions run after the client thread has finished. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <regex.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/http.h"

/* ---- client side (runs on the client thread; no cmocka calls) ---- */

typedef struct resp {
  int status;
  char *head; /* status line and headers, NUL-terminated */
  char *body;
  size_t body_len;
  int err; /* nonzero: connection failed or closed early */
} resp;

typedef struct conn {
  int fd;
  char buf[1 << 16];
  size_t len;
} conn;

static void resp_free(resp *r) {
  free(r->head);
  free(r->body);
  memset(r, 0, sizeof(*r));
}

static void set_timeouts(int fd) {
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int conn_tcp(conn *c, int port) {
  memset(c, 0, sizeof(*c));
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  set_timeouts(c->fd);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa))) {
    close(c->fd);
    c->fd = -1;
    return -errno;
  }
  return 0;
}

static int conn_unix(conn *c, const char *path) {
  memset(c, 0, sizeof(*c));
  c->fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
  set_timeouts(c->fd);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa))) {
    close(c->fd);
    c->fd = -1;
    return -errno;
  }
  return 0;
}

static void conn_close(conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

static int send_all(conn *c, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static int send_str(conn *c, const char *s) { return send_all(c, s, strlen(s)); }

static int fill(conn *c) {
  if (c->len == sizeof(c->buf)) return -1;
  ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
  if (n <= 0) return -1;
  c->len += (size_t)n;
  return 0;
}

static void consume(conn *c, size_t n) {
  memmove(c->buf, c->buf + n, c->len - n);
  c->len -= n;
}

static const char *find_header(const char *head, const char *name, size_t *vlen) {
  size_t n = strlen(name);
  for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
    const char *line = p + 2;
    if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
      const char *v = line + n + 1;
      while (*v == ' ') v++;
      const char *e = strstr(v, "\r\n");
      *vlen = e ? (size_t)(e - v) : strlen(v);
      return v;
    }
  }
  return NULL;
}

/* Reads one response; head_only: a reply to HEAD (no body whatever it says). */
static int read_resp(conn *c, resp *out, int head_only) {
  memset(out, 0, sizeof(*out));
  char *end;
  while (!(end = memmem(c->buf, c->len, "\r\n\r\n", 4)))
    if (fill(c)) return out->err = -1;
  size_t hlen = (size_t)(end - c->buf) + 4;
  out->head = strndup(c->buf, hlen - 2);
  consume(c, hlen);
  sscanf(out->head, "HTTP/%*s %d", &out->status);
  size_t vlen;
  const char *cl = find_header(out->head, "Content-Length", &vlen);
  const char *te = find_header(out->head, "Transfer-Encoding", &vlen);
  if (head_only || out->status == 304 || out->status == 204) {
    out->body = calloc(1, 1);
    return 0;
  }
  if (cl) {
    size_t n = strtoull(cl, NULL, 10);
    out->body = malloc(n + 1);
    while (c->len < n && c->len < sizeof(c->buf))
      if (fill(c)) break;
    size_t got = 0;
    while (got < n) {
      if (!c->len && fill(c)) return out->err = -1;
      size_t k = c->len < n - got ? c->len : n - got;
      memcpy(out->body + got, c->buf, k);
      consume(c, k);
      got += k;
    }
    out->body[n] = '\0';
    out->body_len = n;
  } else if (te) {
    size_t cap = 1024, len = 0;
    out->body = malloc(cap);
    for (;;) {
      char *nl;
      while (!(nl = memmem(c->buf, c->len, "\r\n", 2)))
        if (fill(c)) return out->err = -1;
      size_t sz = strtoul(c->buf, NULL, 16);
      consume(c, (size_t)(nl - c->buf) + 2);
      while (c->len < sz + 2)
        if (fill(c)) return out->err = -1;
      if (len + sz + 1 > cap) {
        cap = (len + sz + 1) * 2;
        out->body = realloc(out->body, cap);
      }
      memcpy(out->body + len, c->buf, sz);
      len += sz;
      consume(c, sz + 2);
      if (sz == 0) break;
    }
    out->body[len] = '\0';
    out->body_len = len;
  } else { /* until the server closes */
    while (fill(c) == 0) {
    }
    out->body = strndup(c->buf, c->len);
    out->body_len = c->len;
    c->len = 0;
  }
  return 0;
}

/* Is the connection closed by the server (EOF within a short time)? */
static int conn_eof(conn *c) {
  struct timeval tv = {.tv_sec = 2};
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char b;
  ssize_t n = recv(c->fd, &b, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* ---- the test harness ---- */

#define MAX_RESP 40

typedef struct ctx ctx;
typedef void (*client_fn)(ctx *c);

struct ctx {
  uv_loop_t loop;
  http_server_t *srv;
  http_options_t opts;
  int port;
  char dir[256];
  char sock[100];
  uv_async_t done;
  client_fn client;
  pthread_t th;
  resp r[MAX_RESP];
  int n;
  int flags[8]; /* free for client-side observations */
  /* loop side */
  int deferred_pending;
  int access_count;
  char access_last[256];
  http_req_t *held;
  int late_reply; /* reply to a held request after the server stopped */
};

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&sa, sizeof(sa));
  socklen_t len = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &len);
  close(fd);
  return ntohs(sa.sin_port);
}

static void on_access_log(void *ud, const char *method, const char *path, int status,
                          uint64_t bytes) {
  ctx *c = ud;
  c->access_count++;
  snprintf(c->access_last, sizeof(c->access_last), "%s %s %d %llu", method, path, status,
           (unsigned long long)bytes);
}

/* Serialises params; long values as length + FNV hash. */
static void h_echo(http_req_t *r, void *ud) {
  size_t n;
  const http_param_t *p = http_req_params(r, &n);
  size_t cap = 4096, len = 0;
  char *out = malloc(cap);
  len += (size_t)snprintf(out, cap, "%s %s\n", http_req_method(r), http_req_path(r));
  for (size_t i = 0; i < n; i++) {
    if (len + 512 > cap) out = realloc(out, cap *= 2);
    len += (size_t)snprintf(out + len, cap - len, "%s|%s|%s|%zu|", p[i].from_body ? "B" : "Q",
                            p[i].key, p[i].filename ? p[i].filename : "-", p[i].len);
    if (p[i].len <= 64) {
      for (size_t k = 0; k < p[i].len; k++)
        len += (size_t)snprintf(out + len, cap - len, "%02x", (unsigned char)p[i].value[k]);
    } else {
      uint32_t h = 2166136261u;
      for (size_t k = 0; k < p[i].len; k++) h = (h ^ (unsigned char)p[i].value[k]) * 16777619u;
      len += (size_t)snprintf(out + len, cap - len, "fnv:%08x", h);
    }
    out[len++] = '\n';
  }
  const http_param_t *a = http_req_param(r, "a");
  if (len + 128 > cap) out = realloc(out, cap *= 2);
  len += (size_t)snprintf(out + len, cap - len, "a=%s\n", a ? a->value : "(none)");
  http_reply_header(r, "X-Echo", "1");
  http_reply(r, 200, "text/plain", out, len);
  free(out);
}

static void h_hello(http_req_t *r, void *ud) {
  static const char body[] = "{\"node_name\": \"test\", \"status\": \"ok\", \"pending\": 0, "
                             "\"running\": 0, \"finished\": 0}\n";
  http_reply_header(r, "Access-Control-Allow-Origin", "*");
  http_reply(r, 200, "application/json", body, sizeof(body) - 1);
}

static void h_named(http_req_t *r, void *ud) {
  const char *name = ud;
  char out[256];
  int n = snprintf(out, sizeof(out), "%s:%s", name, http_req_path(r));
  http_reply(r, 200, "text/plain", out, (size_t)n);
}

typedef struct deferred {
  uv_timer_t t;
  http_req_t *r;
  ctx *c;
} deferred;

static void deferred_closed(uv_handle_t *h) { free(h->data); }

static void deferred_fire(uv_timer_t *t) {
  deferred *d = t->data;
  char body[64];
  int n = snprintf(body, sizeof(body), "late %s", http_req_path(d->r));
  http_reply_header(d->r, "X-Deferred", "yes");
  http_reply(d->r, 202, "text/plain", body, (size_t)n);
  d->c->deferred_pending--;
  uv_close((uv_handle_t *)t, deferred_closed);
}

static void h_deferred(http_req_t *r, void *ud) {
  ctx *c = ud;
  deferred *d = calloc(1, sizeof(*d));
  d->r = r;
  d->c = c;
  uv_timer_init(&c->loop, &d->t);
  d->t.data = d;
  c->deferred_pending++;
  const http_param_t *ms = http_req_param(r, "ms");
  uv_timer_start(&d->t, deferred_fire, ms ? strtoull(ms->value, NULL, 10) : 50, 0);
}

/* Never replies while the server runs: the test replies after stopping it. */
static void h_hold(http_req_t *r, void *ud) {
  ctx *c = ud;
  c->held = r;
}

static void h_logs(http_req_t *r, void *ud) {
  ctx *c = ud;
  const char *path = http_req_path(r);
  http_serve_tree(r, c->dir, path + strlen("/logs"), path);
}

static void on_done(uv_async_t *a) {
  ctx *c = a->data;
  http_server_stop(c->srv);
  c->srv = NULL;
  uv_close((uv_handle_t *)a, NULL);
}

static void *client_main(void *arg) {
  ctx *c = arg;
  c->client(c);
  uv_async_send(&c->done);
  return NULL;
}

static void ctx_init(ctx *c) {
  memset(c, 0, sizeof(*c));
  assert_int_equal(uv_loop_init(&c->loop), 0);
  c->port = free_port();
  c->opts.bind_address = "127.0.0.1";
  c->opts.port = c->port;
  c->opts.realm = "Scrapyd";
  c->opts.max_body = 1 << 20;
}

static void ctx_start(ctx *c) {
  char err[256] = "";
  int rc;
  /* another test binary may take the "free" port first: pick again */
  for (int tries = 0;; tries++) {
    rc = http_server_start(&c->loop, &c->opts, &c->srv, err, sizeof(err));
    if (rc != -EADDRINUSE || tries == 5 || c->opts.port == 0 || c->opts.unix_socket_path) break;
    c->opts.port = c->port = free_port();
  }
  if (rc) fail_msg("http_server_start: %d %s", rc, err);
  http_set_access_log(c->srv, on_access_log, c);
  assert_int_equal(http_route(c->srv, "/echo", h_echo, c), 0);
  assert_int_equal(http_route(c->srv, "/daemonstatus.json", h_hello, c), 0);
  assert_int_equal(http_route(c->srv, "/deferred", h_deferred, c), 0);
  assert_int_equal(http_route(c->srv, "/hold", h_hold, c), 0);
  assert_int_equal(http_route_prefix(c->srv, "/logs/", h_logs, c), 0);
  assert_int_equal(http_route_prefix(c->srv, "/api/", h_named, "api"), 0);
  assert_int_equal(http_route_prefix(c->srv, "/api/v1/", h_named, "v1"), 0);
}

/* Runs the client on its thread while the loop serves, then stops the
 * server and drains the loop. */
static void ctx_run(ctx *c, client_fn fn) {
  c->client = fn;
  uv_async_init(&c->loop, &c->done, on_done);
  c->done.data = c;
  pthread_create(&c->th, NULL, client_main, c);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  pthread_join(c->th, NULL);
}

static void ctx_end(ctx *c) {
  assert_int_equal(uv_loop_close(&c->loop), 0);
  for (int i = 0; i < MAX_RESP; i++) resp_free(&c->r[i]);
}

/* One request on a fresh TCP connection. */
static resp *once(ctx *c, const char *raw, size_t len, int head_only) {
  resp *r = &c->r[c->n++];
  conn k;
  if (conn_tcp(&k, c->port)) {
    r->err = -1;
    return r;
  }
  if (send_all(&k, raw, len)) r->err = -1;
  else read_resp(&k, r, head_only);
  conn_close(&k);
  return r;
}

static resp *get(ctx *c, const char *target) {
  char raw[2048];
  int n = snprintf(raw, sizeof(raw), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                   target);
  return once(c, raw, (size_t)n, 0);
}

static resp *get_h(ctx *c, const char *target, const char *headers) {
  char *raw = NULL;
  int n = asprintf(&raw, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", target,
                   headers);
  resp *r = once(c, raw, (size_t)n, 0);
  free(raw);
  return r;
}

static resp *post(ctx *c, const char *target, const char *ct, const void *body, size_t len) {
  size_t cap = len + 1024;
  char *raw = malloc(cap);
  int n = snprintf(raw, cap,
                   "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   target, ct, len);
  memcpy(raw + n, body, len);
  resp *r = once(c, raw, (size_t)n + len, 0);
  free(raw);
  return r;
}

static char *header_dup(const resp *r, const char *name) {
  size_t n;
  const char *v = r->head ? find_header(r->head, name, &n) : NULL;
  return v ? strndup(v, n) : NULL;
}

static void assert_header(const resp *r, const char *name, const char *want) {
  char *v = header_dup(r, name);
  if (!want) {
    if (v) fail_msg("unexpected header %s: %s", name, v);
    return;
  }
  if (!v) fail_msg("missing header %s in\n%s", name, r->head ? r->head : "(none)");
  assert_string_equal(v, want);
  free(v);
}

static const char not_found_page[] =
    "\n<html>\n  <head><title>404 - No Such Resource</title></head>\n  <body>\n"
    "    <h1>No Such Resource</h1>\n    <p>Sorry. No luck finding that resource.</p>\n"
    "  </body>\n</html>\n";

static const char file_not_found_page[] =
    "\n<html>\n  <head><title>404 - No Such Resource</title></head>\n  <body>\n"
    "    <h1>No Such Resource</h1>\n    <p>File not found.</p>\n  </body>\n</html>\n";

/* ---- parameters ---- */

static void cl_query(ctx *c) {
  get(c, "/echo?a=1&b=&c&a=2&sp=x+y%20z&u=%C3%B1&bad=%C3");
}

static void test_query_params(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_query);
  resp *r = &c.r[0];
  assert_int_equal(r->status, 200);
  assert_header(r, "X-Echo", "1");
  assert_header(r, "Content-Type", "text/plain");
  assert_string_equal(r->body, "GET /echo\n"
                               "Q|a|-|1|31\n"
                               "Q|b|-|0|\n"
                               "Q|c|-|0|\n"
                               "Q|a|-|1|32\n"
                               "Q|sp|-|5|782079207a\n"
                               "Q|u|-|2|c3b1\n"
                               "Q|bad|-|1|c3\n"
                               "a=1\n");
  assert_int_equal(c.access_count, 1);
  char want[64];
  snprintf(want, sizeof(want), "GET /echo 200 %zu", r->body_len);
  assert_string_equal(c.access_last, want);
  ctx_end(&c);
}

static void cl_urlencoded(ctx *c) {
  const char *body = "a=B1&&k2=hello+world%21&mid&a=B2&empty=&bare";
  post(c, "/echo?a=Q1&q=1", "application/x-www-form-urlencoded", body, strlen(body));
  /* charset parameter and a body-only key */
  const char *b2 = "x=%00%ff&s=D=0&p=%zz%4";
  post(c, "/echo", "application/x-www-form-urlencoded; charset=UTF-8", b2, strlen(b2));
  /* JSON bodies are read and ignored, as Scrapyd does */
  const char *js = "{\"a\": \"json\"}";
  post(c, "/echo?a=Q", "application/json", js, strlen(js));
}

static void test_urlencoded_body(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_urlencoded);
  assert_int_equal(c.r[0].status, 200);
  assert_string_equal(c.r[0].body, "POST /echo\n"
                                   "Q|a|-|2|5131\n"
                                   "Q|q|-|1|31\n"
                                   "B|a|-|2|4231\n"
                                   "B|k2|-|12|68656c6c6f20776f726c6421\n"
                                   "B|mid|-|0|\n"
                                   "B|a|-|2|4232\n"
                                   "B|empty|-|0|\n"
                                   "B|bare|-|0|\n"
                                   "a=B1\n");
  /* parse_qs: split at the first '=', invalid escapes kept as sent */
  assert_string_equal(c.r[1].body, "POST /echo\nB|x|-|2|00ff\nB|s|-|3|443d30\n"
                                   "B|p|-|5|257a7a2534\na=(none)\n");
  assert_string_equal(c.r[2].body, "POST /echo\nQ|a|-|1|51\na=Q\n");
  ctx_end(&c);
}

static size_t build_multipart(char *out, const unsigned char *file, size_t flen) {
  size_t n = (size_t)sprintf(out,
                             "--XyZ\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\n"
                             "myproj\r\n"
                             "--XyZ\r\nContent-Disposition: form-data; name=\"egg\"; "
                             "filename=\"project.egg\"\r\nContent-Type: application/octet-stream"
                             "\r\n\r\n");
  memcpy(out + n, file, flen);
  n += flen;
  n += (size_t)sprintf(out + n, "\r\n--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"
                                "\r\n--XyZ--\r\n");
  return n;
}

static unsigned char bigfile[300000];

static void cl_multipart(ctx *c) {
  char *body = malloc(sizeof(bigfile) + 1024);
  size_t n = build_multipart(body, bigfile, sizeof(bigfile));
  post(c, "/echo?a=Q", "multipart/form-data; boundary=XyZ", body, n);
  /* small binary file with NULs, CRLFs and a near-boundary */
  static const unsigned char small[] = {0, 1, 2, '\r', '\n', '-', '-', 'X', 'y', 0xff, 0};
  n = build_multipart(body, small, sizeof(small));
  post(c, "/echo", "multipart/form-data; boundary=\"XyZ\"", body, n);
  free(body);
}

/* The same bodies sent a few bytes at a time: fields cut anywhere. */
static void drip_n(ctx *c, const char *ct, const char *body, size_t len, size_t step) {
  conn k;
  resp *r = &c->r[c->n++];
  if (conn_tcp(&k, c->port)) {
    r->err = -1;
    return;
  }
  char head[256];
  snprintf(head, sizeof(head),
           "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
           "Connection: close\r\n\r\n",
           ct, len);
  send_str(&k, head);
  for (size_t i = 0; i < len; i += step) {
    send_all(&k, body + i, len - i < step ? len - i : step);
    usleep(100);
  }
  read_resp(&k, r, 0);
  conn_close(&k);
}

static void drip(ctx *c, const char *ct, const char *body, size_t len) {
  drip_n(c, ct, body, len, 3);
}

/* Empty and repeated fields, whatever the cuts. */
static size_t tricky_multipart(char *out) {
  size_t n = 0;
  const char *names[] = {"a", "a", "a", "b", "a"};
  const char *vals[] = {"", "x", "", NULL, ""};
  for (int i = 0; i < 5; i++) {
    n += (size_t)sprintf(out + n, "--XyZ\r\nContent-Disposition: form-data; name=\"%s\"%s\r\n\r\n",
                         names[i], vals[i] ? "" : "; filename=\"f.bin\"");
    if (vals[i]) {
      n += (size_t)sprintf(out + n, "%s", vals[i]);
    } else {
      for (int k = 0; k < 700; k++) out[n++] = (char)(k % 3 == 0 ? '\r' : k % 3 == 1 ? '\n' : '-');
    }
    n += (size_t)sprintf(out + n, "\r\n");
  }
  n += (size_t)sprintf(out + n, "--XyZ--\r\n");
  return n;
}

static void cl_tricky(ctx *c) {
  char body[4096];
  size_t n = tricky_multipart(body);
  post(c, "/echo", "multipart/form-data; boundary=XyZ", body, n);
  const size_t steps[] = {1, 2, 5, 7, 64};
  for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
    drip_n(c, "multipart/form-data; boundary=XyZ", body, n, steps[i]);
}

static void test_multipart_cuts(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_tricky);
  assert_int_equal(c.r[0].status, 200);
  assert_non_null(strstr(c.r[0].body, "POST /echo\nB|a|-|0|\nB|a|-|1|78\nB|a|-|0|\n"
                                      "B|b|f.bin|700|fnv:"));
  assert_non_null(strstr(c.r[0].body, "\nB|a|-|0|\na=\n"));
  for (int i = 1; i <= 5; i++) {
    assert_int_equal(c.r[i].status, 200);
    assert_string_equal(c.r[i].body, c.r[0].body);
  }
  ctx_end(&c);
}

static void cl_drip(ctx *c) {
  static const unsigned char bin[] = {0, 1, 2, '\r', '\n', '-', '-', 'X', 'y', 0xff, 0};
  char body[1024];
  size_t n = build_multipart(body, bin, sizeof(bin));
  drip(c, "multipart/form-data; boundary=XyZ", body, n);
  const char *form = "a=B1&&k2=hello+world%21&mid&a=B2&empty=&bare";
  drip(c, "application/x-www-form-urlencoded", form, strlen(form));
  /* an empty file part */
  const char *empty = "--XyZ\r\nContent-Disposition: form-data; name=\"egg\"; filename=\"e.egg\"\r\n"
                      "Content-Type: application/octet-stream\r\n\r\n\r\n--XyZ--\r\n";
  post(c, "/echo", "multipart/form-data; boundary=XyZ", empty, strlen(empty));
}

static void test_body_in_pieces(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_drip);
  assert_int_equal(c.r[0].status, 200);
  assert_string_equal(c.r[0].body, "POST /echo\nB|project|-|6|6d7970726f6a\n"
                                   "B|egg|project.egg|11|0001020d0a2d2d5879ff00\nB|a|-|0|\na=\n");
  assert_int_equal(c.r[1].status, 200);
  assert_string_equal(c.r[1].body, "POST /echo\n"
                                   "B|a|-|2|4231\n"
                                   "B|k2|-|12|68656c6c6f20776f726c6421\n"
                                   "B|mid|-|0|\n"
                                   "B|a|-|2|4232\n"
                                   "B|empty|-|0|\n"
                                   "B|bare|-|0|\n"
                                   "a=B1\n");
  assert_int_equal(c.r[2].status, 200);
  assert_string_equal(c.r[2].body, "POST /echo\nB|egg|e.egg|0|\na=(none)\n");
  ctx_end(&c);
}

static void test_multipart_body(void **state) {
  for (size_t i = 0; i < sizeof(bigfile); i++) bigfile[i] = (unsigned char)(i * 7 + (i >> 9));
  uint32_t h = 2166136261u;
  for (size_t k = 0; k < sizeof(bigfile); k++) h = (h ^ bigfile[k]) * 16777619u;
  char want[512];
  snprintf(want, sizeof(want),
           "POST /echo\nQ|a|-|1|51\nB|project|-|6|6d7970726f6a\n"
           "B|egg|project.egg|%zu|fnv:%08x\nB|a|-|0|\na=\n",
           sizeof(bigfile), h);
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_multipart);
  assert_int_equal(c.r[0].status, 200);
  assert_string_equal(c.r[0].body, want);
  assert_int_equal(c.r[1].status, 200);
  assert_string_equal(c.r[1].body, "POST /echo\nB|project|-|6|6d7970726f6a\n"
                                   "B|egg|project.egg|11|0001020d0a2d2d5879ff00\nB|a|-|0|\na=\n");
  ctx_end(&c);
}

/* ---- body limits and malformed bodies ---- */

static void cl_limits(ctx *c) {
  /* declared too large by a client that waits (Expect: 100-continue), or
   * beyond what is worth reading: answered before the body is sent */
  conn k;
  resp *r = &c->r[c->n++];
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 "Expect: 100-continue\r\nContent-Length: 5000\r\n\r\n");
    read_resp(&k, r, 0);
    conn_close(&k);
  }
  /* streamed (chunked) past the limit */
  r = &c->r[c->n++];
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n");
    char chunk[600];
    memset(chunk, 'a', sizeof(chunk));
    memcpy(chunk, "a=", 2);
    char hdr[16];
    int sent_ok = 0;
    for (int i = 0; i < 4; i++) {
      snprintf(hdr, sizeof(hdr), "%zx\r\n", sizeof(chunk));
      if (send_str(&k, hdr) || send_all(&k, chunk, sizeof(chunk)) || send_str(&k, "\r\n")) break;
      sent_ok++;
    }
    send_str(&k, "0\r\n\r\n");
    read_resp(&k, r, 0);
    c->flags[0] = sent_ok;
    conn_close(&k);
  }
  /* exactly at the limit is fine */
  char body[1000];
  memset(body, 'z', sizeof(body));
  memcpy(body, "a=", 2);
  post(c, "/echo", "application/x-www-form-urlencoded", body, sizeof(body));
  /* declared too large and sent at once: read, thrown away, then 413 (a
   * client still sending would otherwise see a reset, not the answer) */
  r = &c->r[c->n++];
  if (conn_tcp(&k, c->port) == 0) {
    char big[5000];
    memset(big, 'b', sizeof(big));
    send_str(&k, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: 5000\r\n\r\n");
    send_all(&k, big, sizeof(big));
    read_resp(&k, r, 0);
    conn_close(&k);
  }
  r = &c->r[c->n++];
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                 "Content-Length: 999999999999\r\n\r\n");
    read_resp(&k, r, 0);
    conn_close(&k);
  }
}

static void cl_many_fields(ctx *c) {
  size_t n = 10001;
  char *body = malloc(n * 2);
  for (size_t i = 0; i < n; i++) memcpy(body + 2 * i, "k&", 2);
  post(c, "/echo", "application/x-www-form-urlencoded", body, n * 2 - 1);
  post(c, "/echo", "application/x-www-form-urlencoded", body, 9999 * 2 - 1);
  free(body);
  /* headers up to ~8 KiB fit (nginx's and Apache's default), larger: 431 */
  char *hdr = malloc(12000);
  memcpy(hdr, "Cookie: c=", 10);
  memset(hdr + 10, 'x', 7000);
  memcpy(hdr + 7010, "\r\n", 3);
  get_h(c, "/echo?a=big", hdr);
  memset(hdr + 10, 'x', 10000);
  memcpy(hdr + 10010, "\r\n", 3);
  get_h(c, "/echo?a=big", hdr);
  free(hdr);
}

static void test_body_limits(void **state) {
  ctx c;
  ctx_init(&c);
  c.opts.max_body = 1000;
  ctx_start(&c);
  ctx_run(&c, cl_limits);
  assert_int_equal(c.r[0].status, 413);
  assert_int_equal(c.r[1].status, 413);
  assert_int_equal(c.r[2].status, 200);
  assert_non_null(strstr(c.r[2].body, "B|a|-|998|fnv:"));
  assert_int_equal(c.r[3].status, 413);
  assert_int_equal(c.r[4].status, 413);
  ctx_end(&c);
}

static void test_field_limit(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_many_fields);
  assert_int_equal(c.r[0].status, 413);
  assert_int_equal(c.r[1].status, 200);
  assert_non_null(strstr(c.r[1].body, "B|k|-|0|\na=(none)\n"));
  assert_int_equal(c.r[2].status, 200);
  assert_non_null(strstr(c.r[2].body, "a=big\n"));
  assert_int_equal(c.r[3].status, 431);
  ctx_end(&c);
}

static void cl_malformed(ctx *c) {
  const char *truncated = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nvalue";
  post(c, "/echo", "multipart/form-data; boundary=XyZ", truncated, strlen(truncated));
  const char *garbage = "this is not multipart at all";
  post(c, "/echo", "multipart/form-data; boundary=XyZ", garbage, strlen(garbage));
  const char *ok = "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--\r\n";
  post(c, "/echo", "multipart/form-data", ok, strlen(ok)); /* no boundary */
  post(c, "/echo", "multipart/form-data; boundary=XyZ", ok, strlen(ok));
  post(c, "/echo", "multipart/form-data; boundary=XyZ", "", 0); /* empty form */
}

static void test_malformed_multipart(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_malformed);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c.r[i].status, 400);
    assert_non_null(strstr(c.r[i].body, "multipart/form-data"));
    assert_header(&c.r[i], "Content-Type", "text/plain; charset=utf-8");
  }
  assert_int_equal(c.r[3].status, 200);
  assert_string_equal(c.r[3].body, "POST /echo\nB|a|-|1|76\na=v\n");
  assert_int_equal(c.r[4].status, 200);
  ctx_end(&c);
}

/* ---- credentials, judged by an authenticator ---- */

/* Lets in "user:s3cret" over Basic; every other header, or none, is refused
 * with the server's default 401. */
static int auth_user(void *ud, http_req_t *r, const http_credentials_t *cred) {
  return cred->scheme == HTTP_CRED_BASIC && !strcmp(cred->user, "user") &&
                 !strcmp(cred->secret, "s3cret")
             ? HTTP_AUTH_ALLOW
             : HTTP_AUTH_DENY;
}

static void cl_auth(ctx *c) {
  get(c, "/echo");
  get(c, "/nosuch");
  get(c, "/");
  get(c, "/logs/");
  once(c, "OPTIONS /daemonstatus.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       strlen("OPTIONS /daemonstatus.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 0);
  post(c, "/echo", "application/x-www-form-urlencoded", "a=1", 3);
  get_h(c, "/echo", "Authorization: Basic dXNlcjp3cm9uZw==\r\n");  /* user:wrong */
  get_h(c, "/echo", "Authorization: Bearer dXNlcjpzM2NyZXQ=\r\n"); /* wrong scheme */
  get_h(c, "/echo?a=ok", "Authorization: Basic dXNlcjpzM2NyZXQ=\r\n"); /* user:s3cret */
  get_h(c, "/echo?a=ok", "Authorization: basic dXNlcjpzM2NyZXQ\r\n");  /* no padding */
  get_h(c, "/nosuch", "Authorization: Basic dXNlcjpzM2NyZXQ=\r\n");
}

static void test_basic_auth(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  http_set_auth(c.srv, auth_user, NULL, NULL, NULL);
  ctx_run(&c, cl_auth);
  for (int i = 0; i < 8; i++) {
    resp *r = &c.r[i];
    assert_int_equal(r->status, 401);
    assert_string_equal(r->body, "Unauthorized");
    assert_header(r, "Content-Type", "text/html");
    assert_header(r, "WWW-Authenticate", "basic realm=\"Scrapyd\"");
    assert_header(r, "Content-Length", "12");
  }
  assert_int_equal(c.r[8].status, 200);
  assert_non_null(strstr(c.r[8].body, "a=ok\n"));
  assert_int_equal(c.r[9].status, 200);
  assert_int_equal(c.r[10].status, 404);
  assert_string_equal(c.r[10].body, not_found_page);
  ctx_end(&c);
}

/* ---- routing ---- */

static void h_fallback(http_req_t *r, void *ud) {
  http_reply(r, 418, "text/plain", "teapot", 6);
}

static void cl_routing(ctx *c) {
  get(c, "/daemonstatus.json");
  get(c, "/daemonstatus.json/");
  get(c, "//daemonstatus.json/"); /* slashes merged: still the trailing one */
  get(c, "/DAEMONSTATUS.JSON");
  get(c, "/api");
  get(c, "/api/v1/jobs");
  get(c, "/api/v2");
  get(c, "/apix");
  get(c, "/daemon%73tatus.json"); /* percent-decoded before routing */
  /* a NUL would cut the decoded path short: refused before any handler */
  get(c, "/api/a%00.js");
  post(c, "/api/%00", "application/x-www-form-urlencoded", "a=1", 3);
  get(c, "/api/%2500");   /* an escaped '%': the path is "/api/%00" */
  get(c, "/echo?a=%00x"); /* in the query a NUL is a value's byte */
  get(c, "/logs/a%00b");  /* outside /api/: plain text */
}

static void test_routing(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_routing);
  assert_int_equal(c.r[0].status, 200);
  assert_header(&c.r[0], "Content-Type", "application/json");
  assert_header(&c.r[0], "Access-Control-Allow-Origin", "*");
  for (int i = 1; i < 4; i++) {
    assert_int_equal(c.r[i].status, 404);
    assert_header(&c.r[i], "Content-Type", "text/html; charset=utf-8");
    assert_string_equal(c.r[i].body, not_found_page);
  }
  assert_string_equal(c.r[4].body, "api:/api");
  assert_string_equal(c.r[5].body, "v1:/api/v1/jobs");
  assert_string_equal(c.r[6].body, "api:/api/v2");
  assert_int_equal(c.r[7].status, 404);
  assert_int_equal(c.r[8].status, 200);
  for (int i = 9; i < 11; i++) { /* under /api/: the native error shape */
    assert_int_equal(c.r[i].status, 400);
    assert_header(&c.r[i], "Content-Type", "application/json");
    assert_string_equal(c.r[i].body,
                        "{\"error\": {\"code\": \"SPD_EBADREQUEST\", \"message\": \"Bad request: "
                        "the path holds a NUL byte (%00).\", \"details\": {}}}");
  }
  assert_int_equal(c.r[13].status, 400);
  assert_string_equal(c.r[13].body, "400 Bad Request: the path holds a NUL byte (%00).\n");
  assert_string_equal(c.r[11].body, "api:/api/%00");
  assert_int_equal(c.r[12].status, 200);
  assert_non_null(strstr(c.r[12].body, "Q|a|-|2|0078\n"));
  ctx_end(&c);

  /* a custom fallback */
  ctx_init(&c);
  ctx_start(&c);
  http_set_fallback(c.srv, h_fallback, NULL);
  ctx_run(&c, cl_routing);
  assert_int_equal(c.r[1].status, 418);
  assert_int_equal(c.r[7].status, 418);
  ctx_end(&c);
}

/* ---- deferred replies, HEAD, keep-alive ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void cl_deferred(ctx *c) {
  double t0 = now_s();
  get(c, "/deferred?ms=100");
  double dt = now_s() - t0;
  c->flags[0] = dt >= 0.09 && dt < 1.0;
  /* several deferred requests on one keep-alive connection, plus a sync one */
  conn k;
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "GET /deferred?ms=30 HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 0);
    send_str(&k, "GET /daemonstatus.json HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 0);
    send_str(&k, "GET /deferred?ms=0 HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 0);
    conn_close(&k);
  }
  /* the client leaves before the deferred reply: the reply must be safe */
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "GET /deferred?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n");
    conn_close(&k);
  }
  usleep(400 * 1000);
  get(c, "/daemonstatus.json");
  /* a request the server stops on before it is answered */
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    usleep(100 * 1000);
    conn_close(&k);
  }
}

static void test_deferred_reply(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_deferred);
  assert_int_equal(c.r[0].status, 202);
  assert_string_equal(c.r[0].body, "late /deferred");
  assert_header(&c.r[0], "X-Deferred", "yes");
  assert_true(c.flags[0]);
  assert_int_equal(c.r[1].status, 202);
  assert_int_equal(c.r[2].status, 200);
  assert_int_equal(c.r[3].status, 202);
  assert_int_equal(c.r[4].status, 200);
  assert_int_equal(c.deferred_pending, 0);
  /* the held request outlived its server; replying must be harmless */
  assert_non_null(c.held);
  assert_string_equal(http_req_path(c.held), "/hold");
  assert_null(http_req_header(c.held, "Host"));
  http_reply(c.held, 200, "text/plain", "too late", 8);
  ctx_end(&c);
}

static void cl_head(ctx *c) {
  once(c, "HEAD /daemonstatus.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       strlen("HEAD /daemonstatus.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 1);
  get(c, "/daemonstatus.json");
  /* on a keep-alive connection, a HEAD reply must carry no body bytes */
  conn k;
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "HEAD /nosuch HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 1);
    send_str(&k, "GET /daemonstatus.json HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 0);
    conn_close(&k);
  }
}

static void test_head(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_head);
  assert_int_equal(c.r[0].status, 200);
  assert_int_equal(c.r[1].status, 200);
  char *len = header_dup(&c.r[0], "Content-Length");
  assert_non_null(len);
  assert_int_equal(strtoul(len, NULL, 10), c.r[1].body_len);
  free(len);
  assert_int_equal(c.r[2].status, 404);
  assert_int_equal(c.r[3].status, 200);
  assert_non_null(strstr(c.r[3].body, "\"status\": \"ok\""));
  ctx_end(&c);
}

static void cl_keepalive(ctx *c) {
  conn k;
  if (conn_tcp(&k, c->port)) return;
  for (int i = 0; i < 3; i++) {
    send_str(&k, "GET /daemonstatus.json HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 0);
  }
  /* pipelined: two requests in one write */
  send_str(&k, "GET /echo?a=p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?a=p2 HTTP/1.1\r\nHost: x\r\n\r\n");
  read_resp(&k, &c->r[c->n++], 0);
  read_resp(&k, &c->r[c->n++], 0);
  /* a body on a kept-alive connection */
  send_str(&k, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: "
               "application/x-www-form-urlencoded\r\nContent-Length: 4\r\n\r\na=pb");
  read_resp(&k, &c->r[c->n++], 0);
  conn_close(&k);
  /* HTTP/1.0 with Connection: keep-alive */
  if (conn_tcp(&k, c->port)) return;
  send_str(&k, "GET /daemonstatus.json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  read_resp(&k, &c->r[c->n++], 0);
  send_str(&k, "GET /daemonstatus.json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  read_resp(&k, &c->r[c->n++], 0);
  conn_close(&k);
  /* HTTP/1.0 without it: closed after the reply */
  if (conn_tcp(&k, c->port)) return;
  send_str(&k, "GET /daemonstatus.json HTTP/1.0\r\n\r\n");
  read_resp(&k, &c->r[c->n++], 0);
  c->flags[0] = conn_eof(&k);
  conn_close(&k);
}

static void test_keepalive(void **state) {
  ctx c;
  ctx_init(&c);
  ctx_start(&c);
  ctx_run(&c, cl_keepalive);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c.r[i].err, 0);
    assert_int_equal(c.r[i].status, 200);
  }
  assert_non_null(strstr(c.r[3].body, "a=p1\n"));
  assert_non_null(strstr(c.r[4].body, "a=p2\n"));
  assert_non_null(strstr(c.r[5].body, "a=pb\n"));
  assert_int_equal(c.r[6].status, 200);
  assert_header(&c.r[6], "Connection", "Keep-Alive");
  assert_int_equal(c.r[7].err, 0);
  assert_int_equal(c.r[7].status, 200);
  assert_int_equal(c.r[8].status, 200);
  assert_true(c.flags[0]);
  ctx_end(&c);
}

/* ---- listeners ---- */

static void cl_unix_tcp(ctx *c) {
  conn k;
  resp *r = &c->r[c->n++];
  if (conn_unix(&k, c->sock) == 0) {
    send_str(&k, "GET /echo?a=unix HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, r, 0);
    send_str(&k, "GET /deferred?ms=10 HTTP/1.1\r\nHost: x\r\n\r\n");
    read_resp(&k, &c->r[c->n++], 0);
    conn_close(&k);
  } else {
    r->err = -1;
    c->n++;
  }
  get(c, "/echo?a=tcp");
}

static void test_unix_and_tcp(void **state) {
  ctx c;
  ctx_init(&c);
  char tmpl[] = "/tmp/spiderd-http-XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  snprintf(c.sock, sizeof(c.sock), "%s/s.sock", tmpl);
  /* a stale socket file from an earlier run is replaced */
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c.sock);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  close(fd);
  c.opts.unix_socket_path = c.sock;
  ctx_start(&c);
  struct stat st;
  assert_int_equal(stat(c.sock, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0660);
  /* a second server on the same socket and port must fail with a reason */
  http_server_t *s2 = NULL;
  char err[256] = "";
  assert_int_not_equal(http_server_start(&c.loop, &c.opts, &s2, err, sizeof(err)), 0);
  assert_null(s2);
  assert_non_null(strstr(err, "Address already in use"));
  http_options_t only_unix = c.opts;
  only_unix.port = 0;
  assert_int_not_equal(http_server_start(&c.loop, &only_unix, &s2, err, sizeof(err)), 0);
  assert_non_null(strstr(err, c.sock));
  ctx_run(&c, cl_unix_tcp);
  assert_int_equal(c.r[0].status, 200);
  assert_non_null(strstr(c.r[0].body, "a=unix\n"));
  assert_int_equal(c.r[1].status, 202);
  assert_int_equal(c.r[2].status, 200);
  assert_non_null(strstr(c.r[2].body, "a=tcp\n"));
  ctx_end(&c);
  assert_int_not_equal(stat(c.sock, &st), 0); /* removed at stop */
  rmdir(tmpl);
}

static void cl_dual(ctx *c) { get(c, "/daemonstatus.json"); }

/* "::" takes IPv4 clients too, as Twisted's listener on "::" does. */
static void test_dual_stack(void **state) {
  ctx c;
  ctx_init(&c);
  c.opts.bind_address = "::";
  char err[256] = "";
  if (http_server_start(&c.loop, &c.opts, &c.srv, err, sizeof(err))) {
    uv_loop_close(&c.loop); /* no IPv6 here */
    skip();
  }
  ctx_run(&c, cl_dual);
  assert_int_equal(c.r[0].status, 404); /* no routes: reached the fallback over IPv4 */
  ctx_end(&c);
}

static void test_start_errors(void **state) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  http_options_t o = {.bind_address = "127.0.0.1", .port = 0};
  http_server_t *s = NULL;
  char err[256] = "";
  assert_int_not_equal(http_server_start(&loop, &o, &s, err, sizeof(err)), 0);
  o.port = free_port();
  o.bind_address = "not-an-address.invalid";
  assert_int_not_equal(http_server_start(&loop, &o, &s, err, sizeof(err)), 0);
  assert_non_null(strstr(err, "not-an-address.invalid"));
  o.bind_address = "::1";
  int rc = http_server_start(&loop, &o, &s, err, sizeof(err));
  if (rc == 0) { /* IPv6 may be missing in a container */
    http_server_stop(s);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- static trees ---- */

static void write_file(const char *dir, const char *name, const char *data, size_t len,
                       time_t mtime) {
  char path[1100];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fwrite(data, 1, len, f);
  fclose(f);
  struct timespec ts[2] = {{.tv_sec = mtime}, {.tv_sec = mtime}};
  utimensat(AT_FDCWD, path, ts, 0);
}

static void cl_tree(ctx *c) {
  get(c, "/logs/p/s/job1.log");                        /* 0 */
  get_h(c, "/logs/p/s/job1.log", "Range: bytes=2-5\r\n"); /* 1 */
  get_h(c, "/logs/p/s/job1.log", "Range: bytes=-3\r\n");  /* 2 */
  get_h(c, "/logs/p/s/job1.log", "Range: bytes=100-\r\n"); /* 3 */
  get_h(c, "/logs/p/s/job1.log", "Range: bytes=5-\r\n");  /* 4 */
  get(c, "/logs/p/s");                                 /* 5 */
  get(c, "/logs/p/s/");                                /* 6 */
  get(c, "/logs/../secret.txt");                       /* 7 */
  get(c, "/logs/p/%2e%2e/%2e%2e/secret.txt");          /* 8 */
  get(c, "/logs/p/s/escape");                          /* 9: symlink out of the root */
  get(c, "/logs/p/s/nosuch.log");                      /* 10 */
  get(c, "/logs/stats.json");                          /* 11 */
  get(c, "/logs/p/s/job1.log/");                       /* 12 */
  get(c, "/logs");                                     /* 13 */
  get(c, "/logs/");                                    /* 14 */
  get_h(c, "/logs/p/s/job1.log", "If-Modified-Since: Sun, 01 Jan 2034 00:00:00 GMT\r\n"); /* 15 */
  once(c, "HEAD /logs/p/s/job1.log HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
       strlen("HEAD /logs/p/s/job1.log HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
       1);                                             /* 16 */
  get(c, "/logs/p/s/job2.log.gz");                     /* 17 */
}

static int count_matches(const char *re, const char *text, int want_groups, char got[][128]) {
  regex_t rx;
  if (regcomp(&rx, re, REG_EXTENDED)) return -1;
  regmatch_t m[8];
  int n = 0;
  const char *p = text;
  while (regexec(&rx, p, 8, m, 0) == 0) {
    if (got && want_groups > 0) {
      int len = (int)(m[want_groups].rm_eo - m[want_groups].rm_so);
      snprintf(got[n], 128, "%.*s", len, p + m[want_groups].rm_so);
    }
    n++;
    p += m[0].rm_eo;
  }
  regfree(&rx);
  return n;
}

static void test_serve_tree(void **state) {
  ctx c;
  ctx_init(&c);
  char tmpl[] = "/tmp/spiderd-http-XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  char root[256], path[512];
  snprintf(root, sizeof(root), "%s/logs", tmpl);
  snprintf(c.dir, sizeof(c.dir), "%s", root);
  mkdir(root, 0755);
  snprintf(path, sizeof(path), "%s/p", root);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/p/s", root);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/p/s/sub dir", root);
  mkdir(path, 0755);
  snprintf(path, sizeof(path), "%s/p/s", root);
  time_t mt = 1700000000;
  write_file(path, "job1.log", "0123456789", 10, mt);
  char *big = calloc(1, 3 * 1024 + 5);
  write_file(path, "job2.log.gz", big, 3 * 1024 + 5, mt);
  free(big);
  write_file(path, "job3.json", "{}", 2, mt);
  write_file(path, "a<b>&\"c'.txt", "x", 1, mt);
  write_file(tmpl, "secret.txt", "secret", 6, mt);
  char link[600];
  snprintf(link, sizeof(link), "%s/escape", path);
  snprintf(path, sizeof(path), "%s/secret.txt", tmpl);
  assert_int_equal(symlink(path, link), 0);
  snprintf(link, sizeof(link), "%s/p/s/inside.log", root);
  snprintf(path, sizeof(path), "%s/p/s/job1.log", root);
  assert_int_equal(symlink(path, link), 0);
  write_file(root, "stats.json", "{\"a\": 1}", 8, mt);

  ctx_start(&c);
  ctx_run(&c, cl_tree);

  char lm[64];
  struct tm tm;
  gmtime_r(&mt, &tm);
  strftime(lm, sizeof(lm), "%a, %d %b %Y %H:%M:%S GMT", &tm);

  resp *r = c.r;
  assert_int_equal(r[0].status, 200);
  assert_string_equal(r[0].body, "0123456789");
  assert_header(&r[0], "Content-Type", "text/plain");
  assert_header(&r[0], "Accept-Ranges", "bytes");
  assert_header(&r[0], "Last-Modified", lm);
  assert_int_equal(r[1].status, 206);
  assert_string_equal(r[1].body, "2345");
  assert_header(&r[1], "Content-Range", "bytes 2-5/10");
  assert_int_equal(r[2].status, 206);
  assert_string_equal(r[2].body, "789");
  assert_header(&r[2], "Content-Range", "bytes 7-9/10");
  assert_int_equal(r[3].status, 416);
  assert_header(&r[3], "Content-Range", "bytes */10");
  assert_int_equal(r[4].status, 206);
  assert_string_equal(r[4].body, "56789");
  assert_int_equal(r[5].status, 302);
  assert_header(&r[5], "Location", "/logs/p/s/");
  for (int i = 7; i <= 10; i++) {
    assert_int_equal(r[i].status, 404);
    assert_string_equal(r[i].body, file_not_found_page);
    assert_header(&r[i], "Content-Type", "text/html; charset=utf-8");
  }
  assert_int_equal(r[11].status, 200);
  assert_header(&r[11], "Content-Type", "application/json");
  assert_int_equal(r[12].status, 404);
  assert_int_equal(r[13].status, 302);
  assert_header(&r[13], "Location", "/logs/");
  assert_int_equal(r[14].status, 200);
  assert_non_null(strstr(r[14].body, "Directory listing for /logs/"));
  assert_int_equal(r[15].status, 304);
  assert_int_equal(r[16].status, 200);
  assert_header(&r[16], "Content-Length", "10");
  assert_int_equal(r[17].status, 200);
  assert_header(&r[17], "Content-Encoding", "gzip");
  assert_header(&r[17], "Content-Type", "text/plain");

  /* the listing, parsed as ScrapydWeb does */
  resp *l = &r[6];
  assert_int_equal(l->status, 200);
  assert_header(l, "Content-Type", "text/html; charset=utf-8");
  assert_non_null(strstr(l->body, "<title>Directory listing for /logs/p/s/</title>"));
  assert_non_null(strstr(l->body, "<h1>Directory listing for /logs/p/s/</h1>"));
  assert_non_null(strstr(l->body, "<th>Last modified</th>"));
  const char *row_re = "<tr class=\"(odd|even)\">\n"
                       "[[:space:]]+<td>([^\n]*)</td>\n"
                       "[[:space:]]+<td>([^\n]*)</td>\n"
                       "([[:space:]]+<td>([^\n]*)</td>\n)?"
                       "[[:space:]]+<td>([^\n]*)</td>\n"
                       "[[:space:]]+<td>([^\n]*)</td>\n"
                       "</tr>";
  char cls[8][128], names[8][128];
  assert_int_equal(count_matches(row_re, l->body, 1, cls), 6);
  assert_string_equal(cls[0], "odd");
  assert_string_equal(cls[1], "even");
  assert_string_equal(cls[2], "odd");
  assert_int_equal(count_matches("href=\"([^\"]+)\">([^<]+)<", l->body, 1, names), 6);
  assert_string_equal(names[0], "sub%20dir/");
  assert_string_equal(names[1], "a%3Cb%3E%26%22c%27.txt");
  assert_string_equal(names[2], "inside.log");
  assert_string_equal(names[3], "job1.log");
  assert_string_equal(names[4], "job2.log.gz");
  assert_string_equal(names[5], "job3.json");

  char mod[32];
  localtime_r(&mt, &tm);
  strftime(mod, sizeof(mod), "%Y-%m-%d %H:%M", &tm);
  char row[512];
  snprintf(row, sizeof(row),
           "<tr class=\"odd\">\n    <td><a href=\"sub%%20dir/\">sub dir/</a></td>\n"
           "    <td></td>\n    <td>");
  assert_non_null(strstr(l->body, row));
  assert_non_null(strstr(l->body, "</td>\n    <td>[Directory]</td>\n    <td></td>\n</tr>\n"));
  snprintf(row, sizeof(row),
           "<tr class=\"even\">\n    <td><a href=\"job1.log\">job1.log</a></td>\n"
           "    <td>10B</td>\n    <td>%s</td>\n    <td>[text/plain]</td>\n    <td></td>\n</tr>\n",
           mod);
  assert_non_null(strstr(l->body, row));
  snprintf(row, sizeof(row),
           "<tr class=\"odd\">\n    <td><a href=\"job2.log.gz\">job2.log.gz</a></td>\n"
           "    <td>3K</td>\n    <td>%s</td>\n    <td>[text/plain]</td>\n    <td>[gzip]</td>\n"
           "</tr>\n",
           mod);
  assert_non_null(strstr(l->body, row));
  assert_non_null(strstr(l->body, ">a&lt;b&gt;&amp;&quot;c&#x27;.txt</a>"));
  assert_non_null(strstr(l->body, "<td>[application/json]</td>"));
  assert_null(strstr(l->body, "escape"));
  ctx_end(&c);

  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
  assert_int_equal(system(cmd), 0);
}

static void cl_big(ctx *c) {
  get(c, "/logs/big.log");
  get_h(c, "/logs/big.log", "Range: bytes=1000000-1000009\r\n");
  /* a client that leaves in the middle of a large file */
  conn k;
  if (conn_tcp(&k, c->port) == 0) {
    send_str(&k, "GET /logs/big.log HTTP/1.1\r\nHost: x\r\n\r\n");
    fill(&k);
    conn_close(&k);
  }
  usleep(100 * 1000);
  get(c, "/logs/big.log");
}

/* With SIGPIPE ignored (as in the daemon) files go out with sendfile(). */
static void test_big_file(void **state) {
  signal(SIGPIPE, SIG_IGN);
  ctx c;
  ctx_init(&c);
  char tmpl[] = "/tmp/spiderd-http-XXXXXX";
  assert_non_null(mkdtemp(tmpl));
  snprintf(c.dir, sizeof(c.dir), "%s", tmpl);
  size_t n = 3 << 20;
  char *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (char)('a' + (i * 31 + (i >> 12)) % 26);
  write_file(tmpl, "big.log", data, n, time(NULL));
  ctx_start(&c);
  ctx_run(&c, cl_big);
  assert_int_equal(c.r[0].status, 200);
  assert_int_equal(c.r[0].body_len, n);
  assert_memory_equal(c.r[0].body, data, n);
  assert_int_equal(c.r[1].status, 206);
  assert_int_equal(c.r[1].body_len, 10);
  assert_memory_equal(c.r[1].body, data + 1000000, 10);
  assert_int_equal(c.r[2].status, 200);
  assert_int_equal(c.r[2].body_len, n);
  free(data);
  ctx_end(&c);
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
  assert_int_equal(system(cmd), 0);
  signal(SIGPIPE, SIG_DFL);
}

static void test_html_escape(void **state) {
  char *s = http_html_escape("<a href=\"x\">Tom & Jerry's</a>");
  assert_string_equal(s, "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#x27;s&lt;/a&gt;");
  free(s);
  s = http_html_escape("");
  assert_string_equal(s, "");
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_query_params),
      cmocka_unit_test(test_urlencoded_body),
      cmocka_unit_test(test_multipart_body),
      cmocka_unit_test(test_body_in_pieces),
      cmocka_unit_test(test_multipart_cuts),
      cmocka_unit_test(test_body_limits),
      cmocka_unit_test(test_field_limit),
      cmocka_unit_test(test_malformed_multipart),
      cmocka_unit_test(test_basic_auth),
      cmocka_unit_test(test_routing),
      cmocka_unit_test(test_deferred_reply),
      cmocka_unit_test(test_head),
      cmocka_unit_test(test_keepalive),
      cmocka_unit_test(test_unix_and_tcp),
      cmocka_unit_test(test_dual_stack),
      cmocka_unit_test(test_start_errors),
      cmocka_unit_test(test_serve_tree),
      cmocka_unit_test(test_big_file),
      cmocka_unit_test(test_html_escape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
