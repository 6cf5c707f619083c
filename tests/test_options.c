/* test_options.c — hak_option_get/set and the start-up parsing of HAKMEM_*
 * values: defaults, names in any spelling, errors (ENOENT, EPERM, ERANGE,
 * EINVAL), run-time changes of the purge policy and of cache sizes (caches
 * shrink and grow back while threads allocate), and one warning line plus
 * the default for a malformed value (checked in a re-executed child whose
 * stderr is captured). Linked with libhakmem.so. */
#include "hak_test.h"
#include "hakmem.h"

#include <pthread.h>

static long long get(const char *name) {
  long long v = -1;
  int rc = hak_option_get(name, &v);
  CHECK(rc == 0, "hak_option_get(%s) = %d", name, rc);
  return v;
}

static void *churn(void *arg) {
  (void)arg;
  void *p[300];
  for (int r = 0; r < 200; r++) {
    for (int i = 0; i < 300; i++) { p[i] = hak_malloc(16 + (size_t)(i * 37 % 2000)); CHECK(p[i], "malloc"); memset(p[i], i, 16); }
    for (int i = 0; i < 300; i++) hak_free(p[i]);
  }
  return NULL;
}

static void run_churn(void) {
  pthread_t t[3];
  for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, churn, NULL) == 0, "pthread_create");
  churn(NULL);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
}

/* Runs this program again with one variable set; returns its stderr. */
static void child_stderr(const char *self, const char *assign, char *out, size_t len) {
  const char *argv[] = {self, "child", NULL};
  ht_exec_t e = {assign, argv};
  int st = ht_run_captured(ht_exec, &e, out, len, NULL, 0);
  CHECK(ht_exited0(st), "child with %s failed (status %d): %s", assign, st, out);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

int main(int argc, char **argv) {
  hak_test_name = "test_options";
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    /* Print the values the library settled on, for the parent to check. */
    void *p = hak_malloc(100);
    hak_free(p);
    if (getenv("HAKMEM_DIRTY_MAX") && strcmp(getenv("HAKMEM_DIRTY_MAX"), "12Q") == 0)
      CHECK(get("dirty_max") == 8 << 20, "malformed value falls back to the default");
    if (getenv("HAKMEM_TCACHE_MAX")) CHECK(get("tcache_max") == 1024, "out-of-range value clamped to the bound");
    if (getenv("HAKMEM_DIRTY_MAX") && strcmp(getenv("HAKMEM_DIRTY_MAX"), "2M") == 0)
      CHECK(get("dirty_max") == 2 << 20, "well-formed size with suffix");
    return 0;
  }
  if (getenv("HAKMEM_PROFILE") || getenv("HAKMEM_DIRTY_MAX") || getenv("HAKMEM_TCACHE_MAX"))
    HT_FAIL("run without HAKMEM_PROFILE, HAKMEM_DIRTY_MAX, HAKMEM_TCACHE_MAX in the environment");

  /* Defaults of the speed profile, under every spelling. */
  CHECK(get("HAKMEM_DIRTY_MAX") == 8 << 20, "default dirty max");
  CHECK(get("dirty_max") == 8 << 20 && get("Dirty_Max") == 8 << 20, "names in any case, with or without prefix");
  CHECK(get("purge_delay_ms") == 100 && get("tcache_max") == 128 && get("profile") == 0, "defaults");
  long long v;
  CHECK(hak_option_get("no_such_option", &v) == ENOENT, "unknown name: ENOENT");
  CHECK(hak_option_get(NULL, &v) == ENOENT, "NULL name: ENOENT");
  CHECK(hak_option_get("dirty_max", NULL) == EINVAL, "NULL value: EINVAL");
  CHECK(hak_option_set("nonsense", 1) == ENOENT, "set unknown: ENOENT");
  CHECK(hak_option_set("profile", 2) == EPERM && get("profile") == 0, "start-up only: EPERM, unchanged");
  CHECK(hak_option_set("verbose", 1) == EPERM, "verbose is start-up only");
  CHECK(hak_option_set("purge_delay_ms", 60001) == ERANGE && get("purge_delay_ms") == 100, "range: ERANGE, unchanged");
  CHECK(hak_option_set("dirty_max", -1) == ERANGE, "negative size: ERANGE");

  /* The purge policy, changed at run time, takes effect: with no dirty
   * budget and no delay, memory freed goes back soon. */
  CHECK(hak_option_set("HAKMEM_DIRTY_MAX", 1 << 20) == 0 && get("dirty_max") == 1 << 20, "set dirty max");
  CHECK(hak_option_set("purge_delay_ms", 0) == 0 && get("purge_delay_ms") == 0, "set purge delay");
  CHECK(hak_option_set("segment_cache", 2) == 0 && get("segment_cache") == 2, "set segment cache");
  CHECK(hak_option_set("huge_cache", 0) == 0 && get("huge_cache") == 0, "set huge cache");
  run_churn();

  /* Caches: shrink (threads pick it up at their next refill), grow back to
   * the start-up size, never beyond. */
  CHECK(hak_option_set("tcache_max", 4) == 0 && get("tcache_max") == 4, "shrink caches");
  run_churn();
  CHECK(hak_option_set("tcache_max", 0) == 0, "caches off");
  run_churn();
  CHECK(hak_option_set("tcache_max", 129) == ERANGE && get("tcache_max") == 0, "grow beyond start-up: ERANGE");
  CHECK(hak_option_set("tcache_bytes", 256 * 1024) == 0, "bytes up while max is 0 keeps caps within slots");
  CHECK(hak_option_set("tcache_max", 128) == ERANGE, "with 256K bytes the caps exceed the start-up slots");
  CHECK(hak_option_set("tcache_bytes", 128 * 1024) == 0 && hak_option_set("tcache_max", 128) == 0, "back to start-up");
  run_churn();
  CHECK(hak_option_set("stats", 2) == 0 && get("stats") == 2 && hak_option_set("stats", 0) == 0, "stats mode");

  /* Start-up parsing: a malformed value gets one warning line and the default. */
  char err[4096];
  child_stderr(argv[0], "HAKMEM_DIRTY_MAX=12Q", err, sizeof err);
  CHECK(count_lines(err) == 1 && strstr(err, "HAKMEM_DIRTY_MAX=12Q") && strstr(err, "using 8M"),
        "one warning line naming the variable and the default, got: %s", err);
  child_stderr(argv[0], "HAKMEM_TCACHE_MAX=5000", err, sizeof err);
  CHECK(count_lines(err) == 1 && strstr(err, "out of range"), "one out-of-range line, got: %s", err);
  child_stderr(argv[0], "HAKMEM_DIRTY_MAX=2M", err, sizeof err);
  CHECK(err[0] == 0, "a good value prints nothing, got: %s", err);
  printf("test_options: get/set, errors, run-time purge and cache changes, start-up warnings: ok\n");
  return 0;
}
