/* Job operations: list (filtered, paged), get, create (run now), cancel,
 * and following a job's log and items files by byte offset. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/proxy.h"
#include "api/objserve.h"
#include "api/jobs.h"
#include "api/projects.h"
#include "api/auth.h"
#include "api/ops_impl.h"
#include "core/principal.h"
#include "flow/jobs.h"
#include "core/cron.h"
#include "core/limits.h"
#include "clock.h"
#include "error.h"

#define PAGE_DEFAULT 100
#define TAIL_DEFAULT (64 * 1024)

/* ---- jobs.list ---- */

static uint32_t fnv1a(uint32_t h, const char *s) {
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return (h ^ 0xff) * 16777619u; /* separator: ("ab","") differs from ("a","b") */
}

/* What a cursor is bound to: the filters, not the page size. */
static uint32_t list_fingerprint(const op_call_t *c) {
  char buf[128];
  snprintf(buf, sizeof(buf), "%llx/%lld/%lld/%lld/%lld/%lld", (long long)c->num[0],
           op_int(c, "schedule", 0), op_int(c, "parent", 0), (long long)c->num[4],
           (long long)c->num[5], (long long)c->num[7]);
  uint32_t h = fnv1a(fnv1a(fnv1a(2166136261u, buf), op_str(c, "project")), op_str(c, "spider"));
  h = fnv1a(fnv1a(h, op_str(c, "node")), op_str(c, "q"));
  if (op_str(c, "health")) h = fnv1a(h, op_str(c, "health"));
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)op_json(c, "meta"), k, v)
    h = fnv1a(fnv1a(h, k), json_string_value(v));
  return h;
}

/* The meta filters as key, value pairs for job_filter_t (c->names). */
static int list_meta_pairs(op_call_t *c) {
  const json_t *m = op_json(c, "meta");
  size_t n = json_object_size(m), i = 0;
  if (!n) return 0;
  if (n > JOB_FILTER_META_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "meta", "max", JOB_FILTER_META_MAX),
            "at most %d meta filters", JOB_FILTER_META_MAX);
    return 1;
  }
  c->names = calloc(2 * n, sizeof(char *));
  if (!c->names) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return 1;
  }
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)m, k, v) {
    if (!job_meta_key_valid(k)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "meta"),
              "meta filter key '%.200s' must be 1 to %d bytes, without control characters, "
              "'\"' or '\\'", k, JOB_META_KEY_MAX);
      return 1;
    }
    c->names[i++] = (char *)k; /* borrowed from params: c->nnames stays 0 */
    c->names[i++] = (char *)json_string_value(v);
  }
  c->num[6] = (int64_t)n;
  return 0;
}

/* num[0] states, num[1] cursor id (0 = first page), num[2] limit,
 * num[3] = 1 when there is a next page, num[4]/num[5] created from/to,
 * num[7] test runs (job_filter_t's test).
 *
 * Pages are in id order, newest first, so a job never moves between pages
 * as its state changes; the store starts each page after the cursor's id
 * and reads one job more than the page to know whether another follows. */
static int list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_filter_t f = {.project = op_str(c, "project"),
                    .spider = op_str(c, "spider"),
                    .states = (unsigned)c->num[0],
                    .schedule_id = op_int(c, "schedule", 0),
                    .parent_id = op_int(c, "parent", 0),
                    .created_from_ms = c->num[4],
                    .created_to_ms = c->num[5],
                    .node = op_str(c, "node"),
                    .text = op_str(c, "q"),
                    .before_id = c->num[1],
                    .newest_first = 1,
                    .projects = (const char *const *)c->mine,
                    .nprojects = c->nmine,
                    .meta = (const char *const *)c->names,
                    .nmeta = (size_t)c->num[6],
                    .test = (int)c->num[7],
                    .health = op_str(c, "health"),
                    .limit = (size_t)c->num[2] + 1};
  int rc = store_jobs_list(s, &f, &c->list);
  if (rc) return rc;
  size_t limit = (size_t)c->num[2];
  c->num[3] = c->list.n > limit;
  for (size_t i = limit; i < c->list.n; i++) job_release(&c->list.v[i]);
  if (c->list.n > limit) c->list.n = limit;
  return 0;
}

static void list_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (op_store_failed(c, rc)) return;
  json_t *jobs = json_array();
  for (size_t i = 0; i < c->list.n; i++) json_array_append_new(jobs, op_render_job(&c->list.v[i]));
  json_t *next = json_null();
  if (c->num[3] && c->list.n) {
    char cur[24];
    op_cursor_encode(c->list.v[c->list.n - 1].id, list_fingerprint(c), cur);
    json_decref(next);
    next = json_string(cur);
  }
  op_ok(c, json_pack("{s:o,s:o}", "jobs", jobs, "next_cursor", next));
}

void op_jobs_list(op_call_t *c) {
  unsigned states = 0;
  size_t i;
  json_t *v;
  json_array_foreach(op_json(c, "state"), i, v) {
    job_state_t st;
    if (job_state_parse(json_string_value(v), &st)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "state"),
              "unknown state '%s' (expected pending, running, finished, failed, cancelled or "
              "lost)",
              json_string_value(v));
      return;
    }
    states |= 1u << st;
  }
  c->num[0] = states;
  c->num[2] = op_int(c, "limit", PAGE_DEFAULT);
  const json_t *test = op_json(c, "test");
  c->num[7] = !test ? 0 : json_is_true(test) ? 1 : -1;
  const char *q = op_str(c, "q"), *node = op_str(c, "node");
  if (q && strlen(q) > JOB_FILTER_TEXT_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "q", "max", JOB_FILTER_TEXT_MAX),
            "'q' is %zu bytes; the limit is %d", strlen(q), JOB_FILTER_TEXT_MAX);
    return;
  }
  const char *health = op_str(c, "health");
  if (health && strcmp(health, "ok") && strcmp(health, "degraded") && strcmp(health, "broken") &&
      strcmp(health, "none")) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "health"),
            "unknown health '%s' (expected ok, degraded, broken or none)", health);
    return;
  }
  if (node && (!*node || strlen(node) > 200)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "node"),
            "'node' must be a node name of 1 to 200 bytes");
    return;
  }
  char err[256];
  const char *from = op_str(c, "from"), *to = op_str(c, "to");
  if ((from && cron_parse_iso(from, NULL, &c->num[4], err, sizeof(err))) ||
      (to && cron_parse_iso(to, NULL, &c->num[5], err, sizeof(err)))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", from ? "from" : "to"), "%s", err);
    return;
  }
  if (list_meta_pairs(c)) return;
  const char *cursor = op_str(c, "cursor");
  if (cursor) {
    uint32_t fp = 0;
    if (op_cursor_decode(cursor, &c->num[1], &fp)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
              "'cursor' is not a cursor this API handed out");
      return;
    }
    if (fp != list_fingerprint(c)) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "cursor"),
              "'cursor' belongs to a listing with other filters (state, project, spider, "
              "schedule, parent, from, to, node, q, meta, test)");
      return;
    }
  }
  op_store(c, STORE_READ, list_fn, list_done);
}

/* ---- jobs.counts, stats.throughput: what an overview shows ---- */

/* A time parameter as ms since the epoch: digits are milliseconds, anything
 * else ISO 8601 (UTC unless it has an offset). 1 after failing the call. */
int op_time_param(op_call_t *c, const char *name, int64_t dflt, int64_t *out) {
  const char *v = op_str(c, name);
  char err[256];
  *out = dflt;
  if (!v) return 0;
  if (*v && strspn(v, "0123456789") == strlen(v) && strlen(v) <= 15) {
    *out = strtoll(v, NULL, 10);
    return 0;
  }
  if (cron_parse_iso(v, NULL, out, err, sizeof(err)) || *out < 0) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", name),
            "'%s' must be an ISO 8601 time or milliseconds since the epoch: %s", name,
            *out < 0 ? "it is before 1970" : err);
    return 1;
  }
  return 0;
}

/* num[0..JOB_NSTATES-1] the counts, num[7] since. */
_Static_assert(JOB_NSTATES <= 7, "the counts must leave num[7] free");
static int counts_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  int64_t since = c->num[7];
  if (op_str(c, "project") || !c->nmine)
    return store_job_counts_since(s, op_str(c, "project"), since ? since : 1, c->num);
  /* a caller limited to projects: the sum of theirs */
  for (size_t i = 0; i < c->nmine; i++) {
    int64_t one[JOB_NSTATES];
    int rc = store_job_counts_since(s, c->mine[i], since ? since : 1, one);
    if (rc) return rc;
    for (int st = 0; st < JOB_NSTATES; st++) c->num[st] = (i ? c->num[st] : 0) + one[st];
  }
  return 0;
}

static void counts_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (op_store_failed(c, rc)) return;
  json_t *counts = json_object();
  for (int st = 0; st < JOB_NSTATES; st++)
    json_object_set_new(counts, job_state_name((job_state_t)st), json_integer(c->num[st]));
  op_ok(c, json_pack("{s:I,s:o,s:o,s:o}", "since", (json_int_t)c->num[7], "since_time",
                     op_iso_time(c->num[7]), "project", op_str_or_null(op_str(c, "project")),
                     "counts", counts));
}

void op_jobs_counts(op_call_t *c) {
  int64_t now = clock_wall_ms();
  if (op_time_param(c, "since", now - 24 * 3600 * 1000LL, &c->num[7])) return;
  op_store(c, STORE_READ, counts_fn, counts_done);
}

#define THROUGHPUT_BUCKETS_MAX 1500

/* num[0] from, num[1] to, num[2] step ms, num[3] buckets; priv the buckets. */
static int throughput_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  if (op_str(c, "project") || !c->nmine)
    return store_job_throughput(s, op_str(c, "project"), c->num[0], c->num[1], c->num[2],
                                c->priv, (size_t)c->num[3]);
  /* a caller limited to projects: the sum of theirs */
  size_t n = (size_t)c->num[3];
  job_bucket_t *sum = c->priv, *one = calloc(n, sizeof(*one));
  if (!one) return -ENOMEM;
  int rc = 0;
  for (size_t i = 0; !rc && i < c->nmine; i++) {
    rc = store_job_throughput(s, c->mine[i], c->num[0], c->num[1], c->num[2], one, n);
    for (size_t k = 0; !rc && k < n; k++) {
      sum[k].t_ms = one[k].t_ms;
      sum[k].finished += one[k].finished;
      sum[k].failed += one[k].failed;
      sum[k].items += one[k].items;
    }
  }
  free(one);
  return rc;
}

static void throughput_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (op_store_failed(c, rc)) return;
  const job_bucket_t *b = c->priv;
  json_t *buckets = json_array();
  for (int64_t i = 0; i < c->num[3]; i++)
    json_array_append_new(buckets, json_pack("{s:I,s:I,s:I,s:I}", "t", (json_int_t)b[i].t_ms,
                                             "finished", (json_int_t)b[i].finished, "failed",
                                             (json_int_t)b[i].failed, "items",
                                             (json_int_t)b[i].items));
  op_ok(c, json_pack("{s:I,s:I,s:I,s:o,s:o}", "from", (json_int_t)c->num[0], "to",
                     (json_int_t)c->num[1], "step", (json_int_t)(c->num[2] / 1000), "project",
                     op_str_or_null(op_str(c, "project")), "buckets", buckets));
}

/* Jobs that ended per time bucket: the window [from, to) in steps of step
 * seconds (default the last 24 h by minute, from aligned to the step). */
void op_stats_throughput(op_call_t *c) {
  int64_t now = clock_wall_ms(), step = op_int(c, "step", 60) * 1000LL, from, to;
  if (op_time_param(c, "to", now, &to)) return;
  int64_t dflt = to - 24 * 3600 * 1000LL;
  if (!op_str(c, "from")) dflt -= ((dflt % step) + step) % step; /* whole steps */
  if (op_time_param(c, "from", dflt < 0 ? 0 : dflt, &from)) return;
  if (from >= to) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "from"),
            "'from' must be before 'to'");
    return;
  }
  int64_t n = (to - from + step - 1) / step;
  if (n > THROUGHPUT_BUCKETS_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:I,s:i}", "field", "step", "buckets",
                                        (json_int_t)n, "max", THROUGHPUT_BUCKETS_MAX),
            "from..to in steps of %lld s makes %lld buckets; the limit is %d: give a larger "
            "'step' or a shorter window",
            (long long)(step / 1000), (long long)n, THROUGHPUT_BUCKETS_MAX);
    return;
  }
  c->priv = calloc((size_t)n, sizeof(job_bucket_t));
  if (!c->priv) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv_free = free;
  c->num[0] = from;
  c->num[1] = to;
  c->num[2] = step;
  c->num[3] = n;
  op_store(c, STORE_READ, throughput_fn, throughput_done);
}

/* ---- jobs.get ---- */

static int resolve_fn(store_t *s, void *arg) { return op_job_resolve(s, arg); }

/* The job and a count of its children per state (num[0..JOB_NSTATES-1],
 * num[7] all). */
static int get_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  int rc = op_job_resolve(s, c);
  if (rc) return rc;
  job_list_t kids = {0};
  job_filter_t f = {.parent_id = c->job.id};
  if ((rc = store_jobs_list(s, &f, &kids))) return rc;
  for (size_t i = 0; i < kids.n; i++) c->num[kids.v[i].state]++;
  c->num[7] = (int64_t)kids.n;
  job_list_release(&kids);
  return 0;
}

/* A parent's state as a whole: running while it or any child is pending
 * or running, failed when it or any child failed or was lost, else its own. */
static const char *family_state(const job_t *j, const int64_t *kids) {
  if (!job_state_final(j->state) || kids[JOB_PENDING] || kids[JOB_RUNNING]) return "running";
  if (j->state == JOB_FAILED || j->state == JOB_LOST || kids[JOB_FAILED] || kids[JOB_LOST])
    return "failed";
  return job_state_name(j->state);
}

static void get_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail_resolve(c, rc);
    return;
  }
  json_t *o = op_render_job(&c->job);
  if (c->num[7]) {
    json_t *kids = json_object();
    json_object_set_new(kids, "total", json_integer(c->num[7]));
    for (int st = 0; st < JOB_NSTATES; st++)
      json_object_set_new(kids, job_state_name((job_state_t)st), json_integer(c->num[st]));
    json_object_set_new(o, "children", kids);
    json_object_set_new(o, "family_state", json_string(family_state(&c->job, c->num)));
  }
  op_ok(c, o);
}

void op_jobs_get(op_call_t *c) { op_store(c, STORE_READ, get_fn, get_done); }

/* ---- jobs.create ---- */

static void create_done(void *ud, int rc, int stage, const char *error) {
  op_call_t *c = ud;
  const char *project = c->job.project, *spider = c->job.spider;
  if (!rc) {
    /* A held unique_key: the job that holds it, with 200 (nothing created). */
    int existing = stage == API_JOB_EXISTING;
    json_t *o = op_render_job(&c->job);
    json_object_set_new(o, "existing", json_boolean(existing));
    if (!strcmp(c->def->name, "jobs.rerun"))
      json_object_set_new(o, "rerun_of", json_integer(c->num[6]));
    op_ok_status(c, o, existing ? 200 : 0);
    return;
  }
  switch (stage) {
  case API_JOB_LIST:
    op_fail(c, SPD_ERUNNER, json_pack("{s:s}", "stderr", error ? error : spd_strerror(rc)),
            "the spiders of project '%s' could not be listed", project);
    break;
  case API_JOB_SPIDER:
    op_fail(c, SPD_ENOSPIDER, json_pack("{s:s,s:s}", "project", project, "spider", spider),
            "spider '%s' not found in project '%s'", spider, project);
    break;
  case API_JOB_SUBMIT: op_fail(c, SPD_ESHUTDOWN, NULL, "the daemon is shutting down"); break;
  default: op_fail(c, rc, NULL, "the job could not be stored: %s", spd_strerror(rc));
  }
}

static void create_enqueue(op_call_t *c) {
  int rc = api_job_enqueue(c->app, &c->job, c->egg_path, create_done, c, c->who);
  if (rc)
    op_fail(c, SPD_ERUNNER, NULL, "the runner could not be started: %s", spd_strerror(rc));
}

/* Does a pending or running job of the project hold key? Only asked when a
 * job id is busy, so the scan is rare. */
static int key_held(store_t *s, const char *project, const char *key, int *held) {
  job_list_t l = {0};
  job_filter_t f = {.project = project, .states = 1u << JOB_PENDING | 1u << JOB_RUNNING};
  int rc = store_jobs_list(s, &f, &l);
  for (size_t i = 0; !rc && i < l.n && !*held; i++)
    *held = l.v[i].unique_key && !strcmp(l.v[i].unique_key, key);
  job_list_release(&l);
  return rc;
}

/* ---- after: the jobs a new job waits for ---- */

#define AFTER_MAX 100

/* Is `after` an array of 1 to AFTER_MAX job ids (integers > 0) or Scrapyd
 * job ids (strings)? 1 after failing c. */
static int after_refused(op_call_t *c) {
  const json_t *a = op_json(c, "after"), *v;
  size_t i;
  if (!a) return 0;
  if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > AFTER_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "after", "max", AFTER_MAX),
            "after must be an array of 1 to %d job ids", AFTER_MAX);
    return 1;
  }
  json_array_foreach(a, i, v) {
    if ((json_is_integer(v) && json_integer_value(v) > 0) ||
        (json_is_string(v) && json_string_length(v) > 0))
      continue;
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:i}", "field", "after", "index", (int)i),
            "after[%zu] is not a job id (a positive integer or a Scrapyd job id)", i);
    return 1;
  }
  return 0;
}

/* One entry of `after` as a job's id: an id as it is, a Scrapyd job id as
 * the newest job of that id (in the new job's project first). -ENOENT. */
static int after_id(store_t *s, const char *project, const json_t *v, int64_t *id) {
  if (json_is_integer(v)) {
    job_t j;
    int rc = store_job_get(s, json_integer_value(v), &j);
    *id = j.id;
    job_release(&j);
    return rc;
  }
  job_list_t l = {0};
  job_filter_t f = {.project = project, .jobid = json_string_value(v), .newest_first = 1};
  int rc = store_jobs_list(s, &f, &l);
  if (!rc && l.n == 0) {
    f.project = NULL;
    rc = store_jobs_list(s, &f, &l);
  }
  *id = 0;
  for (size_t i = 0; !rc && i < l.n; i++)
    if (l.v[i].id > *id) *id = l.v[i].id;
  job_list_release(&l);
  return rc ? rc : *id ? 0 : -ENOENT;
}

/* The new job's `after` as integer ids, each once. SPD_EBADPARAM with
 * c->num[1] the index + 1 of an id no job has. */
static int after_resolve(store_t *s, op_call_t *c) {
  const json_t *a = op_json(c, "after"), *v;
  size_t i;
  json_decref(c->job.after); /* a run the store pool repeats starts afresh */
  c->job.after = NULL;
  if (!a) return 0;
  json_t *ids = json_array();
  if (!ids) return -ENOMEM;
  int rc = 0;
  json_array_foreach(a, i, v) {
    int64_t id = 0;
    rc = after_id(s, c->job.project, v, &id);
    if (rc == -ENOENT) {
      c->num[1] = (int64_t)i + 1;
      rc = SPD_EBADPARAM;
    }
    if (rc) break;
    int seen = 0;
    for (size_t k = 0; k < json_array_size(ids) && !seen; k++)
      seen = json_integer_value(json_array_get(ids, k)) == id;
    if (!seen) json_array_append_new(ids, json_integer(id));
  }
  if (rc) json_decref(ids);
  else c->job.after = ids;
  return rc;
}

static void after_unknown(op_call_t *c) {
  const json_t *v = json_array_get(op_json(c, "after"), (size_t)c->num[1] - 1);
  char *text = json_dumps(v, JSON_ENCODE_ANY);
  op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:O}", "field", "after", "job", v),
          "after names job %s, which does not exist", text ? text : "?");
  free(text);
}

/* A job id given by the client is refused while a job of that id waits or
 * runs in the project: cancel and status would reach both. Unless the
 * unique_key is held: then the holder is the answer (a client repeating
 * its request gets its job back, not a conflict). */
static int busy_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_state_t st;
  int arc = after_resolve(s, c);
  if (arc) return arc;
  if (c->job.parent_id) {
    job_t parent;
    int rc = store_job_get(s, c->job.parent_id, &parent);
    job_release(&parent);
    if (rc == -ENOENT) return SPD_ENOJOB;
    if (rc) return rc;
  }
  if (!op_str(c, "jobid")) return 0;
  int rc = store_job_status(s, c->job.project, c->job.jobid, &st);
  if (rc == -ENOENT) return 0;
  if (rc == 0 && !job_state_final(st)) c->num[0] = 1;
  if (rc == 0 && c->num[0] && c->job.unique_key) {
    int held = 0;
    rc = key_held(s, c->job.project, c->job.unique_key, &held);
    if (held) c->num[0] = 0;
  }
  return rc;
}

static void busy_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc == SPD_ENOJOB)
    op_fail(c, rc, json_pack("{s:I}", "parent", (json_int_t)c->job.parent_id),
            "parent job %lld not found", (long long)c->job.parent_id);
  else if (rc == SPD_EBADPARAM && c->num[1]) after_unknown(c);
  else if (rc) op_fail(c, rc, NULL, "the store failed: %s", spd_strerror(rc));
  else if (c->num[0])
    op_fail(c, SPD_ECONFLICT, json_pack("{s:s}", "jobid", c->job.jobid),
            "a job with id '%s' is already pending or running in project '%s'", c->job.jobid,
            c->job.project);
  else create_enqueue(c);
}

/* A crawl fans out with its job's token: children of its own job, in its
 * own project, and nothing else. 1 after failing c. */
static int job_token_refused(op_call_t *c, const char *project) {
  if (c->who->kind != AUTH_JOB) return 0;
  if (op_int(c, "parent", 0) == c->who->job_id && c->who->job_project &&
      !strcmp(project, c->who->job_project))
    return 0;
  op_fail(c, SPD_EFORBIDDEN, json_pack("{s:I}", "parent", (json_int_t)c->who->job_id),
          "a job's token creates only children of its own job: parent %lld in project '%s'",
          (long long)c->who->job_id, c->who->job_project ? c->who->job_project : "?");
  return 1;
}

void op_jobs_create(op_call_t *c) {
  const char *project = op_str(c, "project"), *spider = op_str(c, "spider");
  const char *version = op_str(c, "version"), *jobid = op_str(c, "jobid");
  const char *unique_key = op_str(c, "unique_key");
  if (job_token_refused(c, project)) return;
  if (op_check_pairs(c, "args") || op_check_pairs(c, "settings")) return;
  if (after_refused(c)) return;
  char why[256];
  if (unique_key && !job_unique_key_valid(unique_key, why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "unique_key"),
            "unique_key is invalid: %s", why);
    return;
  }
  job_limits_t lim; /* _memory_limit and the like: checked now, used at launch */
  if (limits_resolve(op_json(c, "args"), NULL, &lim, why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "args"), "%s", why);
    return;
  }
  int rc = api_egg_resolve(c->app, project, version, &c->egg_path);
  if (rc == SPD_ENOPROJECT) {
    op_fail(c, rc, json_pack("{s:s}", "project", project), "project '%s' not found", project);
    return;
  }
  if (rc == SPD_ENOVERSION) {
    op_fail(c, rc, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "%s", spd_strerror(rc));
    return;
  }
  char generated[33];
  if (!jobid) api_uuid1_hex(c->app, generated);
  job_t *j = &c->job;
  j->jobid = strdup(jobid ? jobid : generated);
  j->project = strdup(project);
  j->spider = strdup(spider);
  j->version = version ? strdup(version) : NULL;
  const json_t *args = op_json(c, "args"), *settings = op_json(c, "settings");
  j->args = args ? json_deep_copy(args) : json_object();
  j->settings = settings ? json_deep_copy(settings) : json_object();
  j->priority = op_num(c, "priority", 0);
  j->state = JOB_PENDING;
  j->unique_key = unique_key ? strdup(unique_key) : NULL;
  if (op_meta_param(c, &j->meta)) return;
  if (!j->jobid || !j->project || !j->spider || (version && !j->version) || !j->args ||
      !j->settings || (unique_key && !j->unique_key)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  j->parent_id = op_int(c, "parent", 0);
  if (jobid || j->parent_id || op_json(c, "after")) op_store(c, STORE_READ, busy_fn, busy_done);
  else create_enqueue(c);
}

/* ---- jobs.rerun ---- */

/* An ended job's template (flow's jobs_rerun), queued again as a new job
 * with a new Scrapyd job id. */
static void rerun_found(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail_resolve(c, rc);
    return;
  }
  job_t *src = &c->job;
  if (!job_state_final(src->state)) {
    op_fail(c, SPD_ECONFLICT,
            json_pack("{s:I,s:s}", "id", (json_int_t)src->id, "state",
                      job_state_name(src->state)),
            "job %lld is %s: it can be run again once it has ended", (long long)src->id,
            job_state_name(src->state));
    return;
  }
  c->num[6] = src->id;
  rc = api_egg_resolve(c->app, src->project, src->version, &c->egg_path);
  if (rc == SPD_ENOPROJECT) {
    op_fail(c, rc, json_pack("{s:s}", "project", src->project), "project '%s' not found",
            src->project);
    return;
  }
  if (rc == SPD_ENOVERSION) {
    op_fail(c, rc, json_pack("{s:s,s:s}", "project", src->project, "version", src->version),
            "version '%s' of project '%s' not found", src->version, src->project);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "%s", spd_strerror(rc));
    return;
  }
  char generated[33];
  api_uuid1_hex(c->app, generated);
  job_t j;
  rc = jobs_rerun(src, generated, &j);
  *src = j;
  if (rc) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  create_enqueue(c);
}

void op_jobs_rerun(op_call_t *c) { op_store(c, STORE_READ, resolve_fn, rerun_found); }

/* ---- jobs.cancel ---- */

static void cancel_reread(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail_resolve(c, rc);
    return;
  }
  if (c->num[3]) { /* jobs.cancel_children */
    op_ok(c, json_pack("{s:I,s:I,s:o}", "cancelled", (json_int_t)c->num[1], "stopping",
                       (json_int_t)c->num[0], "job", op_render_job(&c->job)));
    return;
  }
  const char *prev = c->num[0] ? "running" : c->num[1] ? "pending" : NULL;
  op_ok(c, json_pack("{s:o,s:o}", "prevstate", prev ? json_string(prev) : json_null(), "job",
                     op_render_job(&c->job)));
}

static int reread_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  job_t j;
  job_init(&j);
  int rc = store_job_get(s, c->job.id, &j);
  if (rc == 0) {
    job_release(&c->job);
    c->job = j;
  } else {
    job_release(&j);
  }
  return rc == -ENOENT ? 0 : rc; /* trimmed from history meanwhile: show what we had */
}

static void cancel_done(void *ud, int rc, int found, int count) {
  op_call_t *c = ud;
  if (op_store_failed(c, rc)) return;
  c->num[0] = found;
  c->num[1] = count;
  op_store(c, STORE_READ, reread_fn, cancel_reread);
}

static void cancel_found(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail_resolve(c, rc);
    return;
  }
  /* A parent that ended may still have children queued or running: those
   * are stopped whatever the parent's state. */
  if (job_state_final(c->job.state) && !c->num[3]) {
    op_fail(c, SPD_ECONFLICT,
            json_pack("{s:I,s:s}", "id", (json_int_t)c->job.id, "state",
                      job_state_name(c->job.state)),
            "job %lld has already ended (%s)", (long long)c->job.id,
            job_state_name(c->job.state));
    return;
  }
  int sig = (int)c->num[2];
  /* The launcher and the store know a job by project and Scrapyd job id:
   * the row id cannot be more precise until the store can cancel one row. */
  if (c->num[3])
    rc = api_job_cancel_children(c->app, c->job.project, c->job.jobid, sig, cancel_done, c,
                                 c->who);
  else
    rc = api_job_cancel(c->app, c->job.project, c->job.jobid, sig, cancel_done, c, c->who);
  if (rc == SPD_ESHUTDOWN) op_fail(c, rc, NULL, "the daemon is shutting down");
  else if (rc) op_fail(c, rc, NULL, "%s", spd_strerror(rc));
}

void op_jobs_cancel(op_call_t *c) {
  int sig = SIGINT;
  const char *name = op_str(c, "signal");
  if (name && api_parse_signal(name, &sig)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "signal"),
            "'signal' must be TERM, INT, KILL, HUP, STOP or a number 1-64, not '%s'", name);
    return;
  }
  c->num[2] = sig;
  c->num[3] = !strcmp(c->def->name, "jobs.cancel_children");
  op_store(c, STORE_READ, resolve_fn, cancel_found);
}

/* ---- jobs.log / jobs.items ---- */

/* Not on this disk: the object store's copy (api/objserve.h). */
static int tail_objstore(op_call_t *c) {
  char key[1024];
  int items = !strcmp(c->def->name, "jobs.items");
  snprintf(key, sizeof(key), "%s/%s/%s/%s.%s", items ? "items" : "logs", c->job.project,
           c->job.spider, c->job.jobid, items ? "jl" : "log");
  return api_objstore_fetch(c->app->s3, key, c->num[0], c->num[1]);
}

/* num[0] offset asked, num[1] limit, num[2] file size, num[3] start,
 * num[4] bytes used, num[5] 1 = the job still runs (or waits). */
static void tail_work(uv_work_t *w) {
  op_call_t *c = w->data;
  c->err_code = 0;
  int fd = open(c->path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 && c->app->s3 && c->job.start_ms) fd = tail_objstore(c); /* never started: none */
  if (fd < 0) { /* not written yet (pending), or removed */
    c->num[2] = 0;
    c->num[3] = c->num[0] < 0 ? 0 : c->num[0];
    if (c->num[3] > 0) c->err_code = SPD_EBADPARAM;
    return;
  }
  struct stat st;
  if (fstat(fd, &st)) {
    c->err_code = -errno;
    close(fd);
    return;
  }
  int64_t size = st.st_size, start = c->num[0];
  if (start < 0) start = size + start < 0 ? 0 : size + start;
  c->num[2] = size;
  c->num[3] = start;
  if (start > size) {
    c->err_code = SPD_EBADPARAM;
    close(fd);
    return;
  }
  size_t want = (size_t)(size - start < c->num[1] ? size - start : c->num[1]);
  char *buf = malloc(want + 1);
  ssize_t got = buf ? pread(fd, buf, want, start) : -1;
  close(fd);
  if (got < 0) {
    c->err_code = buf ? -errno : -ENOMEM;
    free(buf);
    return;
  }
  size_t used = 0, tlen = 0;
  int final = !c->num[5] && start + got >= size;
  c->text = op_utf8_text(buf, (size_t)got, final, &used, &tlen);
  free(buf);
  if (!c->text) c->err_code = -ENOMEM;
  c->num[4] = (int64_t)used;
  c->num[6] = (int64_t)tlen;
}

static void tail_after(uv_work_t *w, int status) {
  op_call_t *c = w->data;
  const char *what = !strcmp(c->def->name, "jobs.items") ? "items file" : "log";
  if (status || c->err_code == -ENOMEM || (c->err_code && c->err_code != SPD_EBADPARAM)) {
    op_fail(c, status ? status : c->err_code, NULL, "the %s could not be read: %s", what,
            spd_strerror(status ? status : c->err_code));
    return;
  }
  if (c->err_code) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s,s:I}", "field", "offset", "size", (json_int_t)c->num[2]),
            "offset %lld is past the end of the %s (%lld bytes)", (long long)c->num[0], what,
            (long long)c->num[2]);
    return;
  }
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer(c->job.id));
  json_object_set_new(o, "state", json_string(job_state_name(c->job.state)));
  json_object_set_new(o, "running", json_boolean(c->num[5]));
  json_object_set_new(o, "offset", json_integer(c->num[3]));
  json_object_set_new(o, "next_offset", json_integer(c->num[3] + c->num[4]));
  json_object_set_new(o, "size", json_integer(c->num[2]));
  json_object_set_new(o, "eof", json_boolean(c->num[3] + c->num[4] >= c->num[2]));
  json_object_set_new(o, "text", json_stringn(c->text ? c->text : "", (size_t)c->num[6]));
  op_ok(c, o);
}

static void tail_local(op_call_t *c);

/* The node that ran the job answered (api_proxy_get): its answer is ours. */
static void tail_remote(void *ud, int rc, long status, const char *body, size_t len) {
  op_call_t *c = ud;
  const char *what = !strcmp(c->def->name, "jobs.items") ? "items" : "log";
  json_t *o = rc ? NULL : json_loadb(body, len, 0, NULL);
  json_t *details = json_pack("{s:I,s:s}", "id", (json_int_t)c->job.id, "node", c->job.node);
  if ((!o || status != 200) && c->app->s3) { /* gone or emptied: the object store */
    json_decref(details);
    json_decref(o);
    tail_local(c);
    return;
  }
  if (!o) {
    op_fail(c, SPD_ENOFILE, details, "the job's %s is on node '%s', which did not answer",
            what, c->job.node);
    return;
  }
  if (status == 200) {
    json_decref(details);
    op_ok(c, o);
    return;
  }
  /* Its error, as it put it (a bad offset, a missing file). */
  const char *msg = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
  op_fail(c, status == 400 ? SPD_EBADPARAM : SPD_ENOFILE, details, "node '%s': %s",
          c->job.node, msg ? msg : "error");
  json_decref(o);
}

static void tail_found(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) {
    op_fail_resolve(c, rc);
    return;
  }
  const job_t *j = &c->job;
  int items = !strcmp(c->def->name, "jobs.items");
  int proxied = c->req && http_req_header(c->req, "X-Spiderd-Proxied");
  if (j->node && j->start_ms && strcmp(j->node, c->app->cfg.node_name) &&
      store_pool_shared(c->app->store) && !proxied) {
    /* Logs and items stay on the node that ran the job: ask it. */
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/jobs/%lld/%s?offset=%lld&limit=%lld",
             (long long)j->id, items ? "items" : "log", (long long)c->num[0],
             (long long)c->num[1]);
    rc = api_proxy_get(c->app, j->node, path, tail_remote, c);
    if (rc) op_fail(c, rc, NULL, "%s", spd_strerror(rc));
    return;
  }
  tail_local(c);
}

/* This node's file, else (api/objserve.h) the object store's. */
static void tail_local(op_call_t *c) {
  const job_t *j = &c->job;
  int items = !strcmp(c->def->name, "jobs.items"), rc;
  c->path = items ? jobs_items_path(&c->app->cfg, j->project, j->spider, j->jobid)
                  : jobs_log_path(&c->app->cfg, j->project, j->spider, j->jobid);
  if (!c->path) {
    op_fail(c, SPD_ENOFILE, json_pack("{s:I}", "id", (json_int_t)j->id),
            items ? "items are not stored on this node (items_dir is empty or a URL)"
                  : "logs are not stored on this node (logs_dir is empty)");
    return;
  }
  c->num[5] = !job_state_final(j->state);
  c->work.data = c;
  rc = uv_queue_work(c->app->loop, &c->work, tail_work, tail_after);
  if (rc) op_fail(c, rc, NULL, "%s", uv_strerror(rc));
}

static void tail_start(op_call_t *c) {
  c->num[0] = op_int(c, "offset", 0);
  c->num[1] = op_int(c, "limit", TAIL_DEFAULT);
  op_store(c, STORE_READ, resolve_fn, tail_found);
}

void op_jobs_log(op_call_t *c) { tail_start(c); }
void op_jobs_items(op_call_t *c) { tail_start(c); }

/* ---- jobs.states ---- */

#define STATES_MAX 1000

/* The state of one id as the caller gave it: the store's id, else a Scrapyd
 * job id (its newest job when several projects share it); NULL when none
 * the caller may see. */
static int state_of(store_t *s, op_call_t *c, const char *id, const char **state) {
  const char *mine = c->who ? c->who->projects : "";
  job_t j;
  job_init(&j);
  *state = NULL;
  int rc = -ENOENT;
  if (*id && strlen(id) <= 18 && strspn(id, "0123456789") == strlen(id)) rc = store_job_get(s, strtoll(id, NULL, 10), &j);
  if (rc == 0 && principal_project_ok(mine, j.project)) *state = job_state_name(j.state);
  job_release(&j);
  if (rc && rc != -ENOENT) return rc;
  if (*state) return 0;
  job_list_t l = {0};
  job_filter_t f = {.jobid = id};
  rc = store_jobs_list(s, &f, &l);
  int64_t best = 0;
  for (size_t i = 0; !rc && i < l.n; i++) {
    if (principal_project_ok(mine, l.v[i].project) && l.v[i].id > best) {
      best = l.v[i].id;
      *state = job_state_name(l.v[i].state);
    }
  }
  job_list_release(&l);
  return rc;
}

/* Every id in one read op, so the answer is one moment of the store. */
static int states_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  const json_t *ids = op_json(c, "ids");
  json_decref(c->result);
  c->result = json_object();
  if (!c->result) return -ENOMEM;
  size_t i;
  const json_t *v;
  int rc = 0;
  json_array_foreach(ids, i, v) {
    char buf[24];
    const char *id = buf, *state;
    if (json_is_integer(v)) snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
    else id = json_string_value(v);
    if ((rc = state_of(s, c, id, &state))) break;
    json_object_set_new(c->result, id, state ? json_string(state) : json_null());
  }
  return rc;
}

static void states_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (op_store_failed(c, rc)) return;
  json_t *r = c->result;
  c->result = NULL;
  op_ok(c, json_pack("{s:o}", "states", r));
}

void op_jobs_states(op_call_t *c) {
  const json_t *ids = op_json(c, "ids");
  json_t *parsed = NULL;
  if (json_is_string(ids)) { /* a query string: comma-separated */
    parsed = json_array();
    char *dup = strdup(json_string_value(ids)), *save = NULL;
    for (char *t = dup ? strtok_r(dup, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
      json_array_append_new(parsed, json_string(t));
    free(dup);
    json_object_set_new(c->params, "ids", parsed);
    ids = parsed;
  }
  size_t n = json_array_size(ids), i;
  const json_t *v;
  int ok = json_is_array(ids) && n >= 1 && n <= STATES_MAX;
  json_array_foreach(ids, i, v) {
    if (!ok) break;
    ok = (json_is_integer(v) && json_integer_value(v) > 0) ||
         (json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= 200);
  }
  if (!ok) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "ids"),
            "'ids' must be an array of 1 to %d job ids (integers or job id strings)",
            STATES_MAX);
    return;
  }
  op_store(c, STORE_READ, states_fn, states_done);
}

/* ---- shared with jobs.test_run (api/ops_testrun.c) ---- */

int op_job_egg(op_call_t *c, const char *project, const char *version) {
  int rc = api_egg_resolve(c->app, project, version, &c->egg_path);
  if (rc == SPD_ENOPROJECT)
    op_fail(c, rc, json_pack("{s:s}", "project", project), "project '%s' not found", project);
  else if (rc == SPD_ENOVERSION)
    op_fail(c, rc, json_pack("{s:s,s:s}", "project", project, "version", version),
            "version '%s' of project '%s' not found", version, project);
  else if (rc)
    op_fail(c, rc, NULL, "%s", spd_strerror(rc));
  return rc != 0;
}

void op_job_submit(op_call_t *c) {
  if (op_str(c, "jobid") || c->job.parent_id) op_store(c, STORE_READ, busy_fn, busy_done);
  else create_enqueue(c);
}
