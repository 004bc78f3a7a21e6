/* The daemon's one context: everything the loop thread owns, created and torn
 * down by main.c and passed to every face of the API. Only the loop thread
 * touches it. */
#ifndef SPIDERD_APP_H
#define SPIDERD_APP_H

#include <uv.h>

#include "api/spiders.h"
#include "config.h"
#include "flow/flow.h"
#include "flow/jobtoken.h"
#include "http/http.h"
#include "store/async.h"

/* run/'s modules, which the faces reach only through app->flow (flow/flow.h);
 * main.c makes and frees them. */
struct launcher;
struct janitor;
struct scheduler;
struct webhooks;
struct cluster;

typedef struct app {
  uv_loop_t *loop;
  config_t cfg;
  store_pool_t *store;
  http_server_t *http;
  spiders_t *spiders;
  struct pyenvs *pyenvs;         /* api/pyenvs.h: builds versions' Python environments */
  struct launcher *launcher;
  struct janitor *janitor;
  struct scheduler *scheduler;
  struct webhooks *webhooks;
  struct cluster *cluster;       /* run/cluster.c: nodes sharing the store */
  flow_hooks_t flow;             /* what the faces ask of run/ */
  job_counters_t counters;
  int stopping;
  int draining;            /* claims no jobs: spiderd drain, or a signal's drain
                            * before the stop (main.c); /readyz says 503 */
  int64_t started_ms;      /* wall clock when serving began (status uptime) */
  struct scrapyd *scrapyd; /* api/scrapyd.c's state */
  struct api_common *api_common; /* api/projects.c's state, shared by the faces */
  struct sse_hub *sse;           /* api/sse.c: live event streams */
  struct api_queues *queues;     /* api/ops_queues.c: takers waiting for elements */
  char job_secret[JOBTOKEN_SECRET_HEX + 1]; /* signs job tokens (flow/jobtoken.h) */
  struct metrics *metrics;       /* metrics.h: what /metrics reports; NULL = none */
  struct auth *auth;             /* api/auth.c: users, tokens, who sent a request */
  struct s3 *s3;                 /* net/s3.h: the object store; NULL = none */
  struct objstore *objstore;     /* run/objstore.c: uploads logs and items there */
} app_t;

typedef struct api_common api_common_t;

/* Registers the Scrapyd endpoints enabled in [services] (api/scrapyd.c). */
int api_scrapyd_register(app_t *app);
void api_scrapyd_free(app_t *app);
/* Registers the native API under /api/v1/: REST, JSON-RPC at
 * /api/v1/jsonrpc and the OpenAPI document (api/rest.c). */
int api_rest_register(app_t *app);
/* Registers /, /jobs, /logs/ and /items/ (api/ui.c), and with them the
 * built web console, docs and API explorer (api_console_register). */
int api_ui_register(app_t *app);
/* Registers /ui/, /docs/ and /api/ (but not /api/v1), served from the
 * console/, docs/ and api/ directories of ui_dir; none when ui_dir is ""
 * (api/console.c). */
int api_console_register(app_t *app);
/* Releases every take waiting for elements (with what it has: none) and
 * takes no more waits (api/ops_queues.c). The daemon is stopping. */
void api_queues_stop(app_t *app);
/* Every parked take tries again: another node put elements (a notice
 * from the shared store names no queue). */
void api_queues_wake_all(app_t *app);
/* Registers GET /metrics (Prometheus), /healthz and /readyz (api/metrics.c);
 * public (no basic auth) when [spiderd] probes_public. */
int api_metrics_register(app_t *app);
/* /readyz's rule once the store answered: 1 when ready, else 0 with the
 * reason in why. A shared store wants a heartbeat younger than
 * node_timeout_s (older, other nodes may declare this node dead). */
int api_ready_check(int shared, int64_t last_beat_ms, int64_t now_ms, double node_timeout_s,
                    char *why, size_t whylen);

#endif
