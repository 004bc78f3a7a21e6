/* Webhooks: durable, signed HTTP delivery of the store's events.
 *
 * Every node runs it; only the holder of the store's "webhooks" lease
 * delivers, so a cluster on one store posts each event once (per attempt).
 * The holder reads new events (store_events_list after a cursor), picks the
 * ones whose type matches [spiderd] webhook_events, and POSTs each to the
 * daemon-wide URLs ([spiderd] webhooks) and to its schedule's own URLs. Each
 * URL has its own FIFO queue, so a slow or dead receiver delays only its own
 * deliveries, and a receiver sees its events in event order. Failures are
 * retried with exponential backoff; after the last retry the delivery is
 * given up (logged).
 *
 * The cursor ("webhooks.cursor" in the store's meta table) only moves past
 * an event once every delivery of it succeeded or was given up, so a crash
 * or a restart redelivers what was in flight: delivery is at least once,
 * and X-Spiderd-Delivery ("<event id>-<url index>") lets receivers dedupe.
 * With no cursor stored yet, delivery starts after the newest event: history
 * is not replayed.
 *
 * HTTP runs on libcurl's multi interface driven by the loop; nothing here
 * blocks the loop. The caller owns libcurl's global state
 * (curl_global_init / curl_global_cleanup).
 *
 * Ownership: borrows cfg and store for its whole life. Runs on the loop
 * thread only, except the pure helpers at the end, which are thread-safe.
 */
#ifndef SPIDERD_RUN_WEBHOOKS_H
#define SPIDERD_RUN_WEBHOOKS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "store/async.h"

typedef struct webhooks webhooks_t;

/* Parses the webhook keys of cfg and starts ticking. Returns 0, or a
 * negative code with the reason in err (a URL that is not http(s), ...). */
int webhooks_init(webhooks_t **out, uv_loop_t *loop, const config_t *cfg,
                  store_pool_t *store, char *err, size_t errlen);

/* New events were appended: look now instead of at the next tick.
 * w may be NULL. */
void webhooks_kick(webhooks_t *w);

/* Stops ticking, abandons deliveries in flight (the cursor stays before
 * them, so they are delivered again after a restart), stores the cursor,
 * gives the lease up, then calls done(ud). */
void webhooks_stop(webhooks_t *w, void (*done)(void *ud), void *ud);

/* Frees it after webhooks_stop completed (the loop must run to close its
 * handles). */
void webhooks_free(webhooks_t *w);

/* ---- pure helpers (exported for their tests) ---- */

/* Splits a comma- and/or whitespace-separated list into malloc'd strings
 * (*out, *n; free with webhooks_list_free). 0 or -ENOMEM. */
int webhooks_list_parse(const char *text, char ***out, size_t *n);
void webhooks_list_free(char **v, size_t n);

/* Does an event of `type` match one of the patterns? A pattern ending in
 * '.' matches every type it prefixes ("job." matches "job.failed"), "*"
 * matches all, anything else matches exactly. */
int webhooks_type_wanted(char *const *patterns, size_t n, const char *type);

/* Delay before retry number `failures` (1 = after the first failure):
 * base_ms * 2^(failures-1), capped at cap_ms, plus jitter in [0, 10%) of
 * that (jitter01 in [0, 1) picks where). */
int64_t webhooks_backoff_ms(int failures, int64_t base_ms, int64_t cap_ms, double jitter01);

/* X-Spiderd-Signature's value: "sha256=" + lowercase hex of
 * HMAC-SHA256(secret, "<timestamp>.<body>"), into out (at least 72 bytes).
 * 0, or -ENOMEM / -EINVAL. */
int webhooks_sign(const char *secret, const char *timestamp, const char *body,
                  size_t len, char out[72]);

/* A network deliveries may reach although it is private: addr with IPv4
 * as ::ffff:a.b.c.d, and the prefix length in bits of those 16 bytes. */
typedef struct webhook_net {
  unsigned char addr[16];
  int bits;
} webhook_net_t;

/* NULL when an address (16 bytes, IPv4 mapped) is public, else what it is
 * ("a loopback", "a private", ...): loopback, unspecified, private,
 * shared, link-local, site-local, unique local, multicast and reserved
 * ranges, also IPv4 inside IPv6 (mapped, compatible, NAT64, 6to4). */
const char *webhooks_addr_private(const unsigned char addr[16]);

/* Parses [spiderd] webhook_allow_private: addresses and CIDR networks
 * (IPv4 or IPv6), "*" for any, separated by commas and/or whitespace.
 * 0, -ENOMEM, or SPD_ECONFIG with the reason in err. */
int webhooks_nets_parse(const char *text, webhook_net_t **out, size_t *n, char *err,
                        size_t errlen);
int webhooks_addr_allowed(const webhook_net_t *nets, size_t n, const unsigned char addr[16]);

#endif
