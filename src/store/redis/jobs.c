/* The Redis backend's jobs, nodes, cancel requests, eggs and history
 * retention (store.h), each op one Lua script (store/redis/internal.h).
 *
 * Keys under the prefix P:
 *   job:ID             hash: the job's fields as named in job_t (absent =
 *                      NULL / 0), plus cancel_ms
 *   jobs:seq           the last id given (INCR: ids are never reused)
 *   jobs:all           zset id -> id (the native listing, newest first)
 *   jobs:pending       zset priority -> INV(id): read backwards, priority
 *                      DESC then id ASC, both exact (a score is the double
 *                      itself; equal scores order by member, and INV is a
 *                      fixed-width decimal of 999999999999999 - id)
 *   jobs:nb            hash id -> not_before_ms of pending jobs that have one
 *   jobs:running       zset start_ms -> PAD(id): start_ms ASC, id ASC
 *   jobs:ended         zset end_ms -> PAD(id), read backwards: end_ms DESC,
 *                      id DESC (every final state)
 *   jobs:ended:PR\0SP  the same per project/spider pair (retention)
 *   jobs:pairs         zset (all scores 0) of the pairs "PR\0SP", by name
 *   jobs:jobid:JOBID   set of ids with this Scrapyd job id
 *   jobs:unique        hash "PR\0KEY" -> id of the live job holding the key
 *   jobs:live          hash parent id -> its pending or running children
 *   jobs:count         hash "STATE" and "STATE:PR" -> jobs (final states
 *                      count only jobs that started), kept by every change
 *   node:NAME, nodes   a hash per node (version absent: never said; draining
 *                      absent: 0, a node from before drains existed); zset
 *                      of names
 *   egg:PR\0VER, eggs  a hash per egg (data, size, created_ms); zset of names
 *
 * Every state change goes through JIDX(id, job, -1) before and
 * JIDX(id, job, +1) after, which keeps all the indexes and counters above.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "store/redis/internal.h"

/* ---- rows ---- */

#define JF(name, type) {#name, type, offsetof(job_t, name)}
static const struct redis_field job_fields[] = {
    JF(id, RF_I64),           JF(jobid, RF_STR),          JF(project, RF_STR),
    JF(spider, RF_STR),       JF(version, RF_STR),        JF(args, RF_JSON),
    JF(settings, RF_JSON),    JF(priority, RF_DBL),       JF(state, RF_INT),
    JF(node, RF_STR),         JF(pid, RF_INT),            JF(pid_start, RF_I64),
    JF(created_ms, RF_I64),   JF(start_ms, RF_I64),       JF(end_ms, RF_I64),
    JF(exit_code, RF_INT),    JF(term_signal, RF_INT),    JF(stats, RF_JSON),
    JF(schedule_id, RF_I64),  JF(parent_id, RF_I64),      JF(retry_of, RF_I64),
    JF(attempt, RF_INT),      JF(max_retries, RF_INT),    JF(retry_backoff_ms, RF_I64),
    JF(timeout_ms, RF_I64),   JF(not_before_ms, RF_I64),  JF(heartbeat_ms, RF_I64),
    JF(unique_key, RF_STR),   JF(meta, RF_JSON),          JF(corrected, RF_INT),
    JF(original_state, RF_INT), JF(note, RF_STR),       JF(test, RF_INT),
    JF(health, RF_STR),         JF(health_reasons, RF_JSON), JF(segments, RF_JSON),
    JF(cancel_ms, RF_I64),      JF(after, RF_JSON),
};
#undef JF

int redis_row_job(const redisReply *r, job_t *j) {
  job_init(j);
  int rc = redis_decode(r, job_fields, sizeof(job_fields) / sizeof(job_fields[0]), j);
  if (rc) job_release(j);
  return rc;
}

int redis_rows_jobs(const redisReply *r, job_list_t *out) {
  if (!r || r->type != REDIS_REPLY_ARRAY) return SPD_ESTORE;
  if (r->elements == 0) return 0;
  job_t *v = calloc(r->elements, sizeof(*v));
  if (!v) return -ENOMEM;
  size_t n = 0;
  int rc = 0;
  for (; n < r->elements; n++)
    if ((rc = redis_row_job(r->element[n], &v[n]))) break;
  if (!rc) rc = job_list_append(out, v, n);
  for (size_t i = 0; i < n; i++) job_release(&v[i]);
  free(v);
  return rc;
}

/* Runs a script whose reply is an array of jobs, appended to out. */
static int redis_jobs_call(struct redis_store *q, int id, redis_args_t *a, job_list_t *out,
                           const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc) rc = redis_rows_jobs(r, out);
  if (r) freeReplyObject(r);
  return rc;
}

/* Runs a script whose reply is an integer (or a code). */
static int redis_int_call(struct redis_store *q, int id, redis_args_t *a, int64_t *v,
                          const char *what) {
  redisReply *r = NULL;
  int rc = redis_eval(q, id, a, &r, what);
  if (!rc && v) *v = rr_i64(r);
  if (r) freeReplyObject(r);
  return rc;
}

/* ---- jobs ---- */

int redis_job_insert(store_t *s, job_t *j) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  int64_t created = j->created_ms ? j->created_ms : clock_wall_ms();
  ra_kv_str(&a, "jobid", j->jobid);
  ra_kv_str(&a, "project", j->project);
  ra_kv_str(&a, "spider", j->spider);
  ra_kv_str(&a, "version", j->version);
  ra_kv_json(&a, "args", j->args);
  ra_kv_json(&a, "settings", j->settings);
  ra_str(&a, "priority");
  ra_dbl(&a, j->priority);
  ra_str(&a, "state");
  ra_i64(&a, j->state);
  ra_kv_str(&a, "node", j->node);
  ra_kv_i64(&a, "pid", j->pid);
  ra_kv_i64(&a, "pid_start", j->pid_start);
  ra_kv_i64(&a, "created_ms", created);
  ra_kv_i64(&a, "start_ms", j->start_ms);
  ra_kv_i64(&a, "end_ms", j->end_ms);
  ra_str(&a, "exit_code");
  ra_i64(&a, j->exit_code);
  ra_kv_i64(&a, "term_signal", j->term_signal);
  ra_kv_json(&a, "stats", j->stats);
  ra_kv_i64(&a, "schedule_id", j->schedule_id);
  ra_kv_i64(&a, "parent_id", j->parent_id);
  ra_kv_i64(&a, "retry_of", j->retry_of);
  ra_str(&a, "attempt");
  ra_i64(&a, j->attempt > 0 ? j->attempt : 1);
  ra_kv_i64(&a, "max_retries", j->max_retries);
  ra_kv_i64(&a, "retry_backoff_ms", j->retry_backoff_ms);
  ra_kv_i64(&a, "timeout_ms", j->timeout_ms);
  ra_kv_i64(&a, "not_before_ms", j->not_before_ms);
  ra_kv_i64(&a, "heartbeat_ms", j->heartbeat_ms);
  ra_kv_str(&a, "unique_key", j->unique_key);
  ra_kv_json(&a, "meta", j->meta);
  ra_kv_i64(&a, "test", j->test ? 1 : 0);
  ra_kv_json(&a, "after", j->after);
  redisReply *r = NULL;
  int rc = redis_eval(q, RS_JOB_INSERT, &a, &r, "insert job");
  if (!rc) {
    j->id = rr_i64(r);
    j->created_ms = created;
    if (j->state == JOB_PENDING) redis_note(q, STORE_NOTE_JOBS);
  } else if (rc == SPD_ECONFLICT && r && r->type == REDIS_REPLY_ERROR) {
    const char *sp = strchr(r->str, ' ');
    j->id = sp ? strtoll(sp + 1, NULL, 10) : 0;
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms,
                    job_list_t *out) {
  redis_args_t a = {0};
  ra_str(&a, node);
  ra_i64(&a, max > 100000 ? 100000 : (int64_t)max);
  ra_i64(&a, now_ms);
  return redis_jobs_call(RQ(s), RS_JOB_CLAIM, &a, out, "claim jobs");
}

/* Under [concurrency] limits the caller counts what runs and claims in one
 * transaction, which holds the store's lock from its begin (redis.c): the
 * counts stay true until it commits. */
int redis_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                         const job_key_t *skip, size_t nskip, job_list_t *out) {
  redis_args_t a = {0};
  ra_str(&a, node);
  ra_i64(&a, max > 100000 ? 100000 : (int64_t)max);
  ra_i64(&a, now_ms);
  for (size_t i = 0; i < nskip; i++) {
    ra_str(&a, skip[i].project);
    ra_str(&a, skip[i].spider);
  }
  return redis_jobs_call(RQ(s), RS_JOB_CLAIM, &a, out, "claim jobs");
}

/* A transaction holds the store's lock from its begin: nothing more to
 * take. */
int redis_claim_lock(store_t *s) { return 0; }

int redis_job_started(store_t *s, int64_t id, int pid, int64_t pid_start) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, pid);
  ra_i64(&a, pid_start);
  return redis_eval(RQ(s), RS_JOB_STARTED, &a, NULL, "record job process");
}

int redis_job_requeue(store_t *s, int64_t id) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_JOB_REQUEUE, &a, NULL, "requeue job");
  if (!rc) redis_note(RQ(s), STORE_NOTE_JOBS);
  return rc;
}

int redis_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                     int exit_code, int term_signal, const json_t *stats) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, state);
  ra_i64(&a, end_ms);
  ra_i64(&a, exit_code);
  ra_i64(&a, term_signal);
  ra_json(&a, stats);
  int rc = redis_eval(RQ(s), RS_JOB_FINISH, &a, NULL, "finish job");
  if (!rc) redis_note(RQ(s), STORE_NOTE_JOBS);
  return rc;
}

int redis_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                             int64_t now_ms, int *count) {
  redis_args_t a = {0};
  int64_t n = 0;
  ra_str(&a, project);
  ra_str(&a, jobid);
  ra_i64(&a, now_ms);
  int rc = redis_int_call(RQ(s), RS_JOB_CANCEL_PENDING, &a, &n, "cancel pending jobs");
  if (!rc) *count = (int)n;
  return rc;
}

int redis_job_get(store_t *s, int64_t id, job_t *out) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_JOB_GET, &a, &r, "get job");
  if (!rc) {
    job_t j;
    rc = redis_row_job(r, &j);
    if (!rc) {
      job_release(out);
      *out = j;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_status(store_t *s, const char *project, const char *jobid, job_state_t *out) {
  redis_args_t a = {0};
  int64_t st = 0;
  ra_str(&a, jobid);
  ra_str(&a, project);
  int rc = redis_int_call(RQ(s), RS_JOB_STATUS, &a, &st, "job status");
  if (!rc) *out = (job_state_t)st;
  return rc;
}

/* A native walk down jobs:all reads at most this many jobs per script. */
#define REDIS_LIST_BUDGET 2000

int redis_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out) {
  int native = f->spider || f->schedule_id || f->parent_id || f->created_from_ms ||
               f->created_to_ms || f->before_id || f->newest_first || f->text || f->nmeta ||
               f->test || f->health;
  int64_t before = f->before_id;
  size_t got = 0;
  int rc;
  for (;;) {
    redis_args_t a = {0};
    redisReply *r = NULL;
    size_t limit = f->limit ? f->limit - got : 0;
    ra_i64(&a, f->states);
    ra_str(&a, f->project);
    ra_str(&a, f->jobid);
    ra_str(&a, f->node);
    ra_i64(&a, f->started_only ? 1 : 0);
    ra_i64(&a, limit > (size_t)INT64_MAX ? INT64_MAX : (int64_t)limit);
    ra_i64(&a, native);
    ra_str(&a, f->spider);
    ra_i64(&a, f->schedule_id);
    ra_i64(&a, f->parent_id);
    ra_i64(&a, f->created_from_ms);
    ra_i64(&a, f->created_to_ms);
    ra_i64(&a, before);
    ra_str(&a, f->text);
    ra_i64(&a, native ? REDIS_LIST_BUDGET : 0);
    ra_i64(&a, (int64_t)f->nprojects);
    for (size_t i = 0; i < f->nprojects; i++) ra_str(&a, f->projects[i]);
    ra_i64(&a, (int64_t)f->nmeta);
    for (size_t i = 0; i < 2 * f->nmeta; i++) ra_str(&a, f->meta[i]);
    ra_i64(&a, f->test);
    ra_str(&a, f->health ? f->health : "");
    rc = redis_eval(RQ(s), RS_JOBS_LIST, &a, &r, "list jobs");
    int64_t resume = 0;
    if (!rc && r->type == REDIS_REPLY_ARRAY && r->elements &&
        r->element[r->elements - 1]->type == REDIS_REPLY_INTEGER) {
      resume = r->element[r->elements - 1]->integer;
      redisReply rows = *r; /* the jobs without the marker (a view, not freed) */
      rows.elements--;
      size_t n0 = out->n;
      rc = redis_rows_jobs(&rows, out);
      got += out->n - n0;
    } else if (!rc) {
      size_t n0 = out->n;
      rc = redis_rows_jobs(r, out);
      got += out->n - n0;
    }
    if (r) freeReplyObject(r);
    if (rc || !resume || (f->limit && got >= f->limit)) break;
    before = resume;
  }
  return rc;
}

int redis_jobs_page(store_t *s, int group, const char *project, size_t limit,
                    job_page_key_t *after, job_list_t *out, int *more) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  char score[40];
  if (group == JOB_GROUP_PENDING) snprintf(score, sizeof(score), "%.17g", after->priority);
  else snprintf(score, sizeof(score), "%lld", (long long)after->t_ms);
  ra_i64(&a, group);
  ra_str(&a, project);
  ra_i64(&a, (int64_t)limit);
  ra_i64(&a, after->id);
  ra_str(&a, score);
  int rc = redis_eval(RQ(s), RS_JOBS_PAGE, &a, &r, "page jobs");
  if (rc) goto out;
  /* {jobs, the last id read (0: the group ends), its score} */
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[1]->type != REDIS_REPLY_INTEGER || r->element[2]->type != REDIS_REPLY_STRING) {
    rc = SPD_ESTORE;
    goto out;
  }
  rc = redis_rows_jobs(r->element[0], out);
  if (rc || !r->element[1]->integer) goto out;
  *more = 1;
  after->id = r->element[1]->integer;
  if (group == JOB_GROUP_PENDING) after->priority = strtod(r->element[2]->str, NULL);
  else after->t_ms = strtoll(r->element[2]->str, NULL, 10);
out:
  if (r) freeReplyObject(r);
  return rc;
}

/* Windows of ended jobs are read a chunk per script (ENDED_CHUNK in
 * lua/jobs.lua), so a day of a busy cluster's history never holds Redis
 * for long: other nodes' claims and heartbeats run in between. */
#define REDIS_ENDED_CHUNK 2000

int redis_job_counts(store_t *s, const char *project, int64_t ended_since_ms,
                     int64_t counts[JOB_NSTATES]) {
  char next[64] = "";
  int first = 1, rc;
  do {
    redis_args_t a = {0};
    redisReply *r = NULL;
    ra_str(&a, project);
    ra_i64(&a, ended_since_ms);
    ra_str(&a, next);
    ra_i64(&a, REDIS_ENDED_CHUNK);
    rc = redis_eval(RQ(s), RS_JOB_COUNTS, &a, &r, "count jobs");
    if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != JOB_NSTATES + 1)) rc = SPD_ESTORE;
    if (!rc) {
      for (size_t i = 0; i < JOB_NSTATES; i++) {
        if (first || i >= JOB_FINISHED) counts[i] += rr_i64(r->element[i]);
      }
      const redisReply *n = r->element[JOB_NSTATES];
      snprintf(next, sizeof(next), "%.*s", n->type == REDIS_REPLY_STRING ? (int)n->len : 0,
               n->type == REDIS_REPLY_STRING ? n->str : "");
    }
    if (r) freeReplyObject(r);
    first = 0;
  } while (!rc && next[0]);
  return rc;
}

int redis_job_throughput(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                         int64_t step_ms, job_bucket_t *buckets, size_t n) {
  char next[64] = "";
  int rc;
  do {
    redis_args_t a = {0};
    redisReply *r = NULL;
    ra_str(&a, project);
    ra_i64(&a, from_ms);
    ra_i64(&a, to_ms);
    ra_i64(&a, step_ms);
    ra_str(&a, next);
    ra_i64(&a, REDIS_ENDED_CHUNK);
    rc = redis_eval(RQ(s), RS_JOB_THROUGHPUT, &a, &r, "job throughput");
    if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || (r->elements - 1) % 4))
      rc = SPD_ESTORE;
    if (!rc) {
      const redisReply *nx = r->element[0];
      snprintf(next, sizeof(next), "%.*s", nx->type == REDIS_REPLY_STRING ? (int)nx->len : 0,
               nx->type == REDIS_REPLY_STRING ? nx->str : "");
      for (size_t i = 1; i + 3 < r->elements; i += 4) {
        int64_t k = rr_i64(r->element[i]);
        if (k < 0 || (size_t)k >= n) continue;
        buckets[k].finished += rr_i64(r->element[i + 1]);
        buckets[k].failed += rr_i64(r->element[i + 2]);
        buckets[k].items += rr_i64(r->element[i + 3]);
      }
    }
    if (r) freeReplyObject(r);
  } while (!rc && next[0]);
  return rc;
}

int redis_trim_finished(store_t *s, int keep, int *deleted) {
  redis_args_t a = {0};
  int64_t n = 0;
  ra_i64(&a, keep);
  int rc = redis_int_call(RQ(s), RS_TRIM_FINISHED, &a, &n, "trim jobs");
  if (!rc) *deleted = (int)n;
  return rc;
}

int redis_job_heartbeat(store_t *s, int64_t id, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_JOB_HEARTBEAT, &a, NULL, "job heartbeat");
}

int redis_job_next_due(store_t *s, int64_t now_ms, int64_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, now_ms);
  return redis_int_call(RQ(s), RS_JOB_NEXT_DUE, &a, out, "next due job");
}

int redis_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                     int keep_default, int64_t ended_before_default_ms, size_t max,
                     job_list_t *deleted) {
  redis_args_t a = {0};
  ra_i64(&a, keep_default);
  ra_i64(&a, ended_before_default_ms);
  ra_i64(&a, max > 1000000 ? 1000000 : (int64_t)max);
  ra_i64(&a, (int64_t)nrules);
  for (size_t i = 0; i < nrules; i++) {
    ra_str(&a, rules[i].project);
    ra_str(&a, rules[i].spider);
    ra_i64(&a, rules[i].keep);
    ra_i64(&a, rules[i].ended_before_ms);
  }
  return redis_jobs_call(RQ(s), RS_JOBS_PRUNE, &a, deleted, "prune jobs");
}

/* ---- nodes and cancel requests ---- */

int redis_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead) {
  redis_args_t a = {0};
  int64_t dead = 0;
  ra_str(&a, n->name);
  ra_str(&a, n->url);
  ra_i64(&a, n->slots);
  ra_i64(&a, n->running);
  ra_i64(&a, n->started_ms);
  ra_i64(&a, now_ms);
  ra_str(&a, n->version);
  ra_i64(&a, n->draining != 0);
  ra_i64(&a, n->mem_free);
  ra_i64(&a, n->mem_reserved);
  int rc = redis_int_call(RQ(s), RS_NODE_BEAT, &a, &dead, "node beat");
  if (!rc) *was_dead = dead != 0;
  return rc;
}

#define NF(name, type) {#name, type, offsetof(node_info_t, name)}
static const struct redis_field node_fields[] = {
    NF(name, RF_STR),       NF(url, RF_STR),          NF(slots, RF_INT), NF(running, RF_INT),
    NF(started_ms, RF_I64), NF(heartbeat_ms, RF_I64), NF(dead, RF_INT), NF(version, RF_STR),
    NF(draining, RF_INT),   NF(mem_free, RF_I64),     NF(mem_reserved, RF_I64),
};
#undef NF

static int node_item(const redisReply *e, void *out) {
  node_info_t n = {0};
  int rc = redis_decode(e, node_fields, sizeof(node_fields) / sizeof(node_fields[0]), &n);
  if (!rc && n.url && !*n.url) {
    free(n.url);
    n.url = NULL;
  }
  if (!rc && n.version && !*n.version) {
    free(n.version);
    n.version = NULL;
  }
  if (!rc) rc = node_list_push(out, &n);
  node_info_release(&n);
  return rc;
}

int redis_nodes_list(store_t *s, node_list_t *out) {
  return redis_list(RQ(s), RS_NODES_LIST, "list nodes", node_item, out);
}

int redis_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                     job_list_t *lost) {
  struct redis_store *q = RQ(s);
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, self);
  ra_i64(&a, now_ms);
  ra_i64(&a, timeout_ms);
  int rc = redis_eval(q, RS_NODES_REAP, &a, &r, "reap nodes");
  if (!rc && (r->type != REDIS_REPLY_ARRAY || r->elements != 2)) rc = SPD_ESTORE;
  if (!rc) {
    size_t before = lost->n;
    rc = redis_rows_jobs(r->element[1], lost);
    for (size_t i = before; !rc && i < lost->n; i++) {
      lost->v[i].state = JOB_RUNNING;
      lost->v[i].end_ms = 0;
    }
    if (!rc && rr_i64(r->element[0]) > 0) redis_note(q, STORE_NOTE_NODES);
    if (!rc && r->element[1]->elements) redis_note(q, STORE_NOTE_JOBS);
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_cancel_request(store_t *s, int64_t id, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_JOB_CANCEL_REQUEST, &a, NULL, "request cancel");
  if (!rc) redis_note(RQ(s), STORE_NOTE_CANCEL);
  return rc;
}

int redis_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out) {
  redis_args_t a = {0};
  ra_str(&a, node);
  return redis_jobs_call(RQ(s), RS_JOBS_CANCEL_REQUESTED, &a, out, "list cancel requests");
}

/* ---- eggs ---- */

int redis_egg_put(store_t *s, const char *project, const char *version, const void *data,
                  size_t len, int64_t now_ms) {
  redis_args_t a = {0};
  ra_str(&a, project);
  ra_str(&a, version);
  ra_bin(&a, data ? data : "", data ? len : 0);
  ra_i64(&a, now_ms);
  ra_i64(&a, (int64_t)len);
  int rc = redis_eval(RQ(s), RS_EGG_PUT, &a, NULL, "store egg");
  if (!rc) redis_note(RQ(s), STORE_NOTE_EGGS);
  return rc;
}

int redis_egg_get(store_t *s, const char *project, const char *version, void **data,
                  size_t *len) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_str(&a, project);
  ra_str(&a, version);
  int rc = redis_eval(RQ(s), RS_EGG_GET, &a, &r, "read egg");
  if (!rc) {
    if (r->type != REDIS_REPLY_STRING) {
      rc = SPD_ESTORE;
    } else {
      *data = malloc(r->len ? r->len : 1);
      if (!*data) {
        rc = -ENOMEM;
      } else {
        memcpy(*data, r->str, r->len);
        *len = r->len;
      }
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

#define EF(name, type) {#name, type, offsetof(egg_ref_t, name)}
static const struct redis_field egg_fields[] = {
    EF(project, RF_STR), EF(version, RF_STR), EF(size, RF_I64), EF(created_ms, RF_I64),
};
#undef EF

static int egg_item(const redisReply *r, void *out) {
  egg_ref_t e = {0};
  int rc = redis_decode(r, egg_fields, sizeof(egg_fields) / sizeof(egg_fields[0]), &e);
  if (!rc) rc = egg_list_push(out, &e);
  free(e.project);
  free(e.version);
  return rc;
}

int redis_eggs_list(store_t *s, egg_list_t *out) {
  return redis_list(RQ(s), RS_EGGS_LIST, "list eggs", egg_item, out);
}

int redis_egg_delete(store_t *s, const char *project, const char *version, int *count) {
  redis_args_t a = {0};
  int64_t n = 0;
  ra_str(&a, project);
  ra_str(&a, version);
  ra_i64(&a, version ? 0 : 1);
  int rc = redis_int_call(RQ(s), RS_EGG_DELETE, &a, &n, "delete eggs");
  if (!rc) {
    *count = (int)n;
    if (n) redis_note(RQ(s), STORE_NOTE_EGGS);
  }
  return rc;
}

/* The window through the ended jobs' sorted set by end time, a page of
 * job hashes at a time (store_jobs_page): one round trip per page plus the
 * window's jobs. */
int redis_job_stats_scan(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                         job_stats_row_fn fn, void *ud) {
  return store_job_stats_walk(s, project, from_ms, to_ms, fn, ud);
}

int redis_job_set_meta(store_t *s, int64_t id, const json_t *meta) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  if (meta) ra_json(&a, meta);
  else ra_str(&a, "");
  return redis_eval(RQ(s), RS_JOB_SET_META, &a, NULL, "set job meta");
}

int redis_job_set_history(store_t *s, int64_t id, job_state_t state, int corrected,
                          job_state_t original, const char *note) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, state);
  ra_i64(&a, corrected ? 1 : 0);
  ra_i64(&a, original);
  ra_str(&a, note ? note : "");
  return redis_eval(RQ(s), RS_JOB_SET_HISTORY, &a, NULL, "update job history");
}

int redis_job_set_health(store_t *s, int64_t id, const char *health, const json_t *reasons) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_str(&a, health ? health : "");
  if (reasons) ra_json(&a, reasons);
  else ra_str(&a, "");
  return redis_eval(RQ(s), RS_JOB_SET_HEALTH, &a, NULL, "set job health");
}

int redis_job_set_segments(store_t *s, int64_t id, const json_t *segments) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  if (segments) ra_json(&a, segments);
  else ra_str(&a, "");
  return redis_eval(RQ(s), RS_JOB_SET_SEGMENTS, &a, NULL, "set job segments");
}

int redis_job_resume(store_t *s, int64_t id) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_JOB_RESUME, &a, NULL, "resume job");
  if (!rc) redis_note(RQ(s), STORE_NOTE_JOBS);
  return rc;
}

/* ---- paused crawls' state ---- */

int redis_job_state_put(store_t *s, int64_t id, const void *data, size_t len, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_bin(&a, data ? data : "", data ? len : 0);
  ra_i64(&a, now_ms);
  return redis_eval(RQ(s), RS_JOB_STATE_PUT, &a, NULL, "store job state");
}

int redis_job_state_get(store_t *s, int64_t id, void **data, size_t *len) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, id);
  int rc = redis_eval(RQ(s), RS_JOB_STATE_GET, &a, &r, "read job state");
  if (!rc && r->type != REDIS_REPLY_STRING) rc = SPD_ESTORE;
  if (!rc) {
    *data = malloc(r->len ? r->len : 1);
    if (!*data) {
      rc = -ENOMEM;
    } else {
      memcpy(*data, r->str, r->len);
      *len = r->len;
    }
  }
  if (r) freeReplyObject(r);
  return rc;
}

int redis_job_state_delete(store_t *s, int64_t id) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  return redis_eval(RQ(s), RS_JOB_STATE_DELETE, &a, NULL, "delete job state");
}

int redis_jobs_waiting(store_t *s, int64_t upstream, job_list_t *out) {
  redis_args_t a = {0};
  ra_i64(&a, upstream);
  return redis_jobs_call(RQ(s), RS_JOBS_WAITING, &a, out, "list waiting jobs");
}

int redis_job_wake(store_t *s, int64_t id, int64_t now_ms) {
  redis_args_t a = {0};
  ra_i64(&a, id);
  ra_i64(&a, now_ms);
  int rc = redis_eval(RQ(s), RS_JOB_WAKE, &a, NULL, "wake job");
  if (!rc) redis_note(RQ(s), STORE_NOTE_JOBS);
  return rc;
}
