/* Egg storage on disk, laid out as Scrapyd's FilesystemEggStorage:
 *   eggs_dir/<project>/<sanitized version>.egg
 * Staging files live in eggs_dir/.staging/ (hidden from project listings) so
 * that a rejected egg never becomes visible.
 *
 * Ownership: every char* / char** returned is malloc'd and the caller frees
 * it (strv_free for arrays). Names must have passed name_valid() already;
 * these functions refuse them again (SPD_ETRAVERSAL) rather than trust it.
 */
#ifndef SPIDERD_STORE_EGGS_H
#define SPIDERD_STORE_EGGS_H

#include <stddef.h>

/* Checks that data is a ZIP archive (libzip, from memory) or a gzip stream
 * (a tar.gz project, store/marchive.h: the caller checks its members) and
 * writes it to a new staging file. Neither -> SPD_EBADEGG with err =
 * "egg is not a ZIP file (if using curl, use egg=@path not egg=path)".
 * Returns 0 and the staging file's path in *tmp_path. */
int eggs_stage(const char *eggs_dir, const void *data, size_t len,
               char **tmp_path, char *err, size_t errlen);

/* Moves a staged egg to eggs_dir/<project>/<sanitize(version)>.egg (atomic
 * rename; overwrites the same sanitized name), creating the project directory.
 * *final_path (may be NULL) receives the path. */
int eggs_commit(const char *eggs_dir, const char *project, const char *version,
                const char *tmp_path, char **final_path);

/* Where eggs_commit would put version (raw or sanitized), the project's
 * directory made, so a file beside it can be written first. */
int eggs_path_for(const char *eggs_dir, const char *project, const char *version, char **path);

/* Removes a staged file; NULL is ignored. */
void eggs_discard(const char *tmp_path);

/* Removes staging files a crash left behind (none can be in use before the
 * daemon serves). Returns how many, or a negative code. */
int eggs_clean_staging(const char *eggs_dir);

/* Path of a project's egg: version raw or sanitized, or NULL for the latest
 * (last by version_compare). -ENOENT if the project has no egg or that
 * version is missing. */
int eggs_path(const char *eggs_dir, const char *project, const char *version,
              char **path);

/* The project's sanitized version stems, latest last; an unknown project
 * gives an empty list and 0. */
int eggs_versions(const char *eggs_dir, const char *project, char ***out, size_t *n);

/* Project directories under eggs_dir that hold at least one .egg, sorted by
 * name (dot-directories skipped). A missing eggs_dir gives an empty list. */
int eggs_projects(const char *eggs_dir, char ***out, size_t *n);

/* Deletes one version (raw or sanitized) and its environment record
 * (<stem>.env, store/pyenv.h); removes the project directory when it was
 * the last. -ENOENT when missing. */
int eggs_delete_version(const char *eggs_dir, const char *project, const char *version);

/* Deletes a project's directory and eggs. -ENOENT when missing. */
int eggs_delete_project(const char *eggs_dir, const char *project);

/* Frees an array of n strings and the array. */
void strv_free(char **v, size_t n);

/* Writes all len bytes of data to fd (again after EINTR and short
 * writes). 0 or -errno. */
int eggs_write_all(int fd, const void *data, size_t len);

#endif
