/* Projects as every API face (Scrapyd's endpoints and the native REST /
 * JSON-RPC API) sees them, so a deploy behaves the same whichever face
 * asked: a project's versions (cached), egg resolution, adding and deleting
 * eggs; and the names a job is given and signalled by (Scrapyd job ids,
 * signal names). Queueing and cancelling jobs: api/jobs.h.
 *
 * Loop thread only. The state lives in app->api_common, made on first use
 * and freed by api_common_free().
 *
 * Ownership: pointers passed in are borrowed until the callback (or the
 * return when no callback will run); *egg_path from api_egg_resolve is
 * malloc'd for the caller. Callbacks never run when the call that would
 * start them returned an error.
 */
#ifndef SPIDERD_API_PROJECTS_H
#define SPIDERD_API_PROJECTS_H

#include <stddef.h>

#include "app.h"

struct auth_who;

/* Makes app->api_common (idempotent). 0 or a negative code. */
int api_common_init(app_t *app);
void api_common_free(app_t *app);

/* The project's version stems, latest last (borrowed until the next call).
 * 0 with n = 0 when the project has no eggs. */
int api_project_versions(app_t *app, const char *project, char *const **v, size_t *n);

/* Has the project eggs, or a [settings] entry? */
int api_project_known(app_t *app, const char *project);

/* Path of project's egg for version (raw or sanitized; NULL = latest) into
 * *egg_path; NULL for a [settings] project without eggs asked for no
 * version. 0, SPD_ENOPROJECT, SPD_ENOVERSION or -ENOMEM. */
int api_egg_resolve(app_t *app, const char *project, const char *version, char **egg_path);

/* A new Scrapyd job id: uuid.uuid1().hex, never repeated by this daemon. */
void api_uuid1_hex(app_t *app, char out[33]);

/* "TERM", "INT", "KILL", "HUP", "STOP" or a number 1..64. -EINVAL else. */
int api_parse_signal(const char *s, int *sig);

/* ---- adding an egg ---- */

/* Where adding an egg stopped. */
enum {
  API_EGG_STAGE = 1, /* not a ZIP, or it could not be written: err says why */
  API_EGG_ALLOC,     /* out of memory */
  API_EGG_LIST,      /* the runner could not list its spiders */
  API_EGG_STORE,     /* it could not be moved into eggs_dir */
  API_EGG_MANIFEST,  /* a spiderd.json project that is refused: err says why */
  API_EGG_ENVSPEC,   /* its requirements or python are refused: err says why */
  API_EGG_ENV,       /* its environment could not be built: error_text is pip's end */
};

/* What an upload may say besides the archive (NULL or "": not said). */
typedef struct api_egg_opts {
  const char *requirements; /* requirements.txt's text, over the archive's own */
  const char *python;       /* "3.11": the interpreter, over scrapy.cfg's [deploy] */
} api_egg_opts_t;

/* rc 0: the egg is stored and names/n are its spiders (borrowed). Else
 * stage tells where it failed; error_text may hold the runner's stderr. */
typedef void (*api_egg_cb)(void *ud, int rc, int stage, const char *error_text,
                           char *const *names, size_t n);

/* Stages data as an egg (opts' requirements and python written into it
 * first), builds or reuses the Python environment it asks for
 * (api/pyenvs.h), lists its spiders with that environment's python, and
 * only then makes it the project's version, recording its environment (a
 * broken egg or a failed build never replaces what was there). Returns
 * 0 (cb runs, possibly before the return) or a code with *stage and a
 * reason in err. Names must have passed name_valid(). Both record who
 * (may be NULL) did it as an event: version.added, version.deleted,
 * project.deleted (flow/projects.h). */
/* Deletes a project's eggs (version NULL) or one version (raw or
 * sanitized) from eggs_dir, and on a shared store from the store first
 * (so from every node). cb(ud, rc) runs once with the result of the
 * deletion (-ENOENT: nothing there), at once on a private store; 0 or the
 * reason cb will never run. */
int api_eggs_delete(app_t *app, const char *project, const char *version,
                    void (*cb)(void *ud, int rc), void *ud, const struct auth_who *who);

int api_egg_add(app_t *app, const char *project, const char *version, const void *data,
                size_t len, const api_egg_opts_t *opts, api_egg_cb cb, void *ud, int *stage,
                char *err, size_t errlen, const struct auth_who *who);

#endif
