/* Taking over a Scrapyd directory: the pending queues Scrapyd left in
 * dbs_dir/<project>.db (table spider_queue, JSON messages) and the finished
 * jobs of its SqliteJobStorage (dbs_dir/jobs.db, table finished_jobs) are
 * copied into the store once, so switching from Scrapyd loses no job.
 *
 * Each imported file is renamed to <name>.imported-by-spiderd afterwards, so
 * a restart does not import it twice and Scrapyd, if started again, does not
 * run the same jobs a second time. A file that is not a Scrapyd queue is left
 * alone with a warning.
 */
#ifndef SPIDERD_STORE_SCRAPYD_IMPORT_H
#define SPIDERD_STORE_SCRAPYD_IMPORT_H

#include "store/store.h"

/* Imports from dbs_dir into s (one transaction per file). skip_path is the
 * store's own file when it lives in dbs_dir. *pending / *finished count the
 * jobs imported. Returns 0 or a negative code (err says why). */
int scrapyd_import(store_t *s, const char *dbs_dir, const char *skip_path, int *pending,
                   int *finished, char *err, size_t errlen);

#endif
