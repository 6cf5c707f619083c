/* smaps_target.c — a process for test_smaps.py to inspect: writes 32 MiB in
 * 64 KiB blocks and 8 MiB in one huge block, says "ready <names>" (names: 1
 * if its mappings got their names, 0 if the kernel refused), then waits for
 * its standard input to close. Linked with libhakmem.so. */
#include "hakmem.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
  static void *b[512];
  for (int i = 0; i < 512; i++) {
    b[i] = hak_malloc(65536);
    if (!b[i]) return 1;
    memset(b[i], 1, 65536);
  }
  void *huge = hak_malloc(8 << 20);
  if (!huge) return 1;
  memset(huge, 2, 8 << 20);
  hak_stats_t st = HAK_STATS_INIT;
  hak_stats_get(&st);
  printf("ready %d\n", st.os.name > st.os.name_failed);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) {
  }
  for (int i = 0; i < 512; i++) hak_free(b[i]);
  hak_free(huge);
  return 0;
}
