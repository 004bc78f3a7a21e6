/* Scrapyd's job listings (listjobs.json, the /jobs page) read and sent a
 * page at a time, so that a million jobs never sit in memory at once and
 * never hold the loop: each round reads one page of jobs (store_jobs_page)
 * on a store thread and renders it there; the loop writes the text to the
 * connection, and the next round is read while the client takes it.
 *
 * A listing that ends within its first round is answered as one reply with
 * a Content-Length, as before; a longer one is streamed (chunked): its
 * bytes are the same. It is not a snapshot: a job that changes group
 * between two rounds may be listed in both or in neither (within a group,
 * keyset pages read each job once).
 *
 * Loop thread only. Ownership: fmt is borrowed for the listing's life
 * (static tables); ud belongs to the listing once api_listing_start was
 * called, which frees it with fmt->free.
 */
#ifndef SPIDERD_API_LISTING_H
#define SPIDERD_API_LISTING_H

#include "app.h"
#include "core/job.h"
#include "strbuf.h"

typedef struct api_listing_fmt {
  /* On a store thread; each appends its text to b. */
  void (*head)(void *ud, strbuf_t *b);
  void (*group_open)(void *ud, int group, strbuf_t *b);
  /* Job i (from 0) of its group; the job is released afterwards. */
  void (*row)(void *ud, int group, size_t i, job_t *j, strbuf_t *b);
  void (*group_close)(void *ud, int group, strbuf_t *b);
  void (*tail)(void *ud, strbuf_t *b);
  /* On the loop, right before the reply: its headers (http_reply_header). */
  void (*headers)(void *ud, http_req_t *req);
  /* On the loop: the first round failed (rc), nothing was sent: it
   * replies, and takes ud back (free is not called). */
  void (*failed)(void *ud, http_req_t *req, int rc);
  /* On the loop, once, when failed is not: the listing is over. */
  void (*free)(void *ud);
} api_listing_fmt_t;

/* Answers req (200, content_type) with the three groups of project's jobs
 * (NULL: every project) in fmt's form, once the ends this node counted are
 * in the store (flow_after_ends). Returns 0; or SPD_ESHUTDOWN when the
 * store takes no more ops, and then nothing was replied and ud is the
 * caller's again (when it stops while the listing waits: fmt->failed). */
int api_listing_start(app_t *app, http_req_t *req, const char *project,
                      const char *content_type, const api_listing_fmt_t *fmt, void *ud);

#endif
