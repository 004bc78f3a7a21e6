/* queue_bench: task queue rates and latency over HTTP/1.1 keep-alive against a
 * running spiderd, and the same workload on Redis (sorted sets and a Lua
 * claim script) in the same run, reported side by side as ratios.
 *
 * Build (bench/queue_bench.sh does this and starts the servers):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE bench/queue_bench.c \
 *     $(pkg-config --cflags --libs jansson hiredis) -lpthread -o /tmp/queue_bench
 *   /tmp/queue_bench -u http://127.0.0.1:6800 --pid PID --db DIR/spiderd.db \
 *     -r 127.0.0.1:6379 --redis-dir DIR [-R 127.0.0.1:6380] [--full 10000000]
 *
 * Phases (-p, comma-separated; default put,take,latency):
 *   put      put 1000 elements per call and 1 per call, with each of -c
 *            clients (keep-alive connections / Redis connections); then
 *            the first batch phase's elements again (all already queued:
 *            the unique upsert moves them)
 *   take     take+ack: take 100 -> ack those 100, take 1 -> ack 1, and take 1
 *            with the previous element's lease in its "ack" (one request per
 *            element; Redis pipelines ZREM of the previous with the claim)
 *   latency  put-to-take, on a queue of its own (<queue>-latency): a taker
 *            waits in a long-poll take (wait=5) while a putter puts one
 *            element at a time; p50/p99 from the put's send to the taker's
 *            receipt
 *   full     fill the queue with --full elements (1000 per call, 8 clients),
 *            then the put and take rates again, as ratios full/empty; memory
 *            and disk at that size
 * Memory (VmRSS/VmHWM of --pid, Redis INFO used_memory) and disk (--db and
 * its -wal, --redis-dir) are sampled after each stage. --repeat N makes N
 * passes over the rate phases and reports medians; --max-seconds ends a
 * rate phase early (its rate is then over what it did, marked *).
 *
 * Elements look like crawl URLs (72 bytes):
 *   https://www.hostNNN.example.com/articles/NNNNNNNNNN/index.html?ref=bench
 * with host = N % 1000, every element new unless a phase says otherwise.
 *
 * Redis data model (the sorted-set frontier crawlers build): ZSET <q>:due
 * scored by due time (ms; every element here has priority 0) holds waiting
 * elements; uniqueness is the ZSET's (plain ZADD = spiderd's default policy
 * "overwrite"; NX / LT would be keep-existing / keep-earliest). The claim
 * script returns expired leases to <q>:due, then moves up to N members due
 * by now into <q>:inflight scored by lease expiry and returns them. Ack is
 * ZREM from <q>:inflight. A waiting taker blocks on BLPOP <q>:wake, which a
 * put pushes to in the same pipeline. Unlike spiderd there are no lease
 * tokens, delivery counts, keys or counters: Redis does less work per element.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64      /* clients per phase */
#define MAXT 3       /* targets */
#define ELEM_MAX 128 /* bytes of one element, with room */

/* ---------------------------------------------------------------- utils */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long long wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "queue_bench: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static int elem(char *out, long long n) {
  return snprintf(out, ELEM_MAX, "https://www.host%03lld.example.com/articles/%010lld/index.html?ref=bench",
                  n % 1000, n);
}

/* The element number back from an element (latency phase). */
static long long elem_num(const char *s) {
  const char *p = strstr(s, "/articles/");
  return p ? strtoll(p + 10, NULL, 10) : -1;
}

typedef struct sb {
  char *p;
  size_t n, cap;
} sb_t;

static void sb_need(sb_t *b, size_t more) {
  if (b->n + more + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->n + more + 1) cap *= 2;
  b->p = realloc(b->p, cap);
  if (!b->p) die("out of memory");
  b->cap = cap;
}

static void sb_add(sb_t *b, const char *s, size_t n) {
  sb_need(b, n);
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void sb_str(sb_t *b, const char *s) { sb_add(b, s, strlen(s)); }

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ----------------------------------------------------- HTTP/1.1 client */

typedef struct hconn {
  int fd;
  char *buf;
  size_t cap, len, used; /* [0,len) read; [0,used) belongs to the last reply */
  int status;
  char *body; /* into buf; body_len bytes (not NUL-terminated) */
  size_t body_len;
} hconn_t;

static char g_host[256] = "127.0.0.1";
static char g_port[16] = "6800";
static const char *g_queue = "bench";

static int tcp_connect(const char *host, const char *port) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
  if (getaddrinfo(host, port, &hints, &ai)) return -1;
  int fd = -1;
  for (struct addrinfo *a = ai; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, 0);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

static void hc_open(hconn_t *h) {
  memset(h, 0, sizeof(*h));
  h->fd = tcp_connect(g_host, g_port);
  if (h->fd < 0) die("connect %s:%s: %s", g_host, g_port, strerror(errno));
}

static void hc_close(hconn_t *h) {
  if (h->fd >= 0) close(h->fd);
  free(h->buf);
  memset(h, 0, sizeof(*h));
  h->fd = -1;
}

static int hc_read(hconn_t *h) {
  if (h->cap - h->len < 65536) {
    size_t cap = h->cap ? h->cap * 2 : 262144;
    h->buf = realloc(h->buf, cap);
    if (!h->buf) die("out of memory");
    h->cap = cap;
  }
  ssize_t n;
  do n = read(h->fd, h->buf + h->len, h->cap - h->len - 1);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  h->len += n;
  return 0;
}

static int write_all(int fd, struct iovec *iov, int n) {
  while (n > 0) {
    ssize_t w = writev(fd, iov, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    while (n > 0 && (size_t)w >= iov->iov_len) {
      w -= iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= w;
    }
  }
  return 0;
}

static const char *hdr_find(const char *h, const char *end, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = h; p && p < end;) {
    const char *eol = memmem(p, end - p, "\r\n", 2);
    if (!eol) break;
    if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      p += nl + 1;
      while (*p == ' ' || *p == '\t') p++;
      return p;
    }
    p = eol + 2;
  }
  return NULL;
}

/* Sends one request and reads its reply (Content-Length or chunked). 0, or
 * -1 when the connection failed. h->status, h->body, h->body_len. */
static int hc_send(hconn_t *h, const char *method, const char *path, const char *body,
                   size_t blen) {
  char head[512];
  int hn = snprintf(head, sizeof(head),
                    "%s %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    method, path, g_host, g_port, blen);
  struct iovec iov[2] = {{head, hn}, {(void *)body, blen}};
  return write_all(h->fd, iov, blen ? 2 : 1);
}

static int hc_recv(hconn_t *h) {
  if (h->used) { /* drop the previous reply */
    memmove(h->buf, h->buf + h->used, h->len - h->used);
    h->len -= h->used;
    h->used = 0;
  }
  char *he;
  for (;;) {
    if (h->buf && h->len >= 4 && (he = memmem(h->buf, h->len, "\r\n\r\n", 4))) break;
    if (hc_read(h)) return -1;
  }
  size_t hlen = he + 4 - h->buf;
  h->status = atoi(h->buf + 9);
  const char *cl = hdr_find(h->buf, he + 2, "Content-Length");
  const char *te = hdr_find(h->buf, he + 2, "Transfer-Encoding");
  const char *conn = hdr_find(h->buf, he + 2, "Connection");
  int closing = conn && strncasecmp(conn, "close", 5) == 0;
  if (te && strncasecmp(te, "chunked", 7) == 0) {
    /* make sure the whole message is here, then join the chunks in place */
    size_t pos = hlen;
    for (;;) {
      char *eol = h->len > pos ? memmem(h->buf + pos, h->len - pos, "\r\n", 2) : NULL;
      if (!eol) {
        if (hc_read(h)) return -1;
        continue;
      }
      size_t sz = strtoul(h->buf + pos, NULL, 16);
      size_t need = (eol + 2 - h->buf) + sz + 2;
      if (h->len < need) {
        if (hc_read(h)) return -1;
        continue;
      }
      pos = need;
      if (sz == 0) break;
    }
    size_t r = hlen, w = hlen;
    for (;;) {
      char *eol = memmem(h->buf + r, pos - r, "\r\n", 2);
      size_t sz = strtoul(h->buf + r, NULL, 16);
      r = eol + 2 - h->buf;
      if (sz == 0) break;
      memmove(h->buf + w, h->buf + r, sz);
      w += sz;
      r += sz + 2;
    }
    h->body = h->buf + hlen;
    h->body_len = w - hlen;
    h->used = pos;
  } else {
    size_t n = cl ? strtoul(cl, NULL, 10) : 0;
    while (h->len < hlen + n)
      if (hc_read(h)) return -1;
    h->body = h->buf + hlen;
    h->body_len = n;
    h->used = hlen + n;
  }
  if (closing) {
    close(h->fd);
    h->fd = tcp_connect(g_host, g_port);
    h->len = h->used = 0;
    if (h->fd < 0) return -1;
  }
  return 0;
}

static int hc_call(hconn_t *h, const char *method, const char *path, const char *body,
                   size_t blen) {
  if (hc_send(h, method, path, body, blen)) return -1;
  return hc_recv(h);
}

/* --------------------------------------------------------------- Redis */

typedef struct rtarget {
  char host[256];
  int port;
  char kdue[256], kinflight[256], kwake[256];
  char sha[64];
} rtarget_t;

/* KEYS: due, inflight; ARGV: now_ms, n, lease_ms. Expired leases go back to
 * due first (at-least-once), then up to n members due by now move to
 * inflight, scored by their lease's end. */
static const char *CLAIM_LUA =
    "local now = tonumber(ARGV[1])\n"
    "local n = tonumber(ARGV[2])\n"
    "local exp = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, n)\n"
    "for _, m in ipairs(exp) do\n"
    "  redis.call('ZADD', KEYS[1], now, m)\n"
    "  redis.call('ZREM', KEYS[2], m)\n"
    "end\n"
    "local got = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, n)\n"
    "if #got > 0 then\n"
    "  local until_ms = now + tonumber(ARGV[3])\n"
    "  local args = {}\n"
    "  for i, m in ipairs(got) do args[2*i-1] = until_ms; args[2*i] = m end\n"
    "  redis.call('ZREM', KEYS[1], unpack(got))\n"
    "  redis.call('ZADD', KEYS[2], unpack(args))\n"
    "end\n"
    "return got\n";

static redisContext *r_open(rtarget_t *t) {
  redisContext *c = redisConnect(t->host, t->port);
  if (!c || c->err) die("redis %s:%d: %s", t->host, t->port, c ? c->errstr : "no memory");
  return c;
}

static redisReply *r_cmd(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(c, fmt, ap);
  va_end(ap);
  if (!r) die("redis: %s", c->errstr);
  if (r->type == REDIS_REPLY_ERROR) die("redis: %s", r->str);
  return r;
}

/* One ZADD with n members (one round trip). */
static int r_put(redisContext *c, rtarget_t *t, long long first, int n, long long score) {
  static __thread const char **argv;
  static __thread size_t *lens;
  static __thread char *mem;
  static __thread int cap;
  if (n > cap) {
    argv = realloc(argv, sizeof(*argv) * (2 + 2 * n));
    lens = realloc(lens, sizeof(*lens) * (2 + 2 * n));
    mem = realloc(mem, (size_t)n * (ELEM_MAX + 24));
    cap = n;
  }
  argv[0] = "ZADD";
  lens[0] = 4;
  argv[1] = t->kdue;
  lens[1] = strlen(t->kdue);
  char *p = mem;
  for (int i = 0; i < n; i++) {
    int sl = snprintf(p, 24, "%lld", score);
    argv[2 + 2 * i] = p;
    lens[2 + 2 * i] = sl;
    p += sl + 1;
    int el = elem(p, first + i);
    argv[3 + 2 * i] = p;
    lens[3 + 2 * i] = el;
    p += el + 1;
  }
  redisReply *r = redisCommandArgv(c, 2 + 2 * n, argv, lens);
  if (!r) return -1;
  int bad = r->type == REDIS_REPLY_ERROR;
  if (bad) fprintf(stderr, "redis ZADD: %s\n", r->str);
  freeReplyObject(r);
  return bad ? -1 : 0;
}

/* Claim up to n, then ZREM them from inflight: two round trips, as take+ack
 * over HTTP. Returns how many. */
static int r_take_ack(redisContext *c, rtarget_t *t, int n) {
  redisReply *r = redisCommand(c, "EVALSHA %s 2 %s %s %lld %d %d", t->sha, t->kdue,
                               t->kinflight, wall_ms(), n, 30000);
  if (!r || r->type != REDIS_REPLY_ARRAY) {
    fprintf(stderr, "redis claim: %s\n", r ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    return -1;
  }
  int k = (int)r->elements;
  if (k > 0) {
    const char *argv[2 + 1000];
    size_t lens[2 + 1000];
    argv[0] = "ZREM";
    lens[0] = 4;
    argv[1] = t->kinflight;
    lens[1] = strlen(t->kinflight);
    for (int i = 0; i < k && i < 1000; i++) {
      argv[2 + i] = r->element[i]->str;
      lens[2 + i] = r->element[i]->len;
    }
    redisReply *a = redisCommandArgv(c, 2 + k, argv, lens);
    if (!a || a->type != REDIS_REPLY_INTEGER || a->integer != k) {
      fprintf(stderr, "redis ack: %s\n", a ? (a->str ? a->str : "wrong count") : c->errstr);
      k = -1;
    }
    if (a) freeReplyObject(a);
  }
  freeReplyObject(r);
  return k;
}

/* -------------------------------------------------------------- targets */

enum { T_SPIDERD, T_REDIS, T_REDIS_RAM };
static const char *tname[MAXT] = {"spiderd", "Redis AOF", "Redis RAM"};
static int tused[MAXT];
static rtarget_t rt[MAXT];
static long long tsize[MAXT]; /* elements we believe are waiting */
static long long tnext[MAXT] = {1, 1, 1}; /* each target's next new element */

static char path_put[512], path_take[512], path_ack[512], path_queue[512];
/* the latency phase has a queue of its own, empty but for its elements */
static char lpath_put[512], lpath_take[512], lpath_ack[512];
static rtarget_t rtl[MAXT];

/* spiderd: one put call of n elements [first, first+n). */
static int s_put(hconn_t *h, sb_t *b, const char *path, long long first, int n) {
  b->n = 0;
  sb_str(b, "{\"elements\":[");
  char e[ELEM_MAX];
  for (int i = 0; i < n; i++) {
    int el = elem(e, first + i);
    sb_need(b, el + 4);
    if (i) b->p[b->n++] = ',';
    b->p[b->n++] = '"';
    memcpy(b->p + b->n, e, el);
    b->n += el;
    b->p[b->n++] = '"';
  }
  sb_str(b, "]}");
  if (hc_call(h, "POST", path, b->p, b->n)) return -1;
  if (h->status != 200) {
    fprintf(stderr, "put: HTTP %d %.*s\n", h->status, (int)h->body_len, h->body);
    return -1;
  }
  return 0;
}

/* spiderd: take up to n (optionally waiting), ack them. Returns how many;
 * *num = the first element's number (latency phase), *t_got = when the take
 * reply was read. */
static int s_take_ack(hconn_t *h, sb_t *b, int n, int wait, long long *num, double *t_got) {
  char req[96];
  int rl = wait ? snprintf(req, sizeof(req), "{\"max\":%d,\"wait\":%d}", n, wait)
                : snprintf(req, sizeof(req), "{\"max\":%d}", n);
  if (hc_call(h, "POST", path_take, req, rl)) return -1;
  if (t_got) *t_got = now_s();
  if (h->status != 200) {
    fprintf(stderr, "take: HTTP %d %.*s\n", h->status, (int)h->body_len, h->body);
    return -1;
  }
  json_error_t err;
  json_t *doc = json_loadb(h->body, h->body_len, 0, &err);
  json_t *items = doc ? json_object_get(doc, "items") : NULL;
  if (!json_is_array(items)) {
    fprintf(stderr, "take: bad reply: %.*s\n", (int)h->body_len, h->body);
    json_decref(doc);
    return -1;
  }
  size_t k = json_array_size(items);
  if (k == 0) {
    json_decref(doc);
    return 0;
  }
  b->n = 0;
  sb_str(b, "{\"leases\":[");
  for (size_t i = 0; i < k; i++) {
    json_t *it = json_array_get(items, i);
    const char *lease = json_string_value(json_object_get(it, "lease"));
    if (!lease) {
      fprintf(stderr, "take: item without a lease\n");
      json_decref(doc);
      return -1;
    }
    if (i == 0 && num) *num = elem_num(json_string_value(json_object_get(it, "element")));
    if (i) sb_add(b, ",", 1);
    sb_add(b, "\"", 1);
    sb_str(b, lease);
    sb_add(b, "\"", 1);
  }
  sb_str(b, "]}");
  json_decref(doc);
  if (hc_call(h, "POST", path_ack, b->p, b->n)) return -1;
  if (h->status != 200) {
    fprintf(stderr, "ack: HTTP %d %.*s\n", h->status, (int)h->body_len, h->body);
    return -1;
  }
  const char *a = memmem(h->body, h->body_len, "\"acked\":", 8);
  if (!a || strtoll(a + 8, NULL, 10) != (long long)k) {
    fprintf(stderr, "ack: not all acked: %.*s\n", (int)h->body_len, h->body);
    return -1;
  }
  return (int)k;
}

/* spiderd: one element per request, the previous one acked by the same
 * request (take's "ack"); prev holds the lease to ack ("" = none) and gets
 * the new one. Returns how many were taken (0 or 1). */
static int s_take_piggy(hconn_t *h, sb_t *b, char prev[256]) {
  b->n = 0;
  sb_str(b, "{\"max\":1");
  if (prev[0]) {
    sb_str(b, ",\"ack\":[\"");
    sb_str(b, prev);
    sb_str(b, "\"]");
  }
  sb_str(b, "}");
  if (hc_call(h, "POST", path_take, b->p, b->n)) return -1;
  if (h->status != 200) {
    fprintf(stderr, "take+ack: HTTP %d %.*s\n", h->status, (int)h->body_len, h->body);
    return -1;
  }
  json_error_t err;
  json_t *doc = json_loadb(h->body, h->body_len, 0, &err);
  json_t *items = doc ? json_object_get(doc, "items") : NULL;
  json_t *acked = doc ? json_object_get(doc, "acked") : NULL;
  if (!json_is_array(items) || (prev[0] && json_integer_value(acked) != 1)) {
    fprintf(stderr, "take+ack: bad reply: %.*s\n", (int)h->body_len, h->body);
    json_decref(doc);
    return -1;
  }
  prev[0] = '\0';
  int k = (int)json_array_size(items);
  if (k) {
    const char *lease = json_string_value(json_object_get(json_array_get(items, 0), "lease"));
    snprintf(prev, 256, "%s", lease ? lease : "");
  }
  json_decref(doc);
  return k;
}

/* Redis: the same in one round trip, ZREM of the previous member and the
 * claim pipelined. */
static int r_take_piggy(redisContext *c, rtarget_t *t, char prev[256]) {
  redisReply *r = NULL;
  if (prev[0]) redisAppendCommand(c, "ZREM %s %s", t->kinflight, prev);
  redisAppendCommand(c, "EVALSHA %s 2 %s %s %lld 1 30000", t->sha, t->kdue, t->kinflight,
                     wall_ms());
  if (prev[0]) {
    if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_INTEGER ||
        r->integer != 1) {
      fprintf(stderr, "redis ack: %s\n", r && r->str ? r->str : c->errstr);
      if (r) freeReplyObject(r);
      return -1;
    }
    freeReplyObject(r);
  }
  if (redisGetReply(c, (void **)&r) != REDIS_OK || !r || r->type != REDIS_REPLY_ARRAY) {
    fprintf(stderr, "redis claim: %s\n", r && r->str ? r->str : c->errstr);
    if (r) freeReplyObject(r);
    return -1;
  }
  prev[0] = '\0';
  int k = (int)r->elements;
  if (k) snprintf(prev, 256, "%s", r->element[0]->str);
  freeReplyObject(r);
  return k;
}

/* --------------------------------------------------------------- phases */

/* PH_TAKEP: take 1 with the previous element's ack in the same request. */
enum { PH_PUT, PH_TAKE, PH_TAKEP };

typedef struct phase {
  int target, kind, batch, clients;
  long long total, first;
  atomic_llong next; /* put: next batch index; take: elements claimed */
  atomic_llong done;
  atomic_int errors, dry, timed_out;
  double deadline; /* monotonic; 0 = none */
  pthread_barrier_t bar;
  int quiet;
} phase_t;

typedef struct worker {
  phase_t *ph;
  pthread_t th;
} worker_t;

static void *worker_main(void *arg) {
  worker_t *w = arg;
  phase_t *ph = w->ph;
  hconn_t h = {.fd = -1};
  redisContext *rc = NULL;
  sb_t b = {0};
  if (ph->target == T_SPIDERD) hc_open(&h);
  else rc = r_open(&rt[ph->target]);
  pthread_barrier_wait(&ph->bar);
  long long nbatches = (ph->total + ph->batch - 1) / ph->batch;
  if (ph->kind == PH_PUT) {
    for (;;) {
      if (ph->deadline && now_s() > ph->deadline) {
        atomic_store(&ph->timed_out, 1);
        break;
      }
      long long i = atomic_fetch_add(&ph->next, 1);
      if (i >= nbatches) break;
      long long first = ph->first + i * ph->batch;
      int n = (int)(ph->total - i * ph->batch < ph->batch ? ph->total - i * ph->batch : ph->batch);
      int rc2 = ph->target == T_SPIDERD ? s_put(&h, &b, path_put, first, n)
                                        : r_put(rc, &rt[ph->target], first, n, wall_ms());
      if (rc2) {
        atomic_fetch_add(&ph->errors, 1);
        break;
      }
      atomic_fetch_add(&ph->done, n);
    }
  } else {
    int empty = 0;
    char prev[256] = "";
    for (;;) {
      if (ph->deadline && now_s() > ph->deadline) {
        atomic_store(&ph->timed_out, 1);
        break;
      }
      long long c = atomic_fetch_add(&ph->next, ph->batch);
      if (c >= ph->total) break;
      int want = (int)(ph->total - c < ph->batch ? ph->total - c : ph->batch);
      int k = ph->kind == PH_TAKEP
                  ? (ph->target == T_SPIDERD ? s_take_piggy(&h, &b, prev)
                                             : r_take_piggy(rc, &rt[ph->target], prev))
              : ph->target == T_SPIDERD ? s_take_ack(&h, &b, want, 0, NULL, NULL)
                                        : r_take_ack(rc, &rt[ph->target], want);
      if (k < 0) {
        atomic_fetch_add(&ph->errors, 1);
        break;
      }
      if (k < want) atomic_fetch_sub(&ph->next, want - k); /* someone takes them again */
      atomic_fetch_add(&ph->done, k);
      if (k == 0 && ++empty >= 3) {
        atomic_fetch_add(&ph->dry, 1);
        break;
      }
      if (k) empty = 0;
    }
    if (prev[0]) { /* the last one's ack */
      if (ph->target == T_SPIDERD) {
        b.n = 0;
        sb_str(&b, "{\"leases\":[\"");
        sb_str(&b, prev);
        sb_str(&b, "\"]}");
        if (hc_call(&h, "POST", path_ack, b.p, b.n) || h.status != 200)
          atomic_fetch_add(&ph->errors, 1);
      } else {
        redisReply *a = redisCommand(rc, "ZREM %s %s", rt[ph->target].kinflight, prev);
        if (!a || a->type != REDIS_REPLY_INTEGER || a->integer != 1)
          atomic_fetch_add(&ph->errors, 1);
        if (a) freeReplyObject(a);
      }
    }
  }
  if (ph->target == T_SPIDERD) hc_close(&h);
  else redisFree(rc);
  free(b.p);
  return NULL;
}

/* the machine's 1-minute load average, sampled after every phase */
static double g_load_min = 1e9, g_load_max = -1;

static double load1(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  if (l >= 0 && l < g_load_min) g_load_min = l;
  if (l > g_load_max) g_load_max = l;
  return l;
}

static double g_max_seconds = 60; /* per timed phase; 0 = no limit */
static int g_last_timed_out;
static long long g_last_done;

/* Runs a phase; returns elements/s (0 on errors). A labelled phase other than
 * the fill stops after g_max_seconds (g_last_timed_out says so): the rate is
 * then over what was done. */
static double run_phase(int target, int kind, int batch, int clients, long long total,
                        long long first, const char *label) {
  phase_t ph = {.target = target, .kind = kind, .batch = batch, .clients = clients,
                .total = total, .first = first};
  worker_t w[MAXC];
  pthread_barrier_init(&ph.bar, NULL, clients + 1);
  for (int i = 0; i < clients; i++) {
    w[i].ph = &ph;
    pthread_create(&w[i].th, NULL, worker_main, &w[i]);
  }
  /* set before the barrier, which orders it before the workers read it */
  if (label && g_max_seconds > 0 && strncmp(label, "fill", 4) != 0)
    ph.deadline = now_s() + g_max_seconds;
  pthread_barrier_wait(&ph.bar);
  double t0 = now_s();
  if (label && total >= 1000000) { /* progress of long fills */
    long long last = 0;
    double tl = t0;
    while (atomic_load(&ph.done) + 0 < total && !atomic_load(&ph.errors)) {
      usleep(200000);
      double t = now_s();
      if (t - tl >= 20) {
        long long d = atomic_load(&ph.done);
        fprintf(stderr, "  %s: %lld / %lld, %.0f/s now\n", label, d, total, (d - last) / (t - tl));
        last = d;
        tl = t;
      }
      /* all workers may have stopped early (errors, dry) */
      if (atomic_load(&ph.next) >= (kind == PH_PUT ? (total + batch - 1) / batch : total) &&
          atomic_load(&ph.done) >= total)
        break;
    }
  }
  for (int i = 0; i < clients; i++) pthread_join(w[i].th, NULL);
  double dt = now_s() - t0;
  pthread_barrier_destroy(&ph.bar);
  long long done = atomic_load(&ph.done);
  double rate = done / dt;
  if (label)
    fprintf(stderr, "  %-9s %-28s %d client%s: %lld in %.2f s = %.0f/s (load %.2f)%s%s%s\n",
            tname[target], label, clients, clients == 1 ? " " : "s", done, dt, rate, load1(),
            atomic_load(&ph.errors) ? " ERRORS" : "", atomic_load(&ph.dry) ? " (ran dry)" : "",
            atomic_load(&ph.timed_out) ? " (time limit)" : "");
  g_last_timed_out = atomic_load(&ph.timed_out);
  g_last_done = done;
  if (atomic_load(&ph.errors) || (done < total && !g_last_timed_out) || done == 0) return 0;
  return rate;
}

/* ------------------------------------------------------------- latency */

typedef struct lat {
  int target, n;
  atomic_int waiting; /* round the taker is waiting for (its take is sent) */
  atomic_int got;     /* rounds received */
  long long first;
  double *t_put, *t_got, *t_putrtt;
  atomic_int errors;
} lat_t;

static void *taker_main(void *arg) {
  lat_t *L = arg;
  hconn_t h = {.fd = -1};
  redisContext *rc = NULL;
  sb_t b = {0};
  if (L->target == T_SPIDERD) hc_open(&h);
  else rc = r_open(&rt[L->target]);
  rtarget_t *t = &rtl[L->target];
  while (atomic_load(&L->got) < L->n) {
    int round = atomic_load(&L->got);
    long long num = -1;
    double tg = 0;
    int k;
    if (L->target == T_SPIDERD) {
      /* send the long-poll take, say so, then read its reply */
      char req[64];
      int rl = snprintf(req, sizeof(req), "{\"max\":1,\"wait\":5}");
      if (hc_send(&h, "POST", lpath_take, req, rl)) break;
      atomic_store(&L->waiting, round + 1);
      if (hc_recv(&h)) break;
      tg = now_s();
      if (h.status != 200) {
        fprintf(stderr, "take: HTTP %d %.*s\n", h.status, (int)h.body_len, h.body);
        break;
      }
      json_t *doc = json_loadb(h.body, h.body_len, 0, NULL);
      json_t *items = json_object_get(doc, "items");
      k = (int)json_array_size(items);
      char lease[128] = "";
      if (k) {
        json_t *it = json_array_get(items, 0);
        num = elem_num(json_string_value(json_object_get(it, "element")));
        snprintf(lease, sizeof(lease), "%s", json_string_value(json_object_get(it, "lease")));
      }
      json_decref(doc);
      if (k) {
        int al = snprintf(req, sizeof(req), "{\"leases\":[\"%s\"]}", lease);
        if (hc_call(&h, "POST", lpath_ack, req, al) || h.status != 200) break;
      }
    } else {
      redisReply *r = redisCommand(rc, "EVALSHA %s 2 %s %s %lld 1 30000", t->sha, t->kdue,
                                   t->kinflight, wall_ms());
      if (!r || r->type != REDIS_REPLY_ARRAY) break;
      k = (int)r->elements;
      if (k) {
        tg = now_s();
        num = elem_num(r->element[0]->str);
        redisReply *a = redisCommand(rc, "ZREM %s %b", t->kinflight, r->element[0]->str,
                                     r->element[0]->len);
        freeReplyObject(a);
      } else {
        atomic_store(&L->waiting, round + 1);
        redisReply *a = redisCommand(rc, "BLPOP %s 5", t->kwake);
        if (!a) break;
        freeReplyObject(a);
      }
      freeReplyObject(r);
      if (!k) continue; /* woken: claim again */
    }
    if (k) {
      long long i = num - L->first;
      if (i != round) {
        fprintf(stderr, "latency: got element %lld, expected %d\n", i, round);
        atomic_fetch_add(&L->errors, 1);
        break;
      }
      L->t_got[round] = tg;
      atomic_store(&L->got, round + 1);
    }
  }
  if (atomic_load(&L->got) < L->n) atomic_fetch_add(&L->errors, 1);
  if (L->target == T_SPIDERD) hc_close(&h);
  else redisFree(rc);
  free(b.p);
  return NULL;
}

typedef struct latres {
  double p50, p99, put50;
  int ok;
} latres_t;

static latres_t run_latency(int target, int n) {
  lat_t L = {.target = target, .n = n, .first = tnext[target]};
  tnext[target] += n;
  L.t_put = calloc(n, sizeof(double));
  L.t_got = calloc(n, sizeof(double));
  L.t_putrtt = calloc(n, sizeof(double));
  pthread_t th;
  pthread_create(&th, NULL, taker_main, &L);
  hconn_t h = {.fd = -1};
  redisContext *rc = NULL;
  sb_t b = {0};
  rtarget_t *t = &rtl[target];
  if (target == T_SPIDERD) hc_open(&h);
  else rc = r_open(t);
  for (int i = 0; i < n && !atomic_load(&L.errors); i++) {
    double dl = now_s() + 10;
    while (atomic_load(&L.waiting) < i + 1 && !atomic_load(&L.errors) && now_s() < dl) usleep(50);
    usleep(2000); /* the take reaches the daemon and parks */
    L.t_put[i] = now_s();
    if (target == T_SPIDERD) {
      if (s_put(&h, &b, lpath_put, L.first + i, 1)) {
        atomic_fetch_add(&L.errors, 1);
        break;
      }
    } else {
      char e[ELEM_MAX];
      int el = elem(e, L.first + i);
      redisAppendCommand(rc, "ZADD %s %lld %b", t->kdue, wall_ms(), e, (size_t)el);
      redisAppendCommand(rc, "LPUSH %s 1", t->kwake);
      redisReply *r;
      for (int j = 0; j < 2; j++) {
        if (redisGetReply(rc, (void **)&r) != REDIS_OK) die("redis: %s", rc->errstr);
        freeReplyObject(r);
      }
    }
    L.t_putrtt[i] = now_s() - L.t_put[i];
    dl = now_s() + 10;
    while (atomic_load(&L.got) < i + 1 && !atomic_load(&L.errors) && now_s() < dl) usleep(20);
    if (atomic_load(&L.got) < i + 1) {
      fprintf(stderr, "latency: element %d not taken within 10 s\n", i);
      atomic_fetch_add(&L.errors, 1);
    }
  }
  if (atomic_load(&L.errors)) atomic_store(&L.got, n); /* let the taker end */
  pthread_join(th, NULL);
  latres_t res = {0};
  if (!atomic_load(&L.errors)) {
    double *d = calloc(n, sizeof(double));
    for (int i = 0; i < n; i++) d[i] = (L.t_got[i] - L.t_put[i]) * 1e3;
    qsort(d, n, sizeof(double), cmp_double);
    res.p50 = d[n / 2];
    res.p99 = d[(int)(n * 0.99) < n ? (int)(n * 0.99) : n - 1];
    qsort(L.t_putrtt, n, sizeof(double), cmp_double);
    res.put50 = L.t_putrtt[n / 2] * 1e3;
    res.ok = 1;
    free(d);
  }
  fprintf(stderr, "  %-9s put-to-take latency: p50 %.3f ms, p99 %.3f ms (put round trip p50 %.3f ms, load %.2f)%s\n",
          tname[target], res.p50, res.p99, res.put50, load1(), res.ok ? "" : " ERRORS");
  if (target == T_SPIDERD) hc_close(&h);
  else redisFree(rc);
  free(b.p);
  free(L.t_put);
  free(L.t_got);
  free(L.t_putrtt);
  return res;
}

/* ------------------------------------------------------ memory and disk */

static long g_pid; /* spiderd */
static const char *g_db;
static const char *g_redis_dir;

typedef struct mem {
  double rss_mb, hwm_mb, db_mb, wal_mb;          /* spiderd */
  double used_mb, rrss_mb, peak_mb, aof_mb;       /* Redis */
  long long spiderd_size, redis_size;
} mem_t;

static double file_mb(const char *path) {
  struct stat st;
  return stat(path, &st) ? 0 : st.st_size / 1048576.0;
}

static double dir_mb(const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "du -sb '%s' 2>/dev/null", dir);
  FILE *f = popen(cmd, "r");
  long long b = 0;
  if (f) {
    if (fscanf(f, "%lld", &b) != 1) b = 0;
    pclose(f);
  }
  return b / 1048576.0;
}

static double info_mb(redisContext *c, const char *field) {
  redisReply *r = r_cmd(c, "INFO memory");
  char key[64];
  snprintf(key, sizeof(key), "\n%s:", field);
  const char *p = strstr(r->str, key);
  double v = p ? strtod(p + strlen(key), NULL) / 1048576.0 : 0;
  freeReplyObject(r);
  return v;
}

static long long s_size(void) {
  hconn_t h;
  hc_open(&h);
  long long n = -1;
  if (!hc_call(&h, "GET", path_queue, NULL, 0) && h.status == 200) {
    json_t *doc = json_loadb(h.body, h.body_len, 0, NULL);
    json_t *st = json_object_get(doc, "stats");
    n = json_integer_value(json_object_get(st, "size"));
    json_decref(doc);
  }
  hc_close(&h);
  return n;
}

static mem_t sample_mem(const char *label) {
  mem_t m = {0};
  m.spiderd_size = m.redis_size = -1;
  if (tused[T_SPIDERD]) {
    if (g_pid) {
      char path[64], line[256];
      snprintf(path, sizeof(path), "/proc/%ld/status", g_pid);
      FILE *f = fopen(path, "r");
      while (f && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "VmRSS:", 6)) m.rss_mb = atof(line + 6) / 1024;
        if (!strncmp(line, "VmHWM:", 6)) m.hwm_mb = atof(line + 6) / 1024;
      }
      if (f) fclose(f);
    }
    if (g_db) {
      char p[1024];
      m.db_mb = file_mb(g_db);
      snprintf(p, sizeof(p), "%s-wal", g_db);
      m.wal_mb = file_mb(p);
    }
    m.spiderd_size = s_size();
  }
  if (tused[T_REDIS]) {
    redisContext *c = r_open(&rt[T_REDIS]);
    m.used_mb = info_mb(c, "used_memory");
    m.rrss_mb = info_mb(c, "used_memory_rss");
    m.peak_mb = info_mb(c, "used_memory_peak");
    redisReply *r = r_cmd(c, "ZCARD %s", rt[T_REDIS].kdue);
    m.redis_size = r->integer;
    freeReplyObject(r);
    r = r_cmd(c, "ZCARD %s", rt[T_REDIS].kinflight);
    m.redis_size += r->integer;
    freeReplyObject(r);
    redisFree(c);
    if (g_redis_dir) m.aof_mb = dir_mb(g_redis_dir);
  }
  fprintf(stderr, "  memory %-10s spiderd: %lld elements, VmRSS %.1f MB, VmHWM %.1f MB, db %.1f MB + WAL %.1f MB;"
          " Redis: %lld elements, used_memory %.1f MB, RSS %.1f MB, dir %.1f MB\n",
          label, m.spiderd_size, m.rss_mb, m.hwm_mb, m.db_mb, m.wal_mb, m.redis_size, m.used_mb,
          m.rrss_mb, m.aof_mb);
  return m;
}

/* ----------------------------------------------------------------- main */

typedef struct pdef {
  int kind, batch, clients;
  long long n;
  int reput; /* the elements of the first batched put phase again */
  char label[64];
} pdef_t;

static pdef_t defs[32];
static int ndefs;
static double rates[2][32][MAXT]; /* [empty/full][def][target] */
static int limited[2][32][MAXT];   /* the phase hit the time limit */

static int g_repeat = 1;
static double samples[2][32][MAXT][9];

/* One pass over the phases: every put phase, then every take phase (which,
 * with the default counts, take what the puts put: an empty-queue pass ends
 * about as empty as it began). Phase by phase, target after target. */
static void rates_pass(int full, int rep, int do_put, int do_take) {
  long long reput_first[MAXT] = {0}, reput_n = 0;
  for (int d = 0; d < ndefs; d++) {
    pdef_t *p = &defs[d];
    double r = 0;
    if ((p->kind == PH_PUT && !do_put) || (p->kind != PH_PUT && !do_take)) continue;
    for (int t = 0; t < MAXT; t++) {
      if (!tused[t] || (full && t == T_REDIS_RAM)) continue;
      g_last_timed_out = 0;
      if (p->kind == PH_PUT && p->reput) {
        if (reput_n)
          r = run_phase(t, PH_PUT, p->batch, p->clients, reput_n, reput_first[t], p->label);
      } else if (p->kind == PH_PUT) {
        if (p->batch > 1 && !reput_first[t]) reput_first[t] = tnext[t];
        r = run_phase(t, PH_PUT, p->batch, p->clients, p->n, tnext[t], p->label);
        tnext[t] += p->n; /* some may not have been put (time limit): never reused */
        tsize[t] += g_last_done;
      } else {
        if (tsize[t] < p->n) { /* untimed: enough waiting elements first */
          long long need = p->n - tsize[t];
          run_phase(t, PH_PUT, 1000, 4, need, tnext[t], NULL);
          tnext[t] += need;
          tsize[t] += g_last_done;
        }
        r = run_phase(t, p->kind, p->batch, p->clients, p->n, 0, p->label);
        tsize[t] -= g_last_done;
      }
      samples[full][d][t][rep] = r;
      limited[full][d][t] |= g_last_timed_out;
    }
    if (p->kind == PH_PUT && !p->reput && p->batch > 1 && !reput_n) reput_n = p->n;
  }
}

/* --repeat passes; each rate is the median of its passes (0 if any failed). */
static void run_rates(int full, int do_put, int do_take) {
  for (int rep = 0; rep < g_repeat; rep++) {
    if (g_repeat > 1) fprintf(stderr, " pass %d of %d\n", rep + 1, g_repeat);
    rates_pass(full, rep, do_put, do_take);
  }
  for (int d = 0; d < ndefs; d++)
    for (int t = 0; t < MAXT; t++) {
      double v[9];
      int bad = 0;
      for (int i = 0; i < g_repeat; i++) {
        v[i] = samples[full][d][t][i];
        if (v[i] <= 0) bad = 1;
      }
      qsort(v, g_repeat, sizeof(double), cmp_double);
      rates[full][d][t] = bad ? 0 : (g_repeat % 2 ? v[g_repeat / 2]
                                                  : (v[g_repeat / 2 - 1] + v[g_repeat / 2]) / 2);
    }
}

static void add_def(int kind, int batch, int clients, long long n, int reput) {
  pdef_t *p = &defs[ndefs++];
  p->kind = kind;
  p->batch = batch;
  p->clients = clients;
  p->n = n;
  p->reput = reput;
  if (kind == PH_PUT)
    snprintf(p->label, sizeof(p->label), "put %d/call%s", batch, reput ? ", all queued" : "");
  else if (kind == PH_TAKEP)
    snprintf(p->label, sizeof(p->label), "take 1, ack in the next take");
  else
    snprintf(p->label, sizeof(p->label), "take %d + ack %d", batch, batch);
}

static void fmt_rate(char *out, size_t cap, double r) {
  if (r <= 0) snprintf(out, cap, "failed");
  else if (r >= 1000) { /* 12,345 */
    long long v = (long long)(r + 0.5);
    if (v >= 1000000)
      snprintf(out, cap, "%lld,%03lld,%03lld", v / 1000000, v / 1000 % 1000, v % 1000);
    else
      snprintf(out, cap, "%lld,%03lld", v / 1000, v % 1000);
  } else if (r >= 100) snprintf(out, cap, "%.0f", r);
  else snprintf(out, cap, "%.1f", r);
}

/* a rate from the tables, * when its phase hit the time limit */
static void fmt_r(char *out, size_t cap, int full, int d, int t) {
  fmt_rate(out, cap, rates[full][d][t]);
  if (limited[full][d][t] && rates[full][d][t] > 0) strncat(out, "*", cap - strlen(out) - 1);
}

static void fmt_ratio(char *out, size_t cap, double a, double b) {
  if (a <= 0 || b <= 0) snprintf(out, cap, "-");
  else snprintf(out, cap, "%.2f", a / b);
}

static void usage(void) {
  fprintf(stderr,
          "usage: queue_bench [-u http://HOST:PORT] [-q QUEUE] [-r HOST:PORT] [-R HOST:PORT]\n"
          "                   [-p put,take,latency,full] [-c 1,8] [--put-batched N] [--put-single N]\n"
          "                   [--take-batched N] [--take-single N] [--latency N] [--full N]\n"
          "                   [--max-seconds S] [--repeat N] [--pid PID] [--db FILE] [--redis-dir DIR]\n"
          "  -u   spiderd's base URL          -r  Redis, AOF (the durable comparison)\n"
          "  -R   Redis in RAM (empty-queue phases only)\n"
          "  -p   phases (default put,take,latency; full needs --full N)\n"
          "  -c   client counts (default 1,8)\n"
          "  --put-batched N (200000), --put-single N (20000), --take-batched N (200000),\n"
          "  --take-single N (20000): elements per phase; --latency N (1000) samples\n"
          "  --full N   fill to N elements, then the rates again (full/empty ratios)\n"
          "  --max-seconds S   a rate phase stops after S s (60; 0 = none), its rate marked *\n"
          "  --repeat N   N passes over the rate phases (empty and full); each rate is the median\n"
          "  --pid, --db, --redis-dir   spiderd's pid and SQLite file, Redis's dir (memory, disk)\n");
  exit(2);
}

static void parse_hostport(const char *s, char *host, size_t hcap, int *port) {
  const char *c = strrchr(s, ':');
  if (!c) die("want HOST:PORT: %s", s);
  snprintf(host, hcap, "%.*s", (int)(c - s), s);
  *port = atoi(c + 1);
}

int main(int argc, char **argv) {
  const char *url = NULL, *phases = "put,take,latency", *clist = "1,8";
  long long n_pb = 200000, n_p1 = 20000, n_tb = 200000, n_t1 = 20000, n_full = 0;
  int n_lat = 1000;
  static struct option lo[] = {
      {"put-batched", 1, 0, 1}, {"put-single", 1, 0, 2}, {"take-batched", 1, 0, 3},
      {"take-single", 1, 0, 4}, {"latency", 1, 0, 5},    {"full", 1, 0, 6},
      {"pid", 1, 0, 7},         {"db", 1, 0, 8},         {"redis-dir", 1, 0, 9},
      {"max-seconds", 1, 0, 10}, {"repeat", 1, 0, 11},
      {"help", 0, 0, 'h'},      {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "u:q:r:R:p:c:h", lo, NULL)) != -1) {
    switch (o) {
    case 'u': url = optarg; break;
    case 'q': g_queue = optarg; break;
    case 'r':
      parse_hostport(optarg, rt[T_REDIS].host, sizeof(rt[T_REDIS].host), &rt[T_REDIS].port);
      tused[T_REDIS] = 1;
      break;
    case 'R':
      parse_hostport(optarg, rt[T_REDIS_RAM].host, sizeof(rt[T_REDIS_RAM].host),
                     &rt[T_REDIS_RAM].port);
      tused[T_REDIS_RAM] = 1;
      break;
    case 'p': phases = optarg; break;
    case 'c': clist = optarg; break;
    case 1: n_pb = atoll(optarg); break;
    case 2: n_p1 = atoll(optarg); break;
    case 3: n_tb = atoll(optarg); break;
    case 4: n_t1 = atoll(optarg); break;
    case 5: n_lat = atoi(optarg); break;
    case 6: n_full = atoll(optarg); break;
    case 7: g_pid = atol(optarg); break;
    case 8: g_db = optarg; break;
    case 9: g_redis_dir = optarg; break;
    case 10: g_max_seconds = atof(optarg); break;
    case 11:
      g_repeat = atoi(optarg);
      if (g_repeat < 1 || g_repeat > 9) die("--repeat: 1 to 9");
      break;
    default: usage();
    }
  }
  if (!url && !tused[T_REDIS] && !tused[T_REDIS_RAM]) usage();
  if (url) {
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *c = strchr(h, ':');
    const char *sl = strchr(h, '/');
    if (!c || (sl && sl < c)) die("want http://HOST:PORT: %s", url);
    snprintf(g_host, sizeof(g_host), "%.*s", (int)(c - h), h);
    snprintf(g_port, sizeof(g_port), "%.*s", (int)(sl ? sl - c - 1 : (long)strlen(c + 1)), c + 1);
    tused[T_SPIDERD] = 1;
    snprintf(path_put, sizeof(path_put), "/api/v1/queues/%s/put", g_queue);
    snprintf(path_take, sizeof(path_take), "/api/v1/queues/%s/take", g_queue);
    snprintf(path_ack, sizeof(path_ack), "/api/v1/queues/%s/ack", g_queue);
    snprintf(path_queue, sizeof(path_queue), "/api/v1/queues/%s", g_queue);
    snprintf(lpath_put, sizeof(lpath_put), "/api/v1/queues/%s-latency/put", g_queue);
    snprintf(lpath_take, sizeof(lpath_take), "/api/v1/queues/%s-latency/take", g_queue);
    snprintf(lpath_ack, sizeof(lpath_ack), "/api/v1/queues/%s-latency/ack", g_queue);
  }
  int want_put = strstr(phases, "put") != NULL, want_take = strstr(phases, "take") != NULL;
  int want_lat = strstr(phases, "latency") != NULL;
  int want_full = strstr(phases, "full") != NULL || n_full > 0;
  if (want_full && n_full <= 0) die("phase full needs --full N");

  int clients[8], nclients = 0;
  for (const char *p = clist; *p && nclients < 8;) {
    int c = atoi(p);
    if (c < 1 || c > MAXC) die("bad client count in %s", clist);
    clients[nclients++] = c;
    p = strchr(p, ',');
    if (!p) break;
    p++;
  }
  for (int i = 0; i < nclients; i++) add_def(PH_PUT, 1000, clients[i], n_pb, 0);
  for (int i = 0; i < nclients; i++) add_def(PH_PUT, 1, clients[i], n_p1, 0);
  add_def(PH_PUT, 1000, 1, 0, 1);
  for (int i = 0; i < nclients; i++) add_def(PH_TAKE, 100, clients[i], n_tb, 0);
  for (int i = 0; i < nclients; i++) add_def(PH_TAKE, 1, clients[i], n_t1, 0);
  for (int i = 0; i < nclients; i++) add_def(PH_TAKEP, 1, clients[i], n_t1, 0);

  /* Redis: fresh keys, the claim script loaded */
  for (int t = T_REDIS; t < MAXT; t++) {
    if (!tused[t]) continue;
    snprintf(rt[t].kdue, sizeof(rt[t].kdue), "q:%s:due", g_queue);
    snprintf(rt[t].kinflight, sizeof(rt[t].kinflight), "q:%s:inflight", g_queue);
    snprintf(rt[t].kwake, sizeof(rt[t].kwake), "q:%s:wake", g_queue);
    rtl[t] = rt[t];
    snprintf(rtl[t].kdue, sizeof(rtl[t].kdue), "q:%s-latency:due", g_queue);
    snprintf(rtl[t].kinflight, sizeof(rtl[t].kinflight), "q:%s-latency:inflight", g_queue);
    snprintf(rtl[t].kwake, sizeof(rtl[t].kwake), "q:%s-latency:wake", g_queue);
    redisContext *c = r_open(&rt[t]);
    freeReplyObject(r_cmd(c, "DEL %s %s %s %s %s %s", rt[t].kdue, rt[t].kinflight, rt[t].kwake,
                          rtl[t].kdue, rtl[t].kinflight, rtl[t].kwake));
    redisReply *r = r_cmd(c, "SCRIPT LOAD %s", CLAIM_LUA);
    snprintf(rt[t].sha, sizeof(rt[t].sha), "%s", r->str);
    snprintf(rtl[t].sha, sizeof(rtl[t].sha), "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
  }
  if (tused[T_SPIDERD]) {
    long long n = s_size();
    if (n > 0) { /* e.g. to profile takes from a queue filled before */
      fprintf(stderr, "queue %s holds %lld elements already\n", g_queue, n);
      tsize[T_SPIDERD] = n;
    }
  }

  mem_t m_start = sample_mem("start");
  latres_t lat[MAXT] = {{0}};
  fprintf(stderr, "empty queue:\n");
  run_rates(0, want_put, want_take);
  if (want_lat)
    for (int t = 0; t < MAXT; t++)
      if (tused[t]) lat[t] = run_latency(t, n_lat);
  mem_t m_empty = sample_mem("empty");
  mem_t m_filled = {0}, m_after = {0};
  double fill_rate[MAXT] = {0};
  if (want_full) {
    fprintf(stderr, "filling to %lld elements:\n", n_full);
    for (int t = 0; t < T_REDIS_RAM; t++) {
      if (!tused[t]) continue;
      long long need = n_full - tsize[t];
      if (need > 0) {
        fill_rate[t] = run_phase(t, PH_PUT, 1000, 8, need, tnext[t], "fill (put 1000/call)");
        tnext[t] += need;
        tsize[t] += g_last_done;
      }
    }
    m_filled = sample_mem("filled");
    fprintf(stderr, "full queue:\n");
    run_rates(1, want_put, want_take);
    m_after = sample_mem("after");
  }

  /* the tables */
  char a[32], b[32], c2[32], d[32];
  printf("\n### Rates, elements/s (empty queue%s)\n\n",
         g_repeat > 1 ? "; each the median of --repeat passes" : "");
  printf("| phase | clients | spiderd |%s%s\n", tused[T_REDIS] ? " Redis AOF | spiderd/Redis |" : "",
         tused[T_REDIS_RAM] ? " Redis RAM | spiderd/Redis RAM |" : "");
  printf("|---|---|---|%s%s\n", tused[T_REDIS] ? "---|---|" : "", tused[T_REDIS_RAM] ? "---|---|" : "");
  for (int i = 0; i < ndefs; i++) {
    pdef_t *p = &defs[i];
    if ((p->kind == PH_PUT && !want_put) || (p->kind != PH_PUT && !want_take)) continue;
    fmt_r(a, sizeof(a), 0, i, T_SPIDERD);
    printf("| %s | %d | %s |", p->label, p->clients, tused[T_SPIDERD] ? a : "-");
    if (tused[T_REDIS]) {
      fmt_r(b, sizeof(b), 0, i, T_REDIS);
      fmt_ratio(c2, sizeof(c2), rates[0][i][T_SPIDERD], rates[0][i][T_REDIS]);
      printf(" %s | %s |", b, c2);
    }
    if (tused[T_REDIS_RAM]) {
      fmt_r(b, sizeof(b), 0, i, T_REDIS_RAM);
      fmt_ratio(c2, sizeof(c2), rates[0][i][T_SPIDERD], rates[0][i][T_REDIS_RAM]);
      printf(" %s | %s |", b, c2);
    }
    printf("\n");
  }
  if (want_lat) {
    printf("\n### Put-to-take latency, a taker waiting (%d samples), ms\n\n", n_lat);
    printf("| target | run | p50 | p99 | put round trip p50 |\n|---|---|---|---|---|\n");
    for (int t = 0; t < MAXT; t++)
      if (tused[t])
        printf("| %s | %s | %.3f | %.3f | %.3f |\n", tname[t], lat[t].ok ? "ok" : "FAILED",
               lat[t].p50, lat[t].p99, lat[t].put50);
  }
  if (want_full) {
    printf("\n### Rates at %lld elements vs empty, elements/s\n\n", n_full);
    printf("| phase | clients | spiderd empty | spiderd full | full/empty |%s\n",
           tused[T_REDIS] ? " Redis empty | Redis full | full/empty | spiderd/Redis full |" : "");
    printf("|---|---|---|---|---|%s\n", tused[T_REDIS] ? "---|---|---|---|" : "");
    for (int i = 0; i < ndefs; i++) {
      pdef_t *p = &defs[i];
      if ((p->kind == PH_PUT && !want_put) || (p->kind != PH_PUT && !want_take)) continue;
      fmt_r(a, sizeof(a), 0, i, T_SPIDERD);
      fmt_r(b, sizeof(b), 1, i, T_SPIDERD);
      fmt_ratio(c2, sizeof(c2), rates[1][i][T_SPIDERD], rates[0][i][T_SPIDERD]);
      printf("| %s | %d | %s | %s | %s |", p->label, p->clients, a, b, c2);
      if (tused[T_REDIS]) {
        fmt_r(a, sizeof(a), 0, i, T_REDIS);
        fmt_r(b, sizeof(b), 1, i, T_REDIS);
        fmt_ratio(c2, sizeof(c2), rates[1][i][T_REDIS], rates[0][i][T_REDIS]);
        fmt_ratio(d, sizeof(d), rates[1][i][T_SPIDERD], rates[1][i][T_REDIS]);
        printf(" %s | %s | %s | %s |", a, b, c2, d);
      }
      printf("\n");
    }
    fmt_rate(a, sizeof(a), fill_rate[T_SPIDERD]);
    fmt_rate(b, sizeof(b), fill_rate[T_REDIS]);
    printf("\nFill (put 1000/call, 8 clients): spiderd %s/s%s%s\n", a,
           tused[T_REDIS] ? ", Redis AOF " : "", tused[T_REDIS] ? b : "");
  }
  printf("\nLoad average (1 min) after each phase: %.2f to %.2f.\n", g_load_min, g_load_max);
  printf("\nA rate marked * stopped at the time limit (--max-seconds %g): it is over what was done.\n",
         g_max_seconds);
  printf("\n### Memory and disk\n\n");
  printf("| when | spiderd elements | VmRSS MB | VmHWM MB | SQLite db + WAL MB |%s\n",
         tused[T_REDIS] ? " Redis elements | used_memory MB | Redis RSS MB | Redis dir (AOF) MB |" : "");
  printf("|---|---|---|---|---|%s\n", tused[T_REDIS] ? "---|---|---|---|" : "");
  mem_t *ms[4] = {&m_start, &m_empty, &m_filled, &m_after};
  const char *mn[4] = {"start", "after the empty-queue phases", "after the fill",
                       "after the full-queue phases"};
  for (int i = 0; i < (want_full ? 4 : 2); i++) {
    mem_t *m = ms[i];
    printf("| %s | %lld | %.1f | %.1f | %.1f + %.1f |", mn[i], m->spiderd_size, m->rss_mb,
           m->hwm_mb, m->db_mb, m->wal_mb);
    if (tused[T_REDIS])
      printf(" %lld | %.1f | %.1f | %.1f |", m->redis_size, m->used_mb, m->rrss_mb, m->aof_mb);
    printf("\n");
  }
  int bad = 0;
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < ndefs; i++)
      for (int t = 0; t < MAXT; t++)
        if (tused[t] && !(f && t == T_REDIS_RAM) && (f ? want_full : 1) &&
            ((defs[i].kind == PH_PUT && want_put) || (defs[i].kind != PH_PUT && want_take)) &&
            !(defs[i].reput && !n_pb) && rates[f][i][t] <= 0)
          bad++;
  if (bad) fprintf(stderr, "queue_bench: %d phase(s) failed\n", bad);
  return bad ? 1 : 0;
}
