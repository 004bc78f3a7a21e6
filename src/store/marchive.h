/* Project archives that are not eggs: a zip or a tar.gz with a spiderd.json
 * manifest at its root (core/manifest.h, docs/spiders.md). They are stored
 * exactly as eggs are (eggs_dir/<project>/<stem>.egg, store/eggs.h), so
 * versions, deletes and the cluster's copies (flow/eggsync.h) treat both
 * alike; what the bytes are is told from the bytes (marchive_kind).
 *
 * Safety: every member is checked before anything is written and again
 * while extracting: no absolute path, no '..' component, no backslash or
 * control character in a name, only files, directories and symlinks whose
 * target is relative without '..' (so no link, however chained, leaves the
 * directory), no hard links or devices; at most MARCHIVE_MAX_MEMBERS members
 * and MARCHIVE_MAX_BYTES bytes once extracted (counted as written, not as
 * declared).
 *
 * Ownership: *dir is malloc'd for the caller; a manifest_t filled here is
 * the caller's to manifest_release (also on error it is left empty).
 */
#ifndef SPIDERD_STORE_MARCHIVE_H
#define SPIDERD_STORE_MARCHIVE_H

#include <stddef.h>

#include "core/manifest.h"

#define MARCHIVE_MAX_MEMBERS 20000
#define MARCHIVE_MAX_BYTES (512ll * 1024 * 1024)

enum { MARCHIVE_EGG = 0, MARCHIVE_MANIFEST = 1 };

/* MARCHIVE_MANIFEST for a gzip stream (a tar.gz) or a ZIP holding
 * spiderd.json at its root and no EGG-INFO/; MARCHIVE_EGG for anything else
 * (a Python egg, or bytes eggs_stage refuses anyway). */
int marchive_kind_mem(const void *data, size_t len);
/* As marchive_kind_mem for the file at path; -errno when it cannot be read. */
int marchive_kind_file(const char *path);

/* Checks every member of the archive in memory (or at path) and parses its
 * manifest into *m. 0, SPD_EBADEGG with a reason in err, SPD_ECONFIG with
 * what to install in err when libarchive cannot be loaded, or -ENOMEM. */
int marchive_check_mem(const void *data, size_t len, manifest_t *m, char *err, size_t errlen);
int marchive_check_file(const char *path, manifest_t *m, char *err, size_t errlen);

/* The texts of the regular files at the archive's root named names[0..n)
 * (texts[i] malloc'd, NUL-terminated; NULL when absent or over max bytes),
 * without checking the rest: for reading what a checked archive asks for
 * (its requirements.txt). 0, SPD_EBADEGG when it is not a zip or tar.gz,
 * SPD_ECONFIG without libarchive, or -ENOMEM. */
int marchive_texts_mem(const void *data, size_t len, const char *const *names, size_t n,
                       size_t max, char **texts);
int marchive_texts_file(const char *path, const char *const *names, size_t n, size_t max,
                        char **texts);

/* The directory the archive at path is extracted to, extracting it first
 * when no earlier job did: root/<project>/<stem>-<id>, where stem is path's
 * file name less ".egg" and id names this very file (device, inode, size,
 * mtime), so a version replaced in place gets a directory of its own. The
 * extraction goes to a temporary directory renamed into place, so a crash
 * never leaves half a project to run. *m receives the extracted manifest.
 * 0, or a code with err. */
int marchive_prepare(const char *path, const char *root, const char *project, manifest_t *m,
                     char **dir, char *err, size_t errlen);

/* Is the archive at path extracted already (marchive_prepare would only
 * read its manifest)? A cheap check for the loop thread. */
int marchive_ready(const char *path, const char *root, const char *project);

/* Removes the extractions under root/<project> whose archive is no longer
 * eggs_dir/<project>/<stem>.egg (deleted, or replaced by another upload of
 * that version), and temporary directories a crash left, except those
 * in_use(ud, dir) says a job still runs in. Returns how many it removed. */
int marchive_prune(const char *root, const char *project, const char *eggs_dir,
                   int (*in_use)(void *ud, const char *dir), void *ud);

#endif
