#include "core/queue.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/array.h"
#include "core/enum.h"
#include "core/names.h"

static const char *const state_names[QSTATE_N] = {"waiting", "inflight", "dead", "done"};
static const char *const policy_names[QPOLICY_N] = {"overwrite", "keep-earliest",
                                                    "keep-existing"};
static const char *const key_mode_names[QKEY_N] = {"none", "host"};

void queue_conf_defaults(queue_conf_t *c) {
  c->paused = 0;
  c->keep_done = 0;
  c->visibility_ms = 30000;
  c->max_deliveries = 5;
  c->backoff_ms = 1000;
  c->backoff_max_ms = 3600000;
  c->max_inflight = 0;
  c->key_mode = QKEY_NONE;
  c->key_inflight = 0;
  c->key_rate = 0;
  c->key_burst = 1;
}

void queue_conf_release(queue_conf_t *c) {
  if (!c) return;
  free(c->name);
  c->name = NULL;
}

ARRAY_LIST_RELEASE(queue_conf_list_release, queue_conf_list_t, queue_conf_release)

void queue_item_release(queue_item_t *it) {
  if (!it) return;
  free(it->element);
  free(it->key);
  free(it->error);
  memset(it, 0, sizeof(*it));
}

ARRAY_LIST_RELEASE(queue_item_list_release, queue_item_list_t, queue_item_release)

queue_item_t *queue_item_list_add(queue_item_list_t *l) {
  return array_push((void **)&l->v, &l->n, &l->cap, sizeof(*l->v));
}

queue_conf_t *queue_conf_list_add(queue_conf_list_t *l) {
  return array_push((void **)&l->v, &l->n, &l->cap, sizeof(*l->v));
}

ENUM_NAMES(queue_state, queue_state_t, state_names, QSTATE_N)
ENUM_NAMES(queue_policy, queue_policy_t, policy_names, QPOLICY_N)
ENUM_NAMES(queue_key_mode, queue_key_mode_t, key_mode_names, QKEY_N)

int queue_name_valid(const char *name) {
  return name_valid("queue", name, NULL, 0) ? 0 : -EINVAL;
}

void queue_key_derive(queue_key_mode_t mode, const char *element, size_t len,
                      char *out, size_t cap) {
  size_t i = 0, o = 0, host, end;

  if (cap == 0) return;
  out[0] = '\0';
  if (mode != QKEY_HOST) return;
  /* scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) "://" */
  if (i >= len || !isalpha((unsigned char)element[i])) return;
  while (i < len && (isalnum((unsigned char)element[i]) || element[i] == '+' ||
                     element[i] == '-' || element[i] == '.'))
    i++;
  if (len - i < 3 || memcmp(element + i, "://", 3) != 0) return;
  host = i + 3;
  end = host;
  while (end < len && element[end] != '/' && element[end] != '?' && element[end] != '#')
    end++;
  /* userinfo ends at the last '@' of the authority */
  for (size_t j = end; j > host; j--)
    if (element[j - 1] == '@') {
      host = j;
      break;
    }
  if (host < end && element[host] == '[') { /* IPv6 literal, kept with brackets */
    size_t j = host;
    while (j < end && element[j] != ']') j++;
    end = j < end ? j + 1 : end;
  } else {
    for (size_t j = host; j < end; j++)
      if (element[j] == ':') {
        end = j;
        break;
      }
  }
  for (i = host; i < end && o + 1 < cap; i++)
    out[o++] = (char)tolower((unsigned char)element[i]);
  out[o] = '\0';
}

/* FNV-1a over 8-byte words, then a murmur3-style finaliser: fast on long
 * URLs and well mixed in every bit (the store indexes all 64). */
uint64_t queue_hash(const char *element, size_t len) {
  uint64_t h = 0xcbf29ce484222325ULL ^ (uint64_t)len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, element + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < len; i++) h = (h ^ (unsigned char)element[i]) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}
