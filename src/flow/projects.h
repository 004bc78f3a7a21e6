/* A project's versions in one place: a version added (version.added), a
 * version or a whole project deleted (version.deleted, project.deleted).
 *
 * An egg lives in two places: on a shared store the store holds its bytes
 * for every node (or, with object_store_eggs, the bucket does and the store
 * its size: flow/eggsync.h), and each node's eggs_dir holds the file
 * its crawls run. The file is moved or removed by the caller, on the loop,
 * between the two store steps of each change, so the order is:
 *   added:   projects_egg_put (shared store only: every node will have it,
 *            and no node's pull prunes the file meanwhile), then the file
 *            into eggs_dir (eggs_commit), then projects_version_added;
 *   deleted: projects_eggs_delete (shared store only: no node's copy can
 *            bring it back once this commits), then the files out of
 *            eggs_dir, then projects_deleted.
 * The event is written once the change is done on this node, so a change
 * that failed half-way (the file could not be moved) records none.
 *
 * Each runs on a store thread inside the caller's store op (store_submit).
 * Nothing here changes the loop's job state: none fills a flow_change_t
 * (the caller forgets its cached spider lists). Errors as store.h's.
 * Ownership: inputs are borrowed.
 */
#ifndef SPIDERD_FLOW_PROJECTS_H
#define SPIDERD_FLOW_PROJECTS_H

#include <stdint.h>

#include "store/store.h"

/* Stores the staged egg file at path as project/version (raw: stored under
 * its sanitized stem) in a shared store. */
int projects_egg_put(store_t *s, const char *project, const char *version, const char *path,
                     int64_t now_ms);

/* Records version.added: version of project is in eggs_dir with nspiders
 * spiders. */
int projects_version_added(store_t *s, const char *project, const char *version, int nspiders,
                           int64_t now_ms);

/* Deletes from a shared store one version (its sanitized stem) or every
 * version of project (stem NULL); *count = how many it held (0 is no
 * error: this node's eggs_dir may have had them alone). */
int projects_eggs_delete(store_t *s, const char *project, const char *stem, int *count);

/* Records version.deleted (version given, raw) or project.deleted (NULL). */
int projects_deleted(store_t *s, const char *project, const char *version, int64_t now_ms);

#endif
