/* Streamed replies of unknown length (http.h: http_reply_stream), for
 * Server-Sent Events. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "http/server_int.h"
#include "log.h"

#define STREAM_MAX_BUFFER (1u << 20) /* a client this far behind is dropped */

/* Wakes a connection parked in stream_read. */
static void stream_wake(http_stream_t *st) {
  http_req_t *r = st->req;
  if (!st->waiting || !r || !r->conn) return;
  st->waiting = false;
  http_suspended_unlink(r);
  MHD_resume_connection(r->conn);
  http_kick(r->lsn);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
  http_stream_t *st = cls;
  http_req_t *r = st->req;
  if (st->failed || !r || r->dropped) return MHD_CONTENT_READER_END_WITH_ERROR;
  if (st->off < st->len) {
    size_t n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(out, st->buf + st->off, n);
    st->off += n;
    if (st->off == st->len) st->off = st->len = 0;
    return (ssize_t)n;
  }
  if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
  /* Nothing to send: park the connection (microhttpd.h's pattern for "no
   * data yet") on the suspended list, so a server stop still finds it. */
  MHD_suspend_connection(r->conn);
  st->waiting = true;
  http_suspended_link(r);
  return 0;
}

static void stream_free(void *cls) {
  http_stream_t *st = cls;
  if (st->req) st->req->stream = NULL;
  if (st->on_gone) st->on_gone(st->ud);
  free(st->buf);
  free(st);
}

http_stream_t *http_reply_stream(http_req_t *r, int status, const char *content_type,
                                 void (*on_gone)(void *ud), void *ud) {
  if (r->replied) {
    log_warn("http", "second reply to %s %s ignored", r->method, r->path);
    on_gone(ud);
    return NULL;
  }
  http_stream_t *st = calloc(1, sizeof(*st));
  if (!st) {
    on_gone(ud);
    http_reply_failed(r);
    return NULL;
  }
  st->on_gone = on_gone;
  st->ud = ud;
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
  if (!resp) {
    stream_free(st);
    http_reply_failed(r);
    return NULL;
  }
  if (http_add_headers(r, resp, content_type)) {
    MHD_destroy_response(resp); /* runs stream_free */
    http_reply_failed(r);
    return NULL;
  }
  if (!r->conn) { /* the client left while the handler waited */
    MHD_destroy_response(resp);
    r->replied = true;
    http_req_free(r);
    return NULL;
  }
  http_watches_end(r, false);
  st->req = r;
  r->stream = st;
  http_deliver(r, resp, (unsigned)status, 0);
  /* A queue that failed at once destroyed the response (and ran on_gone). */
  return r->stream == st ? st : NULL;
}

int http_stream_write(http_stream_t *st, const void *data, size_t len) {
  if (st->ended || st->failed) return -EPIPE;
  if (st->len + len > STREAM_MAX_BUFFER) {
    st->failed = true; /* too slow a reader: end its connection */
    stream_wake(st);
    return -ENOBUFS;
  }
  if (st->len + len > st->cap) {
    size_t cap = st->cap ? st->cap : 4096;
    while (cap < st->len + len) cap *= 2;
    char *b = realloc(st->buf, cap);
    if (!b) return -ENOMEM;
    st->buf = b;
    st->cap = cap;
  }
  memcpy(st->buf + st->len, data, len);
  st->len += len;
  stream_wake(st);
  return 0;
}

void http_stream_end(http_stream_t *st) {
  st->ended = true;
  stream_wake(st);
}

