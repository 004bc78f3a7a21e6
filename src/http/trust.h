/* Trusted reverse proxies, and the client's address behind them.
 *
 * trusted_proxies lists addresses and CIDR blocks (IPv4 and IPv6, comma or
 * space separated; "unix" stands for the Unix socket's peers). When the peer
 * of a connection is one of them, the client is read from X-Forwarded-For,
 * walking from its rightmost entry (the hop nearest to us) over trusted hops:
 * every entry left of the first untrusted one was written by someone we do
 * not trust, so it is never believed.
 *
 * Ownership: http_trust_parse fills a list that http_trust_release frees;
 * nothing else allocates or keeps its arguments.
 */
#ifndef SPIDERD_HTTP_TRUST_H
#define SPIDERD_HTTP_TRUST_H

#include <stddef.h>

/* An IPv4 block is kept as its IPv4-mapped IPv6 block (::ffff:a.b.c.d/96+n),
 * so "10.0.0.0/8" also matches "::ffff:10.1.2.3". */
typedef struct http_net {
  unsigned char addr[16];
  int bits; /* 0..128 */
} http_net_t;

typedef struct http_trust {
  http_net_t *v;
  size_t n;
  int unix_peers; /* "unix" was listed */
} http_trust_t;

/* The longest address text (an IPv6 address, as inet_ntop writes it). */
#define HTTP_ADDR_MAX 46

/* Parses "127.0.0.1, 10.0.0.0/8 ::1 fd00::/8" into out ("" or NULL: an empty
 * list). -EINVAL with the offending entry named in err ("'10.0.0.0/33' is
 * not an address or a CIDR block"); -ENOMEM. out is empty on error. */
int http_trust_parse(const char *text, http_trust_t *out, char *err, size_t errlen);
void http_trust_release(http_trust_t *t);

/* 1 when addr (address text, or "unix") is in the list, else 0. */
int http_trust_has(const http_trust_t *t, const char *addr);

/* Parses one address ("203.0.113.7", "2001:db8::1", "::ffff:1.2.3.4") into
 * 16 bytes (IPv4 mapped). 0, or -EINVAL. */
int http_addr_parse(const char *text, unsigned char out[16]);

/* Writes addr's canonical text (an IPv4-mapped address as plain IPv4) into
 * out; -EINVAL when it is not an address. */
int http_addr_canon(const char *text, char out[HTTP_ADDR_MAX]);

/* 1 for the machine itself: 127.0.0.0/8, ::1, ::ffff:127.0.0.0/104, and
 * "unix" (a peer of the Unix socket). */
int http_addr_local(const char *addr);

/* The client of a request from peer with the X-Forwarded-For value xff
 * (NULL: none; several headers joined with ","), written to out. The peer
 * itself unless it is trusted and xff holds an address; when the walk meets
 * an entry that is not an address, the peer too. Returns 1 when out came
 * from xff, 0 when it is the peer. */
int http_client_addr(const http_trust_t *t, const char *peer, const char *xff,
                     char out[HTTP_ADDR_MAX]);

#endif
