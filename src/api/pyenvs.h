/* Building the Python environments of project versions (store/pyenv.h has
 * the layout; docs/environments.md the behaviour).
 *
 * A build is one child process, `<interpreter> -m spiderd_runner.envbuild
 * DIR REQS` (python/spiderd_runner/envbuild.py), in a process group of its
 * own, its output into the build log; the loop only starts it and hears it
 * exit, so a build never blocks the daemon. Callers wanting one key while it
 * builds wait for the same build: two uploads with the same needs build once.
 * A build still running after [spiderd] env_build_timeout is killed.
 *
 * pip's sources ([spiderd] pip_index_url, pip_extra_index_url,
 * pip_find_links, pip_trusted_hosts) reach pip through its environment,
 * never a command line; the log masks a URL's password.
 *
 * Loop thread only. Ownership: borrows loop and cfg; strings passed in are
 * copied; strings passed to callbacks are borrowed for the call.
 */
#ifndef SPIDERD_API_PYENVS_H
#define SPIDERD_API_PYENVS_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "store/pyenv.h"

typedef struct pyenvs pyenvs_t;

/* rc 0: the environment of key is built. Else why says why (pip's last
 * lines for a failed build). */
typedef void (*pyenvs_cb)(void *ud, int rc, const char *key, const char *why);

/* Makes the environments' directory and removes what a crash left there
 * (unfinished builds, their logs). */
int pyenvs_init(pyenvs_t **out, uv_loop_t *loop, const config_t *cfg);
/* Kills the builds under way, answering their callers with SPD_ESHUTDOWN;
 * frees once their handles are closed (the loop must run). */
void pyenvs_free(pyenvs_t *pe);

/* The environments' directory (absolute). */
const char *pyenvs_dir(const pyenvs_t *pe);

/* Makes sure key's environment (interpreter interp, normalised
 * requirements reqs) exists: cb at once when it does (before the return),
 * else when the build ends. rebuild: build again even when it exists
 * (crawls running in it keep their files: the old one is moved aside).
 * 0, or a negative code and cb never runs. */
int pyenvs_ensure(pyenvs_t *pe, const char *interp, const char *reqs, int rebuild, pyenvs_cb cb,
                  void *ud);

/* Is key being built now? */
int pyenvs_building(const pyenvs_t *pe, const char *key);

/* A key an upload is about to record, or a crawl runs in (hold), until it
 * is recorded or dropped, or the crawl ended (unhold): pyenvs_collect
 * leaves a held key alone. */
void pyenvs_hold(pyenvs_t *pe, const char *key);
void pyenvs_unhold(pyenvs_t *pe, const char *key);

/* Removes the environments no version under eggs_dir uses, nor held, nor
 * building (their files go on the thread pool). Returns how many. One left
 * for a hold alone is collected when its last hold goes. */
int pyenvs_collect(pyenvs_t *pe);

/* [spiderd] env_prebuild: builds now the environments of the versions in
 * eggs_dir that this node lacks (at start-up, and when eggs arrive from
 * the shared store), instead of on their first claim. Returns how many
 * builds it started or joined; a failure is logged. */
int pyenvs_prebuild(pyenvs_t *pe);

/* How many builds this daemon started (for tests and metrics). */
uint64_t pyenvs_builds(const pyenvs_t *pe);

#endif
