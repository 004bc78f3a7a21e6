/* libarchive opened when a project archive (zip or tar.gz, store/marchive.h)
 * is first checked or extracted instead of linked. Linked, libarchive and
 * what it pulls in (libxml2 for xar, which brings ICU and libstdc++; lzma,
 * zstd, lz4, acl) keep ~2.3 MB of every daemon resident, also one that only
 * ever runs eggs.
 *
 * Include this instead of <archive.h> and <archive_entry.h>: the archive_*
 * names below then call through pointers, so marchive.c reads as plain
 * libarchive and the compiler still checks every call against its headers.
 * Call archive_lazy_load() (thread-safe, idempotent) before the first of
 * them. */
#ifndef SPIDERD_STORE_ARCHIVE_LAZY_H
#define SPIDERD_STORE_ARCHIVE_LAZY_H

#include <archive.h>
#include <archive_entry.h>
#include <stddef.h>

#define ARCHIVE_LAZY_FUNCS(X)                                                                 \
  X(archive_entry_filetype) X(archive_entry_hardlink) X(archive_entry_pathname)               \
  X(archive_entry_pathname_utf8) X(archive_entry_perm) X(archive_entry_size)                  \
  X(archive_entry_size_is_set) X(archive_entry_symlink) X(archive_error_string)               \
  X(archive_read_data) X(archive_read_free) X(archive_read_new) X(archive_read_next_header)   \
  X(archive_read_open_filename) X(archive_read_open_memory) X(archive_read_support_filter_gzip) \
  X(archive_read_support_format_tar) X(archive_read_support_format_zip)

#define ARCHIVE_LAZY_DECL(fn) extern __typeof__(fn) *lazy_##fn;
ARCHIVE_LAZY_FUNCS(ARCHIVE_LAZY_DECL)
#undef ARCHIVE_LAZY_DECL

#define archive_entry_filetype (*lazy_archive_entry_filetype)
#define archive_entry_hardlink (*lazy_archive_entry_hardlink)
#define archive_entry_pathname (*lazy_archive_entry_pathname)
#define archive_entry_pathname_utf8 (*lazy_archive_entry_pathname_utf8)
#define archive_entry_perm (*lazy_archive_entry_perm)
#define archive_entry_size (*lazy_archive_entry_size)
#define archive_entry_size_is_set (*lazy_archive_entry_size_is_set)
#define archive_entry_symlink (*lazy_archive_entry_symlink)
#define archive_error_string (*lazy_archive_error_string)
#define archive_read_data (*lazy_archive_read_data)
#define archive_read_free (*lazy_archive_read_free)
#define archive_read_new (*lazy_archive_read_new)
#define archive_read_next_header (*lazy_archive_read_next_header)
#define archive_read_open_filename (*lazy_archive_read_open_filename)
#define archive_read_open_memory (*lazy_archive_read_open_memory)
#define archive_read_support_filter_gzip (*lazy_archive_read_support_filter_gzip)
#define archive_read_support_format_tar (*lazy_archive_read_support_format_tar)
#define archive_read_support_format_zip (*lazy_archive_read_support_format_zip)

/* Opens libarchive.so.13 once. 0, or SPD_ECONFIG with what to install in
 * err (may be NULL). */
int archive_lazy_load(char *err, size_t errlen);

#endif
