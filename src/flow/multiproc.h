/* Multi-process runs: one crawl split over several processes of one
 * spider, the children of a parent job that runs no process of its own,
 * sharing one frontier queue (docs/queues.md, "Multi-process runs").
 *
 *   started   multiproc_start: the parent (running, on no node), the
 *             frontier and its seen set, the seed URLs, the children
 *   fed       multiproc_add: more URLs into a running run's frontier
 *   ended     multiproc_settle: once no child waits or runs, the parent
 *             ends in a state derived from its children's, and its
 *             queues go
 *
 * The parent is recognised by what no other job is: started (start_ms)
 * on no node. Its settings name the frontier (SPIDERD_QUEUE) and the seen
 * set (SPIDERD_DUPEFILTER_QUEUE), as its children's do.
 *
 * Store thread, inside the caller's write op, as flow/jobs.h's
 * transitions. Ownership: inputs are borrowed.
 */
#ifndef SPIDERD_FLOW_MULTIPROC_H
#define SPIDERD_FLOW_MULTIPROC_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "flow/flow.h"
#include "store/store.h"

/* The most processes and seed URLs one call takes, and the longest URL. */
#define MULTIPROC_PROCESSES_MAX 64
#define MULTIPROC_URLS_MAX 10000
#define MULTIPROC_URL_MAX 8192

/* The frontier's name for a run whose parent has Scrapyd job id jobid
 * (the seen set adds ".seen"); out holds at least MULTIPROC_QUEUE_NAME_MAX. */
#define MULTIPROC_QUEUE_NAME_MAX 256
void multiproc_queue_name(const char *jobid, char *out, size_t cap);

/* Is j the parent of a multi-process run (started on no node, its frontier
 * named after it)? */
int multiproc_is_parent(const job_t *j);

/* Starts a run: inserts parent (state running, start_ms set, node NULL,
 * its settings naming the queues) with its job.queued and job.started
 * events, creates the frontier and the seen set (paused, keep_done) anew,
 * puts the n seed urls into the frontier, then queues each of kids
 * (pending, parent_id set here) with jobs_enqueue. *added = seeds new to
 * the frontier. c: as jobs_enqueue. */
int multiproc_start(store_t *s, job_t *parent, job_list_t *kids, const char *const *urls,
                    size_t nurls, int64_t now_ms, int64_t *added, flow_change_t *c);

/* Puts urls into the frontier of running parent `id`, the parent's row
 * locked first (so it cannot end in between). -ENOENT: no such job;
 * SPD_EBADPARAM: not a multi-process run; SPD_ECONFLICT: it has ended.
 * *parent = the parent as read (the caller releases it); *added = urls
 * new to the frontier. */
int multiproc_add(store_t *s, int64_t id, const char *const *urls, size_t n, int64_t now_ms,
                  job_t *parent, int64_t *added);

/* Called after any change that may have ended the last child of job
 * parent_id (a child ended, was cancelled pending, or lost): when
 * parent_id is a running multi-process parent none of whose children
 * waits or runs, ends it (cancelled if a child's last attempt was, else
 * failed if one failed or was lost, else finished) with its event,
 * deletes its queues and counts it in c->finished. Anything else: 0,
 * nothing done. */
int multiproc_settle(store_t *s, int64_t parent_id, int64_t now_ms, flow_change_t *c);

#endif
