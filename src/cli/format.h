/* What the client sub-commands print: times in local time and plain-text
 * tables.
 *
 * Ownership: a fmt_table_t owns copies of every cell it is given;
 * fmt_table_release() frees them.
 */
#ifndef SPIDERD_CLI_FORMAT_H
#define SPIDERD_CLI_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Reads an API time: "YYYY-MM-DDTHH:MM:SS[.fff...](Z|+HH:MM|-HH:MM)"
 * (also with ' ' for 'T' and "+HHMM"). A time without an offset is not
 * accepted: the API always sends one, and guessing a zone would print a
 * wrong time. Returns 0 or -EINVAL. */
int fmt_iso_to_ms(const char *iso, int64_t *ms);

/* "YYYY-MM-DD HH:MM:SS" in the process's local time zone (TZ). */
void fmt_local_time(int64_t ms, char *buf, size_t n);

/* "3d 4h", "2h 5m", "4m 10s", "12s" */
void fmt_duration(int64_t seconds, char *buf, size_t n);

typedef struct fmt_table {
  size_t ncols;
  size_t nrows; /* including the header row */
  size_t cap;
  char **cells; /* row-major, nrows * ncols */
} fmt_table_t;

/* Starts a table with the given column headers (ncols of them). */
int fmt_table_init(fmt_table_t *t, size_t ncols, const char *const *headers);

/* Adds a row of ncols cells; a NULL or empty cell prints as "-".
 * Returns 0 or -ENOMEM. */
int fmt_table_add(fmt_table_t *t, const char *const *cells);

/* Prints the columns left-aligned, two spaces apart, padded to the widest
 * cell counted in characters (UTF-8), with no trailing blanks. */
void fmt_table_print(const fmt_table_t *t, FILE *out);

void fmt_table_release(fmt_table_t *t);

#endif
