/* The memory this node has for crawls: what the machine has available
 * (/proc/meminfo's MemAvailable), or, when the daemon runs in a cgroup with
 * a memory limit, what is left under the tightest one (memory.max less
 * memory.current, up its hierarchy), whichever is less.
 *
 * Ownership: nothing here allocates.
 */
#ifndef SPIDERD_RUN_MEMORY_H
#define SPIDERD_RUN_MEMORY_H

#include <stdint.h>

/* MemAvailable of a /proc/meminfo text, in bytes; -1 when absent. */
int64_t memory_parse_meminfo(const char *text);

/* The bytes available now into *out and where the figure comes from
 * ("meminfo" or "cgroup") into *source. 0, or -ENOENT when nothing can be
 * read (then *out is 0). */
int memory_available(int64_t *out, const char **source);

#endif
