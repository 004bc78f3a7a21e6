/* gzip.c through a real server: a streamed reply of a compressible type,
 * written in pieces with pauses (its connection suspended in between, as a
 * listing written from the store would be), reaches a client that takes
 * gzip deflated on the fly and inflates to exactly what was written; one
 * that does not gets the same bytes as they are; an event stream is never
 * compressed. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "http/http.h"

#define PIECES 400 /* ~25 KiB each way: several deflate blocks */

/* The i-th piece a stream writes: varied enough that zlib emits output as
 * it goes, not only at the end. */
static int piece(int i, char *out, size_t n) {
  uint32_t h = 2166136261u ^ (uint32_t)i;
  for (int k = 0; k < 4; k++) h = (h ^ (uint32_t)(i >> k)) * 16777619u;
  return snprintf(out, n, "{\"i\": %d, \"v\": \"%08x\", \"pad\": \"%.*s\"},\n", i, h,
                  (int)(h % 40), "abcdefghijklmnopqrstuvwxyz0123456789ABCD");
}

/* ---- the server (loop thread) ---- */

typedef struct writer {
  uv_timer_t t;
  http_stream_t *st;
  int next;
  int gone, closed; /* freed once the stream is gone and the timer closed */
} writer;

static void writer_closed(uv_handle_t *h) {
  writer *w = h->data;
  w->closed = 1;
  if (w->gone) free(w);
}

static void on_gone(void *ud) {
  writer *w = ud;
  w->gone = 1;
  w->st = NULL;
  if (w->closed) free(w);
}

/* Some pieces now, the rest later: between two bursts the stream has
 * nothing to send and parks its connection. */
static void write_some(uv_timer_t *t) {
  writer *w = t->data;
  char buf[128];
  for (int k = 0; w->st && k < 37 && w->next < PIECES; k++, w->next++) {
    int n = piece(w->next, buf, sizeof(buf));
    http_stream_write(w->st, buf, (size_t)n);
  }
  if (w->st && w->next == PIECES) http_stream_end(w->st);
  if (!w->st || w->next == PIECES) uv_close((uv_handle_t *)t, writer_closed);
  else uv_timer_start(t, write_some, 15, 0);
}

static void h_stream(http_req_t *r, void *ud) {
  uv_loop_t *loop = ud;
  writer *w = calloc(1, sizeof(*w));
  const char *ct = strcmp(http_req_path(r), "/events") ? "application/json" : "text/event-stream";
  w->st = http_reply_stream(r, 200, ct, on_gone, w);
  if (!w->st) { /* on_gone ran; the timer was never opened */
    free(w);
    return;
  }
  uv_timer_init(loop, &w->t);
  w->t.data = w;
  uv_timer_start(&w->t, write_some, 0, 0);
}

/* ---- the client (its own thread; no cmocka calls) ---- */

typedef struct result {
  char head[2048];
  unsigned char *body; /* unchunked */
  size_t len;
  int err;
} result;

static int fetch(int port, const char *path, const char *extra, result *out) {
  memset(out, 0, sizeof(*out));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct timeval tv = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
    close(fd);
    return out->err = -1;
  }
  char req[512];
  int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
                   path, extra);
  if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) out->err = -1;
  size_t cap = 1 << 16, len = 0;
  char *raw = malloc(cap);
  for (ssize_t k; !out->err && (k = recv(fd, raw + len, cap - len, 0)) > 0;) {
    len += (size_t)k;
    if (len == cap) raw = realloc(raw, cap *= 2);
  }
  close(fd);
  char *end = memmem(raw, len, "\r\n\r\n", 4);
  if (!end || (size_t)(end - raw) >= sizeof(out->head)) {
    free(raw);
    return out->err = -1;
  }
  memcpy(out->head, raw, (size_t)(end - raw));
  out->body = malloc(len);
  for (char *p = end + 4; p < raw + len;) { /* chunked: the server knows no length */
    size_t sz = strtoul(p, NULL, 16);
    char *nl = memmem(p, (size_t)(raw + len - p), "\r\n", 2);
    if (!nl || sz == 0) break;
    memcpy(out->body + out->len, nl + 2, sz);
    out->len += sz;
    p = nl + 2 + sz + 2;
  }
  free(raw);
  return 0;
}

typedef struct client {
  int port;
  result plain, gz, events;
} client;

static void *client_main(void *arg) {
  client *c = arg;
  fetch(c->port, "/stream", "", &c->plain);
  fetch(c->port, "/stream", "Accept-Encoding: gzip;q=0.5, br\r\n", &c->gz);
  fetch(c->port, "/events", "Accept-Encoding: gzip\r\n", &c->events);
  return NULL;
}

/* ---- the test ---- */

typedef struct run {
  uv_async_t done;
  http_server_t *srv;
} run;

static void on_done(uv_async_t *a) {
  run *r = a->data;
  http_server_stop(r->srv);
  uv_close((uv_handle_t *)a, NULL);
}

typedef struct thread_arg {
  client *c;
  run *r;
} thread_arg;

static void *client_thread(void *arg) {
  thread_arg *t = arg;
  client_main(t->c);
  uv_async_send(&t->r->done);
  return NULL;
}

static char *expected(size_t *len) {
  size_t cap = 128 * PIECES, n = 0;
  char *e = malloc(cap);
  for (int i = 0; i < PIECES; i++) n += (size_t)piece(i, e + n, cap - n);
  *len = n;
  return e;
}

static void test_streamed_reply_is_deflated_on_the_fly(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  http_options_t o = {.bind_address = "127.0.0.1", .port = 0, .realm = "x", .max_body = 1024};
  run r = {0};
  char err[256];
  int port = 0;
  for (int tries = 0; tries < 5; tries++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    o.port = port = ntohs(sa.sin_port);
    if (http_server_start(&loop, &o, &r.srv, err, sizeof(err)) == 0) break;
    r.srv = NULL;
  }
  if (!r.srv) fail_msg("http_server_start: %s", err);
  assert_int_equal(http_route(r.srv, "/stream", h_stream, &loop), 0);
  assert_int_equal(http_route(r.srv, "/events", h_stream, &loop), 0);
  client c = {.port = port};
  thread_arg ta = {&c, &r};
  uv_async_init(&loop, &r.done, on_done);
  r.done.data = &r;
  pthread_t th;
  pthread_create(&th, NULL, client_thread, &ta);
  uv_run(&loop, UV_RUN_DEFAULT);
  pthread_join(th, NULL);
  assert_int_equal(uv_loop_close(&loop), 0);

  size_t elen;
  char *want = expected(&elen);
  /* identity: the bytes as written, and the note that they could vary */
  assert_int_equal(c.plain.err, 0);
  assert_null(strcasestr(c.plain.head, "Content-Encoding"));
  assert_non_null(strcasestr(c.plain.head, "\r\nVary: Accept-Encoding"));
  assert_int_equal(c.plain.len, elen);
  assert_memory_equal(c.plain.body, want, elen);
  /* gzip: inflates to the same bytes, and is smaller */
  assert_int_equal(c.gz.err, 0);
  assert_non_null(strcasestr(c.gz.head, "\r\nContent-Encoding: gzip"));
  assert_non_null(strcasestr(c.gz.head, "\r\nVary: Accept-Encoding"));
  assert_true(c.gz.len > 18 && c.gz.len < elen / 2);
  unsigned char *got = malloc(elen + 1);
  z_stream z = {0};
  assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  z.next_in = c.gz.body;
  z.avail_in = (uInt)c.gz.len;
  z.next_out = got;
  z.avail_out = (uInt)elen + 1;
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  assert_int_equal(z.total_out, elen);
  assert_int_equal(z.avail_in, 0); /* the trailer ends the body */
  inflateEnd(&z);
  assert_memory_equal(got, want, elen);
  /* an event stream: each event must reach the client when written */
  assert_int_equal(c.events.err, 0);
  assert_null(strcasestr(c.events.head, "Content-Encoding"));
  assert_int_equal(c.events.len, elen);
  free(got);
  free(want);
  free(c.plain.body);
  free(c.gz.body);
  free(c.events.body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_streamed_reply_is_deflated_on_the_fly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
