/* Live events as Server-Sent Events: GET /api/v1/events/stream.
 *
 * One hub reads new events from the store for all clients at once, every
 * SSE_TICK_MS while any client is connected (events come from every node
 * sharing the store, so the store is what is watched), and writes each
 * client the ones its filters match. A client resumes where it left off
 * with Last-Event-ID (or ?after=); without either it gets what happens from
 * now on. */
#include "api/sse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "error.h"
#include "log.h"
#include "store/async.h"

#define SSE_TICK_MS 200
#define SSE_PING_MS 15000
#define SSE_BATCH 500

typedef struct sse_client {
  struct sse_client *next;
  struct sse_hub *hub; /* NULL once the hub stopped */
  http_req_t *req;     /* until the stream starts */
  http_stream_t *stream;
  int64_t after;       /* last event id sent (or skipped) */
  char *type;          /* prefix filter or NULL */
  int64_t schedule_id, job_id;
  auth_who_t who;      /* what the caller may see: its projects (copied) */
} sse_client_t;

struct sse_hub {
  app_t *app;
  uv_timer_t timer;
  sse_client_t *clients;
  int busy;     /* a read is in flight: it owns the hub until it lands */
  int stopping;
  int closed;   /* the timer is closed */
  uint64_t last_ping;
  /* the read in flight */
  int64_t from;
  event_list_t got;
};

static void client_free(sse_client_t *c) {
  free(c->type);
  free((char *)c->who.projects);
  free(c);
}

static void unlink_client(sse_hub_t *h, sse_client_t *c) {
  for (sse_client_t **p = &h->clients; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      return;
    }
}

/* The client's connection is gone (or its stream ended and was sent). */
static void client_gone(void *ud) {
  sse_client_t *c = ud;
  if (c->hub) unlink_client(c->hub, c);
  client_free(c);
}

static int matches(const sse_client_t *c, const event_t *e) {
  if (c->type && strncmp(e->type, c->type, strlen(c->type))) return 0;
  if (c->schedule_id && e->schedule_id != c->schedule_id) return 0;
  if (c->job_id && e->job_id != c->job_id) return 0;
  return auth_event_visible(&c->who, e);
}

static void send_event(sse_client_t *c, const event_t *e) {
  json_t *o = json_pack("{s:I, s:s, s:I, s:o, s:o, s:o}", "id", (json_int_t)e->id, "type", e->type,
                        "ts_ms", (json_int_t)e->ts_ms, "schedule_id",
                        e->schedule_id ? json_integer(e->schedule_id) : json_null(), "job_id",
                        e->job_id ? json_integer(e->job_id) : json_null(), "data",
                        e->data ? json_incref(e->data) : json_null());
  char *data = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!data) return;
  char *msg = NULL;
  /* JSON has no raw newlines, so the data is one SSE line. */
  int n = asprintf(&msg, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)e->id, e->type, data);
  if (n > 0) http_stream_write(c->stream, msg, (size_t)n);
  free(msg);
  free(data);
}

static int read_fn(store_t *s, void *arg) {
  sse_hub_t *h = arg;
  event_filter_t f = {.after_id = h->from, .limit = SSE_BATCH};
  return store_events_list(s, &f, &h->got);
}

static void tick(uv_timer_t *t);

static void read_done(void *arg, int rc) {
  sse_hub_t *h = arg;
  h->busy = 0;
  if (h->stopping) {
    event_list_release(&h->got);
    if (h->closed) free(h);
    return;
  }
  if (rc) log_warn("sse", "cannot read events: %s", spd_strerror(rc));
  /* Nothing newer than the oldest cursor: no cursor moves. */
  int64_t last = h->got.n ? h->got.v[h->got.n - 1].id : h->from;
  for (sse_client_t *c = h->clients; c && !rc; c = c->next) {
    if (!c->stream) continue; /* still opening */
    /* A stream that opened while this read was in flight may be behind
     * where it began (it began at INT64_MAX - 1 when no stream was open):
     * moving its cursor to `last` would skip its events for good, while
     * its next read, from its own cursor, serves it whole. */
    if (c->after < h->from) continue;
    for (size_t i = 0; i < h->got.n; i++)
      if (h->got.v[i].id > c->after && matches(c, &h->got.v[i])) send_event(c, &h->got.v[i]);
    if (last > c->after) c->after = last;
  }
  int more = h->got.n == SSE_BATCH;
  event_list_release(&h->got);
  if (h->stopping || !h->clients) return;
  uint64_t now = uv_now(h->app->loop);
  if (now - h->last_ping >= SSE_PING_MS) {
    /* A comment line: keeps proxies from closing an idle stream and lets
     * a vanished client be noticed. */
    for (sse_client_t *c = h->clients; c; c = c->next)
      if (c->stream) http_stream_write(c->stream, ": ping\n\n", 8);
    h->last_ping = now;
  }
  uv_timer_start(&h->timer, tick, more ? 0 : SSE_TICK_MS, 0);
}

static void tick(uv_timer_t *t) {
  sse_hub_t *h = t->data;
  if (h->busy || h->stopping || !h->clients) return;
  /* One read serves every client: from the oldest cursor among them. */
  h->from = INT64_MAX - 1;
  for (sse_client_t *c = h->clients; c; c = c->next)
    if (c->stream && c->after < h->from) h->from = c->after;
  h->busy = 1;
  if (store_submit(h->app->store, STORE_READ, read_fn, h, read_done)) h->busy = 0;
}

static void start_stream(sse_client_t *c) {
  sse_hub_t *h = c->hub;
  http_req_t *req = c->req;
  c->req = NULL;
  http_reply_header(req, "Cache-Control", "no-cache");
  http_reply_header(req, "X-Accel-Buffering", "no");
  c->stream = http_reply_stream(req, 200, "text/event-stream; charset=utf-8", client_gone, c);
  if (!c->stream) return; /* client_gone ran */
  /* Tell the client how soon to reconnect, and open the stream at once. */
  http_stream_write(c->stream, "retry: 2000\n\n", 13);
  if (!h->busy) uv_timer_start(&h->timer, tick, 0, 0);
}

static int head_fn(store_t *s, void *arg) {
  sse_client_t *c = arg;
  return store_events_head(s, &c->after);
}

static void head_done(void *arg, int rc) {
  sse_client_t *c = arg;
  if (rc || !c->hub) {
    if (rc) http_reply(c->req, 500, "text/plain", "cannot read the event log\n", 26);
    else http_reply(c->req, 503, "text/plain", "the daemon is stopping\n", 23);
    if (c->hub) unlink_client(c->hub, c);
    client_free(c);
    return;
  }
  start_stream(c);
}

int sse_hub_init(app_t *app, sse_hub_t **out) {
  sse_hub_t *h = calloc(1, sizeof(*h));
  if (!h) return -ENOMEM;
  h->app = app;
  int rc = uv_timer_init(app->loop, &h->timer);
  if (rc) {
    free(h);
    return rc;
  }
  h->timer.data = h;
  *out = h;
  return 0;
}

static void hub_closed(uv_handle_t *t) {
  sse_hub_t *h = t->data;
  h->closed = 1;
  if (!h->busy) free(h);
}

void sse_hub_stop(sse_hub_t *h) {
  if (!h) return;
  h->stopping = 1;
  for (sse_client_t *c = h->clients; c; c = c->next) {
    c->hub = NULL;
    if (c->stream) http_stream_end(c->stream); /* else head_done answers 503 */
  }
  h->clients = NULL;
  uv_close((uv_handle_t *)&h->timer, hub_closed);
}

static int64_t param_int(http_req_t *req, const char *key, int *bad) {
  const http_param_t *p = http_req_param(req, key);
  if (!p) return 0;
  char *end = NULL;
  long long v = strtoll(p->value, &end, 10);
  if (!*p->value || *end || v < 0) *bad = 1;
  return v;
}

int sse_hub_open(sse_hub_t *h, http_req_t *req, char *err, size_t errlen) {
  if (h->stopping) {
    snprintf(err, errlen, "the daemon is stopping");
    return SPD_ESHUTDOWN;
  }
  int bad = 0;
  const char *last = http_req_header(req, "Last-Event-ID");
  int64_t after = -1;
  if (last && *last) {
    char *end = NULL;
    after = strtoll(last, &end, 10);
    if (*end || after < 0) bad = 1;
  } else if (http_req_param(req, "after")) {
    after = param_int(req, "after", &bad);
  }
  int64_t schedule = param_int(req, "schedule", &bad), job = param_int(req, "job", &bad);
  if (bad) {
    snprintf(err, errlen, "after, schedule, job and Last-Event-ID must be integers >= 0");
    return SPD_EBADPARAM;
  }
  sse_client_t *c = calloc(1, sizeof(*c));
  const http_param_t *type = http_req_param(req, "type");
  if (!c || (type && !(c->type = strdup(type->value))) ||
      !(c->who.projects = strdup(auth_who(h->app, req)->projects))) {
    if (c) client_free(c);
    return -ENOMEM;
  }
  c->after = after;
  c->schedule_id = schedule;
  c->job_id = job;
  c->hub = h;
  c->req = req;
  /* Listed at once, so a hub that stops meanwhile can disown it. */
  c->next = h->clients;
  h->clients = c;
  if (after >= 0) {
    start_stream(c);
    return 0;
  }
  /* "From now on" is the newest event when the stream opens: read it before
   * answering, so nothing committed after the 200 can be missed. */
  int rc = store_submit(h->app->store, STORE_READ, head_fn, c, head_done);
  if (rc) {
    unlink_client(h, c);
    client_free(c);
    snprintf(err, errlen, "the daemon is stopping");
  }
  return rc;
}
