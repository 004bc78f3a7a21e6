/* The SQLite backend's history retention (store_jobs_prune,
 * store_events_prune). Both run on the writer, so each call does bounded
 * work: at most `max` rows go, and the caller comes back for more.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store/sqlite/internal.h"

enum {
  SJ_SCAN,
  SJ_LIVE_CHILD,
  SJ_DELETE,
  SJ_EVENTS,
  SJ_RUNS,
  SJ_COUNT
};

_Static_assert(SJ_COUNT <= SQLITE_JANITOR_SLOTS, "grow SQLITE_JANITOR_SLOTS");

static const char *const janitor_sql[SJ_COUNT] = {
    /* Walks jobs_history (covering, in its own order: no sort, no table
     * row). The row-value bound lets a pair with no limits be skipped with
     * one seek instead of being read; ('', '') starts before every pair
     * because names are never empty. The rank is counted by the caller
     * rather than by ROW_NUMBER(), since a job that never started takes
     * no place in it. */
    [SJ_SCAN] = "SELECT id, project, spider, end_ms, start_ms FROM jobs "
                "WHERE state >= 2 AND state <> 6 AND (project, spider) > (?1, ?2) "
                "ORDER BY project, spider, end_ms DESC, id DESC",
    /* "parent_id != 0" spelled out so the partial index jobs_parent applies. */
    [SJ_LIVE_CHILD] = "SELECT 1 FROM jobs WHERE parent_id = ?1 AND parent_id != 0 "
                      "AND state < 2 LIMIT 1",
    /* state >= 2 again: nothing but an ended job is ever deleted, whatever
     * the scan saw. */
    [SJ_DELETE] = "DELETE FROM jobs WHERE id = ?1 AND state >= 2 AND state <> 6 "
                  "RETURNING id, jobid, project, spider, state, start_ms, end_ms",
    /* Events are appended in time order, so the oldest by id are the
     * oldest: no index on ts_ms, which would be one more page in every
     * commit that appends an event. Never the newest event: events have no
     * AUTOINCREMENT, so the newest row is what keeps ids (the stream's
     * cursors) from being reused. */
    [SJ_EVENTS] = "DELETE FROM events WHERE id IN "
                  "(SELECT id FROM events ORDER BY id LIMIT ?2) AND ts_ms < ?1 "
                  "AND id < (SELECT max(id) FROM events)",
    /* "state != 0" is runs_ended's own condition, so the planner uses it. */
    [SJ_RUNS] = "DELETE FROM runs WHERE id IN (SELECT id FROM runs WHERE state != 0 "
                "AND done_ms < ?1 ORDER BY done_ms LIMIT ?2)",
};

static sqlite3_stmt *janitor_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->janitor_stmt[id], janitor_sql[id]);
}

/* ---- jobs ---- */

/* The project/spider pair the scan is in, and its limits. */
struct pair {
  char *project, *spider;
  int keep;
  int64_t before;
  int started; /* started jobs of the pair seen so far (newest first) */
};

static void pair_release(struct pair *p) {
  free(p->project);
  free(p->spider);
  memset(p, 0, sizeof(*p));
}

static int has_live_child(struct sqlite_store *q, int64_t id, int *live) {
  sqlite3_stmt *st = janitor_stmt(q, SJ_LIVE_CHILD);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  if (src != SQLITE_ROW && src != SQLITE_DONE) return sqlite_fail(q, "prune jobs");
  *live = src == SQLITE_ROW;
  return 0;
}

/* Restarts the scan after pair p (or from the first pair when p is empty). */
static void scan_from(sqlite3_stmt *st, const struct pair *p) {
  sqlite3_reset(st);
  sqlite3_bind_text(st, 1, p->project ? p->project : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 2, p->spider ? p->spider : "", -1, SQLITE_TRANSIENT);
}

/* Finds up to max ids to delete, newest first within each pair. */
static int find_expired(struct sqlite_store *q, const prune_rule_t *rules, size_t nrules,
                        int keep_default, int64_t before_default, size_t max, int64_t *ids,
                        size_t *n) {
  struct pair p = {0};
  int rc = 0, src = SQLITE_DONE;
  sqlite3_stmt *st = janitor_stmt(q, SJ_SCAN);
  if (!st) return SPD_ESTORE;
  *n = 0;
  scan_from(st, &p);
  while (*n < max && (src = sqlite3_step(st)) == SQLITE_ROW) {
    const char *project = (const char *)sqlite3_column_text(st, 1);
    const char *spider = (const char *)sqlite3_column_text(st, 2);
    if (!project || !spider) continue;
    if (!p.project || strcmp(p.project, project) || strcmp(p.spider, spider)) {
      pair_release(&p);
      p.project = strdup(project);
      p.spider = strdup(spider);
      if (!p.project || !p.spider) {
        rc = -ENOMEM;
        break;
      }
      store_prune_limits(rules, nrules, keep_default, before_default, project, spider,
                         &p.keep, &p.before);
      if (!p.keep && !p.before) {
        scan_from(st, &p); /* the step above was this pair's first row */
        continue;
      }
    }
    int64_t id = sqlite3_column_int64(st, 0), end_ms = sqlite3_column_int64(st, 3);
    int started = sqlite3_column_int64(st, 4) != 0;
    /* An unstarted job goes once keep started ones are newer than it. */
    int over = p.keep && p.started >= p.keep;
    p.started += started;
    if (!over && !(p.before && end_ms < p.before)) continue;
    int live = 0;
    if ((rc = has_live_child(q, id, &live))) break;
    if (!live) ids[(*n)++] = id;
  }
  if (!rc && *n < max && src != SQLITE_DONE) rc = sqlite_fail(q, "prune jobs");
  sqlite3_reset(st);
  pair_release(&p);
  return rc;
}

static int delete_job(struct sqlite_store *q, int64_t id, job_t *out, int *found) {
  sqlite3_stmt *st = janitor_stmt(q, SJ_DELETE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, id);
  int rc = 0, src = sqlite3_step(st);
  *found = src == SQLITE_ROW;
  if (*found) {
    job_init(out);
    out->id = sqlite3_column_int64(st, 0);
    out->state = (job_state_t)sqlite3_column_int(st, 4);
    out->start_ms = sqlite3_column_int64(st, 5);
    out->end_ms = sqlite3_column_int64(st, 6);
    if ((rc = sqlite_col_str(st, 1, &out->jobid)) || (rc = sqlite_col_str(st, 2, &out->project)) ||
        (rc = sqlite_col_str(st, 3, &out->spider)))
      job_release(out);
    /* RETURNING rows come before the change is final: step to the end. */
    if (!rc) src = sqlite3_step(st);
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "prune jobs");
  sqlite3_reset(st);
  return rc;
}

int sqlite_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                      int keep_default, int64_t ended_before_default_ms, size_t max,
                      job_list_t *deleted) {
  struct sqlite_store *q = SQ(s);
  size_t n = 0, got = 0;
  job_t *jobs = NULL;
  int began = 0;
  int64_t *ids = calloc(max, sizeof(*ids));
  if (!ids) return -ENOMEM;
  int rc = sqlite_auto_begin(q, &began);
  if (rc) goto out;
  rc = find_expired(q, rules, nrules, keep_default, ended_before_default_ms, max, ids, &n);
  /* Nothing to delete writes nothing, not even meta: an idle janitor's op
   * adds no page to the group commit it rides in. */
  if (rc || n == 0) goto out;
  if ((rc = sqlite_keep_last_id(q))) goto out;
  if (!(jobs = calloc(n, sizeof(*jobs)))) {
    rc = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    int found = 0;
    rc = delete_job(q, ids[i], &jobs[got], &found);
    got += !rc && found;
  }
out:
  rc = sqlite_auto_end(q, began, rc);
  /* Handed over only once committed: the caller deletes files by it. */
  if (!rc) rc = job_list_append(deleted, jobs, got);
  for (size_t i = 0; i < got; i++) job_release(&jobs[i]);
  free(jobs);
  free(ids);
  return rc;
}

/* ---- events and runs ---- */

static int delete_older(struct sqlite_store *q, int id, int64_t before_ms, size_t max,
                        int *n) {
  sqlite3_stmt *st = janitor_stmt(q, id);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int64(st, 1, before_ms);
  sqlite3_bind_int64(st, 2, sqlite_clamp(max));
  int rc = sqlite_done(q, st, "prune events");
  if (!rc) *n += sqlite3_changes(q->db);
  return rc;
}

int sqlite_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted) {
  struct sqlite_store *q = SQ(s);
  int n = 0, began = 0;
  int rc = sqlite_auto_begin(q, &began);
  if (!rc) rc = delete_older(q, SJ_EVENTS, before_ms, max, &n);
  if (!rc && (size_t)n < max) rc = delete_older(q, SJ_RUNS, before_ms, max - (size_t)n, &n);
  rc = sqlite_auto_end(q, began, rc);
  if (!rc) *deleted = n;
  return rc;
}
