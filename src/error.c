#include "error.h"

#include <string.h>

struct entry {
  int code;
  int http;
  int rpc;
  const char *name;
  const char *desc;
};

static const struct entry entries[] = {
#define SPD_ERR_ROW(name, value, http, rpc, desc) {value, http, rpc, #name, desc},
    SPD_ERRORS(SPD_ERR_ROW)
#undef SPD_ERR_ROW
};

static const struct entry *find(int code) {
  for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
    if (entries[i].code == code) return &entries[i];
  return NULL;
}

/* What a full disk (or quota) tells a person, whichever layer met it. */
static const char disk_full[] = "disk full: no space left on the device holding the daemon's data";

static int is_disk_full(int code) { return code == -ENOSPC || code == -EDQUOT; }

const char *spd_strerror(int code) {
  const struct entry *e = find(code);
  if (e) return e->desc;
  if (is_disk_full(code)) return disk_full;
  if (code < 0 && code > -4096) return strerror(-code);
  return "unknown error";
}

const char *spd_errname(int code) {
  const struct entry *e = find(code);
  if (e) return e->name;
  switch (code) {
  case -ENOENT: return "ENOENT";
  case -EINVAL: return "EINVAL";
  case -ENOMEM: return "ENOMEM";
  case -EEXIST: return "EEXIST";
  case -EIO: return "EIO";
  case -EACCES: return "EACCES";
  case -ENOSPC: return "ENOSPC";
  case -EDQUOT: return "EDQUOT";
  default: return "EUNKNOWN";
  }
}

int spd_http_status(int code) {
  const struct entry *e = find(code);
  if (e) return e->http;
  switch (code) {
  case -ENOENT: return 404;
  case -EINVAL: return 400;
  case -EEXIST: return 409;
  case -ENOSPC:
  case -EDQUOT: return 507; /* Insufficient Storage: retry once space is freed */
  case -EAGAIN: return 503; /* a write that collided every time the store ran it: retry */
  default: return 500;
  }
}

int spd_rpc_code(int code) {
  const struct entry *e = find(code);
  if (e) return e->rpc;
  if (code == -EINVAL) return -32602;
  return -32603;
}
