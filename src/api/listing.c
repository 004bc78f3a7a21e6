/* Scrapyd's job listings, a page at a time (api/listing.h).
 *
 * Rounds run one at a time: while the loop hands one round's text to the
 * connection, the next round is read, so store and network overlap and at
 * most two rounds' text exist at once. */
#include "api/listing.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "store/store.h"

/* Store calls one round may make: Redis can answer a call with no job (a
 * read budget spent on other projects' jobs); the round then ends with
 * what it has, so no round holds its store thread for long. */
#define LISTING_CALLS 8
/* Bytes of listing after which the memory it churned is given back. */
#define LISTING_TRIM (4u << 20)

typedef struct listing {
  app_t *app;
  http_req_t *req;
  http_stream_t *st;
  char *project;
  const char *ctype;
  const api_listing_fmt_t *fmt;
  void *ud;
  size_t page;
  /* Where the reading is (store thread while busy, else loop). */
  bool began;         /* the head is written */
  int group;          /* JOB_NGROUPS once the tail is written */
  bool opened;        /* the current group's opening is written */
  size_t index;       /* jobs of the current group written */
  job_page_key_t key; /* past the last job read */
  bool done;          /* everything has been read and rendered */
  strbuf_t text;      /* the round just read (store thread) */
  strbuf_t ready;     /* text read and not yet queued (loop) */
  size_t sent;        /* bytes queued so far */
  bool busy;          /* a round is on a store thread */
  bool asked;         /* the stream waits for text */
  bool gone;          /* the reply is over: free once not busy */
} listing_t;

static void listing_free(listing_t *l) {
  if (l->ud) l->fmt->free(l->ud);
  strbuf_release(&l->text);
  strbuf_release(&l->ready);
  free(l->project);
  /* A long listing churned pages of jobs and text in the store thread's
   * malloc arena, which glibc does not give back by itself. */
  if (l->sent > LISTING_TRIM) malloc_trim(0);
  free(l);
}

/* The paused jobs (few: each waits for a person), at the end of the
 * pending group. */
static int paused_rows(store_t *s, listing_t *l) {
  job_list_t paused = {0};
  job_filter_t f = {.project = l->project, .states = 1u << JOB_PAUSED};
  int rc = store_jobs_list(s, &f, &paused);
  for (size_t i = 0; !rc && i < paused.n; i++)
    l->fmt->row(l->ud, l->group, l->index++, &paused.v[i], &l->text);
  job_list_release(&paused);
  return rc;
}

/* One group's page into l->text; *calls counts store calls. */
static int round_group(store_t *s, listing_t *l, size_t want, size_t *got) {
  job_list_t jobs = {0};
  int more = 0;
  int rc = store_jobs_page(s, l->group, l->project, want, &l->key, &jobs, &more);
  if (rc) goto out;
  for (size_t i = 0; i < jobs.n; i++) {
    /* A paused job waits to be resumed: Scrapyd's word for it is pending
     * (below), not finished. */
    if (jobs.v[i].state != JOB_PAUSED)
      l->fmt->row(l->ud, l->group, l->index++, &jobs.v[i], &l->text);
    job_release(&jobs.v[i]);
  }
  *got += jobs.n;
  if (!more && l->group == 0 && (rc = paused_rows(s, l))) goto out;
  if (!more) {
    l->fmt->group_close(l->ud, l->group, &l->text);
    l->group++;
    l->opened = false;
    l->index = 0;
    memset(&l->key, 0, sizeof(l->key));
  }
out:
  job_list_release(&jobs);
  return rc;
}

/* A round: up to a page of jobs, across groups when one ends early. */
static int round_fn(store_t *s, void *arg) {
  listing_t *l = arg;
  size_t got = 0;
  int rc = 0;
  if (!l->began) {
    l->fmt->head(l->ud, &l->text);
    l->began = true;
  }
  for (int calls = 0; calls < LISTING_CALLS && got < l->page && l->group < JOB_NGROUPS;
       calls++) {
    if (!l->opened) {
      l->fmt->group_open(l->ud, l->group, &l->text);
      l->opened = true;
    }
    if ((rc = round_group(s, l, l->page - got, &got))) return rc;
  }
  if (l->group == JOB_NGROUPS) {
    l->fmt->tail(l->ud, &l->text);
    l->done = true;
  }
  return l->text.failed ? -ENOMEM : 0;
}

static void round_done(void *arg, int rc);

static int round_submit(listing_t *l) {
  l->busy = true;
  int rc = store_submit(l->app->store, STORE_READ, round_fn, l, round_done);
  if (rc) l->busy = false;
  return rc;
}

/* Gives the stream what it waits for and keeps one round read ahead. */
static void feed(listing_t *l) {
  if (l->asked && l->ready.len) {
    l->asked = false;
    int rc = http_stream_write(l->st, l->ready.p, l->ready.len);
    l->sent += l->ready.len;
    l->ready.len = 0;
    if (rc) {
      http_stream_fail(l->st);
      return;
    }
  } else if (l->asked && l->done && !l->busy) {
    l->asked = false;
    http_stream_end(l->st);
    return;
  }
  if (!l->busy && !l->done && !l->ready.len && round_submit(l)) http_stream_fail(l->st);
}

static void on_more(void *ud) {
  listing_t *l = ud;
  l->asked = true;
  feed(l);
}

static void on_gone(void *ud) {
  listing_t *l = ud;
  l->st = NULL;
  l->gone = true;
  if (!l->busy) listing_free(l);
}

/* The first round decides: all of it in one reply, or a stream. */
static void first_done(listing_t *l, int rc) {
  http_req_t *req = l->req;
  l->req = NULL;
  if (rc) {
    l->fmt->failed(l->ud, req, rc);
    l->ud = NULL;
    listing_free(l);
    return;
  }
  l->fmt->headers(l->ud, req);
  if (l->done) {
    http_reply(req, 200, l->ctype, l->text.p, l->text.len);
    l->sent = l->text.len;
    listing_free(l);
    return;
  }
  strbuf_t t = l->text;
  memset(&l->text, 0, sizeof(l->text));
  l->ready = t;
  http_stream_t *st = http_reply_pull(req, 200, l->ctype, on_more, on_gone, l);
  /* NULL: it could not start, and on_gone has freed l. Otherwise the
   * first round waits for the stream to ask, and the next is read. */
  if (!st) return;
  l->st = st;
  feed(l);
}

static void round_done(void *arg, int rc) {
  listing_t *l = arg;
  l->busy = false;
  if (l->req) { /* the first round */
    /* HEAD reads every round into one reply, for the length GET would
     * send: libmicrohttpd 0.9.75 ends a streamed reply to HEAD with a
     * stray last chunk, which breaks the client's next keep-alive answer. */
    if (!rc && !l->done && http_req_is_head(l->req) && !(rc = round_submit(l))) return;
    first_done(l, rc);
    return;
  }
  if (l->gone) {
    listing_free(l);
    return;
  }
  if (rc) {
    log_warn("http", "a job listing stopped after %zu bytes: %s", l->sent, spd_strerror(rc));
    http_stream_fail(l->st);
    return;
  }
  /* ready is empty here: a round is read only once it was handed over. */
  strbuf_t t = l->ready;
  l->ready = l->text;
  l->text = t;
  l->text.len = 0;
  if (l->text.p) l->text.p[0] = '\0';
  feed(l);
}

/* The first round, once the ends counted are in the store. */
static void first_round(void *ud) {
  listing_t *l = ud;
  if (round_submit(l)) first_done(l, SPD_ESHUTDOWN);
}

int api_listing_start(app_t *app, http_req_t *req, const char *project,
                      const char *content_type, const api_listing_fmt_t *fmt, void *ud) {
  listing_t *l = calloc(1, sizeof(*l));
  if (!l) return -ENOMEM;
  l->app = app;
  l->req = req;
  l->ctype = content_type;
  l->fmt = fmt;
  l->page = app->cfg.list_page > 0 ? (size_t)app->cfg.list_page : 1000;
  if (l->page > JOB_PAGE_MAX) l->page = JOB_PAGE_MAX;
  l->ud = ud;
  if (project && !(l->project = strdup(project))) {
    free(l);
    return -ENOMEM;
  }
  if (!flow_after_ends(&app->flow, first_round, l)) return 0;
  int rc = round_submit(l);
  if (rc) { /* ud is the caller's again */
    free(l->project);
    free(l);
  }
  return rc;
}
