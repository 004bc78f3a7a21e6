/* A small blocking HTTP + JSON client for spiderd's native API, on
 * libcurl's easy interface (one connection, reused between calls).
 *
 * Ownership: client_url() and client_target_url() return malloc'd
 * strings the caller frees; client_call() hands the caller a new
 * reference in *out (json_decref it). client_release() frees the client's
 * contents; the caller calls curl_global_init/cleanup once around all use.
 */
#ifndef SPIDERD_CLI_CLIENT_H
#define SPIDERD_CLI_CLIENT_H

#include <jansson.h>
#include <stddef.h>

typedef struct client {
  char *base;        /* "http://host:port/prefix/" */
  char *userpwd;     /* "user:password" for basic auth, or NULL */
  char *token;       /* an API token sent as "Authorization: Bearer", or
                      * NULL; at most one of userpwd and token is set */
  char *unix_socket; /* talk HTTP over this socket instead of TCP, or NULL */
  char *cainfo;      /* PEM file of the CAs an https:// daemon is checked
                      * against, or NULL: $CURL_CA_BUNDLE, $SSL_CERT_FILE,
                      * else libcurl's default bundle */
  void *curl;        /* CURL * */
  long status;       /* HTTP status of the last call, 0 when none came */
} client_t;

/* base: the daemon's URL (a trailing '/' is optional); userpwd and token
 * (either may be NULL, not both set) are the credentials. Returns 0, or
 * -EINVAL (not http:// or https://, or both credentials) / -ENOMEM with a
 * message in err. */
int client_init(client_t *c, const char *base, const char *userpwd, const char *token,
                const char *unix_socket, char *err, size_t errlen);
void client_release(client_t *c);

/* base + "api/v1/" + the segments, each percent-encoded and joined by
 * '/', + "?k=v&..." from query (pairs, NULL-terminated; a pair whose
 * value is NULL is left out). Pure; NULL when out of memory. */
char *client_url(const char *base, const char *const *segs, size_t nsegs,
                 const char *const *query);

/* The URL of a daemon that serves at bind_address:port: a wildcard address
 * means this host, and an IPv6 address gets brackets. */
char *client_target_url(const char *bind_address, int port);

/* method path [query] [body]; body (may be NULL) is sent as JSON.
 * Returns 0 with the parsed response in *out (NULL for an empty body,
 * e.g. 204), or -1 with the reason in err: the API's error.message, a
 * clear word about 401, or the transport's error. */
int client_call(client_t *c, const char *method, const char *const *segs, size_t nsegs,
                const char *const *query, json_t *body, json_t **out, char *err, size_t errlen);

#endif
