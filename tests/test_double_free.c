/* test_double_free: in the standard build, a block freed twice while it sits
 * in the thread's cache is reported ("hakmem: free: double free 0x...") and
 * the second free is ignored, so the block is never handed to two owners.
 * (glibc aborts here; this is HAKMEM's own defined answer, so the test has no
 * glibc baseline.) Registered only for builds with checks. */
#include "hak_test.h"

/* In a child: free a block twice, then take two blocks of the same size. */
static void run_child(void *arg) {
  size_t size = *(const size_t *)arg;
  char *a = malloc(size);
  memset(a, 1, size);
  free(a);
  free(a);
  char *b = malloc(size), *c = malloc(size);
  if (!b || !c || b == c) _exit(3);
  memset(b, 2, size);
  memset(c, 3, size);
  if (b[0] != 2 || c[size - 1] != 3) _exit(4);
  free(b);
  free(c);
  _exit(0);
}

/* In a child: a block realloc moved away from (into the thread's cache,
 * front/api.c: free_moved) freed again; the moved block and two new ones of
 * the old size must stay apart. */
static void run_realloc_child(void *arg) {
  size_t size = *(const size_t *)arg;
  char *a = malloc(size);
  memset(a, 1, size);
  char *b = realloc(a, 2 * size + 100);
  if (!b || b == a) _exit(2);
  free(a);
  char *c = malloc(size), *d = malloc(size);
  if (!c || !d || c == d || c == b || d == b) _exit(3);
  memset(c, 2, size);
  memset(d, 3, size);
  for (size_t i = 0; i < size; i++)
    if (b[i] != 1) _exit(4);
  free(b);
  free(c);
  free(d);
  _exit(0);
}

/* In a child whose stderr is /dev/full (the report's write fails with
 * ENOSPC): a reported double free leaves errno as it was, as free does. */
static void run_errno_child(void *arg) {
  (void)arg;
  int full = open("/dev/full", O_WRONLY);
  if (full < 0) _exit(0); /* no /dev/full: nothing to check */
  dup2(full, 2);
  char *a = malloc(100);
  free(a);
  errno = 4321;
  free(a);
  _exit(errno == 4321 ? 0 : 5);
}

int main(void) {
  hak_test_require_hakmem("test_double_free");
  static const size_t sizes[] = {16, 24, 100, 1000, 4096, 20000};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char buf[512];
    int status = ht_run_captured(run_child, (void *)&sizes[i], buf, sizeof buf, NULL, 0);
    CHECK(ht_exited0(status), "size %zu: child status 0x%x: a double free handed one block to two owners, or crashed",
          sizes[i], status);
    CHECK(strstr(buf, "hakmem: free: double free 0x"), "size %zu: the double free was not reported; stderr was: %s",
          sizes[i], buf);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char buf[512];
    int status = ht_run_captured(run_realloc_child, (void *)&sizes[i], buf, sizeof buf, NULL, 0);
    CHECK(ht_exited0(status), "size %zu: child status 0x%x: a free of a block realloc moved away from handed one "
          "block to two owners, or crashed", sizes[i], status);
    CHECK(strstr(buf, "hakmem: free: double free 0x"), "size %zu: the free after realloc moved the block was not "
          "reported; stderr was: %s", sizes[i], buf);
  }
  int status = ht_run_captured(run_errno_child, NULL, NULL, 0, NULL, 0);
  CHECK(ht_exited0(status), "errno child status 0x%x: reporting a double free (its write to stderr failing) changed "
        "errno", status);
  printf("test_double_free: OK: double frees of cached blocks (16 B - 20 KB), also of blocks realloc moved "
         "away from, reported and ignored; errno "
         "unchanged by a report whose write fails\n");
  return 0;
}
