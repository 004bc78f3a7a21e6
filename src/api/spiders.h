/* Spider lists: `python -m spiderd_runner list -s LOG_STDOUT=0` run for a
 * project's egg, cached in memory (Scrapyd's SpiderList).
 *
 * The child gets env_build(cfg, project, egg_path, version,
 * {"PYTHONIOENCODING=UTF-8"}), cwd = the daemon's cwd, stdout and stderr
 * captured through pipes (bounded: at most 1 MiB each, the rest dropped).
 * Its stdout split into non-empty lines is the list. A non-zero exit (or a
 * signal) is an error whose text is stderr, or stdout when stderr is empty.
 *
 * The cache key is (egg_path, the file's size and mtime), so an egg
 * overwritten in place is listed again; a project without egg (from
 * [settings]) is keyed by its name. Lists are not cached on error.
 *
 * A project stored as a spiderd.json archive (store/marchive.h) is listed
 * from its manifest, with no process, and cached the same way.
 *
 * Runs on the loop thread only. Ownership: names and error_text passed to the
 * callback are borrowed for the callback's duration only.
 */
#ifndef SPIDERD_API_SPIDERS_H
#define SPIDERD_API_SPIDERS_H

#include <stddef.h>
#include <uv.h>

#include "config.h"

typedef struct spiders spiders_t;

/* rc 0: names/n are the spiders. rc SPD_ERUNNER: error_text says why (the
 * runner's stderr, e.g. a Python traceback). Other rc: spawn failure, with
 * error_text. */
typedef void (*spiders_cb)(void *ud, int rc, char *const *names, size_t n,
                           const char *error_text);

int spiders_init(spiders_t **out, uv_loop_t *loop, const config_t *cfg);
/* Kills listings still running; their callbacks are not called. The struct is
 * freed once their handles are closed (the loop must run). */
void spiders_free(spiders_t *sp);

/* Lists the spiders of project at egg_path (NULL for a [settings] project);
 * version is the raw version for SCRAPYD_EGG_VERSION (may be NULL). On a
 * cache hit cb runs before this returns; otherwise from a later loop
 * callback. Returns 0, or a negative code and cb is never called. */
int spiders_list(spiders_t *sp, const char *project, const char *egg_path,
                 const char *version, spiders_cb cb, void *ud);

/* The same with the interpreter given (python: a version's environment,
 * e.g. for an egg still being added); spiders_list finds it from the
 * egg's environment record (store/pyenv.h), and refuses to list with
 * SPD_ERUNNER when that environment is not built on this node. */
int spiders_list_py(spiders_t *sp, const char *project, const char *egg_path,
                    const char *version, const char *python, spiders_cb cb, void *ud);

/* How a listing gets a version's environment built when this node lacks
 * it (a version copied from another node): fn(ctx, interp, reqs, cb, ud)
 * as pyenvs_ensure, cb(ud, rc, key, why) once built or failed. */
typedef int (*spiders_env_fn)(void *ctx, const char *interp, const char *reqs,
                              void (*cb)(void *ud, int rc, const char *key, const char *why),
                              void *ud);
void spiders_set_env_builder(spiders_t *sp, spiders_env_fn fn, void *ctx);

/* Drops every cached entry of project. */
void spiders_forget(spiders_t *sp, const char *project);

/* Records names as the list of the egg now at egg_path (e.g. the egg just
 * listed under its staging name and moved into place), so the next listing
 * of that egg needs no runner. Copies names. */
int spiders_prime(spiders_t *sp, const char *project, const char *egg_path,
                  char *const *names, size_t n);

#endif
