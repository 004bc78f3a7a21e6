/* libpq opened when a PostgreSQL store is opened instead of linked. Linked,
 * libpq and what it pulls in (libssl, libcrypto, Kerberos, LDAP, SASL) keep
 * ~2.7 MB of every daemon resident, also one that runs on SQLite or Redis.
 *
 * Include this instead of <libpq-fe.h> (store/pg/internal.h does): the PQ*
 * names below then call through pointers, so the backend reads as plain
 * libpq and the compiler still checks every call against libpq-fe.h. Call
 * pq_lazy_load() (thread-safe, idempotent) before the first of them: the
 * backend's open and watch_open do, before any connection exists. */
#ifndef SPIDERD_STORE_PG_PQ_LAZY_H
#define SPIDERD_STORE_PG_PQ_LAZY_H

#include <libpq-fe.h>
#include <stddef.h>

#define PQ_LAZY_FUNCS(X)                                                                      \
  X(PQclear) X(PQcmdStatus) X(PQcmdTuples) X(PQconnectdb) X(PQconsumeInput)                   \
  X(PQerrorMessage) X(PQexec) X(PQexecParams) X(PQexecPrepared) X(PQfinish) X(PQfreemem)      \
  X(PQgetisnull) X(PQgetlength) X(PQgetvalue) X(PQnotifies) X(PQntuples) X(PQprepare)         \
  X(PQresultErrorField) X(PQresultErrorMessage) X(PQresultStatus) X(PQsetNoticeProcessor)     \
  X(PQsetnonblocking) X(PQsocket) X(PQstatus)

#define PQ_LAZY_DECL(fn) extern __typeof__(fn) *lazy_##fn;
PQ_LAZY_FUNCS(PQ_LAZY_DECL)
#undef PQ_LAZY_DECL

#define PQclear (*lazy_PQclear)
#define PQcmdStatus (*lazy_PQcmdStatus)
#define PQcmdTuples (*lazy_PQcmdTuples)
#define PQconnectdb (*lazy_PQconnectdb)
#define PQconsumeInput (*lazy_PQconsumeInput)
#define PQerrorMessage (*lazy_PQerrorMessage)
#define PQexec (*lazy_PQexec)
#define PQexecParams (*lazy_PQexecParams)
#define PQexecPrepared (*lazy_PQexecPrepared)
#define PQfinish (*lazy_PQfinish)
#define PQfreemem (*lazy_PQfreemem)
#define PQgetisnull (*lazy_PQgetisnull)
#define PQgetlength (*lazy_PQgetlength)
#define PQgetvalue (*lazy_PQgetvalue)
#define PQnotifies (*lazy_PQnotifies)
#define PQntuples (*lazy_PQntuples)
#define PQprepare (*lazy_PQprepare)
#define PQresultErrorField (*lazy_PQresultErrorField)
#define PQresultErrorMessage (*lazy_PQresultErrorMessage)
#define PQresultStatus (*lazy_PQresultStatus)
#define PQsetNoticeProcessor (*lazy_PQsetNoticeProcessor)
#define PQsetnonblocking (*lazy_PQsetnonblocking)
#define PQsocket (*lazy_PQsocket)
#define PQstatus (*lazy_PQstatus)

/* Opens libpq.so.5 once. 0, or SPD_ECONFIG with what to install in err
 * (may be NULL). */
int pq_lazy_load(char *err, size_t errlen);

#endif
