/* The address of a request's client (http_req_addr): the connection's peer,
 * or, when the peer is a trusted proxy, the client X-Forwarded-For names
 * (trust.h). Everything that speaks of "where a request came from" (the
 * failed-login throttle, the audit trail, the log) reads this one value. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http/server_int.h"
#include "http/trust.h"

static const char *peer_of(http_req_t *r, char buf[INET6_ADDRSTRLEN]) {
  if (!r->lsn || !r->lsn->name[0] || r->lsn->name[0] == '/') return "unix";
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  snprintf(buf, INET6_ADDRSTRLEN, "?");
  if (sa && sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, INET6_ADDRSTRLEN);
  else if (sa && sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, INET6_ADDRSTRLEN);
  else if (sa && sa->sa_family == AF_UNIX)
    return "unix";
  /* "::ffff:10.0.0.1" is an IPv4 client of a dual-stack socket */
  return strncmp(buf, "::ffff:", 7) == 0 && strchr(buf, '.') ? buf + 7 : buf;
}

/* Every X-Forwarded-For header, joined with "," in their order (a proxy
 * may add its own line rather than extend the client's): a first pass
 * measures (out NULL), a second copies. */
typedef struct xff {
  char *out;
  size_t len;
} xff_t;

static enum MHD_Result xff_add(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  xff_t *x = cls;
  (void)kind;
  if (!key || !value || strcasecmp(key, "X-Forwarded-For")) return MHD_YES;
  size_t n = strlen(value);
  if (x->len) {
    if (x->out) x->out[x->len] = ',';
    x->len++;
  }
  if (x->out) memcpy(x->out + x->len, value, n);
  x->len += n;
  return MHD_YES;
}

static const char *forwarded_for(http_req_t *r) {
  xff_t x = {NULL, 0};
  if (MHD_get_connection_values(r->conn, MHD_HEADER_KIND, xff_add, &x) <= 0 || !x.len)
    return NULL;
  size_t n = x.len;
  x.out = http_req_alloc(r, n + 1);
  if (!x.out) return NULL;
  x.len = 0;
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, xff_add, &x);
  x.out[x.len < n ? x.len : n] = '\0';
  return x.out;
}

const char *http_client_of(http_req_t *r) {
  char buf[INET6_ADDRSTRLEN], client[HTTP_ADDR_MAX];
  const char *peer = peer_of(r, buf);
  const http_trust_t *t = r->srv ? &r->srv->trust : NULL;
  const char *xff = t && (t->n || t->unix_peers) && http_trust_has(t, peer) ? forwarded_for(r)
                                                                             : NULL;
  http_client_addr(t, peer, xff, client);
  size_t n = strlen(client);
  char *out = http_req_alloc(r, n + 1);
  if (out) memcpy(out, client, n + 1);
  return out;
}
