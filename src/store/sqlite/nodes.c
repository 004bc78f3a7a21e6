/* The SQLite backend's nodes and cancel requests. A SQLite store has one
 * node (the daemon that owns the file), so reaping never finds another; the
 * table is there so /api/v1/nodes answers alike on every backend. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store/sqlite/internal.h"

enum {
  SN_BEAT_DEAD,
  SN_BEAT,
  SN_LIST,
  SN_REAP_NODES,
  SN_REAP_JOBS,
  SN_CANCEL_REQ,
  SN_CANCEL_LIST,
  SN_COUNT
};

static const char *const sqlite_nodes_sql[SN_COUNT] = {
    [SN_BEAT_DEAD] = "SELECT dead FROM nodes WHERE name = ?1",
    [SN_BEAT] =
        "INSERT INTO nodes (name, url, slots, running, started_ms, heartbeat_ms, dead, version, "
        "draining, mem_free, mem_reserved) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, ?7, ?8, ?9, ?10) "
        "ON CONFLICT (name) DO UPDATE SET "
        "url = excluded.url, slots = excluded.slots, running = excluded.running, "
        "started_ms = excluded.started_ms, heartbeat_ms = excluded.heartbeat_ms, dead = 0, "
        "version = excluded.version, draining = excluded.draining, "
        "mem_free = excluded.mem_free, mem_reserved = excluded.mem_reserved",
    [SN_LIST] = "SELECT name, url, slots, running, started_ms, heartbeat_ms, dead, version, "
                "draining, mem_free, mem_reserved FROM nodes ORDER BY name",
    [SN_REAP_NODES] = "UPDATE nodes SET dead = 1 WHERE dead = 0 AND name != ?1 "
                      "AND heartbeat_ms < ?2",
    [SN_REAP_JOBS] =
        "UPDATE jobs SET state = 5, end_ms = ?1 WHERE state = 1 AND node IN "
        "(SELECT name FROM nodes WHERE dead = 1) RETURNING " SQLITE_JOB_COLS,
    [SN_CANCEL_REQ] = "UPDATE jobs SET cancel_ms = ?2 WHERE id = ?1 AND state = 1",
    [SN_CANCEL_LIST] = "SELECT " SQLITE_JOB_COLS " FROM jobs WHERE state = 1 AND node = ?1 "
                       "AND cancel_ms != 0 ORDER BY id",
};

static sqlite3_stmt *sn_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->nodes_stmt[id], sqlite_nodes_sql[id]);
}

int sqlite_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *probe = sn_stmt(q, SN_BEAT_DEAD), *st = sn_stmt(q, SN_BEAT);
  if (!probe || !st) return SPD_ESTORE;
  int began = 0, rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  sqlite_bind_str(probe, 1, n->name);
  int src = sqlite3_step(probe);
  if (src == SQLITE_ROW) *was_dead = sqlite3_column_int(probe, 0) != 0;
  else if (src != SQLITE_DONE) rc = sqlite_fail(q, "read node");
  sqlite3_reset(probe);
  if (!rc) {
    sqlite_bind_str(st, 1, n->name);
    sqlite_bind_str(st, 2, n->url);
    sqlite3_bind_int(st, 3, n->slots);
    sqlite3_bind_int(st, 4, n->running);
    sqlite3_bind_int64(st, 5, n->started_ms);
    sqlite3_bind_int64(st, 6, now_ms);
    sqlite_bind_str(st, 7, n->version);
    sqlite3_bind_int(st, 8, n->draining != 0);
    sqlite3_bind_int64(st, 9, n->mem_free);
    sqlite3_bind_int64(st, 10, n->mem_reserved);
    rc = sqlite_done(q, st, "node beat");
  }
  return sqlite_auto_end(q, began, rc);
}

/* Appends the node of SN_LIST's row to the node_list_t out. */
static int node_row(sqlite3_stmt *st, void *out) {
  node_info_t n = {0};
  int rc;
  if ((rc = sqlite_col_str(st, 0, &n.name)) || (rc = sqlite_col_str(st, 1, &n.url)) ||
      (rc = sqlite_col_str(st, 7, &n.version))) {
    node_info_release(&n);
    return rc;
  }
  n.slots = sqlite3_column_int(st, 2);
  n.running = sqlite3_column_int(st, 3);
  n.started_ms = sqlite3_column_int64(st, 4);
  n.heartbeat_ms = sqlite3_column_int64(st, 5);
  n.dead = sqlite3_column_int(st, 6);
  n.draining = sqlite3_column_int(st, 8);
  n.mem_free = sqlite3_column_int64(st, 9);
  n.mem_reserved = sqlite3_column_int64(st, 10);
  if ((rc = node_list_push(out, &n))) node_info_release(&n);
  return rc;
}

int sqlite_nodes_list(store_t *s, node_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sn_stmt(q, SN_LIST);
  if (!st) return SPD_ESTORE;
  return sqlite_each_row(q, st, node_row, out, "list nodes");
}

int sqlite_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                      job_list_t *lost) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *nodes = sn_stmt(q, SN_REAP_NODES), *jobs = sn_stmt(q, SN_REAP_JOBS);
  if (!nodes || !jobs) return SPD_ESTORE;
  struct sqlite_rows r = {0};
  int began = 0, rc = sqlite_auto_begin(q, &began);
  if (rc) return rc;
  sqlite_bind_str(nodes, 1, self);
  sqlite3_bind_int64(nodes, 2, now_ms - timeout_ms);
  rc = sqlite_done(q, nodes, "reap nodes");
  if (!rc) {
    sqlite3_bind_int64(jobs, 1, now_ms);
    rc = sqlite_read_rows(q, jobs, &r, "reap jobs");
  }
  rc = sqlite_auto_end(q, began, rc);
  if (!rc) {
    for (size_t i = 0; i < r.n; i++) {
      r.v[i].state = JOB_RUNNING;
      r.v[i].end_ms = 0;
    }
    rc = job_list_append(lost, r.v, r.n);
  }
  sqlite_rows_release(&r);
  return rc;
}

int sqlite_job_cancel_request(store_t *s, int64_t id, int64_t now_ms) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sn_stmt(q, SN_CANCEL_REQ);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  sqlite3_bind_int64(st, 2, now_ms);
  return sqlite_changed(q, sqlite_done(q, st, "request cancel"));
}

int sqlite_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sn_stmt(q, SN_CANCEL_LIST);
  if (!st) return SPD_ESTORE;
  struct sqlite_rows r = {0};
  sqlite_bind_str(st, 1, node);
  int rc = sqlite_read_rows(q, st, &r, "list cancel requests");
  if (!rc) rc = job_list_append(out, r.v, r.n);
  sqlite_rows_release(&r);
  return rc;
}

/* ---- what only a shared store does ----
 * One node on one file: eggs stay in eggs_dir, there is nobody to notify
 * and the write transaction already serializes claims. */

int sqlite_claim_lock(store_t *s) { return 0; }

int sqlite_notify(store_t *s, unsigned what) { return 0; }

int sqlite_watch_open(const char *url, const char *rest, store_watch_t **out, char *err,
                      size_t errlen) {
  snprintf(err, errlen, "store '%s' has no notifications", url);
  return -ENOTSUP;
}

int sqlite_egg_put(store_t *s, const char *project, const char *version, const void *data,
                   size_t len, int64_t now_ms) {
  return -ENOTSUP;
}

int sqlite_egg_get(store_t *s, const char *project, const char *version, void **data,
                   size_t *len) {
  return -ENOTSUP;
}

int sqlite_eggs_list(store_t *s, egg_list_t *out) { return -ENOTSUP; }

int sqlite_egg_delete(store_t *s, const char *project, const char *version, int *count) {
  return -ENOTSUP;
}

/* One node: a paused crawl's state stays in its directory on disk. */
int sqlite_job_state_put(store_t *s, int64_t id, const void *data, size_t len, int64_t now_ms) {
  return -ENOTSUP;
}

int sqlite_job_state_get(store_t *s, int64_t id, void **data, size_t *len) { return -ENOTSUP; }

int sqlite_job_state_delete(store_t *s, int64_t id) { return -ENOTSUP; }
