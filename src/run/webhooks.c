/* Webhook delivery (webhooks.h). Store threads read events and render
 * their bodies; the loop thread owns the queues, the lease state and
 * libcurl, which it drives through uv_poll and uv_timer. */
#include "clock.h"
#include "run/webhooks.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/job.h"
#include "core/schedule.h"
#include "error.h"
#include "net/curl_lazy.h"
#include "log.h"
#include "run/done.h"

#define SYS "webhooks"
#define LEASE_NAME "webhooks"
#define CURSOR_KEY "webhooks.cursor"
#define LEASE_TTL_MS 5000
#define TICK_MS 1000
#define READ_BATCH 256
#define SCAN_PAGES 16       /* pages an idle scan reads per tick at most */
#define MAX_WINDOW 1024     /* events held in memory awaiting delivery */
#define MAX_INFLIGHT 16     /* HTTP requests at once */
#define BACKOFF_CAP_MS (5 * 60 * 1000LL)

/* ---- pure helpers ---- */

void webhooks_list_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

int webhooks_list_parse(const char *text, char ***out, size_t *n) {
  char **v = NULL;
  size_t k = 0;
  const char *p = text ? text : "";
  *out = NULL;
  *n = 0;
  for (;;) {
    while (*p && (*p == ',' || isspace((unsigned char)*p))) p++;
    if (!*p) break;
    const char *start = p;
    while (*p && *p != ',' && !isspace((unsigned char)*p)) p++;
    char **grown = realloc(v, (k + 1) * sizeof(*v));
    char *item = grown ? strndup(start, (size_t)(p - start)) : NULL;
    if (grown) v = grown;
    if (!item) {
      webhooks_list_free(v, k);
      return -ENOMEM;
    }
    v[k++] = item;
  }
  *out = v;
  *n = k;
  return 0;
}

int webhooks_type_wanted(char *const *patterns, size_t n, const char *type) {
  for (size_t i = 0; i < n; i++) {
    const char *p = patterns[i];
    size_t len = strlen(p);
    if (!strcmp(p, "*") || !strcmp(p, type)) return 1;
    if (len && p[len - 1] == '.' && !strncmp(p, type, len)) return 1;
  }
  return 0;
}

int64_t webhooks_backoff_ms(int failures, int64_t base_ms, int64_t cap_ms, double jitter01) {
  int64_t d = base_ms > 0 ? base_ms : 1;
  for (int i = 1; i < failures && d < cap_ms; i++) d *= 2;
  if (d > cap_ms) d = cap_ms;
  if (jitter01 < 0) jitter01 = 0;
  if (jitter01 >= 1) jitter01 = 0.999;
  return d + (int64_t)((double)d * 0.1 * jitter01);
}

int webhooks_sign(const char *secret, const char *timestamp, const char *body, size_t len,
                  char out[72]) {
  unsigned char md[32];
  size_t tlen = strlen(timestamp);
  /* Signing the timestamp with the body is what lets a receiver refuse a
   * captured request replayed later (Stripe's scheme). */
  char *msg = malloc(tlen + 1 + len);
  if (!msg) return -ENOMEM;
  memcpy(msg, timestamp, tlen);
  msg[tlen] = '.';
  memcpy(msg + tlen + 1, body, len);
  int rc = curl_lazy_hmac_sha256(secret, strlen(secret), msg, tlen + 1 + len, md);
  free(msg);
  if (rc) return rc;
  memcpy(out, "sha256=", 7);
  for (unsigned i = 0; i < 32; i++) snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
  return 0;
}

/* ---- which addresses a delivery may reach ---- */

static int in_net(const unsigned char *a, const unsigned char *net, int bits) {
  int whole = bits / 8, rest = bits % 8;
  if (memcmp(a, net, (size_t)whole)) return 0;
  if (!rest) return 1;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (a[whole] & mask) == (net[whole] & mask);
}

static const char *v4_private(const unsigned char *a) {
  static const struct {
    unsigned char net[4];
    int bits;
    const char *what;
  } nets[] = {
      {{0, 0, 0, 0}, 8, "an unspecified (this-network)"},
      {{10, 0, 0, 0}, 8, "a private"},
      {{100, 64, 0, 0}, 10, "a shared (carrier-grade NAT)"},
      {{127, 0, 0, 0}, 8, "a loopback"},
      {{169, 254, 0, 0}, 16, "a link-local"},
      {{172, 16, 0, 0}, 12, "a private"},
      {{192, 0, 0, 0}, 24, "a reserved"},
      {{192, 168, 0, 0}, 16, "a private"},
      {{198, 18, 0, 0}, 15, "a reserved"},
      {{224, 0, 0, 0}, 4, "a multicast"},
      {{240, 0, 0, 0}, 4, "a reserved"},
  };
  for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
    if (in_net(a, nets[i].net, nets[i].bits)) return nets[i].what;
  return NULL;
}

const char *webhooks_addr_private(const unsigned char a[16]) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  static const unsigned char zero[16] = {0};
  static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  static const unsigned char nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
  /* IPv4 inside IPv6: mapped (::ffff:a.b.c.d), compatible (::a.b.c.d),
   * NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:AABB:CCDD::) reach that IPv4
   * address, so they are judged as it. */
  if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12)) return v4_private(a + 12);
  if (!memcmp(a, zero, 12)) {
    if (!memcmp(a, zero, 15)) return a[15] == 1 ? "a loopback" : "an unspecified";
    return v4_private(a + 12);
  }
  if (a[0] == 0x20 && a[1] == 0x02) return v4_private(a + 2);
  if (!memcmp(a, nat64_local, 6)) return "a private (local NAT64)";
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) return "a link-local";
  if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) return "a site-local";
  if ((a[0] & 0xfe) == 0xfc) return "a unique local (private)";
  if (a[0] == 0xff) return "a multicast";
  if (a[0] == 0x01 && a[1] == 0 && !memcmp(a + 2, zero, 6)) return "a discard-only";
  return NULL;
}

int webhooks_nets_parse(const char *text, webhook_net_t **out, size_t *n, char *err,
                        size_t errlen) {
  char **items = NULL;
  size_t k = 0;
  int rc = webhooks_list_parse(text, &items, &k);
  *out = NULL;
  *n = 0;
  if (rc) return rc;
  webhook_net_t *v = k ? calloc(k, sizeof(*v)) : NULL;
  if (k && !v) {
    webhooks_list_free(items, k);
    return -ENOMEM;
  }
  for (size_t i = 0; i < k; i++) {
    char *item = items[i], *slash = strchr(item, '/'), *end = NULL;
    unsigned char a4[4];
    int max;
    if (!strcmp(item, "*")) {
      v[i].bits = 0; /* every address */
      continue;
    }
    if (slash) *slash = '\0';
    if (inet_pton(AF_INET, item, a4) == 1) {
      memset(v[i].addr, 0, 10);
      v[i].addr[10] = v[i].addr[11] = 0xff;
      memcpy(v[i].addr + 12, a4, 4);
      max = 32;
    } else if (inet_pton(AF_INET6, item, v[i].addr) == 1) {
      max = 128;
    } else {
      snprintf(err, errlen, "'%s' is not an IP address or network (CIDR)", item);
      rc = SPD_ECONFIG;
      break;
    }
    long bits = max;
    if (slash) {
      errno = 0;
      bits = strtol(slash + 1, &end, 10);
      if (!isdigit((unsigned char)slash[1]) || *end || errno || bits < 0 || bits > max) {
        snprintf(err, errlen, "'%s/%s': the prefix length must be 0 to %d", item, slash + 1,
                 max);
        rc = SPD_ECONFIG;
        break;
      }
    }
    v[i].bits = (int)bits + (max == 32 ? 96 : 0);
  }
  webhooks_list_free(items, k);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = k;
  return 0;
}

int webhooks_addr_allowed(const webhook_net_t *nets, size_t n, const unsigned char a[16]) {
  for (size_t i = 0; i < n; i++)
    if (in_net(a, nets[i].addr, nets[i].bits)) return 1;
  return 0;
}

/* The URL as logs show it: a password in its user part becomes "***". */
static char *url_shown(const char *url) {
  const char *auth = strstr(url, "://");
  auth = auth ? auth + 3 : url;
  size_t alen = strcspn(auth, "/?#");
  const char *at = NULL, *colon = NULL;
  for (const char *p = auth; p < auth + alen; p++)
    if (*p == '@') at = p;
  if (at)
    for (const char *p = auth; p < at && !colon; p++)
      if (*p == ':') colon = p;
  if (!colon) return strdup(url);
  char *out = NULL;
  if (asprintf(&out, "%.*s***%s", (int)(colon + 1 - url), url, at) < 0) return NULL;
  return out;
}

/* ---- state ---- */

/* An event read and not yet fully handled. The window of them is ordered by
 * id; the cursor can pass an event only once it is at the front with no
 * delivery left. */
typedef struct wevent {
  struct wevent *next;
  int64_t id;
  char *type;
  char *body;
  size_t len;
  int pending; /* deliveries not yet delivered or given up */
} wevent_t;

typedef struct delivery {
  struct delivery *next;
  wevent_t *ev;
  int url_index;
  int failures;
} delivery_t;

/* One URL's FIFO: only its head is ever tried, which keeps a receiver's
 * events in order. */
typedef struct target {
  struct target *next;
  char *url;
  char *shown; /* url with its password masked, for the log */
  delivery_t *head, *tail;
  uint64_t next_ms; /* uv_now when the head may be tried */
  CURL *easy;       /* the head's request in flight */
  struct curl_slist *headers;
  char errbuf[CURL_ERROR_SIZE];
  const struct webhooks *w;
  char refused[160]; /* the attempt's address was refused, and why */
} target_t;

typedef struct sock {
  uv_poll_t poll;
  struct sock *next;
  curl_socket_t fd;
  struct webhooks *w;
} sock_t;

struct webhooks {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  char **urls, **types;
  size_t nurls, ntypes;
  webhook_net_t *allowed; /* [spiderd] webhook_allow_private */
  size_t nallowed;
  int64_t timeout_ms, backoff_ms;
  int retries;
  uint64_t rng;

  uv_timer_t tick, pump, curl_timer;
  int closing;
  CURLM *multi;    /* NULL until the first delivery */
  int curl_inited; /* this module's curl_global_init, undone at free */
  int curl_failed; /* libcurl could not be loaded (said once) */
  sock_t *socks;

  int busy, again, stopping;
  run_done_t stopped;

  int leader;
  int64_t token;
  int work_seen;    /* an idle scan found an event for a schedule's hook */
  int64_t scan_from; /* idle scan position; -1 = not known yet */
  int caught_up;    /* the last read returned less than a full batch */
  int64_t cursor, saved, read_upto;

  wevent_t *whead, *wtail;
  size_t wn;
  target_t *targets;
  size_t inflight;
};

enum { OP_LEASE, OP_RELEASE, OP_READ, OP_SCAN };

typedef struct out_event {
  int64_t id;
  char *type;
  char *body;
  size_t len;
  char **urls;
  int *idx;
  size_t nurls;
} out_event_t;

typedef struct op {
  webhooks_t *w;
  int kind;
  /* lease */
  int64_t held;        /* in (OP_LEASE): the token this node believed it held */
  int64_t token;       /* in (OP_RELEASE); out (OP_LEASE) */
  int was_leader;
  int64_t save_cursor; /* >= 0: store it, fenced by the lease */
  int64_t init_hint;   /* cursor when none is stored; -1 = the newest event */
  int leader;
  int64_t cursor;
  /* read / scan */
  int64_t after, last_id;
  size_t nread;
  int found, full;
  out_event_t *ev;
  size_t nev;
} op_t;

static double rand01(webhooks_t *w) {
  /* xorshift64: jitter only needs to spread retries, not to be secret */
  uint64_t x = w->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  w->rng = x;
  return (double)(x >> 11) / (double)(1ULL << 53);
}

static void out_event_clear(out_event_t *e) {
  free(e->type);
  free(e->body);
  webhooks_list_free(e->urls, e->nurls);
  free(e->idx);
}

static void out_events_free(out_event_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) out_event_clear(&v[i]);
  free(v);
}

static op_t *op_new(webhooks_t *w, int kind) {
  op_t *o = calloc(1, sizeof(*o));
  if (o) {
    o->w = w;
    o->kind = kind;
  }
  return o;
}

static void op_free(op_t *o) {
  if (!o) return;
  out_events_free(o->ev, o->nev);
  free(o);
}

/* ---- store side ---- */

static void iso_ms(int64_t ms, char out[32]) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

/* The POST body of an event: the event, and for job events the job as it is
 * now (a job deleted meanwhile is null). */
static int render(store_t *s, const event_t *e, const char *node, char **body, size_t *len) {
  char ts[32];
  json_t *job = NULL;
  int rc = 0;
  if (e->job_id && !strncmp(e->type, "job.", 4)) {
    job_t j;
    job_init(&j);
    rc = store_job_get(s, e->job_id, &j);
    if (!rc) job = job_event_json(&j);
    job_release(&j);
    if (rc == -ENOENT) rc = 0, job = json_null();
    if (rc) return rc;
    if (!job) return -ENOMEM;
  }
  iso_ms(e->ts_ms, ts);
  json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:o, s:s}", "id", (json_int_t)e->id,
                        "type", e->type, "ts", ts, "ts_ms", (json_int_t)e->ts_ms, "schedule_id",
                        (json_int_t)e->schedule_id, "job_id", (json_int_t)e->job_id, "data",
                        e->data ? json_incref(e->data) : json_object(), "node", node);
  if (o && job) json_object_set_new(o, "job", job);
  else json_decref(job);
  *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!*body) return -ENOMEM;
  *len = strlen(*body);
  return 0;
}

static int http_url(const char *u) {
  return !strncasecmp(u, "http://", 7) || !strncasecmp(u, "https://", 8);
}

/* A one-entry cache: consecutive events mostly share a schedule. */
typedef struct sched_cache {
  int64_t id;
  json_t *hooks; /* array, or NULL = none */
} sched_cache_t;

static int schedule_hooks(store_t *s, int64_t id, sched_cache_t *c, json_t **out) {
  if (c->id != id) {
    schedule_t sc;
    schedule_init(&sc);
    int rc = store_schedule_get(s, id, &sc);
    if (rc && rc != -ENOENT) {
      schedule_release(&sc);
      return rc;
    }
    json_decref(c->hooks);
    c->hooks = json_is_array(sc.webhooks) && json_array_size(sc.webhooks)
                   ? json_incref(sc.webhooks) : NULL;
    c->id = id;
    schedule_release(&sc);
  }
  *out = c->hooks;
  return 0;
}

/* Where an event goes: the daemon-wide URLs (indexes 0..n-1), then its
 * schedule's (n + position in the schedule's array), each URL once. The
 * indexes only depend on the configuration, so a redelivery after a restart
 * carries the same X-Spiderd-Delivery. */
static int targets_of(store_t *s, const webhooks_t *w, const event_t *e, sched_cache_t *c,
                      out_event_t *oe) {
  json_t *hooks = NULL;
  int rc = e->schedule_id ? schedule_hooks(s, e->schedule_id, c, &hooks) : 0;
  if (rc) return rc;
  size_t max = w->nurls + json_array_size(hooks);
  if (!max) return 0;
  oe->urls = calloc(max, sizeof(*oe->urls));
  oe->idx = calloc(max, sizeof(*oe->idx));
  if (!oe->urls || !oe->idx) return -ENOMEM;
  for (size_t i = 0; i < max; i++) {
    const char *u = i < w->nurls ? w->urls[i]
                                 : json_string_value(json_array_get(hooks, i - w->nurls));
    if (!u || !http_url(u)) {
      if (u) log_debug(SYS, "schedule %" PRId64 ": '%s' is not an http(s) URL", e->schedule_id, u);
      continue;
    }
    int dup = 0;
    for (size_t k = 0; k < oe->nurls && !dup; k++) dup = !strcmp(oe->urls[k], u);
    if (dup) continue;
    if (!(oe->urls[oe->nurls] = strdup(u))) return -ENOMEM;
    oe->idx[oe->nurls++] = (int)i;
  }
  return 0;
}

static int cursor_get(store_t *s, int64_t *out) {
  char *v = NULL;
  int rc = store_meta_get(s, CURSOR_KEY, &v);
  if (!rc) {
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x < 0) rc = -EINVAL;
    else *out = x;
  }
  free(v);
  return rc;
}

static int cursor_put(store_t *s, int64_t c) {
  char buf[24];
  snprintf(buf, sizeof(buf), "%" PRId64, c);
  return store_meta_set(s, CURSOR_KEY, buf);
}

static int lease_fn(store_t *s, void *arg) {
  op_t *o = arg;
  const char *node = o->w->cfg->node_name;
  int64_t now = clock_wall_ms();
  int rc = 0;
  if (o->kind == OP_RELEASE) {
    /* Fenced: a node whose lease passed on must not move the cursor back. */
    if (o->save_cursor >= 0 && !store_lease_check(s, LEASE_NAME, o->token, now))
      rc = cursor_put(s, o->save_cursor);
    int r2 = store_lease_release(s, LEASE_NAME, node, o->token);
    return rc ? rc : r2 == -ENOENT ? 0 : r2;
  }
  /* From held, not token: a run the store pool repeats after a collision
   * must not take the rolled-back run's token for the one it held. */
  int64_t prev = o->held;
  o->leader = 0;
  rc = store_lease_acquire(s, LEASE_NAME, node, now, LEASE_TTL_MS, &o->token);
  if (rc == -EBUSY) return 0;
  if (rc) return rc;
  o->leader = 1;
  /* A new token means the lease lapsed in between: start again from the
   * stored cursor, whatever this node believed. */
  if (o->was_leader && o->token == prev)
    return o->save_cursor >= 0 ? cursor_put(s, o->save_cursor) : 0;
  rc = cursor_get(s, &o->cursor);
  if (rc == -ENOENT || rc == -EINVAL) {
    if (o->init_hint >= 0) o->cursor = o->init_hint, rc = 0;
    else rc = store_events_head(s, &o->cursor);
    if (!rc) rc = cursor_put(s, o->cursor);
  }
  return rc;
}

/* OP_READ: renders up to READ_BATCH events after o->after. OP_SCAN (no
 * daemon-wide URL, not holding the lease): only looks for the first event
 * a schedule's hook wants, so an idle node costs one read per tick. */
static int read_fn(store_t *s, void *arg) {
  op_t *o = arg;
  webhooks_t *w = o->w;
  sched_cache_t cache = {0};
  int rc = 0;
  if (o->kind == OP_SCAN && o->after < 0) {
    rc = cursor_get(s, &o->after);
    if (rc == -ENOENT || rc == -EINVAL) rc = store_events_head(s, &o->after);
    if (rc) return rc;
  }
  o->last_id = o->after;
  for (int page = 0; page < (o->kind == OP_SCAN ? SCAN_PAGES : 1) && !rc && !o->found; page++) {
    event_list_t l = {0};
    event_filter_t f = {.after_id = o->last_id, .limit = READ_BATCH};
    if ((rc = store_events_list(s, &f, &l))) break;
    if (o->kind == OP_READ && !(o->ev = calloc(l.n ? l.n : 1, sizeof(*o->ev)))) rc = -ENOMEM;
    for (size_t i = 0; i < l.n && !rc; i++) {
      const event_t *e = &l.v[i];
      if (webhooks_type_wanted(w->types, w->ntypes, e->type)) {
        out_event_t oe = {.id = e->id};
        rc = targets_of(s, w, e, &cache, &oe);
        if (!rc && oe.nurls && o->kind == OP_SCAN) o->found = 1;
        if (!rc && oe.nurls && o->kind == OP_READ) {
          rc = render(s, e, w->cfg->node_name, &oe.body, &oe.len);
          if (!rc && !(oe.type = strdup(e->type))) rc = -ENOMEM;
        }
        if (!rc && oe.nurls && o->kind == OP_READ) o->ev[o->nev++] = oe;
        else out_event_clear(&oe);
        if (rc || o->found) break;
      }
      o->last_id = e->id;
      o->nread++;
    }
    o->full = l.n == READ_BATCH;
    event_list_release(&l);
    if (!o->full) break;
  }
  json_decref(cache.hooks);
  return rc;
}

/* ---- the loop side: libcurl ---- */

static void tick_start(webhooks_t *w);
static void pump(webhooks_t *w);

static void sock_closed(uv_handle_t *h) { free(h->data); }

static void on_poll(uv_poll_t *h, int status, int events) {
  sock_t *c = h->data;
  webhooks_t *w = c->w;
  int flags = 0, running = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (!status && (events & UV_READABLE)) flags |= CURL_CSELECT_IN;
  if (!status && (events & UV_WRITABLE)) flags |= CURL_CSELECT_OUT;
  curl_multi_socket_action(w->multi, c->fd, flags, &running);
  pump(w);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp) {
  webhooks_t *w = userp;
  sock_t *c = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (!c) return 0;
    for (sock_t **p = &w->socks; *p; p = &(*p)->next)
      if (*p == c) {
        *p = c->next;
        break;
      }
    curl_multi_assign(w->multi, fd, NULL);
    uv_close((uv_handle_t *)&c->poll, sock_closed);
    return 0;
  }
  if (!c) {
    if (!(c = calloc(1, sizeof(*c)))) return -1;
    if (uv_poll_init_socket(w->loop, &c->poll, fd)) {
      free(c);
      return -1;
    }
    c->fd = fd;
    c->w = w;
    c->poll.data = c;
    c->next = w->socks;
    w->socks = c;
    curl_multi_assign(w->multi, fd, c);
  }
  int ev = 0;
  if (what & CURL_POLL_IN) ev |= UV_READABLE;
  if (what & CURL_POLL_OUT) ev |= UV_WRITABLE;
  uv_poll_start(&c->poll, ev, on_poll);
  return 0;
}

static void on_curl_timer(uv_timer_t *h) {
  webhooks_t *w = h->data;
  int running = 0;
  curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  pump(w);
}

static int on_curl_timeout(CURLM *m, long timeout_ms, void *userp) {
  webhooks_t *w = userp;
  /* Never call back into curl from here: a 0 timeout runs on the next
   * loop iteration instead. */
  if (timeout_ms < 0) uv_timer_stop(&w->curl_timer);
  else uv_timer_start(&w->curl_timer, on_curl_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) { return size * n; }

static int header(struct curl_slist **h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int header(struct curl_slist **h, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  struct curl_slist *n = curl_slist_append(*h, line);
  if (!n) return -ENOMEM;
  *h = n;
  return 0;
}

/* libcurl is loaded and started on the first delivery, not at start-up
 * (see net/curl_lazy.h). Its global init runs here, with the store
 * threads up: none of them ever calls libcurl or OpenSSL. */
static int curl_start(webhooks_t *w) {
  if (w->multi) return 0;
  char why[256];
  if (curl_lazy_load(why, sizeof(why))) {
    if (!w->curl_failed) log_error(SYS, "%s: webhooks cannot be delivered", why);
    w->curl_failed = 1;
    return -ENOENT;
  }
  if (!w->curl_inited) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) return -ENOMEM;
    w->curl_inited = 1;
  }
  if (!(w->multi = curl_multi_init())) return -ENOMEM;
  curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
  curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_curl_timeout);
  curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
  return 0;
}

/* Every address curl connects to passes here, after name resolution and
 * for each address it tries: a name that resolves (or is rebound) to a
 * private address is judged by the address actually connected to. */
static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *sa) {
  target_t *t = ud;
  unsigned char a[16];
  char shown[INET6_ADDRSTRLEN] = "?";
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
  if (sa->family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)&sa->addr;
    memset(a, 0, 10);
    a[10] = a[11] = 0xff;
    memcpy(a + 12, &in->sin_addr, 4);
    inet_ntop(AF_INET, &in->sin_addr, shown, sizeof(shown));
  } else if (sa->family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa->addr;
    memcpy(a, &in6->sin6_addr, 16);
    inet_ntop(AF_INET6, &in6->sin6_addr, shown, sizeof(shown));
  } else {
    snprintf(t->refused, sizeof(t->refused), "address family %d is not IP", sa->family);
    return CURL_SOCKET_BAD;
  }
  const char *what = webhooks_addr_private(a);
  if (what && !webhooks_addr_allowed(t->w->allowed, t->w->nallowed, a)) {
    snprintf(t->refused, sizeof(t->refused),
             "%s is %s address ([spiderd] webhook_allow_private may allow it)", shown, what);
    return CURL_SOCKET_BAD;
  }
  return socket(sa->family, sa->socktype | SOCK_CLOEXEC, sa->protocol);
}

static int attempt_start(webhooks_t *w, target_t *t) {
  delivery_t *d = t->head;
  wevent_t *ev = d->ev;
  struct curl_slist *h = NULL;
  char ts[24], sig[72];
  int rc = curl_start(w);
  if (rc) return rc;
  CURL *e = curl_easy_init();
  if (!e) return -ENOMEM;
  snprintf(ts, sizeof(ts), "%" PRId64, clock_wall_ms() / 1000);
  /* "Expect:" stops curl from waiting for a 100-continue that simple
   * receivers never send. */
  if ((rc = header(&h, "Content-Type: application/json")) || (rc = header(&h, "Expect:")) ||
      (rc = header(&h, "X-Spiderd-Event: %s", ev->type)) ||
      (rc = header(&h, "X-Spiderd-Delivery: %" PRId64 "-%d", ev->id, d->url_index)) ||
      (rc = header(&h, "X-Spiderd-Attempt: %d", d->failures + 1)))
    goto out;
  if (w->cfg->webhook_secret[0]) {
    if ((rc = webhooks_sign(w->cfg->webhook_secret, ts, ev->body, ev->len, sig)) ||
        (rc = header(&h, "X-Spiderd-Timestamp: %s", ts)) ||
        (rc = header(&h, "X-Spiderd-Signature: %s", sig)))
      goto out;
  }
  t->errbuf[0] = '\0';
  t->refused[0] = '\0';
  t->w = w;
  curl_easy_setopt(e, CURLOPT_URL, t->url);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, ev->body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)ev->len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "spiderd/" SPIDERD_VERSION);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)w->timeout_ms);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  if (curl_multi_add_handle(w->multi, e) != CURLM_OK) {
    rc = -ENOMEM;
    goto out;
  }
  t->easy = e;
  t->headers = h;
  w->inflight++;
  return 0;
out:
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  return rc;
}

static void attempt_drop(webhooks_t *w, target_t *t) {
  if (!t->easy) return;
  curl_multi_remove_handle(w->multi, t->easy);
  curl_easy_cleanup(t->easy);
  curl_slist_free_all(t->headers);
  t->easy = NULL;
  t->headers = NULL;
  w->inflight--;
}

/* ---- the loop side: queues and the cursor ---- */

static void advance_cursor(webhooks_t *w) {
  while (w->whead && !w->whead->pending) {
    wevent_t *e = w->whead;
    w->whead = e->next;
    if (!w->whead) w->wtail = NULL;
    w->wn--;
    free(e->type);
    free(e->body);
    free(e);
  }
  w->cursor = w->whead ? w->whead->id - 1 : w->read_upto;
}

static void target_pop(webhooks_t *w, target_t *t) {
  delivery_t *d = t->head;
  t->head = d->next;
  if (!t->head) t->tail = NULL;
  d->ev->pending--;
  free(d);
  t->next_ms = 0;
}

/* Drops every delivery and request: the lease is gone or we stop. The
 * cursor stays where it is, before everything dropped. */
static void abandon_all(webhooks_t *w) {
  while (w->targets) {
    target_t *t = w->targets;
    w->targets = t->next;
    attempt_drop(w, t);
    while (t->head) target_pop(w, t);
    free(t->url);
    free(t->shown);
    free(t);
  }
  while (w->whead) {
    wevent_t *e = w->whead;
    w->whead = e->next;
    free(e->type);
    free(e->body);
    free(e);
  }
  w->wtail = NULL;
  w->wn = 0;
}

static void attempt_done(webhooks_t *w, target_t *t, CURLcode code) {
  long status = 0;
  delivery_t *d = t->head;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  attempt_drop(w, t);
  d->failures++;
  if (code == CURLE_OK && status >= 200 && status < 300) {
    log_debug(SYS, "event %" PRId64 " (%s) delivered to %s: HTTP %ld", d->ev->id, d->ev->type,
              t->shown, status);
  } else if (t->refused[0]) {
    /* Not retried: the same name is expected to give the same answer. */
    log_warn(SYS, "event %" PRId64 " (%s) to %s refused: %s", d->ev->id, d->ev->type, t->shown,
             t->refused);
  } else {
    char why[CURL_ERROR_SIZE + 32];
    if (code != CURLE_OK)
      snprintf(why, sizeof(why), "%s", t->errbuf[0] ? t->errbuf : curl_easy_strerror(code));
    else
      snprintf(why, sizeof(why), "HTTP %ld", status);
    if (d->failures <= w->retries) {
      int64_t delay = webhooks_backoff_ms(d->failures, w->backoff_ms, BACKOFF_CAP_MS, rand01(w));
      log_info(SYS, "event %" PRId64 " to %s failed (%s); retry %d of %d in %.1f s",
               d->ev->id, t->shown, why, d->failures, w->retries, (double)delay / 1000.0);
      t->next_ms = uv_now(w->loop) + (uint64_t)delay;
      return;
    }
    log_warn(SYS, "event %" PRId64 " (%s) to %s given up after %d attempts: %s", d->ev->id,
             d->ev->type, t->shown, d->failures, why);
  }
  target_pop(w, t);
  advance_cursor(w);
}

static void read_finished(webhooks_t *w) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(w->multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    char *t = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &t);
    if (t) attempt_done(w, (target_t *)t, m->data.result);
  }
}

static void on_pump(uv_timer_t *h) { pump(h->data); }

/* Collects finished requests, starts every head that is due (MAX_INFLIGHT
 * at most), frees empty queues, and arms the timer for the next retry. */
static void pump(webhooks_t *w) {
  /* Nothing to send yet, or libcurl cannot be had (logged): wait. */
  if (!w->multi && (!w->targets || curl_start(w))) return;
  read_finished(w);
  if (w->stopping) return;
  uint64_t now = uv_now(w->loop), next = UINT64_MAX;
  for (target_t **p = &w->targets; *p;) {
    target_t *t = *p;
    if (!t->head && !t->easy) {
      *p = t->next;
      free(t->url);
    free(t->shown);
      free(t);
      continue;
    }
    p = &t->next;
    if (t->easy) continue;
    if (t->next_ms > now) {
      if (t->next_ms < next) next = t->next_ms;
      continue;
    }
    if (w->inflight >= MAX_INFLIGHT) continue; /* a finishing request pumps again */
    int rc = attempt_start(w, t);
    if (rc) {
      log_warn(SYS, "cannot post to %s: %s", t->shown, spd_strerror(rc));
      t->next_ms = now + TICK_MS;
      if (t->next_ms < next) next = t->next_ms;
    }
  }
  if (next != UINT64_MAX) uv_timer_start(&w->pump, on_pump, next - now, 0);
}

static target_t *target_get(webhooks_t *w, const char *url) {
  for (target_t *t = w->targets; t; t = t->next)
    if (!strcmp(t->url, url)) return t;
  target_t *t = calloc(1, sizeof(*t));
  if (!t || !(t->url = strdup(url)) || !(t->shown = url_shown(url))) {
    if (t) free(t->url);
    free(t);
    return NULL;
  }
  t->next = w->targets;
  w->targets = t;
  return t;
}

/* Takes the rendered events of a read into the window and the queues. */
static int enqueue(webhooks_t *w, op_t *o) {
  for (size_t i = 0; i < o->nev; i++) {
    out_event_t *oe = &o->ev[i];
    wevent_t *e = calloc(1, sizeof(*e));
    if (!e) return -ENOMEM;
    e->id = oe->id;
    e->type = oe->type;
    e->body = oe->body;
    e->len = oe->len;
    oe->type = oe->body = NULL;
    if (w->wtail) w->wtail->next = e;
    else w->whead = e;
    w->wtail = e;
    w->wn++;
    for (size_t k = 0; k < oe->nurls; k++) {
      target_t *t = target_get(w, oe->urls[k]);
      delivery_t *d = t ? calloc(1, sizeof(*d)) : NULL;
      if (!d) return -ENOMEM;
      d->ev = e;
      d->url_index = oe->idx[k];
      if (t->tail) t->tail->next = d;
      else t->head = d;
      t->tail = d;
      e->pending++;
    }
  }
  return 0;
}

/* ---- the loop side: ticks ---- */

static void on_tick(uv_timer_t *h) { tick_start(h->data); }

static void tick_later(webhooks_t *w, uint64_t ms) {
  if (w->stopping) return;
  if (w->again) ms = 0;
  w->again = 0;
  uv_timer_start(&w->tick, on_tick, ms, 0);
}

static void release_done(void *arg, int rc) {
  op_t *o = arg;
  webhooks_t *w = o->w;
  w->busy = 0;
  if (rc) log_warn(SYS, "cannot store the cursor and give the lease up: %s", spd_strerror(rc));
  else w->saved = o->save_cursor;
  w->leader = 0;
  w->scan_from = -1;
  w->work_seen = 0;
  op_free(o);
  if (w->stopping) run_done_fire(&w->stopped);
  else tick_later(w, TICK_MS);
}

static void release_lease(webhooks_t *w) {
  op_t *o = w->leader ? op_new(w, OP_RELEASE) : NULL;
  if (!o) {
    if (w->stopping) run_done_fire(&w->stopped);
    return;
  }
  o->token = w->token;
  o->save_cursor = w->cursor;
  w->busy = 1;
  if (store_submit(w->store, STORE_WRITE, lease_fn, o, release_done)) {
    w->busy = 0;
    free(o);
    if (w->stopping) run_done_fire(&w->stopped);
  }
}

static void read_done(void *arg, int rc) {
  op_t *o = arg;
  webhooks_t *w = o->w;
  w->busy = 0;
  if (w->stopping) {
    op_free(o);
    release_lease(w);
    return;
  }
  if (rc) {
    log_error(SYS, "cannot read events: %s", spd_strerror(rc));
  } else if (o->kind == OP_SCAN) {
    w->scan_from = o->last_id;
    if (o->found) {
      w->work_seen = 1;
      w->again = 1;
    } else if (o->full) {
      w->again = 1;
    }
  } else if (w->leader) {
    if ((rc = enqueue(w, o))) log_error(SYS, "cannot queue deliveries: %s", spd_strerror(rc));
    /* On failure the whole batch is read again later: harmless, since
     * what was queued of it is simply delivered again (at least once). */
    if (!rc) w->read_upto = o->last_id;
    w->caught_up = !o->full;
    if (o->full && w->wn < MAX_WINDOW) w->again = 1;
    advance_cursor(w);
    pump(w);
  }
  op_free(o);
  tick_later(w, TICK_MS);
}

static void read_start(webhooks_t *w, int kind) {
  op_t *o = op_new(w, kind);
  if (!o) {
    tick_later(w, TICK_MS);
    return;
  }
  o->after = kind == OP_SCAN ? w->scan_from : w->read_upto;
  w->busy = 1;
  if (store_submit(w->store, STORE_READ, read_fn, o, read_done)) {
    w->busy = 0;
    free(o);
  }
}

static void lease_done(void *arg, int rc) {
  op_t *o = arg;
  webhooks_t *w = o->w;
  w->busy = 0;
  if (w->stopping) {
    if (!rc && o->leader) w->leader = 1, w->token = o->token;
    op_free(o);
    release_lease(w);
    return;
  }
  if (rc) {
    log_error(SYS, "lease tick failed: %s", spd_strerror(rc));
    op_free(o);
    tick_later(w, TICK_MS);
    return;
  }
  if (!o->leader) {
    if (w->leader) {
      log_warn(SYS, "another node holds the webhooks lease now; dropping deliveries in flight");
      abandon_all(w);
    }
    w->leader = 0;
    op_free(o);
    tick_later(w, TICK_MS);
    return;
  }
  if (!w->leader || o->token != w->token) {
    abandon_all(w);
    w->cursor = w->saved = w->read_upto = o->cursor;
    w->caught_up = 0;
    log_info(SYS, "this node delivers webhooks now (lease token %" PRId64 ", after event %" PRId64
             ")", o->token, o->cursor);
  } else if (o->save_cursor >= 0) {
    w->saved = o->save_cursor;
  }
  w->leader = 1;
  w->token = o->token;
  op_free(o);
  if (w->wn >= MAX_WINDOW) tick_later(w, TICK_MS);
  else read_start(w, OP_READ);
}

static void tick_start(webhooks_t *w) {
  if (w->stopping) return;
  if (w->busy) {
    w->again = 1;
    return;
  }
  if (!w->nurls && !w->leader && !w->work_seen) {
    read_start(w, OP_SCAN);
    return;
  }
  /* With only schedules' hooks, hand the lease back once everything is
   * delivered: idle nodes then only scan, and any of them takes over. */
  if (!w->nurls && w->leader && !w->wn && !w->targets && w->caught_up) {
    release_lease(w);
    return;
  }
  op_t *o = op_new(w, OP_LEASE);
  if (!o) {
    tick_later(w, TICK_MS);
    return;
  }
  o->held = o->token = w->token;
  o->was_leader = w->leader;
  o->save_cursor = w->leader && w->cursor != w->saved ? w->cursor : -1;
  o->init_hint = w->nurls ? -1 : w->scan_from;
  w->busy = 1;
  if (store_submit(w->store, STORE_WRITE, lease_fn, o, lease_done)) {
    w->busy = 0;
    free(o);
  }
}

/* ---- life ---- */

static int bad_config(char *err, size_t errlen, int rc, const char *fmt, const char *arg) {
  snprintf(err, errlen, fmt, arg);
  return rc;
}

int webhooks_init(webhooks_t **out, uv_loop_t *loop, const config_t *cfg, store_pool_t *store,
                  char *err, size_t errlen) {
  webhooks_t *w = calloc(1, sizeof(*w));
  int rc;
  if (!w) return -ENOMEM;
  w->loop = loop;
  w->cfg = cfg;
  w->store = store;
  w->scan_from = -1;
  w->timeout_ms = (int64_t)(cfg->webhook_timeout * 1000.0);
  w->backoff_ms = (int64_t)(cfg->webhook_backoff * 1000.0);
  w->retries = cfg->webhook_retries;
  if (w->timeout_ms < 1) w->timeout_ms = 1;
  if (getrandom(&w->rng, sizeof(w->rng), 0) != (ssize_t)sizeof(w->rng) || !w->rng)
    w->rng = (uint64_t)clock_wall_ms() | 1;
  if ((rc = webhooks_list_parse(cfg->webhooks, &w->urls, &w->nurls)) ||
      (rc = webhooks_list_parse(cfg->webhook_events, &w->types, &w->ntypes))) {
    rc = bad_config(err, errlen, rc, "%s", "out of memory");
    goto fail;
  }
  char why[160];
  if ((rc = webhooks_nets_parse(cfg->webhook_allow_private, &w->allowed, &w->nallowed, why,
                                sizeof(why)))) {
    rc = bad_config(err, errlen, rc, "[spiderd] webhook_allow_private: %s",
                    rc == -ENOMEM ? "out of memory" : why);
    goto fail;
  }
  for (size_t i = 0; i < w->nurls; i++)
    if (!http_url(w->urls[i])) {
      char *shown = url_shown(w->urls[i]);
      rc = bad_config(err, errlen, SPD_ECONFIG,
                      "[spiderd] webhooks: '%s' is not an http:// or https:// URL",
                      shown ? shown : "?");
      free(shown);
      goto fail;
    }
  uv_timer_init(loop, &w->tick);
  uv_timer_init(loop, &w->pump);
  uv_timer_init(loop, &w->curl_timer);
  w->tick.data = w->pump.data = w->curl_timer.data = w;
  if (w->nurls)
    log_info(SYS, "delivering %s to %zu URL(s)%s", cfg->webhook_events, w->nurls,
             cfg->webhook_secret[0] ? ", signed" : "");
  uv_timer_start(&w->tick, on_tick, 0, 0);
  *out = w;
  return 0;
fail:
  webhooks_list_free(w->urls, w->nurls);
  webhooks_list_free(w->types, w->ntypes);
  free(w->allowed);
  free(w);
  return rc;
}

void webhooks_kick(webhooks_t *w) {
  if (!w || w->stopping) return;
  if (w->busy) w->again = 1;
  else uv_timer_start(&w->tick, on_tick, 0, 0);
}

void webhooks_stop(webhooks_t *w, void (*done)(void *ud), void *ud) {
  if (!w) {
    if (done) done(ud);
    return;
  }
  w->stopping = 1;
  run_done_set(&w->stopped, done, ud);
  uv_timer_stop(&w->tick);
  uv_timer_stop(&w->pump);
  if (w->whead)
    log_info(SYS, "stopping: %zu event(s) not yet delivered are delivered after the next start",
             w->wn);
  abandon_all(w);
  if (!w->busy) release_lease(w); /* else the op in flight releases it */
}

static void handle_closed(uv_handle_t *h) {
  webhooks_t *w = h->data;
  if (--w->closing == 0) {
    webhooks_list_free(w->urls, w->nurls);
    webhooks_list_free(w->types, w->ntypes);
    free(w->allowed);
    free(w);
  }
}

void webhooks_free(webhooks_t *w) {
  if (!w) return;
  abandon_all(w);
  if (w->multi) curl_multi_cleanup(w->multi);
  w->multi = NULL;
  if (w->curl_inited) curl_global_cleanup();
  w->curl_inited = 0;
  /* Sockets curl did not report removed (connections it kept) are ours. */
  while (w->socks) {
    sock_t *c = w->socks;
    w->socks = c->next;
    uv_close((uv_handle_t *)&c->poll, sock_closed);
  }
  w->closing = 3;
  uv_close((uv_handle_t *)&w->tick, handle_closed);
  uv_close((uv_handle_t *)&w->pump, handle_closed);
  uv_close((uv_handle_t *)&w->curl_timer, handle_closed);
}
