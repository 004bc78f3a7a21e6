/* Close watches (http.h: http_req_watch_close): a request whose reply is
 * deferred sits in a suspended connection, which libmicrohttpd no longer
 * polls. A long wait (a long-poll take) must still learn that its client
 * left, so the connection's socket is polled here while it waits: an
 * end-of-stream or an error on it means the client is gone. */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "http/server_int.h"
#include "log.h"

struct http_watch {
  struct http_watch *next;
  http_req_t *r;
  void (*fn)(void *ud);
  void *ud;
};

/* One poll per request, shared by its watches (libuv polls an fd once). */
struct close_poll {
  uv_poll_t h;
  http_req_t *r; /* NULL once stopped */
  int fd;
};

static void poll_closed(uv_handle_t *h) { free(h->data); }

static void poll_stop(http_req_t *r) {
  struct close_poll *cp = r->cpoll;
  if (!cp) return;
  r->cpoll = NULL;
  cp->r = NULL;
  uv_poll_stop(&cp->h);
  uv_close((uv_handle_t *)&cp->h, poll_closed);
}

void http_watches_end(http_req_t *r, bool fire) {
  poll_stop(r);
  struct http_watch *list = r->watches;
  r->watches = NULL;
  /* Detached first: a callback's reply may free r, and a cancel of a
   * watch in this list then only marks it. */
  for (struct http_watch *w = list; w; w = w->next) w->r = NULL;
  while (list) {
    struct http_watch *w = list;
    if (fire && w->fn) w->fn(w->ud);
    list = w->next;
    free(w);
  }
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct close_poll *cp = h->data;
  http_req_t *r = cp->r;
  if (!r) return;
  if (status == 0 && !(events & UV_DISCONNECT)) {
    char b;
    ssize_t n = recv(cp->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n > 0) { /* more bytes from a live client: nothing to tell from them */
      poll_stop(r);
      return;
    }
  }
  http_watches_end(r, true);
}

http_watch_t *http_req_watch_close(http_req_t *r, void (*fn)(void *ud), void *ud) {
  if (r->replied || !r->conn || !r->srv || r->stream) return NULL;
  if (!r->cpoll) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci || ci->connect_fd < 0) return NULL;
    struct close_poll *cp = calloc(1, sizeof(*cp));
    if (!cp) return NULL;
    cp->r = r;
    cp->fd = ci->connect_fd;
    cp->h.data = cp;
    int rc = uv_poll_init_socket(r->srv->loop, &cp->h, cp->fd);
    if (rc) {
      log_debug("http", "cannot watch a waiting connection: %s", uv_strerror(rc));
      free(cp);
      return NULL;
    }
    if ((rc = uv_poll_start(&cp->h, UV_READABLE | UV_DISCONNECT, on_poll))) {
      uv_close((uv_handle_t *)&cp->h, poll_closed);
      return NULL;
    }
    r->cpoll = cp;
  }
  struct http_watch *w = calloc(1, sizeof(*w));
  if (!w) return NULL;
  w->r = r;
  w->fn = fn;
  w->ud = ud;
  w->next = r->watches;
  r->watches = w;
  return w;
}

void http_watch_cancel(http_watch_t *w) {
  if (!w) return;
  http_req_t *r = w->r;
  if (!r) { /* being ended by http_watches_end, which frees it */
    w->fn = NULL;
    return;
  }
  for (struct http_watch **p = &r->watches; *p; p = &(*p)->next)
    if (*p == w) {
      *p = w->next;
      break;
    }
  free(w);
  if (!r->watches) poll_stop(r);
}
