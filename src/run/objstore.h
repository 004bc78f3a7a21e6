/* The uploader of logs and items to the object store ([spiderd]
 * object_store): a thread of its own, so a slow or unreachable store never
 * slows a crawl or the loop.
 *
 * While a job runs on this node, every object_store_flush seconds what its
 * log and items file grew by goes up as the next numbered part object
 * (logs/P/S/JOB.log.part-000001, ...): a node killed with kill -9 loses at
 * most the last flush interval, and other nodes read a running crawl by
 * joining the parts (s3_read_joined). When the job has ended, each file
 * goes up whole (logs/P/S/JOB.log, items/P/S/JOB.jl, Scrapyd's layout under
 * the prefix), its parts are deleted, and jobs_to_keep is applied to its
 * project/spider in the store as Scrapyd applies it to a directory.
 *
 * The local files are the spool: what is not up yet is retried with
 * backoff (1 s doubling to 60 s), and a small marker per job in spool_dir
 * says how far each file is up, so a restarted node uploads what is left.
 *
 * Ownership: objstore_start borrows s3 and cfg for the uploader's life.
 * The functions run on the loop thread; they only queue work.
 */
#ifndef SPIDERD_RUN_OBJSTORE_H
#define SPIDERD_RUN_OBJSTORE_H

#include "config.h"
#include "core/job.h"
#include "net/s3.h"

typedef struct objstore objstore_t;

/* Checks the bucket (a refusal that only the operator can fix, as a
 * missing bucket or refused credentials, fails the start with the reason
 * in err; an unreachable store is logged and retried), loads the spool and
 * starts the thread. 0 or a negative code. */
int objstore_start(objstore_t **out, s3_t *s3, const config_t *cfg, char *err, size_t errlen);
/* A job started on this node: its files go up as they grow. */
void objstore_job_started(objstore_t *o, const job_t *job);
/* A job of this node ended: its files go up whole. */
void objstore_job_ended(objstore_t *o, const job_t *job);
/* A job's history was deleted (the janitor): its objects go too. */
void objstore_forget(objstore_t *o, const char *project, const char *spider, const char *jobid);
/* Uploads what ended jobs left (for at most a few seconds when the store
 * answers; else the spool waits for the next start), stops the thread and
 * frees o. NULL is a no-op. */
void objstore_stop(objstore_t *o);

#endif
