/* Job statistics over a window of end times, on any backend: the window's
 * ended jobs are read down the end-time index a page at a time
 * (store_jobs_page), so the cost follows the window's size, never the
 * history's, and percentiles come from the durations read. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/account.h"
#include "store/store.h"
#include "store/store_impl.h"

#define STATS_PAGE 1000

static int stats_key_cmp(job_stats_by_t by, const job_stats_group_t *g,
                         const job_stats_row_t *j, const char *account) {
  if (by == JOB_STATS_BY_ACCOUNT) return strcmp(g->account, account);
  if (by == JOB_STATS_BY_SCHEDULE)
    return g->schedule_id < j->schedule_id ? -1 : g->schedule_id > j->schedule_id;
  int c = strcmp(g->project, j->project);
  if (c || by == JOB_STATS_BY_PROJECT) return c;
  return strcmp(g->spider, j->spider);
}

/* The group of j, made when new; groups stay sorted by key, so a lookup
 * is a binary search. NULL when out of memory. */
static job_stats_group_t *stats_group(job_stats_t *st, job_stats_by_t by,
                                      const job_stats_row_t *j, const char *account) {
  size_t lo = 0, hi = st->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = stats_key_cmp(by, &st->v[mid], j, account);
    if (c == 0) return &st->v[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  if (st->n == st->cap) {
    size_t cap = st->cap ? st->cap * 2 : 16;
    job_stats_group_t *v = realloc(st->v, cap * sizeof(*v));
    if (!v) return NULL;
    st->v = v;
    st->cap = cap;
  }
  job_stats_group_t g = {0};
  if (by == JOB_STATS_BY_SCHEDULE) {
    g.schedule_id = j->schedule_id;
  } else if (by == JOB_STATS_BY_ACCOUNT) {
    if (!(g.account = strdup(account))) return NULL;
  } else {
    g.project = strdup(j->project ? j->project : "");
    if (by == JOB_STATS_BY_SPIDER) g.spider = strdup(j->spider ? j->spider : "");
    if (!g.project || (by == JOB_STATS_BY_SPIDER && !g.spider)) {
      free(g.project);
      free(g.spider);
      return NULL;
    }
  }
  memmove(&st->v[lo + 1], &st->v[lo], (st->n - lo) * sizeof(*st->v));
  st->v[lo] = g;
  st->n++;
  return &st->v[lo];
}

/* The crawl's item count: the runner's "items" (spiderd_runner/stats.py),
 * else a top-level item_scraped_count (stats reported by other means), when
 * it is a number. */
static int64_t stats_items(const job_t *j) {
  json_t *v = j->stats ? json_object_get(j->stats, "items") : NULL;
  if (j->stats && !json_is_number(v)) v = json_object_get(j->stats, "item_scraped_count");
  if (json_is_integer(v)) return (int64_t)json_integer_value(v);
  if (json_is_real(v)) return (int64_t)json_real_value(v);
  return 0;
}

struct stats_ctx {
  job_stats_t *st;
  const job_stats_query_t *q;
};

static int stats_add(void *ud, const job_stats_row_t *j) {
  struct stats_ctx *x = ud;
  job_stats_t *st = x->st;
  const job_stats_query_t *q = x->q;
  st->scanned++;
  if (q->spider && (!j->spider || strcmp(q->spider, j->spider) != 0)) return 0;
  if (q->schedule_id && j->schedule_id != q->schedule_id) return 0;
  if (q->by == JOB_STATS_BY_SCHEDULE && !j->schedule_id) return 0;
  if (!job_state_final(j->state)) return 0;
  const char *account = NULL;
  if (q->accounts) account = account_find(q->accounts, ACCOUNT_PROJECTS, j->project);
  if (q->account && (!account || strcmp(account, q->account))) return 0;
  job_stats_group_t *g = stats_group(st, q->by, j, account ? account : "");
  if (!g) return -ENOMEM;
  if (g->ndurs == g->durcap) {
    size_t cap = g->durcap ? g->durcap * 2 : 64;
    int64_t *d = realloc(g->durs, cap * sizeof(*d));
    if (!d) return -ENOMEM;
    g->durs = d;
    g->durcap = cap;
  }
  int64_t dur = j->end_ms - j->start_ms;
  g->durs[g->ndurs++] = dur < 0 ? 0 : dur;
  g->runs[j->state]++;
  g->ended++;
  g->items += j->items;
  if (j->state == JOB_FINISHED && j->end_ms > g->last_success_ms)
    g->last_success_ms = j->end_ms;
  return 0;
}

static int stats_i64_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* The nearest-rank percentile p (in percent) of n sorted values. */
static int64_t stats_rank(const int64_t *v, size_t n, unsigned p) {
  if (!n) return 0;
  size_t k = (p * n + 99) / 100;
  return v[k ? k - 1 : 0];
}

static void stats_finish(job_stats_t *st) {
  for (size_t i = 0; i < st->n; i++) {
    job_stats_group_t *g = &st->v[i];
    qsort(g->durs, g->ndurs, sizeof(*g->durs), stats_i64_cmp);
    g->dur_p50_ms = stats_rank(g->durs, g->ndurs, 50);
    g->dur_p95_ms = stats_rank(g->durs, g->ndurs, 95);
    g->dur_max_ms = g->ndurs ? g->durs[g->ndurs - 1] : 0;
  }
}

int store_job_stats_walk(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                         job_stats_row_fn fn, void *ud) {
  /* past the jobs that ended at to_ms (id < 1: none), so end_ms < to_ms */
  job_page_key_t after = {.id = 1, .t_ms = to_ms};
  int rc = 0, more = 1, past = 0;
  while (!rc && more && !past) {
    job_list_t page = {0};
    rc = store_jobs_page(s, JOB_GROUP_ENDED, project, STATS_PAGE, &after, &page, &more);
    for (size_t i = 0; !rc && i < page.n; i++) {
      const job_t *j = &page.v[i];
      if (j->end_ms < from_ms) {
        past = 1;
        break;
      }
      if (j->test) continue; /* a test run counts in no statistics */
      job_stats_row_t row = {.project = j->project, .spider = j->spider,
                             .schedule_id = j->schedule_id, .state = (int)j->state,
                             .start_ms = j->start_ms, .end_ms = j->end_ms,
                             .items = stats_items(j)};
      rc = fn(ud, &row);
    }
    job_list_release(&page);
  }
  return rc;
}

int store_job_stats(store_t *s, const job_stats_query_t *q, job_stats_t *out) {
  int accounts = q && (q->account || q->by == JOB_STATS_BY_ACCOUNT);
  if (!s || !q || !out || (accounts && !q->accounts) || q->by < 0 || q->by >= JOB_STATS_NBY ||
      q->from_ms >= q->to_ms)
    return -EINVAL;
  struct stats_ctx x = {out, q};
  int rc = s->ops->job_stats_scan(s, q->project, q->from_ms, q->to_ms, stats_add, &x);
  if (!rc) stats_finish(out);
  return rc;
}

void job_stats_release(job_stats_t *st) {
  if (!st) return;
  for (size_t i = 0; i < st->n; i++) {
    free(st->v[i].project);
    free(st->v[i].spider);
    free(st->v[i].account);
    free(st->v[i].durs);
  }
  free(st->v);
  memset(st, 0, sizeof(*st));
}
