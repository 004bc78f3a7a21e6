/* Small file-system helpers shared by the layers. */
#ifndef SPIDERD_FSUTIL_H
#define SPIDERD_FSUTIL_H

#include <stdio.h>
#include <sys/types.h>

/* mkdir -p: creates path and its missing parents with mode. 0 or -errno. */
int fs_mkdirs(const char *path, mode_t mode);

/* rm -rf: path and everything below it; a symlink is removed, not followed.
 * 0 or -errno. */
int fs_rmtree(const char *path);

/* tmpfile(3), close-on-exec: a crawl started meanwhile does not get it.
 * NULL with errno set. */
FILE *fs_tmpfile(void);

#endif
