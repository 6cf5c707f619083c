/* stats.c — statistics from code: the versioned struct, the JSON document,
 * a reset, and glibc's malloc_info/mallinfo2 filled from the same figures. */
#include <hakmem.h>

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  void *blocks[1000];
  for (int i = 0; i < 1000; i++) blocks[i] = hak_malloc(64);

  hak_stats_t st = HAK_STATS_INIT; /* sets version and size: the library writes no more */
  if (hak_stats_get(&st) != 0) return 1;
  printf("mapped %llu KiB, in use %llu KiB, %llu mmap calls\n", (unsigned long long)st.memory.mapped >> 10,
         (unsigned long long)st.memory.in_use >> 10, (unsigned long long)st.os.mmap);
  if (st.valid & HAK_STATS_HAVE_EVENTS) /* not in the fast build */
    printf("small blocks live: %llu\n", (unsigned long long)st.blocks.small_live);

  size_t need = hak_stats_json(NULL, 0); /* snprintf-style */
  char *json = malloc(need + 256);
  hak_stats_json(json, need + 256);
  printf("json: %.60s...\n", json);
  free(json);

  for (int i = 0; i < 1000; i++) hak_free(blocks[i]);
  hak_stats_reset(); /* counters and peaks restart from here */
  struct mallinfo2 mi = mallinfo2();
  printf("mallinfo2: arena %zu, in use %zu\n", mi.arena, mi.uordblks);
  malloc_info(0, stdout);
  hak_stats_print(); /* the text report, on stderr */
  return 0;
}
