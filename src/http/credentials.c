/* The Authorization header: Basic (base64 "user:password") or Bearer,
 * decoded into the credentials an authenticator judges (http_set_auth).
 * The server has no password of its own: whether a request may be served
 * is the authenticator's call alone. Loop thread only; the strings live in
 * the request's arena.
 */
#include <microhttpd.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "http/server_int.h"

static int b64val(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

/* Decodes "Basic <base64 user:password>" into out (NUL-terminated, at
 * most outlen - 1 bytes); its length, or -1 when h is not that. */
static long basic_decode(const char *h, char *out, size_t outlen) {
  while (*h == ' ' || *h == '\t') h++;
  if (strncasecmp(h, "basic", 5) != 0 || (h[5] != ' ' && h[5] != '\t')) return -1;
  h += 5;
  while (*h == ' ' || *h == '\t') h++;
  size_t n = 0;
  unsigned acc = 0;
  int bits = 0;
  for (; *h && *h != '=' && *h != ' ' && *h != '\t'; h++) {
    int v = b64val((unsigned char)*h);
    if (v < 0) return -1;
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n + 1 >= outlen) return -1;
      out[n++] = (char)(unsigned char)(acc >> bits);
    }
  }
  out[n] = '\0';
  return (long)n;
}

/* The Authorization header as credentials; strings in the arena. */
static void credentials_of(http_req_t *r, const char *h, http_credentials_t *c) {
  memset(c, 0, sizeof(*c));
  if (!h) return;
  c->scheme = HTTP_CRED_BAD;
  while (*h == ' ' || *h == '\t') h++;
  char buf[1024];
  long n = basic_decode(h, buf, sizeof(buf));
  if (n >= 0) {
    char *colon = memchr(buf, ':', (size_t)n);
    if (!colon || memchr(buf, '\0', (size_t)n)) return;
    c->user = http_arena_strndup(r, buf, (size_t)(colon - buf));
    c->secret = http_arena_strndup(r, colon + 1, (size_t)(buf + n - colon - 1));
    if (c->user && c->secret) c->scheme = HTTP_CRED_BASIC;
    return;
  }
  if (strncasecmp(h, "bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return;
  h += 6;
  while (*h == ' ' || *h == '\t') h++;
  size_t len = strcspn(h, " \t");
  if (!len || len > 512 || h[len + strspn(h + len, " \t")]) return;
  c->secret = http_arena_strndup(r, h, len);
  if (c->secret) c->scheme = HTTP_CRED_BEARER;
}

int http_authenticate(http_req_t *r) {
  http_server_t *s = r->srv;
  const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
  http_credentials_t c;
  credentials_of(r, h, &c);
  return s->auth_fn(s->auth_ud, r, &c);
}
