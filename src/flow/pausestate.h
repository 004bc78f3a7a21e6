/* Where a paused crawl keeps its state, and how that state travels to the
 * node that resumes it (flow/pause.h).
 *
 * A Scrapy crawl gets JOBDIR=<dbs_dir>/jobstate/<job row id> (Scrapyd's
 * jobs_dir, when set, instead); a resumable command spider gets the same
 * directory as SPIDERD_STATE_DIR. On a shared store a pause packs the
 * directory (a gzip'd tar, at most PAUSESTATE_MAX bytes) into the store,
 * and the claim of the resumed job on any node unpacks it there. With an
 * object store ([spiderd] object_store) the tar goes to the bucket instead
 * (jobstate/<job row id>.tar.gz under its prefix), and the store keeps an
 * empty row that says so. These run on a store thread, as the eggs' copies
 * do (flow/eggsync.h).
 *
 * Ownership: returned strings and buffers are the caller's (free).
 */
#ifndef SPIDERD_FLOW_PAUSESTATE_H
#define SPIDERD_FLOW_PAUSESTATE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "core/job.h"
#include "store/store.h"

struct s3;

/* The largest state a pause hands to the store; a larger one stays on the
 * node that paused (resumed elsewhere, the crawl starts afresh). */
#define PAUSESTATE_MAX (256u << 20)

/* Paused crawls' states go to this object store from now on (set once at
 * start-up on a shared store; NULL = the store's own rows). */
void pausestate_set_objstore(const struct s3 *s3);

/* The absolute path of job id's state directory; NULL when out of memory. */
char *pausestate_dir(const config_t *cfg, int64_t id);

/* Is dir one that spiderd made (under <dbs_dir>/jobstate), to delete when
 * its job ends for good? */
int pausestate_ours(const config_t *cfg, const char *dir);

/* dir packed as a gzip'd tar into *data (malloc'd, *len bytes): 0, -EFBIG
 * over PAUSESTATE_MAX, or another -errno. */
int pausestate_pack(const char *dir, void **data, size_t *len);

/* Replaces dir with the tar's contents: 0 or -errno. */
int pausestate_unpack(const char *dir, const void *data, size_t len);

/* On a shared store: job j, claimed here, was paused: its state, when the
 * store has it, is unpacked into its directory. Failures are logged: the
 * crawl then starts from what the directory holds. */
void pausestate_restore(store_t *s, const config_t *cfg, const job_t *j);

/* On a shared store: dir packed into the store as job id's state. 0, or
 * the store's error (a pack that fails is logged and stores nothing). */
int pausestate_save(store_t *s, int64_t id, const char *dir, int64_t now_ms);

/* Job id's state is no longer needed: its row, and its object. */
int pausestate_drop(store_t *s, int64_t id);

#endif
