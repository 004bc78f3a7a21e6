/* Warm starts: a template process per (project, version) in use, from
 * which Scrapy crawls fork instead of starting Python and importing Scrapy
 * and the project again (python/spiderd_runner/template.py, docs/spiders.md).
 *
 * A template is started lazily, by the first crawl of its version that
 * finds none (that crawl starts cold), and serves every later one once it
 * says it is ready. The crawl it forks is the daemon's child (clone with
 * CLONE_PARENT): the launcher watches it through a pidfd and reaps it, so
 * its exit status, process group, cancel and adoption are a cold start's.
 * At most [spiderd] warm_templates are kept (the least recently used idle
 * one makes room); one unused for warm_idle seconds, one whose egg was
 * deleted or replaced, and one whose version cannot be served warm (it
 * says why, once, in the log) go. A template that dies is replaced by the
 * next crawl of its version; three deaths within warm_idle make that
 * version start cold until then.
 *
 * Loop thread only. Ownership: borrows loop and cfg for its whole life.
 */
#ifndef SPIDERD_RUN_WARM_H
#define SPIDERD_RUN_WARM_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "core/limits.h"

typedef struct warm warm_t;

/* NULL in *out (and 0) when warm starts are off (warm_templates = 0) or
 * the kernel cannot do them (no pidfd_open): every crawl starts cold. */
int warm_init(warm_t **out, uv_loop_t *loop, const config_t *cfg);

/* One crawl to fork: what a cold start would exec, minus the interpreter
 * and "-m spiderd_runner". */
typedef struct warm_req {
  const char *python;  /* the interpreter (a version's environment); NULL: the daemon's */
  const char *project;
  const char *version; /* as the job asked for it; NULL = latest */
  const char *egg;     /* the egg file; NULL for a project by settings module */
  const char *spider;
  char **argv;         /* "crawl", spider, ... */
  char **env;          /* the crawl's whole environment */
  int log_fd;          /* its stdout and stderr (sent, not taken) */
  const limits_rlimit_t *rlimits; /* set in the crawl before it runs */
  size_t nrlimits;
} warm_req_t;

/* pid > 0: the crawl runs, the daemon's child. Otherwise why says why it
 * was not forked (start it cold). */
typedef void (*warm_cb)(void *ud, int pid, const char *why);

/* 0: sent to a ready template; cb runs later, exactly once (with pid 0 if
 * the template dies or the daemon stops first). -1: no template can serve
 * it now (start it cold; a template may be starting for the next one). */
int warm_fork(warm_t *w, const warm_req_t *req, warm_cb cb, void *ud);

/* Keeps *gauge (metrics.h; it outlives w) equal to the number of templates
 * alive (starting or ready). */
void warm_set_gauge(warm_t *w, uint64_t *gauge);

/* Ends every template (answering the calls in flight), closes the handles
 * and frees w once they are closed. */
void warm_close(warm_t *w);

#endif
