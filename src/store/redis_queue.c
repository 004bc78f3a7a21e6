/* The Redis backend's task queues (core/queue.h). */
#include <errno.h>

#include "store/redis_int.h"

static const char queue_helpers[] = "";

void redis_queue_scripts(const char **src, const char **helpers) {
  for (int i = RS_QUEUE_PUT; i < RS_COUNT; i++) src[i] = "return 0\n";
  *helpers = queue_helpers;
}

int redis_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                    int64_t now_ms) { return -ENOSYS; }
int redis_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                     int64_t now_ms, queue_item_list_t *out, int64_t *next_ms) { return -ENOSYS; }
int redis_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms) { return -ENOSYS; }
int redis_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms) { return -ENOSYS; }
int redis_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                       int64_t visibility_ms, int64_t now_ms) { return -ENOSYS; }
int redis_queue_set(store_t *s, queue_conf_t *c) { return -ENOSYS; }
int redis_queue_get(store_t *s, const char *name, queue_conf_t *out) { return -ENOSYS; }
int redis_queues_list(store_t *s, const char *after, size_t limit, queue_conf_list_t *out) { return -ENOSYS; }
int redis_queue_delete(store_t *s, const char *name) { return -ENOSYS; }
int redis_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out) { return -ENOSYS; }
int redis_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                      queue_item_list_t *out) { return -ENOSYS; }
int redis_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                        int64_t due_ms, int64_t now_ms, int64_t *count) { return -ENOSYS; }
int redis_queue_purge(store_t *s, const char *name, const queue_filter_t *f, int64_t now_ms,
                      int64_t *count) { return -ENOSYS; }
