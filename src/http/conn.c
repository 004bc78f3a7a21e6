/* A deadline on a request's headers, which MHD's idle timeout does not give:
 * a client that sends its headers a byte at a time, each byte within the idle
 * timeout, would keep its connection for as long as it likes (slowloris).
 *
 * Every connection is followed from MHD's start notification to its close.
 * While it waits for a request's headers (from its opening, or from the end
 * of its previous request) it has `timeout` seconds from that moment to
 * complete them; a sweep every second shuts down the socket of one that did
 * not, and MHD, seeing the stream end, closes the connection as any other.
 * Connections past their headers (a body being read, a deferred reply, an
 * event stream) are left to the idle timeout. */
#include <stdlib.h>
#include <sys/socket.h>

#include "http/server_int.h"
#include "log.h"

#define SWEEP_MS 1000

struct http_conn {
  struct http_conn *prev, *next;
  int fd;
  bool waiting;     /* for a request's headers */
  uint64_t since;   /* loop time (ms) the wait began */
};

static void sweep(uv_timer_t *t) {
  struct listener *l = t->data;
  if (!l->conns) {
    uv_timer_stop(t);
    return;
  }
  uint64_t now = uv_now(l->srv->loop), limit = (uint64_t)l->srv->timeout_s * 1000;
  for (struct http_conn *c = l->conns; c; c = c->next)
    if (c->waiting && now - c->since >= limit) {
      c->waiting = false; /* once: MHD closes it when it sees the shutdown */
      log_debug("http", "%s: a request's headers took more than %d s: connection closed", l->name,
                l->srv->timeout_s);
      if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    }
}

int http_conn_init(struct listener *l) {
  int rc = uv_timer_init(l->srv->loop, &l->sweep);
  if (!rc) l->sweep.data = l;
  return rc;
}

void http_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code) {
  struct listener *l = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    struct http_conn *t = calloc(1, sizeof(*t));
    if (!t) return; /* untracked: only the idle timeout applies */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    t->fd = ci ? ci->connect_fd : -1;
    t->waiting = true;
    t->since = uv_now(l->srv->loop);
    if (!l->conns && l->sweep.data && !l->srv->closing)
      uv_timer_start(&l->sweep, sweep, SWEEP_MS, SWEEP_MS);
    t->next = l->conns;
    if (l->conns) l->conns->prev = t;
    l->conns = t;
    l->nconns++;
    *socket_context = t;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    struct http_conn *t = *socket_context;
    if (!t) return;
    *socket_context = NULL;
    if (t->prev) t->prev->next = t->next;
    else l->conns = t->next;
    if (t->next) t->next->prev = t->prev;
    free(t);
    /* At its limit MHD stops polling the listening socket and takes it up
     * again at its next pass, which nothing would cause before some
     * connection's timeout: clients waiting in the backlog would wait that
     * long. So a close at the limit makes that pass happen now. */
    if (l->nconns-- >= l->conn_max) http_kick(l);
  }
}

static struct http_conn *conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      c ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
  return ci ? ci->socket_context : NULL;
}

void http_conn_headers_done(struct MHD_Connection *c) {
  struct http_conn *t = conn_of(c);
  if (t) t->waiting = false;
}

void http_conn_request_done(struct listener *l, struct MHD_Connection *c) {
  struct http_conn *t = conn_of(c);
  if (!t) return;
  t->waiting = true;
  t->since = uv_now(l->srv->loop);
}

void http_conn_free_all(struct listener *l) {
  while (l->conns) {
    struct http_conn *t = l->conns;
    l->conns = t->next;
    free(t);
  }
}
