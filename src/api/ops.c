/* The operation table and what every operation shares: parameter
 * validation, replies, job rendering and lookup, cursors, and the small
 * codecs the faces need (JSON bodies, base64, UTF-8 text of log files). */
#include "api/ops.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "core/names.h"
#include "error.h"
#include "store/eggs.h"

/* ---- the table ---- */

#define END {NULL, 0, 0, 0, 0}
#define REQ OPF_REQUIRED
#define NAME OPF_NAME

static const op_param_t p_none[] = {END};
static const op_param_t p_project[] = {{"project", OPT_STR, REQ | NAME, 0, 0}, END};
static const op_param_t p_version_add[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                           {"version", OPT_STR, REQ | NAME, 0, 0},
                                           {"egg", OPT_BLOB, REQ, 0, 0},
                                           {"requirements", OPT_STR, 0, 0, 0},
                                           {"python", OPT_STR, 0, 0, 0},
                                           END};
static const op_param_t p_version[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                       {"version", OPT_STR, REQ | NAME, 0, 0},
                                       END};
static const op_param_t p_version_env[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                           {"version", OPT_STR, REQ | NAME, 0, 0},
                                           {"log", OPT_BOOL, 0, 0, 0},
                                           END};
static const op_param_t p_spiders[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                       {"version", OPT_STR, NAME, 0, 0},
                                       END};
static const op_param_t p_jobs_list[] = {{"state", OPT_STRS, 0, 0, 0},
                                         {"project", OPT_STR, NAME, 0, 0},
                                         {"spider", OPT_STR, NAME, 0, 0},
                                         {"schedule", OPT_INT, 0, 1, INT64_MAX},
                                         {"parent", OPT_INT, 0, 1, INT64_MAX},
                                         {"from", OPT_STR, 0, 0, 0},
                                         {"to", OPT_STR, 0, 0, 0},
                                         {"node", OPT_STR, 0, 0, 0},
                                         {"q", OPT_STR, 0, 0, 0},
                                         {"meta", OPT_OBJ, 0, 0, 0},
                                         {"limit", OPT_INT, 0, 1, 1000},
                                         {"cursor", OPT_STR, 0, 0, 0},
                                         {"test", OPT_BOOL, 0, 0, 0},
                                         {"health", OPT_STR, 0, 0, 0},
                                         END};
static const op_param_t p_jobs_counts[] = {{"since", OPT_STR, 0, 0, 0},
                                           {"project", OPT_STR, NAME, 0, 0},
                                           END};
static const op_param_t p_throughput[] = {{"from", OPT_STR, 0, 0, 0},
                                          {"to", OPT_STR, 0, 0, 0},
                                          {"step", OPT_INT, 0, 1, 366LL * 86400},
                                          {"project", OPT_STR, NAME, 0, 0},
                                          END};
static const op_param_t p_stats[] = {{"from", OPT_STR, 0, 0, 0},
                                     {"to", OPT_STR, 0, 0, 0},
                                     {"by", OPT_STR, 0, 0, 0},
                                     {"project", OPT_STR, NAME, 0, 0},
                                     {"spider", OPT_STR, NAME, 0, 0},
                                     {"schedule", OPT_INT, 0, 1, INT64_MAX},
                                     {"account", OPT_STR, 0, 0, 0},
                                     END};
static const op_param_t p_job[] = {{"id", OPT_ID, REQ, 0, 0}, END};
static const op_param_t p_jobs_create[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                           {"spider", OPT_STR, REQ | NAME, 0, 0},
                                           {"version", OPT_STR, NAME, 0, 0},
                                           {"args", OPT_OBJ, 0, 0, 0},
                                           {"settings", OPT_OBJ, 0, 0, 0},
                                           {"priority", OPT_NUM, 0, 0, 0},
                                           {"jobid", OPT_STR, NAME, 0, 0},
                                           {"parent", OPT_INT, 0, 1, INT64_MAX},
                                           {"unique_key", OPT_STR, 0, 0, 0},
                                           {"meta", OPT_ANY, 0, 0, 0},
                                           {"after", OPT_ANY, 0, 0, 0},
                                           END};
/* A test run: a job's fields, or a schedule's template, and its limits. */
static const op_param_t p_jobs_test_run[] = {{"project", OPT_STR, NAME, 0, 0},
                                             {"spider", OPT_STR, NAME, 0, 0},
                                             {"schedule", OPT_STR, 0, 0, 0},
                                             {"version", OPT_STR, NAME, 0, 0},
                                             {"args", OPT_OBJ, 0, 0, 0},
                                             {"settings", OPT_OBJ, 0, 0, 0},
                                             {"priority", OPT_NUM, 0, 0, 0},
                                             {"jobid", OPT_STR, NAME, 0, 0},
                                             {"meta", OPT_ANY, 0, 0, 0},
                                             {"items", OPT_INT, 0, 1, 1000000000},
                                             {"pages", OPT_INT, 0, 1, 1000000000},
                                             {"seconds", OPT_NUM, 0, 0, 0},
                                             END};
static const op_param_t p_cancel[] = {{"id", OPT_ID, REQ, 0, 0},
                                      {"signal", OPT_STR, 0, 0, 0},
                                      END};
static const op_param_t p_job_meta[] = {{"id", OPT_ID, REQ, 0, 0},
                                        {"meta", OPT_ANY, REQ, 0, 0},
                                        END};
static const op_param_t p_job_history[] = {{"id", OPT_ID, REQ, 0, 0},
                                           {"state", OPT_STR, 0, 0, 0},
                                           {"note", OPT_STR, 0, 0, 0},
                                           END};
static const op_param_t p_jobs_history[] = {{"ids", OPT_ANY, REQ, 0, 0},
                                            {"state", OPT_STR, 0, 0, 0},
                                            {"note", OPT_STR, 0, 0, 0},
                                            END};
static const op_param_t p_jobs_history_by[] = {{"status", OPT_STR, REQ, 0, 0},
                                               {"project", OPT_STR, NAME, 0, 0},
                                               {"spider", OPT_STR, NAME, 0, 0},
                                               {"schedule", OPT_INT, 0, 1, INT64_MAX},
                                               {"ended_from", OPT_STR, 0, 0, 0},
                                               {"ended_to", OPT_STR, 0, 0, 0},
                                               {"state", OPT_STR, 0, 0, 0},
                                               {"note", OPT_STR, 0, 0, 0},
                                               END};
static const op_param_t p_jobs_states[] = {{"ids", OPT_ANY, REQ, 0, 0}, END};
static const op_param_t p_jobs_multiprocess[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                                 {"spider", OPT_STR, REQ | NAME, 0, 0},
                                                 {"processes", OPT_INT, REQ, 1, 64},
                                                 {"urls", OPT_ANY, REQ, 0, 0},
                                                 {"version", OPT_STR, NAME, 0, 0},
                                                 {"args", OPT_OBJ, 0, 0, 0},
                                                 {"settings", OPT_OBJ, 0, 0, 0},
                                                 {"priority", OPT_NUM, 0, 0, 0},
                                                 {"meta", OPT_ANY, 0, 0, 0},
                                                 END};
static const op_param_t p_jobs_add_urls[] = {{"id", OPT_ID, REQ, 0, 0},
                                             {"urls", OPT_ANY, REQ, 0, 0},
                                             END};
static const op_param_t p_tail[] = {{"id", OPT_ID, REQ, 0, 0},
                                    {"offset", OPT_INT, 0, -(1LL << 52), 1LL << 52},
                                    {"limit", OPT_INT, 0, 1, 1 << 20},
                                    END};

/* A schedule's fields: create needs name, project, spider and one timing. */
#define SCHEDULE_FIELDS                                                                   \
  {"version", OPT_STR, NAME, 0, 0}, {"cron", OPT_STR, 0, 0, 0}, {"interval", OPT_NUM, 0, 0, 0}, \
      {"at", OPT_STR, 0, 0, 0}, {"tz", OPT_STR, 0, 0, 0}, {"start", OPT_STR, 0, 0, 0},       \
      {"end", OPT_STR, 0, 0, 0}, {"jitter", OPT_NUM, 0, 0, 0},                               \
      {"overlap", OPT_STR, 0, 0, 0}, {"missed", OPT_STR, 0, 0, 0},                           \
      {"catchup_max", OPT_INT, 0, 1, 1000}, {"paused", OPT_BOOL, 0, 0, 0},                   \
      {"args", OPT_OBJ, 0, 0, 0}, {"settings", OPT_OBJ, 0, 0, 0},                            \
      {"priority", OPT_NUM, 0, 0, 0}, {"timeout", OPT_NUM, 0, 0, 0},                         \
      {"retries", OPT_INT, 0, 0, 100}, {"retry_backoff", OPT_NUM, 0, 0, 0},                  \
      {"webhooks", OPT_STRS, 0, 0, 0}, {"meta", OPT_ANY, 0, 0, 0},                            \
      {"calendars", OPT_STRS, 0, 0, 0}
static const op_param_t p_schedule_create[] = {{"name", OPT_STR, REQ | NAME, 0, 0},
                                               {"project", OPT_STR, REQ | NAME, 0, 0},
                                               {"spider", OPT_STR, REQ | NAME, 0, 0},
                                               SCHEDULE_FIELDS,
                                               END};
static const op_param_t p_schedule_update[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                               {"name", OPT_STR, NAME, 0, 0},
                                               {"project", OPT_STR, NAME, 0, 0},
                                               {"spider", OPT_STR, NAME, 0, 0},
                                               SCHEDULE_FIELDS,
                                               END};
static const op_param_t p_schedule_preview[] = {{"cron", OPT_STR, 0, 0, 0},
                                                {"interval", OPT_NUM, 0, 0, 0},
                                                {"at", OPT_STR, 0, 0, 0},
                                                {"tz", OPT_STR, 0, 0, 0},
                                                {"start", OPT_STR, 0, 0, 0},
                                                {"end", OPT_STR, 0, 0, 0},
                                                {"count", OPT_INT, 0, 1, 100},
                                                END};
static const op_param_t p_schedule[] = {{"schedule", OPT_STR, REQ, 0, 0}, END};
static const op_param_t p_health_schedule[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                               {"rules", OPT_ANY, REQ, 0, 0},
                                               END};
static const op_param_t p_health_project[] = {{"project", OPT_STR, REQ | NAME, 0, 0},
                                              {"rules", OPT_ANY, REQ, 0, 0},
                                              END};
static const op_param_t p_schedule_pause[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                              {"note", OPT_STR, 0, 0, 0},
                                              END};
static const op_param_t p_schedule_run[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                            {"priority", OPT_NUM, 0, 0, 0},
                                            END};
static const op_param_t p_sched_next[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                          {"from", OPT_STR, 0, 0, 0},
                                          {"limit", OPT_INT, 0, 1, 1000},
                                          {"cursor", OPT_STR, 0, 0, 0},
                                          END};
static const op_param_t p_sched_next_all[] = {{"project", OPT_STR, NAME, 0, 0},
                                              {"from", OPT_STR, 0, 0, 0},
                                              {"limit", OPT_INT, 0, 1, 1000},
                                              {"cursor", OPT_STR, 0, 0, 0},
                                              END};
static const op_param_t p_runs_missed[] = {{"schedule", OPT_STR, 0, 0, 0},
                                           {"project", OPT_STR, NAME, 0, 0},
                                           {"from", OPT_STR, 0, 0, 0},
                                           {"to", OPT_STR, 0, 0, 0},
                                           {"limit", OPT_INT, 0, 1, 1000},
                                           {"cursor", OPT_STR, 0, 0, 0},
                                           END};
static const op_param_t p_page[] = {{"limit", OPT_INT, 0, 1, 1000},
                                    {"cursor", OPT_STR, 0, 0, 0},
                                    END};
static const op_param_t p_runs[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                    {"state", OPT_STRS, 0, 0, 0},
                                    {"from", OPT_STR, 0, 0, 0},
                                    {"to", OPT_STR, 0, 0, 0},
                                    {"limit", OPT_INT, 0, 1, 1000},
                                    {"cursor", OPT_STR, 0, 0, 0},
                                    END};
static const op_param_t p_events[] = {{"after", OPT_INT, 0, 0, INT64_MAX},
                                      {"type", OPT_STR, 0, 0, 0},
                                      {"schedule", OPT_INT, 0, 1, INT64_MAX},
                                      {"job", OPT_INT, 0, 1, INT64_MAX},
                                      {"limit", OPT_INT, 0, 1, 1000},
                                      {"before", OPT_INT, 0, 1, INT64_MAX},
                                      {"order", OPT_STR, 0, 0, 0},
                                      END};

/* Task queues (docs/queues.md): values the handlers check themselves are
 * OPT_ANY (elements, leases, ids: strings or objects in arrays). */
#define QUEUE_SETTINGS                                                                       \
  {"paused", OPT_BOOL, 0, 0, 0}, {"keep_done", OPT_BOOL, 0, 0, 0},                          \
      {"visibility", OPT_NUM, 0, 0, 0}, {"max_deliveries", OPT_INT, 0, 0, 1000000},         \
      {"backoff", OPT_NUM, 0, 0, 0}, {"backoff_max", OPT_NUM, 0, 0, 0},                      \
      {"max_inflight", OPT_INT, 0, 0, INT32_MAX}, {"key_mode", OPT_STR, 0, 0, 0},          \
      {"key_inflight", OPT_INT, 0, 0, INT32_MAX}, {"key_rate", OPT_NUM, 0, 0, 0},          \
      {"key_burst", OPT_NUM, 0, 0, 0}
static const op_param_t p_queue[] = {{"name", OPT_STR, REQ, 0, 0}, END};
static const op_param_t p_queue_set[] = {{"name", OPT_STR, REQ, 0, 0}, QUEUE_SETTINGS, END};
static const op_param_t p_queue_put[] = {{"name", OPT_STR, REQ, 0, 0},
                                         {"elements", OPT_ANY, 0, 0, 0},
                                         {"element", OPT_ANY, 0, 0, 0},
                                         {"priority", OPT_ANY, 0, 0, 0},
                                         {"delay", OPT_ANY, 0, 0, 0},
                                         {"due", OPT_ANY, 0, 0, 0},
                                         {"key", OPT_ANY, 0, 0, 0},
                                         {"policy", OPT_STR, 0, 0, 0},
                                         END};
static const op_param_t p_queue_take[] = {{"name", OPT_STR, REQ, 0, 0},
                                          {"max", OPT_INT, 0, 0, 0},
                                          {"visibility", OPT_NUM, 0, 0, 0},
                                          {"wait", OPT_NUM, 0, 0, 0},
                                          {"ack", OPT_ANY, 0, 0, 0},
                                          END};
static const op_param_t p_queue_ack[] = {{"name", OPT_STR, REQ, 0, 0},
                                         {"leases", OPT_ANY, REQ, 0, 0},
                                         END};
static const op_param_t p_queue_nack[] = {{"name", OPT_STR, REQ, 0, 0},
                                          {"leases", OPT_ANY, REQ, 0, 0},
                                          {"delay", OPT_NUM, 0, 0, 0},
                                          {"retry_after", OPT_NUM, 0, 0, 0},
                                          {"error", OPT_STR, 0, 0, 0},
                                          {"release", OPT_ANY, 0, 0, 0},
                                          END};
static const op_param_t p_queue_extend[] = {{"name", OPT_STR, REQ, 0, 0},
                                            {"leases", OPT_ANY, REQ, 0, 0},
                                            {"visibility", OPT_NUM, 0, 0, 0},
                                            END};
static const op_param_t p_queue_items[] = {{"name", OPT_STR, REQ, 0, 0},
                                           {"state", OPT_STRS, 0, 0, 0},
                                           {"key", OPT_STR, 0, 0, 0},
                                           {"prefix", OPT_STR, 0, 0, 0},
                                           {"cursor", OPT_STR, 0, 0, 0},
                                           {"limit", OPT_INT, 0, 1, 1000},
                                           END};
static const op_param_t p_queue_keys[] = {{"name", OPT_STR, REQ, 0, 0},
                                          {"limit", OPT_INT, 0, 1, 1000},
                                          {"cursor", OPT_STR, 0, 0, 0},
                                          END};
static const op_param_t p_queue_requeue[] = {{"name", OPT_STR, REQ, 0, 0},
                                             {"state", OPT_STRS, 0, 0, 0},
                                             {"key", OPT_STR, 0, 0, 0},
                                             {"prefix", OPT_STR, 0, 0, 0},
                                             {"ids", OPT_ANY, 0, 0, 0},
                                             {"delay", OPT_NUM, 0, 0, 0},
                                             END};
static const op_param_t p_queue_purge[] = {{"name", OPT_STR, REQ, 0, 0},
                                           {"state", OPT_STRS, 0, 0, 0},
                                           {"key", OPT_STR, 0, 0, 0},
                                           {"prefix", OPT_STR, 0, 0, 0},
                                           {"ids", OPT_ANY, 0, 0, 0},
                                           END};

static const op_param_t p_backfill[] = {{"schedule", OPT_STR, REQ, 0, 0},
                                        {"from", OPT_STR, REQ, 0, 0},
                                        {"to", OPT_STR, REQ, 0, 0},
                                        {"redo", OPT_STR, 0, 0, 0},
                                        {"order", OPT_STR, 0, 0, 0},
                                        {"max_running", OPT_INT, 0, 1, 1000},
                                        {"dry_run", OPT_BOOL, 0, 0, 0},
                                        {"slot_arg", OPT_STR, 0, 0, 0},
                                        {"slot_format", OPT_STR, 0, 0, 0},
                                        END};
static const op_param_t p_backfill_id[] = {{"id", OPT_ID, REQ, 0, 0}, END};
static const op_param_t p_calendar[] = {{"name", OPT_STR, REQ | NAME, 0, 0}, END};
static const op_param_t p_calendar_put[] = {{"name", OPT_STR, REQ | NAME, 0, 0},
                                            {"tz", OPT_STR, 0, 0, 0},
                                            {"dates", OPT_STRS, 0, 0, 0},
                                            {"weekdays", OPT_STRS, 0, 0, 0},
                                            {"hours", OPT_STRS, 0, 0, 0},
                                            {"note", OPT_STR, 0, 0, 0},
                                            END};

static const op_param_t p_token_create[] = {{"name", OPT_STR, 0, 0, 0},
                                            {"role", OPT_STR, REQ, 0, 0},
                                            {"projects", OPT_STRS, 0, 0, 0},
                                            {"expires_in", OPT_NUM, 0, 0, 0},
                                            END};
static const op_param_t p_token[] = {{"id", OPT_STR, REQ, 0, 0}, END};
static const op_param_t p_user_create[] = {{"name", OPT_STR, REQ, 0, 0},
                                           {"password", OPT_STR, REQ, 0, 0},
                                           {"role", OPT_STR, REQ, 0, 0},
                                           {"projects", OPT_STRS, 0, 0, 0},
                                           END};
static const op_param_t p_user_update[] = {{"name", OPT_STR, REQ, 0, 0},
                                           {"password", OPT_STR, 0, 0, 0},
                                           {"role", OPT_STR, 0, 0, 0},
                                           {"projects", OPT_STRS, 0, 0, 0},
                                           END};
static const op_param_t p_user[] = {{"name", OPT_STR, REQ, 0, 0}, END};
static const op_param_t p_account_create[] = {{"name", OPT_STR, REQ, 0, 0},
                                              {"description", OPT_STR, 0, 0, 0},
                                              {"max_running", OPT_INT, 0, 0, 1000000},
                                              END};
static const op_param_t p_account_update[] = {{"account", OPT_STR, REQ, 0, 0},
                                              {"description", OPT_STR, 0, 0, 0},
                                              {"max_running", OPT_INT, 0, 0, 1000000},
                                              END};
static const op_param_t p_account[] = {{"account", OPT_STR, REQ, 0, 0}, END};
static const op_param_t p_account_member[] = {{"account", OPT_STR, REQ, 0, 0},
                                              {"project", OPT_STR, 0, 0, 0},
                                              {"user", OPT_STR, 0, 0, 0},
                                              {"token", OPT_STR, 0, 0, 0},
                                              END};
static const op_param_t p_account_upcoming[] = {{"account", OPT_STR, REQ, 0, 0},
                                                {"from", OPT_STR, 0, 0, 0},
                                                {"limit", OPT_INT, 0, 1, 1000},
                                                {"cursor", OPT_STR, 0, 0, 0},
                                                END};

/* Order matters only for listings (the API index, the docs). */
const op_def_t op_table[] = {
    {"status.get", NULL, op_status_get, p_none, 0, "GET", "/status", 200, OP_BODY_NONE, ROLE_READ},
    {"nodes.list", NULL, op_nodes_list, p_none, 0, "GET", "/nodes", 200, OP_BODY_NONE, ROLE_READ},
    /* The node that answers: draining another one through it is not a
     * thing (docs/operations.md). */
    {"nodes.drain", NULL, op_nodes_drain, p_none, OP_WRITE, "POST", "/nodes/self/drain", 200,
     OP_BODY_JSON, ROLE_ADMIN},
    {"nodes.undrain", NULL, op_nodes_drain, p_none, OP_WRITE, "POST", "/nodes/self/undrain", 200,
     OP_BODY_JSON, ROLE_ADMIN},
    {"projects.list", NULL, op_projects_list, p_none, 0, "GET", "/projects", 200, OP_BODY_NONE, ROLE_READ},
    {"projects.get", NULL, op_projects_get, p_project, 0, "GET", "/projects/{project}", 200,
     OP_BODY_NONE, ROLE_READ},
    {"projects.delete", NULL, op_projects_delete, p_project, OP_WRITE, "DELETE",
     "/projects/{project}", 204, OP_BODY_NONE, ROLE_DEPLOY},
    {"versions.list", NULL, op_versions_list, p_project, 0, "GET", "/projects/{project}/versions",
     200, OP_BODY_NONE, ROLE_READ},
    {"versions.add", NULL, op_versions_add, p_version_add, OP_WRITE, "POST",
     "/projects/{project}/versions", 201, OP_BODY_BLOB, ROLE_DEPLOY},
    {"versions.delete", NULL, op_versions_delete, p_version, OP_WRITE, "DELETE",
     "/projects/{project}/versions/{version}", 204, OP_BODY_NONE, ROLE_DEPLOY},
    {"versions.environment", NULL, op_versions_env, p_version_env, 0, "GET",
     "/projects/{project}/versions/{version}/environment", 200, OP_BODY_NONE, ROLE_READ},
    {"versions.rebuild", NULL, op_versions_rebuild, p_version, OP_WRITE, "POST",
     "/projects/{project}/versions/{version}/environment/rebuild", 200, OP_BODY_NONE,
     ROLE_DEPLOY},
    {"spiders.list", NULL, op_spiders_list, p_spiders, 0, "GET", "/projects/{project}/spiders",
     200, OP_BODY_NONE, ROLE_READ},
    {"scrapers.list", NULL, op_scrapers_list, p_none, 0, "GET", "/spiders", 200,
     OP_BODY_NONE, ROLE_READ},
    {"jobs.list", NULL, op_jobs_list, p_jobs_list, 0, "GET", "/jobs", 200,
     OP_BODY_NONE, ROLE_READ},
    {"jobs.create", NULL, op_jobs_create, p_jobs_create, OP_WRITE, "POST", "/jobs",
     201, OP_BODY_JSON, ROLE_RUN},
    {"jobs.counts", NULL, op_jobs_counts, p_jobs_counts, 0, "GET", "/jobs/counts", 200,
     OP_BODY_NONE, ROLE_READ},
    {"stats.throughput", NULL, op_stats_throughput, p_throughput, 0, "GET",
     "/stats/throughput", 200, OP_BODY_NONE, ROLE_READ},
    {"jobs.stats", NULL, op_jobs_stats, p_stats, 0, "GET", "/stats", 200, OP_BODY_NONE,
     ROLE_READ},
    {"jobs.get", NULL, op_jobs_get, p_job, 0, "GET", "/jobs/{id}", 200,
     OP_BODY_NONE, ROLE_READ},
    {"jobs.cancel", "kill_task", op_jobs_cancel, p_cancel, OP_WRITE, "POST", "/jobs/{id}/cancel",
     200, OP_BODY_JSON, ROLE_RUN},
    {"jobs.cancel_children", NULL, op_jobs_cancel, p_cancel, OP_WRITE, "POST",
     "/jobs/{id}/cancel-children", 200, OP_BODY_JSON, ROLE_RUN},
    {"jobs.pause", NULL, op_jobs_pause, p_job, OP_WRITE, "POST", "/jobs/{id}/pause", 200,
     OP_BODY_JSON, ROLE_RUN},
    {"jobs.resume", NULL, op_jobs_resume, p_job, OP_WRITE, "POST", "/jobs/{id}/resume", 200,
     OP_BODY_JSON, ROLE_RUN},
    {"jobs.meta", NULL, op_jobs_meta, p_job_meta, OP_WRITE, "PATCH", "/jobs/{id}/meta", 200,
     OP_BODY_JSON, ROLE_RUN},
    {"jobs.history", NULL, op_jobs_history, p_job_history, OP_WRITE, "POST",
     "/jobs/{id}/history", 200, OP_BODY_JSON, ROLE_RUN},
    {"jobs.history_batch", NULL, op_jobs_history_batch, p_jobs_history, OP_WRITE, "POST",
     "/jobs/history", 200, OP_BODY_JSON, ROLE_RUN},
    {"jobs.history_by_status", NULL, op_jobs_history_by_status, p_jobs_history_by, OP_WRITE,
     "POST", "/jobs/history/by-status", 200, OP_BODY_JSON, ROLE_RUN},
    {"jobs.states", NULL, op_jobs_states, p_jobs_states, 0, "POST", "/jobs/states", 200,
     OP_BODY_JSON, ROLE_READ},
    {"jobs.rerun", NULL, op_jobs_rerun, p_job, OP_WRITE, "POST", "/jobs/{id}/rerun", 201,
     OP_BODY_JSON, ROLE_RUN},
    {"jobs.multiprocess", NULL, op_jobs_multiprocess, p_jobs_multiprocess, OP_WRITE, "POST",
     "/jobs/multiprocess", 201, OP_BODY_JSON, ROLE_RUN},
    {"jobs.add_urls", NULL, op_jobs_add_urls, p_jobs_add_urls, OP_WRITE, "POST",
     "/jobs/{id}/urls", 200, OP_BODY_JSON, ROLE_RUN},
    {"jobs.test_run", NULL, op_jobs_test_run, p_jobs_test_run, OP_WRITE, "POST", "/jobs/test",
     201, OP_BODY_JSON, ROLE_RUN},
    {"jobs.log", NULL, op_jobs_log, p_tail, 0, "GET", "/jobs/{id}/log", 200,
     OP_BODY_NONE, ROLE_READ},
    {"jobs.items", NULL, op_jobs_items, p_tail, 0, "GET", "/jobs/{id}/items", 200, OP_BODY_NONE, ROLE_READ},
    {"schedules.list", NULL, op_schedules_list, p_page, 0, "GET", "/schedules", 200,
     OP_BODY_NONE, ROLE_READ},
    {"schedules.create", NULL, op_schedules_create, p_schedule_create, OP_WRITE,
     "POST", "/schedules", 201, OP_BODY_JSON, ROLE_RUN},
    {"schedules.preview", NULL, op_schedules_preview, p_schedule_preview, 0, "GET",
     "/schedules/preview", 200, OP_BODY_NONE, ROLE_READ},
    {"schedules.next_all", NULL, op_schedules_next_all, p_sched_next_all, 0, "GET",
     "/schedules/next", 200, OP_BODY_NONE, ROLE_READ},
    {"runs.missed", NULL, op_runs_missed, p_runs_missed, 0, "GET", "/runs/missed", 200,
     OP_BODY_NONE, ROLE_READ},
    {"schedules.get", NULL, op_schedules_get, p_schedule, 0, "GET",
     "/schedules/{schedule}", 200, OP_BODY_NONE, ROLE_READ},
    {"schedules.update", NULL, op_schedules_update, p_schedule_update, OP_WRITE,
     "PATCH", "/schedules/{schedule}", 200, OP_BODY_JSON, ROLE_RUN},
    {"schedules.delete", NULL, op_schedules_delete, p_schedule, OP_WRITE, "DELETE",
     "/schedules/{schedule}", 204, OP_BODY_NONE, ROLE_RUN},
    {"schedules.pause", NULL, op_schedules_pause, p_schedule_pause, OP_WRITE, "POST",
     "/schedules/{schedule}/pause", 200, OP_BODY_JSON, ROLE_RUN},
    {"schedules.resume", NULL, op_schedules_pause, p_schedule, OP_WRITE, "POST",
     "/schedules/{schedule}/resume", 200, OP_BODY_JSON, ROLE_RUN},
    {"schedules.health", NULL, op_health_get, p_schedule, 0, "GET",
     "/schedules/{schedule}/health", 200, OP_BODY_NONE, ROLE_READ},
    {"schedules.health_set", NULL, op_health_set, p_health_schedule, OP_WRITE, "PUT",
     "/schedules/{schedule}/health", 200, OP_BODY_JSON, ROLE_RUN},
    {"projects.health", NULL, op_health_get, p_project, 0, "GET", "/projects/{project}/health",
     200, OP_BODY_NONE, ROLE_READ},
    {"projects.health_set", NULL, op_health_set, p_health_project, OP_WRITE, "PUT",
     "/projects/{project}/health", 200, OP_BODY_JSON, ROLE_RUN},
    {"schedules.run", NULL, op_schedules_run, p_schedule_run, OP_WRITE, "POST",
     "/schedules/{schedule}/run", 201, OP_BODY_JSON, ROLE_RUN},
    {"schedules.runs", NULL, op_schedules_runs, p_runs, 0, "GET", "/schedules/{schedule}/runs",
     200, OP_BODY_NONE, ROLE_READ},
    {"schedules.next", NULL, op_schedules_next, p_sched_next, 0, "GET",
     "/schedules/{schedule}/next", 200, OP_BODY_NONE, ROLE_READ},
    {"schedules.backfill", NULL, op_schedules_backfill, p_backfill, OP_WRITE, "POST",
     "/schedules/{schedule}/backfill", 201, OP_BODY_JSON, ROLE_RUN},
    {"backfills.list", NULL, op_backfills_list, p_none, 0, "GET", "/backfills", 200,
     OP_BODY_NONE, ROLE_READ},
    {"backfills.get", NULL, op_backfills_get, p_backfill_id, 0, "GET", "/backfills/{id}", 200,
     OP_BODY_NONE, ROLE_READ},
    {"backfills.pause", NULL, op_backfills_pause, p_backfill_id, OP_WRITE, "POST",
     "/backfills/{id}/pause", 200, OP_BODY_JSON, ROLE_RUN},
    {"backfills.resume", NULL, op_backfills_pause, p_backfill_id, OP_WRITE, "POST",
     "/backfills/{id}/resume", 200, OP_BODY_JSON, ROLE_RUN},
    {"backfills.cancel", NULL, op_backfills_cancel, p_backfill_id, OP_WRITE, "POST",
     "/backfills/{id}/cancel", 200, OP_BODY_JSON, ROLE_RUN},
    {"calendars.list", NULL, op_calendars_list, p_none, 0, "GET", "/calendars", 200,
     OP_BODY_NONE, ROLE_READ},
    {"calendars.create", NULL, op_calendars_put, p_calendar_put, OP_WRITE, "POST", "/calendars",
     201, OP_BODY_JSON, ROLE_RUN},
    {"calendars.get", NULL, op_calendars_get, p_calendar, 0, "GET", "/calendars/{name}", 200,
     OP_BODY_NONE, ROLE_READ},
    {"calendars.update", NULL, op_calendars_put, p_calendar_put, OP_WRITE, "PUT",
     "/calendars/{name}", 200, OP_BODY_JSON, ROLE_RUN},
    {"calendars.delete", NULL, op_calendars_delete, p_calendar, OP_WRITE, "DELETE",
     "/calendars/{name}", 204, OP_BODY_NONE, ROLE_RUN},
    {"events.list", NULL, op_events_list, p_events, 0, "GET", "/events", 200, OP_BODY_NONE, ROLE_READ},
    {"queues.list", NULL, op_queues_list, p_none, 0, "GET", "/queues", 200, OP_BODY_NONE, ROLE_READ},
    {"queues.get", NULL, op_queues_get, p_queue, 0, "GET", "/queues/{name}", 200, OP_BODY_NONE, ROLE_READ},
    {"queues.set", NULL, op_queues_set, p_queue_set, OP_WRITE, "PUT", "/queues/{name}", 200,
     OP_BODY_JSON, ROLE_RUN},
    {"queues.delete", NULL, op_queues_delete, p_queue, OP_WRITE, "DELETE", "/queues/{name}", 200,
     OP_BODY_NONE, ROLE_DEPLOY},
    {"queues.put", NULL, op_queues_put, p_queue_put, OP_WRITE, "POST", "/queues/{name}/put", 200,
     OP_BODY_JSON, ROLE_RUN},
    {"queues.take", NULL, op_queues_take, p_queue_take, OP_WRITE, "POST", "/queues/{name}/take",
     200, OP_BODY_JSON, ROLE_RUN},
    {"queues.ack", NULL, op_queues_ack, p_queue_ack, OP_WRITE, "POST", "/queues/{name}/ack", 200,
     OP_BODY_JSON, ROLE_RUN},
    {"queues.nack", NULL, op_queues_ack, p_queue_nack, OP_WRITE, "POST", "/queues/{name}/nack",
     200, OP_BODY_JSON, ROLE_RUN},
    {"queues.extend", NULL, op_queues_ack, p_queue_extend, OP_WRITE, "POST",
     "/queues/{name}/extend", 200, OP_BODY_JSON, ROLE_RUN},
    {"queues.pause", NULL, op_queues_pause, p_queue, OP_WRITE, "POST", "/queues/{name}/pause",
     200, OP_BODY_JSON, ROLE_RUN},
    {"queues.resume", NULL, op_queues_pause, p_queue, OP_WRITE, "POST", "/queues/{name}/resume",
     200, OP_BODY_JSON, ROLE_RUN},
    {"queues.items", NULL, op_queues_items, p_queue_items, 0, "GET", "/queues/{name}/items", 200,
     OP_BODY_NONE, ROLE_READ},
    {"queues.keys", NULL, op_queues_keys, p_queue_keys, 0, "GET", "/queues/{name}/keys", 200,
     OP_BODY_NONE, ROLE_READ},
    {"queues.requeue", NULL, op_queues_requeue, p_queue_requeue, OP_WRITE, "POST",
     "/queues/{name}/requeue", 200, OP_BODY_JSON, ROLE_RUN},
    {"queues.purge", NULL, op_queues_requeue, p_queue_purge, OP_WRITE, "POST",
     "/queues/{name}/purge", 200, OP_BODY_JSON, ROLE_DEPLOY},
    /* ops_auth.c: a user makes its own tokens; admins manage all */
    {"auth.whoami", NULL, op_auth_whoami, p_none, 0, "GET", "/auth/whoami", 200, OP_BODY_NONE,
     ROLE_READ},
    {"tokens.list", NULL, op_tokens_list, p_none, 0, "GET", "/tokens", 200, OP_BODY_NONE,
     ROLE_READ},
    {"tokens.create", NULL, op_tokens_create, p_token_create, OP_WRITE, "POST", "/tokens", 201,
     OP_BODY_JSON, ROLE_READ},
    {"tokens.delete", NULL, op_tokens_delete, p_token, OP_WRITE, "DELETE", "/tokens/{id}", 204,
     OP_BODY_NONE, ROLE_READ},
    {"users.list", NULL, op_users_list, p_none, 0, "GET", "/users", 200, OP_BODY_NONE,
     ROLE_ADMIN},
    {"users.create", NULL, op_users_create, p_user_create, OP_WRITE, "POST", "/users", 201,
     OP_BODY_JSON, ROLE_ADMIN},
    {"users.update", NULL, op_users_update, p_user_update, OP_WRITE, "PATCH", "/users/{name}",
     200, OP_BODY_JSON, ROLE_ADMIN},
    {"users.delete", NULL, op_users_delete, p_user, OP_WRITE, "DELETE", "/users/{name}", 204,
     OP_BODY_NONE, ROLE_ADMIN},
    /* ops_accounts.c: admins manage accounts; a member reads its own */
    {"accounts.list", NULL, op_accounts_list, p_none, 0, "GET", "/accounts", 200, OP_BODY_NONE,
     ROLE_READ},
    {"accounts.create", NULL, op_accounts_create, p_account_create, OP_WRITE, "POST",
     "/accounts", 201, OP_BODY_JSON, ROLE_ADMIN},
    {"accounts.get", NULL, op_accounts_get, p_account, 0, "GET", "/accounts/{account}", 200,
     OP_BODY_NONE, ROLE_READ},
    {"accounts.update", NULL, op_accounts_update, p_account_update, OP_WRITE, "PATCH",
     "/accounts/{account}", 200, OP_BODY_JSON, ROLE_ADMIN},
    {"accounts.delete", NULL, op_accounts_delete, p_account, OP_WRITE, "DELETE",
     "/accounts/{account}", 204, OP_BODY_NONE, ROLE_ADMIN},
    {"accounts.assign", NULL, op_accounts_member, p_account_member, OP_WRITE, "POST",
     "/accounts/{account}/assign", 200, OP_BODY_JSON, ROLE_ADMIN},
    {"accounts.unassign", NULL, op_accounts_member, p_account_member, OP_WRITE, "POST",
     "/accounts/{account}/unassign", 200, OP_BODY_JSON, ROLE_ADMIN},
    {"accounts.upcoming", NULL, op_accounts_upcoming, p_account_upcoming, 0, "GET",
     "/accounts/{account}/upcoming", 200, OP_BODY_NONE, ROLE_READ},
};
const size_t op_count = sizeof(op_table) / sizeof(op_table[0]);

const op_def_t *op_find(const char *name) {
  for (size_t i = 0; i < op_count; i++)
    if (!strcmp(op_table[i].name, name) || (op_table[i].alias && !strcmp(op_table[i].alias, name)))
      return &op_table[i];
  return NULL;
}

const op_param_t *op_param(const op_def_t *def, const char *name) {
  for (const op_param_t *p = def->params; p->name; p++)
    if (!strcmp(p->name, name)) return p;
  return NULL;
}

const char *op_type_name(op_type_t t) {
  switch (t) {
  case OPT_STR: return "string";
  case OPT_INT: return "integer";
  case OPT_NUM: return "number";
  case OPT_BOOL: return "boolean";
  case OPT_OBJ: return "object of strings";
  case OPT_STRS: return "array of strings";
  case OPT_ID: return "job id (integer or string)";
  case OPT_BLOB: return "file";
  case OPT_ANY: return "JSON value";
  }
  return "value";
}

/* ---- validation ---- */

static int bad(char *err, size_t errlen, json_t **details, const char *field, int code,
               const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int bad(char *err, size_t errlen, json_t **details, const char *field, int code,
               const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  *details = json_pack("{s:s}", "field", field);
  return code;
}

static int is_digits(const char *s) { return *s && strspn(s, "0123456789") == strlen(s); }

/* Checks one present value; may replace it in params (normalisation). */
static int check_value(const op_param_t *p, json_t *params, json_t *v, char *err, size_t errlen,
                       json_t **details) {
  char why[256];
  switch (p->type) {
  case OPT_STR:
    if (!json_is_string(v)) break;
    if (strlen(json_string_value(v)) != json_string_length(v))
      return bad(err, errlen, details, p->name, SPD_EBADPARAM,
                 "'%s' must not contain a NUL character", p->name);
    if ((p->flags & OPF_NAME) && !name_valid(p->name, json_string_value(v), why, sizeof(why)))
      return bad(err, errlen, details, p->name, SPD_EBADPARAM, "%s", why);
    return 0;
  case OPT_INT:
    if (!json_is_integer(v)) break;
    if (p->max > p->min && (json_integer_value(v) < p->min || json_integer_value(v) > p->max))
      return bad(err, errlen, details, p->name, SPD_EBADPARAM,
                 "'%s' must be between %lld and %lld", p->name, p->min, p->max);
    return 0;
  case OPT_NUM:
    if (!json_is_number(v)) break;
    if (!isfinite(json_number_value(v)))
      return bad(err, errlen, details, p->name, SPD_EBADPARAM, "'%s' must be finite", p->name);
    return 0;
  case OPT_BOOL:
    if (!json_is_boolean(v)) break;
    return 0;
  case OPT_OBJ: {
    if (!json_is_object(v)) break;
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
      if (!json_is_string(x))
        return bad(err, errlen, details, p->name, SPD_EBADPARAM,
                   "'%s.%s' must be a string, not %s", p->name, k,
                   json_is_object(x) ? "an object" : json_is_array(x) ? "an array" : "a number");
    }
    return 0;
  }
  case OPT_STRS: {
    json_t *arr = NULL;
    if (json_is_string(v)) {
      arr = json_array();
      const char *s = json_string_value(v);
      while (*s) {
        size_t n = strcspn(s, ",");
        if (n) json_array_append_new(arr, json_stringn(s, n));
        s += n + (s[n] == ',');
      }
      json_object_set_new(params, p->name, arr);
      return 0;
    }
    if (!json_is_array(v)) break;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
      if (!json_is_string(x))
        return bad(err, errlen, details, p->name, SPD_EBADPARAM,
                   "'%s' must be an array of strings", p->name);
    }
    return 0;
  }
  case OPT_ID:
    if (json_is_integer(v)) {
      if (json_integer_value(v) < 1)
        return bad(err, errlen, details, p->name, SPD_EBADPARAM, "'%s' must be at least 1",
                   p->name);
      char buf[32];
      snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
      json_object_set_new(params, p->name, json_string(buf));
      return 0;
    }
    if (!json_is_string(v)) break;
    if (!name_valid("job id", json_string_value(v), why, sizeof(why)))
      return bad(err, errlen, details, p->name, SPD_EBADPARAM, "%s", why);
    return 0;
  case OPT_BLOB:
    if (!json_is_string(v)) break;
    return 0;
  case OPT_ANY:
    return 0;
  }
  return bad(err, errlen, details, p->name, SPD_EBADPARAM, "'%s' must be %s%s", p->name,
             p->type == OPT_INT || p->type == OPT_OBJ || p->type == OPT_ID ? "an " : "a ",
             p->type == OPT_BLOB ? "base64 string" : op_type_name(p->type));
}

int op_validate(const op_def_t *def, json_t *params, int have_blob, char *err, size_t errlen,
                json_t **details) {
  const char *k;
  json_t *v;
  *details = NULL;
  json_object_foreach(params, k, v) {
    if (op_param(def, k)) continue;
    char expected[256] = "";
    size_t w = 0;
    for (const op_param_t *p = def->params; p->name && w < sizeof(expected); p++)
      w += (size_t)snprintf(expected + w, sizeof(expected) - w, "%s%s", w ? ", " : "", p->name);
    return bad(err, errlen, details, k, SPD_EBADPARAM, "unknown field '%s' (%s%s)", k,
               w ? "expected one of: " : "this takes no parameters", expected);
  }
  for (const op_param_t *p = def->params; p->name; p++) {
    v = json_object_get(params, p->name);
    if (v && json_is_null(v) && !(p->flags & OPF_REQUIRED)) {
      json_object_del(params, p->name); /* null = absent: clients send {"version": null} */
      continue;
    }
    if (!v && !(p->type == OPT_BLOB && have_blob)) {
      if (p->flags & OPF_REQUIRED)
        return bad(err, errlen, details, p->name, SPD_EMISSING, "'%s' is required", p->name);
      continue;
    }
    if (v && p->type == OPT_BLOB && have_blob)
      return bad(err, errlen, details, p->name, SPD_EBADPARAM,
                 "'%s' is given twice (as the body and as a field)", p->name);
    int rc = v ? check_value(p, params, v, err, errlen, details) : 0;
    if (rc) return rc;
  }
  return 0;
}

json_t *op_coerce(const op_param_t *p, const char *s, char *err, size_t errlen) {
  char *end = NULL;
  switch (p->type) {
  case OPT_STR:
  case OPT_STRS:
  case OPT_ID:
  case OPT_ANY:
    return json_string(s);
  case OPT_INT: {
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno && (is_digits(s) || (s[0] == '-' && is_digits(s + 1))))
      return json_integer(v);
    snprintf(err, errlen, "'%s' must be an integer, not '%.64s'", p->name, s);
    return NULL;
  }
  case OPT_NUM: {
    double v = strtod(s, &end);
    if (*s && !*end && isfinite(v)) return json_real(v);
    snprintf(err, errlen, "'%s' must be a number, not '%.64s'", p->name, s);
    return NULL;
  }
  case OPT_BOOL:
    if (!strcmp(s, "true") || !strcmp(s, "1")) return json_true();
    if (!strcmp(s, "false") || !strcmp(s, "0")) return json_false();
    snprintf(err, errlen, "'%s' must be true or false, not '%.64s'", p->name, s);
    return NULL;
  case OPT_OBJ:
    snprintf(err, errlen, "'%s' is an object: send it in a JSON body", p->name);
    return NULL;
  case OPT_BLOB:
    snprintf(err, errlen, "'%s' must be sent as the request body or a multipart file", p->name);
    return NULL;
  }
  return NULL;
}

int op_parse_json(const char *body, size_t len, size_t max, int depth, json_t **out, char *err,
                  size_t errlen) {
  *out = NULL;
  if (len > max) {
    snprintf(err, errlen, "the JSON body is %zu bytes; the limit is %zu", len, max);
    return SPD_ETOOBIG;
  }
  /* jansson recurses once per level (up to 2048): refuse deep nesting
   * before it parses anything. */
  int d = 0, in_str = 0;
  for (size_t i = 0; i < len; i++) {
    char ch = body[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') in_str = 0;
    } else if (ch == '"') {
      in_str = 1;
    } else if (ch == '[' || ch == '{') {
      if (++d > depth) {
        snprintf(err, errlen, "the JSON body is nested deeper than %d levels", depth);
        return SPD_EBADJSON;
      }
    } else if (ch == ']' || ch == '}') {
      d--;
    }
  }
  json_error_t je;
  *out = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!*out) {
    snprintf(err, errlen, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
             je.column);
    return SPD_EBADJSON;
  }
  return 0;
}

/* ---- cursors and base64 ---- */

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static int b64val(unsigned char ch, int url) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == (url ? '-' : '+')) return 62;
  if (ch == (url ? '_' : '/')) return 63;
  return -1;
}

/* Decodes n base64 characters (no padding, no white space) into out. */
static int b64_decode_raw(const char *s, size_t n, int url, unsigned char *out, size_t *outlen) {
  if (n % 4 == 1) return -EINVAL;
  uint32_t acc = 0;
  int bits = 0;
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    int v = b64val((unsigned char)s[i], url);
    if (v < 0) return -EINVAL;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[w++] = (unsigned char)(acc >> bits);
    }
  }
  if (bits && (acc & ((1u << bits) - 1))) return -EINVAL; /* non-canonical tail */
  *outlen = w;
  return 0;
}

int op_base64_decode(const char *s, size_t n, unsigned char **out, size_t *outlen) {
  while (n && s[n - 1] == '=') n--;
  *out = malloc(n / 4 * 3 + 3);
  if (!*out) return -ENOMEM;
  int rc = b64_decode_raw(s, n, 0, *out, outlen);
  if (rc) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

void op_cursor_encode(int64_t last_id, uint32_t fingerprint, char out[24]) {
  unsigned char b[12];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)last_id >> (56 - 8 * i));
  for (int i = 0; i < 4; i++) b[8 + i] = (unsigned char)(fingerprint >> (24 - 8 * i));
  size_t w = 0;
  for (int i = 0; i < 12; i += 3) {
    uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
    for (int k = 3; k >= 0; k--) out[w++] = b64url[(v >> (6 * k)) & 63];
  }
  out[w] = '\0';
}

int op_cursor_decode(const char *s, int64_t *last_id, uint32_t *fingerprint) {
  unsigned char b[12];
  size_t n = 0;
  if (strlen(s) != 16 || b64_decode_raw(s, 16, 1, b, &n) || n != 12) return -EINVAL;
  uint64_t id = 0;
  uint32_t fp = 0;
  for (int i = 0; i < 8; i++) id = id << 8 | b[i];
  for (int i = 8; i < 12; i++) fp = fp << 8 | b[i];
  if (id < 1 || id > INT64_MAX) return -EINVAL;
  *last_id = (int64_t)id;
  *fingerprint = fp;
  return 0;
}

/* ---- UTF-8 text of file bytes ---- */

/* Could buf[0..n) be the start of a valid sequence cut short? */
static int utf8_prefix(const unsigned char *s, size_t n) {
  size_t need = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (!need || n >= need) return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  return 1;
}

char *op_utf8_text(const char *buf, size_t n, int final, size_t *used, size_t *textlen) {
  char *out = malloc(n * 3 + 1); /* every byte may become U+FFFD */
  if (!out) return NULL;
  size_t r = 0, w = 0;
  while (r < n) {
    size_t k = utf8_sequence(buf + r, n - r);
    if (k) {
      memcpy(out + w, buf + r, k);
      w += k;
      r += k;
      continue;
    }
    if (!final && n - r < 4 && utf8_prefix((const unsigned char *)buf + r, n - r)) break;
    memcpy(out + w, "\xef\xbf\xbd", 3);
    w += 3;
    r++;
  }
  out[w] = '\0';
  *used = r;
  *textlen = w;
  return out;
}

/* ---- calls ---- */

static void call_free(op_call_t *c) {
  json_decref(c->params);
  json_decref(c->result);
  json_decref(c->details);
  job_release(&c->job);
  job_list_release(&c->list);
  free(c->egg_path);
  free(c->path);
  free(c->text);
  free(c->blob_owned);
  if (c->names) strv_free(c->names, c->nnames);
  if (c->mine) strv_free(c->mine, c->nmine);
  if (c->priv_free) c->priv_free(c->priv);
  free(c);
}

void op_ok(op_call_t *c, json_t *result) { op_ok_status(c, result, 0); }

void op_ok_result(op_call_t *c) {
  json_t *r = c->result;
  c->result = NULL;
  op_ok_status(c, r, 0);
}

void op_ok_status(op_call_t *c, json_t *result, int status) {
  op_result_t r = {0, result, NULL, NULL, status};
  c->reply(c->ud, &r);
  json_decref(result);
  call_free(c);
}

void op_fail(op_call_t *c, int code, json_t *details, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (!details) details = json_object();
  op_result_t r = {code ? code : -EIO, NULL, msg, details, 0};
  c->reply(c->ud, &r);
  json_decref(details);
  call_free(c);
}

int op_store_failed(op_call_t *c, int rc) {
  if (rc) op_fail(c, rc, NULL, "the store failed: %s", spd_strerror(rc));
  return rc != 0;
}

static void op_submit(op_call_t *c, int kind, int (*fn)(store_t *, void *),
                      void (*done)(void *, int)) {
  int rc = store_submit_as(c->app->store, kind, fn, c, done, c->who->actor, c->who->addr);
  if (rc) op_fail(c, SPD_ESHUTDOWN, NULL, "the daemon is shutting down");
}

static void op_read_now(void *ud) {
  op_call_t *c = ud;
  op_submit(c, STORE_READ, c->read_fn, c->read_done);
}

void op_store(op_call_t *c, int kind, int (*fn)(store_t *, void *), void (*done)(void *, int)) {
  if (kind == STORE_READ) {
    c->read_fn = fn;
    c->read_done = done;
    if (!flow_after_ends(&c->app->flow, op_read_now, c)) return;
  }
  op_submit(c, kind, fn, done);
}

/* "a,b" into {"a", "b"}; "" into none. */
static int split_projects(const char *list, char ***out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!*list) return 0;
  size_t cap = 1;
  for (const char *p = list; *p; p++) cap += *p == ',';
  char **v = calloc(cap, sizeof(*v));
  if (!v) return -ENOMEM;
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (len && !(v[(*n)++] = strndup(p, len))) {
      strv_free(v, *n);
      *n = 0;
      return -ENOMEM;
    }
    p += len + (p[len] == ',');
  }
  *out = v;
  return 0;
}

void op_names_keep_mine(op_call_t *c) {
  size_t kept = 0;
  for (size_t i = 0; i < c->nnames; i++) {
    if (principal_project_ok(c->who->projects, c->names[i])) c->names[kept++] = c->names[i];
    else free(c->names[i]);
  }
  c->nnames = kept;
}

void op_start(app_t *app, const op_def_t *def, json_t *params, const void *blob,
              size_t blob_len, http_req_t *req, op_reply_fn reply, void *ud) {
  op_call_t *c = calloc(1, sizeof(*c));
  if (!c) {
    op_result_t r = {-ENOMEM, NULL, "out of memory", NULL, 0};
    reply(ud, &r);
    json_decref(params);
    return;
  }
  job_init(&c->job);
  c->app = app;
  c->def = def;
  c->params = params ? params : json_object();
  c->reply = reply;
  c->ud = ud;
  c->req = req;
  if (!json_is_object(c->params)) {
    op_fail(c, SPD_EBADPARAM, NULL, "params must be an object of named parameters");
    return;
  }
  char err[512];
  json_t *details = NULL;
  int rc = op_validate(def, c->params, blob != NULL, err, sizeof(err), &details);
  if (rc) {
    op_fail(c, rc, details, "%s", err);
    return;
  }
  if ((def->flags & OP_WRITE) && app->stopping) {
    op_fail(c, SPD_ESHUTDOWN, NULL, "the daemon is shutting down");
    return;
  }
  c->who = auth_who(app, req);
  rc = strncmp(def->name, "queues.", 7)
           ? auth_allow(c->who, def->role, op_str(c, "project"), err, sizeof(err))
           : auth_allow_queue(c->who, def->role, op_str(c, "name"), err, sizeof(err));
  if (!rc && !strncmp(def->name, "queues.", 7))
    rc = auth_job_queue(app, c->who, op_str(c, "name"), err, sizeof(err));
  if (rc) {
    op_fail(c, rc, NULL, "%s", err);
    return;
  }
  if ((rc = split_projects(c->who->projects, &c->mine, &c->nmine))) {
    op_fail(c, rc, NULL, "out of memory");
    return;
  }
  for (const op_param_t *p = def->params; p->name; p++) {
    if (p->type != OPT_BLOB) continue;
    const json_t *v = json_object_get(c->params, p->name);
    if (blob) {
      c->blob = blob;
      c->blob_len = blob_len;
    } else if (v) {
      rc = op_base64_decode(json_string_value(v), json_string_length(v), &c->blob_owned,
                            &c->blob_len);
      if (rc) {
        op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", p->name),
                "'%s' is not valid base64", p->name);
        return;
      }
      c->blob = c->blob_owned;
    }
  }
  def->fn(c);
}

/* ---- parameters ---- */

const char *op_str(const op_call_t *c, const char *name) {
  return json_string_value(json_object_get(c->params, name));
}

long long op_int(const op_call_t *c, const char *name, long long dflt) {
  const json_t *v = json_object_get(c->params, name);
  return v ? (long long)json_integer_value(v) : dflt;
}

double op_num(const op_call_t *c, const char *name, double dflt) {
  const json_t *v = json_object_get(c->params, name);
  return v ? json_number_value(v) : dflt;
}

const json_t *op_json(const op_call_t *c, const char *name) {
  return json_object_get(c->params, name);
}

/* ---- jobs ---- */

json_t *op_iso_time(int64_t ms) {
  if (!ms) return json_null();
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[40];
  size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
  return json_string(buf);
}

json_t *op_str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

int op_check_pairs(op_call_t *c, const char *field) {
  static const char *const reserved[] = {"_job", "_version", "settings", "name", NULL};
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)op_json(c, field), k, v) {
    if (!*k || strchr(k, '=')) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", field),
              "'%s' keys must be non-empty and without '=' ('%s')", field, k);
      return 1;
    }
    for (int i = 0; !strcmp(field, "args") && reserved[i]; i++)
      if (!strcmp(k, reserved[i])) {
        op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", field),
                "'args.%s' is reserved: use the job's own fields", k);
        return 1;
      }
  }
  return 0;
}

json_t *op_render_job(const job_t *j) {
  json_t *o = json_object();
  json_object_set_new(o, "id", json_integer(j->id));
  json_object_set_new(o, "job", json_string(j->jobid));
  json_object_set_new(o, "project", json_string(j->project));
  json_object_set_new(o, "spider", json_string(j->spider));
  json_object_set_new(o, "version", op_str_or_null(j->version));
  json_object_set_new(o, "state", json_string(job_state_name(j->state)));
  json_object_set_new(o, "priority", json_real(j->priority));
  json_object_set_new(o, "args", j->args ? json_incref(j->args) : json_object());
  json_object_set_new(o, "settings", j->settings ? json_incref(j->settings) : json_object());
  json_object_set_new(o, "node", op_str_or_null(j->node));
  json_object_set_new(o, "pid", j->pid ? json_integer(j->pid) : json_null());
  json_object_set_new(o, "created_at", op_iso_time(j->created_ms));
  json_object_set_new(o, "started_at", op_iso_time(j->start_ms));
  json_object_set_new(o, "ended_at", op_iso_time(j->end_ms));
  json_object_set_new(o, "exit_code", j->exit_code >= 0 ? json_integer(j->exit_code) : json_null());
  json_object_set_new(o, "signal", j->term_signal ? json_integer(j->term_signal) : json_null());
  json_object_set_new(o, "stats", j->stats ? json_incref(j->stats) : json_null());
  /* The same instants as integers, for programs that compute with them. */
  json_object_set_new(o, "created_ms", json_integer(j->created_ms));
  json_object_set_new(o, "started_ms", j->start_ms ? json_integer(j->start_ms) : json_null());
  json_object_set_new(o, "ended_ms", j->end_ms ? json_integer(j->end_ms) : json_null());
  json_object_set_new(o, "schedule_id", j->schedule_id ? json_integer(j->schedule_id) : json_null());
  json_object_set_new(o, "parent_id", j->parent_id ? json_integer(j->parent_id) : json_null());
  json_object_set_new(o, "retry_of", j->retry_of ? json_integer(j->retry_of) : json_null());
  json_object_set_new(o, "attempt", json_integer(j->attempt));
  json_object_set_new(o, "max_retries", json_integer(j->max_retries));
  json_object_set_new(o, "timeout", j->timeout_ms ? json_real(j->timeout_ms / 1000.0) : json_null());
  json_object_set_new(o, "not_before", op_iso_time(j->not_before_ms));
  json_object_set_new(o, "heartbeat_at", op_iso_time(j->heartbeat_ms));
  json_object_set_new(o, "unique_key", op_str_or_null(j->unique_key));
  json_object_set_new(o, "meta", j->meta ? json_deep_copy(j->meta) : json_object());
  json_object_set_new(o, "note", op_str_or_null(j->note));
  json_object_set_new(o, "test", json_boolean(j->test));
  json_object_set_new(o, "health", op_str_or_null(j->health));
  json_object_set_new(o, "health_reasons",
                      j->health_reasons ? json_incref(j->health_reasons) : json_array());
  json_object_set_new(o, "segments", j->segments ? json_deep_copy(j->segments) : json_array());
  json_object_set_new(o, "after", j->after ? json_deep_copy(j->after) : json_array());
  if (j->corrected)
    json_object_set_new(o, "original_state", json_string(job_state_name(j->original_state)));
  return o;
}

/* A job of a project the caller may not see is, to it, no job at all. */
int op_job_resolve(store_t *s, op_call_t *c) {
  const char *id = op_str(c, "id");
  const char *mine = c->who ? c->who->projects : "";
  int rc;
  if (strlen(id) <= 18 && is_digits(id)) {
    rc = store_job_get(s, strtoll(id, NULL, 10), &c->job);
    if (rc == 0 && !principal_project_ok(mine, c->job.project)) rc = -ENOENT;
    if (rc != -ENOENT) return rc;
    job_release(&c->job);
    job_init(&c->job);
  }
  job_list_t l = {0};
  job_filter_t f = {.jobid = id};
  rc = store_jobs_list(s, &f, &l);
  size_t kept = 0;
  for (size_t i = 0; rc == 0 && i < l.n; i++) {
    if (principal_project_ok(mine, l.v[i].project)) {
      job_t t = l.v[kept];
      l.v[kept++] = l.v[i];
      l.v[i] = t;
    }
  }
  for (size_t i = kept; i < l.n; i++) job_release(&l.v[i]);
  l.n = kept;
  if (rc == 0 && l.n == 0) rc = SPD_ENOJOB;
  if (rc == 0 && l.n == 1) {
    c->job = l.v[0];
    job_init(&l.v[0]);
  } else if (rc == 0) {
    json_t *ids = json_array();
    for (size_t i = 0; i < l.n; i++) json_array_append_new(ids, json_integer(l.v[i].id));
    c->details = json_pack("{s:o}", "ids", ids);
    c->num[7] = (int64_t)l.n;
    rc = SPD_ECONFLICT;
  }
  job_list_release(&l);
  return rc;
}

int op_spider_listed(op_call_t *c, int rc, char *const *names, size_t n, const char *error) {
  const char *project = c->job.project, *spider = c->job.spider;
  if (rc) {
    op_fail(c, SPD_ERUNNER, json_pack("{s:s}", "stderr", error ? error : spd_strerror(rc)),
            "the spiders of project '%s' could not be listed", project);
    return -1;
  }
  for (size_t i = 0; i < n; i++)
    if (!strcmp(names[i], spider)) return 0;
  op_fail(c, SPD_ENOSPIDER, json_pack("{s:s,s:s}", "project", project, "spider", spider),
          "spider '%s' not found in project '%s'", spider, project);
  return -1;
}

void op_fail_resolve(op_call_t *c, int rc) {
  const char *id = op_str(c, "id");
  json_t *details = c->details;
  c->details = NULL;
  if (rc == SPD_ENOJOB)
    op_fail(c, rc, json_pack("{s:s}", "id", id), "job '%s' not found", id);
  else if (rc == SPD_ECONFLICT)
    op_fail(c, rc, details, "job id '%s' names %lld jobs: use the numeric id", id,
            (long long)c->num[7]);
  else
    op_fail(c, rc, details, "the store failed: %s", spd_strerror(rc));
}
