/* alloc.c — the allocation family under its hak_ names: what a program that
 * links libhakmem.a next to another malloc calls to reach HAKMEM directly. */
#include <hakmem.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  char *s = hak_malloc(32);
  if (!s) return 1;
  strcpy(s, "hello from hakmem");
  printf("%s (usable %zu bytes, ours: %d)\n", s, hak_usable_size(s), hak_owns(s));

  int *v = hak_calloc(100, sizeof *v);         /* zeroed */
  v = hak_reallocarray(v, 1000, sizeof *v);     /* grows, overflow-checked */
  v[999] = 42;
  double *d = hak_realloc(NULL, 8 * sizeof *d); /* realloc(NULL, n) is malloc(n) */

  void *page = hak_aligned_alloc(4096, 4096);
  void *line = NULL;
  if (hak_posix_memalign(&line, 64, 256) != 0) return 1;
  printf("aligned: %d %d\n", (int)((size_t)page % 4096 == 0), (int)((size_t)line % 64 == 0));

  hak_free(line);
  hak_free(page);
  hak_free(d);
  hak_free(v);
  hak_free(s);
  hak_free(NULL); /* does nothing */
  return 0;
}
