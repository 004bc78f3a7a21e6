/* What the client sub-commands print: times in local time, an API
 * object's members as text, plain-text tables, and the one printer of an
 * API list as a table (fmt_json_table) or of an object as "label value"
 * lines (fmt_json_fields) that every command uses.
 *
 * Ownership: a fmt_table_t owns copies of every cell it is given;
 * fmt_table_release() frees them. The printers keep nothing.
 */
#ifndef SPIDERD_CLI_FORMAT_H
#define SPIDERD_CLI_FORMAT_H

#include <jansson.h>
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

/* ---- an API object's members as text; each writes "" (printed "-") when
 * the member is absent or null, and truncates to n bytes ---- */

/* A cell made from member key of o. */
typedef void (*fmt_cell_fn)(const json_t *o, const char *key, char *buf, size_t n);

/* Strings as they are, numbers without a useless ".0", true/false as
 * yes/no, anything else as compact JSON. */
void fmt_field(const json_t *o, const char *key, char *buf, size_t n);
/* Milliseconds since the epoch, in local time. */
void fmt_ms_field(const json_t *o, const char *key, char *buf, size_t n);
/* An ISO 8601 time, in local time (as sent if unreadable). */
void fmt_iso_field(const json_t *o, const char *key, char *buf, size_t n);
/* An object of strings as "k=v, k=v". */
void fmt_pairs_field(const json_t *o, const char *key, char *buf, size_t n);
/* By the member: "*_ms" as fmt_ms_field, "*_at" as fmt_iso_field, an
 * object as fmt_pairs_field, an empty array as "", else fmt_field. */
void fmt_auto_field(const json_t *o, const char *key, char *buf, size_t n);

/* ---- the printers ---- */

typedef struct fmt_col {
  const char *label; /* the column's header, or the line's label */
  const char *key;   /* the member shown (passed to cell; may be NULL for it) */
  fmt_cell_fn cell;  /* NULL: fmt_auto_field */
} fmt_col_t;

#define FMT_NCOLS_MAX 16
#define FMT_CELL_MAX 1024 /* bytes of one cell, its NUL included */

/* Prints the objects rows[from...] (a JSON array) as a table of ncols
 * (at most FMT_NCOLS_MAX) columns under their labels, as fmt_table_print
 * does; indent goes before every line. Returns 0, -EINVAL or -ENOMEM
 * (then nothing is printed). */
int fmt_json_table(FILE *out, const json_t *rows, size_t from, const fmt_col_t *cols,
                   size_t ncols, const char *indent);

/* Prints one line per column for the object o: its label padded to width
 * characters, a space, and the cell ("-" when empty). */
void fmt_json_fields(FILE *out, const json_t *o, const fmt_col_t *cols, size_t ncols,
                     int width);

#endif
