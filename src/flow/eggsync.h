/* Eggs on a shared store: the store holds every egg's bytes, and each
 * node's eggs_dir is a copy of them, so every node can run every version
 * and lists what the cluster has. These run on a store thread (they do
 * file I/O and store calls); nothing here touches the loop.
 *
 * Ownership: nothing returned is owned by the caller. */
#ifndef SPIDERD_FLOW_EGGSYNC_H
#define SPIDERD_FLOW_EGGSYNC_H

#include "store/store.h"

struct s3;

/* object_store_eggs = on: eggs' bytes go to the bucket under
 * eggs/PROJECT/STEM.egg (a command project's archive: STEM.tar.gz), the
 * store keeps a row with their size and no bytes, and copies come from
 * the bucket. Called once before the loop runs; s3 borrowed for the
 * daemon's life. NULL: bytes in the store. */
void eggsync_set_objstore(const struct s3 *s3);

/* Deletes the objects of one version (stem) or of every version of
 * project (stem NULL) from the bucket, when eggs are there; a failure is
 * logged (the store's row is gone already, so no node runs it again).
 * Blocking: a store thread or the pool. */
void eggsync_objstore_delete(const char *project, const char *stem);

/* Makes eggs_dir hold the store's eggs of `project` (NULL: of every
 * project): copies the missing and the changed (by size), and deletes the
 * versions and projects the store no longer has. *changed (may be NULL) =
 * files written or removed. A version an upload holds is left alone. */
int eggsync_pull(store_t *s, const char *eggs_dir, const char *project, int *changed);

/* Copies into the store every egg of eggs_dir it does not hold (a node
 * joining a cluster brings its eggs rather than losing them to the first
 * pull). *pushed (may be NULL) = how many. */
int eggsync_push_missing(store_t *s, const char *eggs_dir, int *pushed);

/* An upload on a shared store writes the store, then eggs_dir: between the
 * two, a copy would fetch the same egg back and replace the file (which
 * makes every node's caches of it stale). The upload holds its version
 * from before the store write until its file is in eggs_dir, and copies
 * leave it alone. Any thread; every hold is released once. */
int eggsync_hold(const char *project, const char *version);
void eggsync_unhold(const char *project, const char *version);

/* Stores the egg file at path as project/version (version raw: it is
 * sanitized to the stem the file has on disk). */
int eggsync_put_file(store_t *s, const char *project, const char *version, const char *path,
                     int64_t now_ms);

#endif
