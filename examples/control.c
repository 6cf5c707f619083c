/* control.c — giving memory back: free a large working set, then return
 * what HAKMEM still keeps cached to the OS at once, and watch the figures. */
#include <hakmem.h>

#include <stdio.h>
#include <string.h>

static unsigned long long committed_kib(void) {
  hak_stats_t st = HAK_STATS_INIT;
  hak_stats_get(&st);
  return (unsigned long long)st.memory.committed >> 10;
}

int main(void) {
  static void *b[4096];
  for (int i = 0; i < 4096; i++) {
    b[i] = hak_malloc(16384);
    memset(b[i], 1, 16384);
  }
  printf("after writing 64 MiB: committed %llu KiB\n", committed_kib());
  for (int i = 0; i < 4096; i++) hak_free(b[i]);
  printf("after freeing it:     committed %llu KiB\n", committed_kib());
  /* Collect other threads' frees into every heap and purge, keeping the
   * mappings (here there is one thread: it purges what the free left). */
  int collected = hak_collect(false);
  printf("after hak_collect (%d): committed %llu KiB\n", collected, committed_kib());
  int released = hak_trim(); /* the same, and unmap empty segments and cached huge mappings */
  printf("after hak_trim (%d):   committed %llu KiB\n", released, committed_kib());
  return 0;
}
