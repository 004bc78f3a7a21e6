/* Uploaded project archives (store/eggs.c, store/marchive.c, and the
 * spiderd.json manifest of core/manifest.c), as addversion.json takes
 * them: the bytes are staged as an egg (a ZIP or a gzip stream), told
 * apart (marchive_kind), checked member by member from memory and from the
 * staged file, and, when the check passes, extracted for a job and the
 * extraction removed again. A body starting with '{' is also parsed as a
 * manifest on its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/manifest.h"
#include "fsutil.h"
#include "fuzz.h"
#include "store/eggs.h"
#include "store/marchive.h"

static void manifest_use(const manifest_t *m) {
  for (size_t i = 0; i < m->n; i++) {
    char **argv = manifest_argv(&m->spiders[i], "s");
    manifest_argv_free(argv);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 20) return 0;
  char eggs[512], root[512], err[1024];
  snprintf(eggs, sizeof(eggs), "%s/eggs", fuzz_tmpdir());
  snprintf(root, sizeof(root), "%s/projects", fuzz_tmpdir());
  manifest_t m;

  if (size && data[0] == '{') {
    if (!manifest_parse((const char *)data, size, &m, err, sizeof(err))) manifest_use(&m);
    manifest_release(&m);
  }

  marchive_kind_mem(data, size);
  if (!marchive_check_mem(data, size, &m, err, sizeof(err))) manifest_use(&m);
  manifest_release(&m);

  char *tmp = NULL;
  if (!eggs_stage(eggs, data, size, &tmp, err, sizeof(err))) {
    if (marchive_kind_file(tmp) == MARCHIVE_MANIFEST &&
        !marchive_check_file(tmp, &m, err, sizeof(err))) {
      manifest_release(&m);
      char *dir = NULL;
      if (!marchive_prepare(tmp, root, "p", &m, &dir, err, sizeof(err))) manifest_use(&m);
      manifest_release(&m);
      free(dir);
      fs_rmtree(root);
    }
    eggs_discard(tmp);
    free(tmp);
  }
  return 0;
}
