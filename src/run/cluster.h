/* Nodes sharing a store (PostgreSQL): this node's heartbeat, the reaping
 * of dead nodes, and the notices that wake dispatch, egg copies, cancels
 * and queue takers on every node.
 *
 * Every node_heartbeat seconds the node writes its row (url, slots,
 * running) and, on a shared store, declares dead the nodes silent for
 * node_timeout: their running jobs end as lost and are retried here or
 * elsewhere (flow's jobs_reap_nodes). A node that finds itself declared dead
 * kills its crawls, whose jobs already belong to others.
 *
 * Notices (store_watch) make a job queued on any node start on a free node
 * at once; each beat also claims, copies eggs and checks cancels, so a lost
 * notice costs at most one heartbeat. On SQLite only the heartbeat runs (so
 * /api/v1/nodes lists the one node).
 *
 * Ownership: borrows cfg, the pool, the launcher and the app for its life;
 * cluster_free() frees it once cluster_stop() is done. Loop thread only. */
#ifndef SPIDERD_RUN_CLUSTER_H
#define SPIDERD_RUN_CLUSTER_H

#include <uv.h>

#include "config.h"
#include "flow/flow.h"
#include "run/launcher.h"
#include "store/async.h"

typedef struct cluster cluster_t;

typedef struct cluster_hooks {
  void (*queues)(void *ud); /* another node put queue elements */
  void (*eggs)(void *ud);   /* eggs_dir changed (a copy or a removal) */
  void *ud;
  const flow_hooks_t *flow; /* what a reap changed is applied there; NULL = nowhere */
} cluster_hooks_t;

/* shared: store_shared() of the daemon's store (eggs, reaping, notices). */
int cluster_init(cluster_t **out, uv_loop_t *loop, const config_t *cfg, store_pool_t *store,
                 launcher_t *launcher, int shared, const cluster_hooks_t *hooks, char *err,
                 size_t errlen);


/* Stops beating and listening; done(ud) once no store op is in flight. */
void cluster_stop(cluster_t *c, void (*done)(void *ud), void *ud);
void cluster_free(cluster_t *c);
/* This node claims no jobs (or does again): written with its heartbeat,
 * the first one at once, so other nodes and GET /api/v1/nodes see it. */
void cluster_set_draining(cluster_t *c, int draining);
/* Wall ms of this node's last heartbeat the store took; 0 = none yet. */
int64_t cluster_last_beat(const cluster_t *c);

#endif
