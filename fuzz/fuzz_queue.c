/* Task queue elements and keys (core/queue.c) and the queue engine's
 * policy (store/queue_engine.c) on a real SQLite store, opened once per
 * process in a scratch directory.
 *
 * Input: the first line sets the queue (bytes pick key mode, limits,
 * keep_done, max_deliveries); every further line is one step, its first
 * byte the operation and the rest its argument:
 *   p ELEMENT[\tKEY]  put (policy from the element's length)
 *   t N               take up to N          a  ack what was taken
 *   n                 nack what was taken (with a Retry-After)
 *   r PREFIX          requeue by prefix     x PREFIX  purge by prefix
 *   l PREFIX          list by prefix        k         keys, stats
 *   +                 a minute passes
 * Each element also goes through queue_key_derive, each line through the
 * name and enum parsers. The queue is deleted at the end of the input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/queue.h"
#include "fuzz.h"
#include "store/store.h"

static store_t *st;

static void init(void) {
  char url[512], err[512];
  snprintf(url, sizeof(url), "sqlite:%s/queue.db", fuzz_tmpdir());
  if (store_open(url, &st, err, sizeof(err))) {
    fprintf(stderr, "store_open: %s\n", err);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!st) init();
  if (size > 65536) return 0;
  char *buf = fuzz_strndup(data, size);
  const char *name = "fuzz";
  int64_t now = 1767225600000LL;

  char *line = buf, *rest;
  char *nl = strchr(buf, '\n');
  rest = nl ? nl + 1 : NULL;
  if (nl) *nl = '\0';
  size_t l0 = strlen(line);
  queue_conf_t c;
  memset(&c, 0, sizeof(c));
  queue_conf_defaults(&c);
  c.name = (char *)name;
  c.key_mode = l0 > 0 && (line[0] & 1) ? QKEY_HOST : QKEY_NONE;
  c.keep_done = l0 > 1 && (line[1] & 1);
  c.max_deliveries = l0 > 2 ? line[2] % 4 : 0;
  c.key_inflight = l0 > 3 ? line[3] % 3 : 0;
  c.key_rate = l0 > 4 ? (double)(line[4] % 4) : 0;
  c.key_burst = l0 > 5 ? (double)(line[5] % 3) : 0;
  c.max_inflight = l0 > 6 ? line[6] % 5 : 0;
  c.backoff_ms = 1000;
  queue_state_t qs;
  queue_policy_t qp;
  queue_key_mode_t km;
  queue_name_valid(line);
  queue_state_parse(line, &qs);
  queue_policy_parse(line, &qp);
  queue_key_mode_parse(line, &km);
  int rc = store_queue_set(st, &c);
  c.name = NULL; /* borrowed */
  if (rc) goto out;

  queue_item_list_t taken = {0};
  int steps = 0;
  while (rest && steps++ < 64) {
    line = rest;
    nl = memchr(line, '\n', size - (size_t)(line - buf));
    rest = nl ? nl + 1 : NULL;
    size_t len = nl ? (size_t)(nl - line) : size - (size_t)(line - buf);
    if (nl) *nl = '\0';
    if (!len) continue;
    char op = line[0];
    const char *arg = line + 1;
    size_t alen = len - 1;
    char key[QUEUE_KEY_MAX + 1];
    queue_key_derive(QKEY_HOST, arg, alen, key, sizeof(key));
    queue_hash(arg, alen);
    queue_filter_t f = {0};
    f.prefix = alen ? arg : NULL;
    int64_t count;
    switch (op) {
    case 'p': {
      queue_put_t p = {0};
      const char *tab = memchr(arg, '\t', alen);
      p.element = arg;
      p.len = tab ? (size_t)(tab - arg) : alen;
      p.key = tab ? tab + 1 : NULL;
      p.due_ms = now + (int64_t)(alen % 3) * 30000;
      p.priority = (int)(alen % 5) - 2;
      p.policy = (queue_policy_t)(alen % QPOLICY_N);
      store_queue_put(st, name, &p, 1, now);
      break;
    }
    case 't':
      store_queue_take(st, name, (size_t)(alen ? arg[0] % 8 : 1), 0, now, &taken, NULL);
      break;
    case 'a':
    case 'n': {
      if (!taken.n) break;
      queue_lease_t *ls = calloc(taken.n, sizeof(*ls));
      if (!ls) abort();
      for (size_t i = 0; i < taken.n; i++) {
        ls[i].id = taken.v[i].id;
        ls[i].token = taken.v[i].token;
        ls[i].delay_ms = -1;
        ls[i].retry_after_ms = alen ? 5000 : 0;
        ls[i].error = alen ? arg : NULL;
        ls[i].release = alen > 3;
      }
      if (op == 'a') store_queue_ack(st, name, ls, taken.n, now);
      else store_queue_nack(st, name, ls, taken.n, now);
      free(ls);
      queue_item_list_release(&taken);
      memset(&taken, 0, sizeof(taken));
      break;
    }
    case 'r':
      store_queue_requeue(st, name, &f, now, now, &count);
      break;
    case 'x':
      store_queue_purge(st, name, &f, now, &count);
      break;
    case 'l': {
      queue_item_list_t items = {0};
      f.limit = 10;
      store_queue_items(st, name, &f, &items);
      queue_item_list_release(&items);
      break;
    }
    case 'k': {
      queue_key_list_t keys = {0};
      queue_stats_t s;
      store_queue_keys(st, name, alen ? arg : NULL, 10, now, &keys);
      queue_key_list_release(&keys);
      store_queue_stats(st, name, now, &s);
      break;
    }
    case '+':
      now += 60000;
      break;
    default:
      break;
    }
  }
  queue_item_list_release(&taken);
  store_queue_delete(st, name);
out:
  queue_conf_release(&c);
  free(buf);
  return 0;
}
