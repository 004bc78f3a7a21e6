/* See trust.h. */
#include "http/trust.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int http_addr_parse(const char *text, unsigned char out[16]) {
  struct in_addr a4;
  if (inet_pton(AF_INET, text, &a4) == 1) {
    memcpy(out, v4_mapped, 12);
    memcpy(out + 12, &a4, 4);
    return 0;
  }
  struct in6_addr a6;
  if (inet_pton(AF_INET6, text, &a6) == 1) {
    memcpy(out, &a6, 16);
    return 0;
  }
  return -EINVAL;
}

static void addr_text(const unsigned char a[16], char out[HTTP_ADDR_MAX]) {
  if (!memcmp(a, v4_mapped, 12))
    inet_ntop(AF_INET, a + 12, out, HTTP_ADDR_MAX);
  else
    inet_ntop(AF_INET6, a, out, HTTP_ADDR_MAX);
}

int http_addr_canon(const char *text, char out[HTTP_ADDR_MAX]) {
  unsigned char a[16];
  int rc = http_addr_parse(text, a);
  if (!rc) addr_text(a, out);
  return rc;
}

static int net_has(const http_net_t *net, const unsigned char a[16]) {
  int full = net->bits / 8, rest = net->bits % 8;
  if (memcmp(net->addr, a, (size_t)full)) return 0;
  if (!rest) return 1;
  unsigned char mask = (unsigned char)(0xff << (8 - rest));
  return (net->addr[full] & mask) == (a[full] & mask);
}

int http_addr_local(const char *addr) {
  return !strcmp(addr, "unix") || addr_loopback_numeric(addr);
}

/* "10.0.0.0/8", "fd00::/8" or a single address. */
static int net_parse(const char *s, http_net_t *net) {
  char host[HTTP_ADDR_MAX + 1];
  const char *slash = strchr(s, '/');
  size_t n = slash ? (size_t)(slash - s) : strlen(s);
  if (n == 0 || n >= sizeof(host)) return -EINVAL;
  memcpy(host, s, n);
  host[n] = '\0';
  if (http_addr_parse(host, net->addr)) return -EINVAL;
  int v4 = strchr(host, ':') == NULL, max = v4 ? 32 : 128, bits = max;
  if (slash) {
    const char *p = slash + 1;
    char *end = NULL;
    long b = strtol(p, &end, 10);
    if (p[0] < '0' || p[0] > '9' || *end || b > max || (p[0] == '0' && p[1])) return -EINVAL;
    bits = (int)b;
  }
  net->bits = v4 ? bits + 96 : bits;
  /* the host bits are cleared, so "10.1.2.3/8" is simply 10.0.0.0/8 */
  for (int i = net->bits; i < 128; i++) net->addr[i / 8] &= (unsigned char)~(0x80 >> (i % 8));
  return 0;
}

static const char SEPARATORS[] = ", \t\r\n";

int http_trust_parse(const char *text, http_trust_t *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  size_t cap = 0;
  for (const char *p = text ? text : ""; *p;) {
    p += strspn(p, SEPARATORS);
    size_t n = strcspn(p, SEPARATORS);
    if (!n) break;
    char item[128];
    snprintf(item, sizeof(item), "%.*s", (int)(n < sizeof(item) ? n : sizeof(item) - 1), p);
    p += n;
    if (!strcmp(item, "unix")) {
      out->unix_peers = 1;
      continue;
    }
    if (out->n == cap) {
      cap = cap ? 2 * cap : 4;
      http_net_t *v = realloc(out->v, cap * sizeof(*v));
      if (!v) {
        http_trust_release(out);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
      }
      out->v = v;
    }
    if (n >= sizeof(item) || net_parse(item, &out->v[out->n])) {
      snprintf(err, errlen, "'%s' is not an address or a CIDR block (e.g. 10.0.0.0/8, fd00::/8)",
               item);
      http_trust_release(out);
      return -EINVAL;
    }
    out->n++;
  }
  return 0;
}

void http_trust_release(http_trust_t *t) {
  free(t->v);
  memset(t, 0, sizeof(*t));
}

static int trusted(const http_trust_t *t, const unsigned char a[16]) {
  for (size_t i = 0; i < t->n; i++)
    if (net_has(&t->v[i], a)) return 1;
  return 0;
}

int http_trust_has(const http_trust_t *t, const char *addr) {
  unsigned char a[16];
  if (!strcmp(addr, "unix")) return t->unix_peers;
  return !http_addr_parse(addr, a) && trusted(t, a);
}

/* One X-Forwarded-For entry: an address, and as some proxies write it,
 * "[2001:db8::1]", "[2001:db8::1]:443" or "203.0.113.7:443". */
static int xff_entry(const char *s, size_t n, unsigned char a[16]) {
  char buf[HTTP_ADDR_MAX + 8];
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
  if (!n || n >= sizeof(buf)) return -EINVAL;
  memcpy(buf, s, n);
  buf[n] = '\0';
  if (!http_addr_parse(buf, a)) return 0;
  char *end = NULL;
  if (buf[0] == '[' && (end = strchr(buf, ']')) && (!end[1] || end[1] == ':')) {
    *end = '\0';
    return http_addr_parse(buf + 1, a) || strchr(buf + 1, ':') == NULL ? -EINVAL : 0;
  }
  char *colon = strchr(buf, ':');
  if (!colon || strchr(colon + 1, ':')) return -EINVAL; /* an IPv6 address without [] */
  *colon = '\0';
  return strchr(buf, '.') ? http_addr_parse(buf, a) : -EINVAL;
}

int http_client_addr(const http_trust_t *t, const char *peer, const char *xff,
                     char out[HTTP_ADDR_MAX]) {
  snprintf(out, HTTP_ADDR_MAX, "%s", peer);
  if (!t || !xff || !http_trust_has(t, peer)) return 0;
  unsigned char a[16];
  size_t end = strlen(xff);
  for (;;) {
    size_t start = end;
    while (start > 0 && xff[start - 1] != ',') start--;
    if (xff_entry(xff + start, end - start, a)) return 0; /* malformed: the peer */
    if (!trusted(t, a) || start == 0) break; /* the client, or the leftmost hop */
    end = start - 1;
  }
  addr_text(a, out);
  return 1;
}
