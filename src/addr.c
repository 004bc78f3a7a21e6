/* Which listening addresses only this machine reaches (addr.h). */
#include "addr.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static int v4_loopback(const struct in_addr *a) {
  return (ntohl(a->s_addr) >> 24) == 127;
}

static int v6_loopback(const struct in6_addr *a) {
  if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
  if (!IN6_IS_ADDR_V4MAPPED(a)) return 0;
  struct in_addr v4;
  memcpy(&v4, &a->s6_addr[12], sizeof(v4));
  return v4_loopback(&v4);
}

int addr_loopback_numeric(const char *addr) {
  char host[INET6_ADDRSTRLEN + 1];
  struct in_addr a4;
  struct in6_addr a6;
  size_t n = addr ? strlen(addr) : 0;
  if (n == 0) return 0;
  if (addr[0] == '[') { /* "[::1]", as the HTTP server takes it */
    if (n < 3 || addr[n - 1] != ']' || n - 2 >= sizeof(host)) return 0;
    memcpy(host, addr + 1, n - 2);
    host[n - 2] = '\0';
    return inet_pton(AF_INET6, host, &a6) == 1 && v6_loopback(&a6);
  }
  if (inet_pton(AF_INET, addr, &a4) == 1) return v4_loopback(&a4);
  return inet_pton(AF_INET6, addr, &a6) == 1 && v6_loopback(&a6);
}

/* Every address the resolver gives for name is loopback (and there is
 * one): the HTTP server binds the first, with these hints. */
static int resolves_to_loopback(const char *name) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  if (getaddrinfo(name, "6800", &hints, &ai) || !ai) return 0;
  int ok = 1;
  for (const struct addrinfo *p = ai; p && ok; p = p->ai_next) {
    if (p->ai_family == AF_INET)
      ok = v4_loopback(&((const struct sockaddr_in *)p->ai_addr)->sin_addr);
    else if (p->ai_family == AF_INET6)
      ok = v6_loopback(&((const struct sockaddr_in6 *)p->ai_addr)->sin6_addr);
    else
      ok = 0;
  }
  freeaddrinfo(ai);
  return ok;
}

int addr_loopback(const char *addr) {
  if (addr_loopback_numeric(addr)) return 1;
  return addr && !strcmp(addr, "localhost") && resolves_to_loopback(addr);
}
