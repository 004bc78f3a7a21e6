/* Streamed replies of unknown length (http.h): pushed ones
 * (http_reply_stream: Server-Sent Events, written as events come) and pulled
 * ones (http_reply_pull: long listings, a page produced each time the last
 * one has been sent).
 *
 * A stream with nothing to send parks its connection suspended, and
 * libmicrohttpd does not poll a suspended connection: a client that left
 * would only be found out at the next write (an event, or the next keepalive
 * comment 15 s later), holding its descriptor and memory until then. So the
 * socket is watched here while the stream waits, and a client's end of the
 * stream ends the reply at once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "http/server_int.h"
#include "log.h"

#define STREAM_MAX_BUFFER (1u << 20) /* a client this far behind is dropped */

struct stream_watch {
  uv_poll_t h;
  http_stream_t *st; /* NULL once the stream is gone */
  int fd;
};

static void stream_wake(http_stream_t *st);

static void watch_closed(uv_handle_t *h) { free(h->data); }

static void watch_close(http_stream_t *st) {
  struct stream_watch *w = st->watch;
  if (!w) return;
  st->watch = NULL;
  w->st = NULL;
  uv_close((uv_handle_t *)&w->h, watch_closed);
}

static void on_watch(uv_poll_t *h, int status, int events) {
  struct stream_watch *w = h->data;
  http_stream_t *st = w->st;
  if (!st) return;
  uv_poll_stop(h);
  if (status == 0 && !(events & UV_DISCONNECT)) {
    char b;
    ssize_t n = recv(w->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      uv_poll_start(h, UV_READABLE | UV_DISCONNECT, on_watch);
      return;
    }
    if (n > 0) { /* a live client's bytes, which MHD reads later: stop watching */
      st->talks = true;
      watch_close(st);
      return;
    }
  }
  st->failed = true; /* the client left: end the reply */
  stream_wake(st);
}

/* Watches the socket of a parked stream; without a watch (the client sends
 * bytes, or a handle cannot be had) the next write finds a client gone. */
static void watch_start(http_stream_t *st) {
  http_req_t *r = st->req;
  if (st->talks || !r || !r->conn || !r->srv) return;
  if (!st->watch) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd < 0) return;
    struct stream_watch *w = calloc(1, sizeof(*w));
    if (!w) return;
    w->fd = ci->connect_fd;
    w->h.data = w;
    if (uv_poll_init_socket(r->srv->loop, &w->h, w->fd)) {
      free(w);
      st->talks = true; /* do not try again */
      return;
    }
    w->st = st;
    st->watch = w;
  }
  if (uv_poll_start(&st->watch->h, UV_READABLE | UV_DISCONNECT, on_watch)) watch_close(st);
}

/* Wakes a connection parked in stream_read. */
static void stream_wake(http_stream_t *st) {
  http_req_t *r = st->req;
  if (!st->waiting || !r || !r->conn) return;
  st->waiting = false;
  if (st->watch) uv_poll_stop(&st->watch->h); /* MHD polls it again */
  /* A failed stream's connection is closed once resumed, but libmicrohttpd
   * 0.9.75 frees a closed connection only when its idle handler runs again,
   * which for one on the daemon's timeout can wait for that whole timeout;
   * a connection with a timeout of its own has it run at every pass. */
  if (st->failed) MHD_set_connection_option(r->conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
  http_suspended_unlink(r);
  MHD_resume_connection(r->conn);
  http_kick(r->lsn);
}

/* The next bytes of the reply, at most max, into out: what is queued, or,
 * in a pulled stream with nothing queued, what its producer queues when
 * asked. The one place where a stream's bytes leave it, and libmicrohttpd's
 * content reader: a content coding wraps this function (it compresses what
 * it returns, and passes 0 "nothing yet, the connection is suspended" and
 * the end codes through). */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
  http_stream_t *st = cls;
  http_req_t *r = st->req;
  (void)pos;
  if (st->failed || !r || r->dropped) return MHD_CONTENT_READER_END_WITH_ERROR;
  if (st->off == st->len && !st->ended && st->more && !st->asked) {
    st->asked = true;
    st->more(st->ud); /* may queue at once, or later from a loop callback */
    if (st->failed) return MHD_CONTENT_READER_END_WITH_ERROR;
  }
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
  watch_start(st);
  return 0;
}

static void stream_free(void *cls) {
  http_stream_t *st = cls;
  watch_close(st);
  if (st->req) st->req->stream = NULL;
  if (st->on_gone) st->on_gone(st->ud);
  free(st->buf);
  free(st);
}

static http_stream_t *stream_start(http_req_t *r, int status, const char *content_type,
                                   void (*more)(void *ud), void (*on_gone)(void *ud),
                                   void *ud) {
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
  st->more = more;
  st->ud = ud;
  struct MHD_Response *resp =
      http_response_from_callback(r, status, content_type, 4096, stream_read, st, stream_free);
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

http_stream_t *http_reply_stream(http_req_t *r, int status, const char *content_type,
                                 void (*on_gone)(void *ud), void *ud) {
  return stream_start(r, status, content_type, NULL, on_gone, ud);
}

http_stream_t *http_reply_pull(http_req_t *r, int status, const char *content_type,
                               void (*more)(void *ud), void (*on_gone)(void *ud), void *ud) {
  return stream_start(r, status, content_type, more, on_gone, ud);
}

int http_stream_write(http_stream_t *st, const void *data, size_t len) {
  if (st->ended || st->failed) return -EPIPE;
  /* A pulled stream queues only what was asked for: no lag to bound. */
  if (!st->more && st->len + len > STREAM_MAX_BUFFER) {
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
  if (len) st->asked = false;
  stream_wake(st);
  return 0;
}

void http_stream_end(http_stream_t *st) {
  st->ended = true;
  stream_wake(st);
}

void http_stream_fail(http_stream_t *st) {
  st->failed = true;
  stream_wake(st);
}

