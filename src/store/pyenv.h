/* Python environments of project versions, on disk (docs/environments.md):
 *
 *   <dbs_dir>/envs/<key>/                  a virtual environment; ready once
 *                                          spiderd-env.json is in it
 *   <dbs_dir>/envs/<key>/build.log         pip's whole output
 *   eggs_dir/<project>/<stem>.env          which environment a version uses
 *                                          (JSON: key, python, requirements)
 *
 * The key is a hash of the base interpreter's real path and the normalised
 * requirements, so versions and projects with the same needs share one
 * environment. Pure file-system and text functions: no process is started
 * here (api/pyenvs.h builds). Safe on any thread.
 *
 * Ownership: every char * returned is malloc'd for the caller.
 */
#ifndef SPIDERD_STORE_PYENV_H
#define SPIDERD_STORE_PYENV_H

#include <stddef.h>

#define PYENV_KEY_LEN 16
#define PYENV_READY "spiderd-env.json"

/* The environments' directory, absolute: <dbs_dir>/envs (a relative
 * dbs_dir is taken from the current directory). NULL when out of memory. */
char *pyenv_dir(const char *dbs_dir);

/* Requirements as pip reads them, one a line: comments, blank lines and
 * surrounding blanks dropped, duplicates once, sorted, so the same needs
 * written twice give one key. An option line ("-r", "--index-url", "-e")
 * is refused (SPD_EBADPARAM, err says which): where packages come from is
 * the daemon's setting. *out is "" when nothing is required. */
int pyenv_normalize(const char *text, size_t len, char **out, char *err, size_t errlen);

/* The base interpreter for want ("3.11", "3"; NULL or "" = the daemon's
 * python): the configured one when its version matches, else an installed
 * python<want> (/usr/bin, /usr/local/bin, or beside the daemon's). *path is its real
 * path. SPD_EBADPARAM with a message naming what is installed otherwise. */
int pyenv_interpreter(const char *default_python, const char *want, char **path, char *err,
                      size_t errlen);

/* The key of (interpreter, normalised requirements): 16 hex digits. */
void pyenv_key(const char *interp, const char *reqs, char out[PYENV_KEY_LEN + 1]);

/* eggs_dir/<project>/<stem>.env of egg_path (…/<stem>.egg). */
char *pyenv_sidecar_path(const char *egg_path);

/* Writes egg_path's sidecar (atomically). 0 or -errno. */
int pyenv_sidecar_write(const char *egg_path, const char *key, const char *interp,
                        const char *reqs);

/* Reads egg_path's sidecar: 0 and the key (interp and reqs may be NULL when
 * not wanted), -ENOENT when the version needs no environment, -EINVAL when
 * the file is unreadable. */
int pyenv_sidecar_read(const char *egg_path, char key[PYENV_KEY_LEN + 1], char **interp,
                       char **reqs);

/* Is envs_dir/<key> a built environment? */
int pyenv_ready(const char *envs_dir, const char *key);

/* envs_dir/<key>/bin/python. */
char *pyenv_python(const char *envs_dir, const char *key);

/* The interpreter a version's crawls use: 0 with *python NULL when it needs
 * no environment (the daemon's python), 0 with the environment's python,
 * or SPD_ENOFILE when its environment is not built on this node (key says
 * which). */
int pyenv_for_egg(const char *envs_dir, const char *egg_path, char **python,
                  char key[PYENV_KEY_LEN + 1]);

/* The keys the sidecars under eggs_dir name, each once. */
int pyenv_keys_in_use(const char *eggs_dir, char ***keys, size_t *n);

/* The requirements a project archive carries: requirements.txt at its
 * root (an egg, an "uber egg" of scrapyd-client's --include-dependencies),
 * else a wheel's Requires-Dist (without extras' lines). *reqs NULL: none.
 * Also the Python version of a .python-version at its root, else the
 * python = X.Y of a scrapy.cfg [deploy] section there (*python NULL:
 * none). 0, or -ENOMEM. */
int pyenv_from_archive(const void *data, size_t len, char **reqs, char **python);

/* The same of the archive at path. */
int pyenv_from_file(const char *path, char **reqs, char **python);

/* A copy of the zip archive data with requirements.txt (reqs) and
 * .python-version (python) at its root, replacing any there (NULL: left
 * as it is), so the archive carries what its upload asked for to every
 * node. *out is malloc'd. 0, SPD_EBADEGG (not a zip) or -ENOMEM. */
int pyenv_embed(const void *data, size_t len, const char *reqs, const char *python,
                void **out, size_t *outlen);

/* The environment of (reqs, want), NULL meaning not said: 0 with *interp
 * NULL when the version runs on the daemon's python as it is (nothing to
 * install, no other interpreter asked for); else the interpreter, the
 * normalised requirements and the key. SPD_EBADPARAM with err as
 * pyenv_normalize and pyenv_interpreter say. */
int pyenv_spec(const char *default_python, const char *reqs, const char *want, char **interp,
               char **norm, char key[PYENV_KEY_LEN + 1], char *err, size_t errlen);

/* Is the archive a wheel (a .dist-info/METADATA and no EGG-INFO)? */
int pyenv_is_wheel(const void *data, size_t len);

#endif
