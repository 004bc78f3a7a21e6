/* spiderd's one error registry.
 *
 * Functions return 0 on success or a negative code: a negated errno value
 * (-ENOENT, -EINVAL, ...) or one of the SPD_E* codes below. The same registry
 * maps a code to an HTTP status, a JSON-RPC code and a short name, so every
 * face of the daemon reports one error the same way. Messages meant for a
 * person are written by the failing function into a caller-given buffer.
 */
#ifndef SPIDERD_ERROR_H
#define SPIDERD_ERROR_H

#include <errno.h>
#include <stddef.h>

/* X(name, value, http status, json-rpc code, short description) */
#define SPD_ERRORS(X)                                                              \
  X(SPD_EBADPARAM,   -1001, 400, -32602, "invalid parameter")                      \
  X(SPD_EMISSING,    -1002, 400, -32602, "missing parameter")                      \
  X(SPD_ENOPROJECT,  -1003, 404, -32004, "project not found")                      \
  X(SPD_ENOVERSION,  -1004, 404, -32005, "version not found")                      \
  X(SPD_ENOSPIDER,   -1005, 404, -32006, "spider not found")                       \
  X(SPD_ENOJOB,      -1006, 404, -32007, "job not found")                          \
  X(SPD_EBADEGG,     -1007, 400, -32008, "egg is not valid")                       \
  X(SPD_ERUNNER,     -1008, 422, -32009, "runner failed")                          \
  X(SPD_ETRAVERSAL,  -1009, 400, -32010, "name would escape its directory")       \
  X(SPD_ETOOBIG,     -1010, 413, -32011, "request body too large")                 \
  X(SPD_EMETHOD,     -1011, 405, -32601, "method not allowed")                     \
  X(SPD_ESTORE,      -1012, 503, -32603, "store failure")                          \
  X(SPD_ECONFIG,     -1013, 500, -32603, "configuration error")                    \
  X(SPD_ECONFLICT,   -1014, 409, -32012, "conflict")                               \
  X(SPD_ESHUTDOWN,   -1015, 503, -32013, "daemon is shutting down")                 \
  X(SPD_ENOROUTE,    -1016, 404, -32601, "no such route")                           \
  X(SPD_EBADJSON,    -1017, 400, -32700, "malformed JSON")                          \
  X(SPD_ENOFILE,     -1018, 404, -32014, "file not available")                      \
  X(SPD_EBADREQUEST, -1019, 400, -32600, "invalid request")                         \
  X(SPD_EFENCED,     -1020, 409, -32015, "lease lost: another scheduler took over")  \
  X(SPD_ENOSCHEDULE, -1021, 404, -32016, "schedule not found")                     \
  X(SPD_ENOQUEUE,    -1022, 404, -32017, "queue not found")                        \
  X(SPD_EFORBIDDEN,  -1023, 403, -32018, "not allowed with these credentials")     \
  X(SPD_EUNAUTHORIZED, -1024, 401, -32019, "authentication required")               \
  X(SPD_ETHROTTLED,  -1025, 429, -32020, "too many failed logins")                 \
  X(SPD_ENOPRINCIPAL, -1026, 404, -32021, "no such user or token")                \
  X(SPD_ENOACCOUNT,  -1027, 404, -32022, "account not found")                      \
  X(SPD_ENOCALENDAR, -1028, 404, -32023, "calendar not found")

enum spd_error {
#define SPD_ERR_ENUM(name, value, http, rpc, desc) name = value,
  SPD_ERRORS(SPD_ERR_ENUM)
#undef SPD_ERR_ENUM
};

/* Short description of any code (SPD_E* or negated errno). Never NULL. */
const char *spd_strerror(int code);
/* Symbolic name, e.g. "SPD_ENOPROJECT" or "ENOENT". Never NULL. */
const char *spd_errname(int code);
/* HTTP status for a code (500 for anything unknown; 507 for a full disk,
 * -ENOSPC or -EDQUOT, which every layer returns as it is). */
int spd_http_status(int code);
/* JSON-RPC error code for a code (-32603 for anything unknown). */
int spd_rpc_code(int code);

#endif
