/* test_stats.c — statistics from code: hak_stats_get (versioned: an older,
 * smaller struct gets only its part), per-class block counts that follow
 * what the program does, hak_stats_json (snprintf-style lengths, the same
 * figures as the struct), hak_stats_reset, mallinfo2 and malloc_info(0)
 * agreeing with hak_stats_get, remote frees counted in batches, and
 * HAKMEM_STATS=json at exit (a re-executed
 * child). Checks what the build fills (st.valid), so it passes in every
 * build variant. Linked with libhakmem.so. */
#include "hak_test.h"
#include "hakmem.h"

#include <malloc.h>
#include <pthread.h>

#define N 20000
static void *blocks[N];

static hak_stats_t get(void) {
  hak_stats_t st = HAK_STATS_INIT;
  CHECK(hak_stats_get(&st) == 0, "hak_stats_get");
  CHECK(st.version == HAK_STATS_VERSION && st.size == sizeof st, "version %u size %u", st.version, st.size);
  return st;
}

static const hak_stats_class_t *row64(const hak_stats_t *st) {
  for (int k = 0; k < HAK_STATS_CLASSES; k++)
    if (st->classes[k].block_size == 64) return &st->classes[k];
  HT_FAIL("no 64-byte class");
}

static void *free_blocks(void *arg) {
  for (uintptr_t i = 0; i < (uintptr_t)arg; i++) hak_free(blocks[i]);
  return NULL;
}

static char *json(void) {
  size_t need = hak_stats_json(NULL, 0);
  CHECK(need > 20, "json length %zu", need);
  /* The figures may move between the two calls (this malloc counts too). */
  char *buf = hak_malloc(need + 512);
  size_t got = hak_stats_json(buf, need + 512);
  CHECK(got < need + 512 && strlen(buf) == got, "whole document fits (%zu, %zu)", got, need);
  size_t again = hak_stats_json(buf, got + 1); /* resident figures may gain a digit meanwhile */
  CHECK(strlen(buf) == (again <= got ? again : got), "returns the length needed, NUL written");
  return buf;
}

static unsigned long long json_number(const char *doc, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(doc, pat);
  CHECK(p, "key %s in %s", key, doc);
  return strtoull(p + strlen(pat), NULL, 10);
}

int main(int argc, char **argv) {
  hak_test_name = "test_stats";
  if (argc > 1 && strcmp(argv[1], "child") == 0) {
    for (int i = 0; i < 1000; i++) blocks[i] = hak_malloc(64);
    for (int i = 0; i < 1000; i += 2) hak_free(blocks[i]);
    return 0; /* the report is written at exit */
  }

  /* Errors and the versioned struct. */
  void *first = hak_malloc(100); /* something mapped */
  hak_stats_t small;
  memset(&small, 0xab, sizeof small);
  small.version = HAK_STATS_VERSION;
  small.size = 16 + 8; /* a caller that knows only the header and memory.mapped */
  CHECK(hak_stats_get(&small) == 0 && small.size == 24 && small.memory.mapped > 0, "short struct: its part only");
  CHECK(small.memory.mapped_peak == 0xababababababababull, "nothing written past the caller's size");
  small.size = 8;
  errno = 0;
  CHECK(hak_stats_get(&small) == -1 && errno == EINVAL, "size below the header: EINVAL");
  CHECK(hak_stats_get(NULL) == -1 && errno == EINVAL, "NULL: EINVAL");

  hak_stats_t st = get();
  CHECK(st.valid & HAK_STATS_HAVE_MEMORY && st.valid & HAK_STATS_HAVE_OS, "memory and OS figures in every build");
  CHECK(st.build <= 2 && ((st.build == 0) == !(st.valid & HAK_STATS_HAVE_EVENTS)), "build %u valid %x", st.build, st.valid);
  CHECK(st.memory.mapped >= st.memory.in_use && st.memory.committed >= st.memory.in_use, "in_use <= committed <= mapped");
  CHECK(st.memory.mapped_peak >= st.memory.mapped && st.os.mmap > 0, "peak, mmap count");
  CHECK(st.memory.process_resident > 0 && st.memory.process_resident_peak >= st.memory.process_resident, "process RSS");

  /* Blocks of 64 bytes (asked for as 56, or 48 in the secure build, which
   * adds its 16 bytes, heap/canary.h) follow the program: live grows by N,
   * and after the frees and hak_trim (which flushes this thread's caches)
   * it is back. */
  void *probe = hak_malloc(1);
  size_t req64 = hak_usable_size(probe) == 1 ? 48 : 56; /* only the secure build says 1 */
  hak_free(probe);
  uint64_t live0 = row64(&st)->blocks_live, small0 = st.blocks.small_live;
  for (int i = 0; i < N; i++) CHECK((blocks[i] = hak_malloc(req64)) != NULL, "malloc");
  hak_stats_t mid = get();
  if (st.valid & HAK_STATS_HAVE_EVENTS) {
    CHECK(row64(&mid)->blocks_live >= live0 + N && row64(&mid)->blocks_live <= live0 + N + 256,
          "live 64-byte blocks %llu, expected %llu + %d (+ one cache)", (unsigned long long)row64(&mid)->blocks_live,
          (unsigned long long)live0, N);
    CHECK(row64(&mid)->blocks_taken >= (uint64_t)N && row64(&mid)->refills > 0, "taken, refills");
    CHECK(mid.blocks.small_bytes_live >= mid.blocks.small_live * 16, "bytes follow blocks");
    CHECK(mid.memory.in_use >= st.memory.in_use + (uint64_t)N * 64 - (1 << 20), "in_use grew with the blocks");
  }
  for (int i = 0; i < N; i++) hak_free(blocks[i]);
  hak_trim();
  hak_stats_t after = get();
  if (st.valid & HAK_STATS_HAVE_EVENTS) {
    CHECK(row64(&after)->blocks_live == live0, "after free+trim: %llu live, was %llu",
          (unsigned long long)row64(&after)->blocks_live, (unsigned long long)live0);
    CHECK(after.blocks.small_live <= small0 + 64, "small live back (%llu, was %llu)",
          (unsigned long long)after.blocks.small_live, (unsigned long long)small0);
    CHECK(row64(&after)->blocks_returned >= (uint64_t)N && row64(&after)->flushes > 0, "returned, flushes");
  } else {
    CHECK(row64(&after)->blocks_live == 0 && after.blocks.small_allocated == 0, "fast build: no block counts");
  }

  /* Remote frees: another thread frees M of this thread's blocks and exits
   * (its caches flushed at exit): every one is counted, in batches of at
   * least one block (heap_return_blocks counts them once a flush). The
   * refills and flushes of the events are the sums of the classes' (stats.c). */
  if (st.valid & HAK_STATS_HAVE_EVENTS) {
    enum { M = 5000 };
    for (int i = 0; i < M; i++) CHECK((blocks[i] = hak_malloc(req64)) != NULL, "malloc");
    hak_stats_t r0 = get();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, free_blocks, (void *)(uintptr_t)M) == 0, "pthread_create");
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    hak_stats_t r1 = get();
    uint64_t nb = r1.events.remote_free_blocks - r0.events.remote_free_blocks;
    uint64_t nq = r1.events.remote_free_batches - r0.events.remote_free_batches;
    CHECK(nb >= M && nq >= 1 && nq <= nb, "remote frees: %llu blocks in %llu batches, expected >= %d",
          (unsigned long long)nb, (unsigned long long)nq, M);
    uint64_t refills = 0, flushes = 0;
    for (int k = 0; k < HAK_STATS_CLASSES; k++) {
      refills += r1.classes[k].refills;
      flushes += r1.classes[k].flushes;
    }
    CHECK(r1.events.refill == refills && refills > 0, "refill events %llu = the classes' %llu",
          (unsigned long long)r1.events.refill, (unsigned long long)refills);
    CHECK(r1.events.flush == flushes && flushes > r0.events.flush, "flush events %llu = the classes' %llu (was %llu)",
          (unsigned long long)r1.events.flush, (unsigned long long)flushes, (unsigned long long)r0.events.flush);
  }

  /* mallinfo2 and malloc_info: the same figures (nothing allocates between). */
  hak_stats_t q = get();
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.arena == q.memory.mapped - q.memory.huge_bytes && mi.hblkhd == q.memory.huge_bytes &&
            mi.hblks == q.memory.huge_blocks && mi.uordblks == q.memory.in_use && mi.fordblks == q.memory.free_slices &&
            mi.usmblks == q.memory.mapped_peak && mi.keepcost == q.memory.free_resident,
        "mallinfo2 (arena %zu uord %zu ford %zu) agrees with hak_stats_get (mapped %llu in_use %llu free %llu)",
        mi.arena, mi.uordblks, mi.fordblks, (unsigned long long)q.memory.mapped, (unsigned long long)q.memory.in_use,
        (unsigned long long)q.memory.free_slices);
  static char xml[4096];
  FILE *f = fmemopen(xml, sizeof xml, "w");
  CHECK(f && malloc_info(0, f) == 0, "malloc_info(0)");
  fclose(f);
  CHECK(malloc_info(1, stdout) == EINVAL, "malloc_info(1): EINVAL as in glibc");
  hak_stats_t q2 = get();
  char want[128];
  snprintf(want, sizeof want, "<system type=\"current\" size=\"%llu\"/>\n<system type=\"max\" size=\"%llu\"/>\n<aspace",
           (unsigned long long)q2.memory.mapped, (unsigned long long)q2.memory.mapped_peak);
  CHECK(strncmp(xml, "<malloc version=\"1\">\n<heap nr=\"0\">", 34) == 0 && strstr(xml, want) &&
            strstr(xml, "</malloc>\n"),
        "glibc's XML with the same figures (%s) : %s", want, xml);

  /* JSON: snprintf-style, and the same figures as the struct. */
  char *doc = json();
  hak_stats_t j = get();
  CHECK(json_number(doc, "mapped") == j.memory.mapped && json_number(doc, "mmap") == j.os.mmap, "json = struct");
  CHECK(json_number(doc, "version") == HAK_STATS_VERSION && doc[0] == '{' && doc[strlen(doc) - 1] == '}', "shape");
  if (st.valid & HAK_STATS_HAVE_EVENTS)
    CHECK(json_number(doc, "small_live") == j.blocks.small_live && strstr(doc, "\"classes\":[{"), "blocks, classes");
  else
    CHECK(!strstr(doc, "\"blocks\"") && !strstr(doc, "\"classes\""), "groups the build lacks are left out");
  char tiny[10];
  memset(tiny, 'x', sizeof tiny);
  CHECK(hak_stats_json(tiny, sizeof tiny) > sizeof tiny && tiny[9] == 0 && strncmp(tiny, doc, 9) == 0,
        "truncated like snprintf: %.10s", tiny);
  hak_free(doc);

  /* Reset: counters restart, peaks come down to now, live figures stay. */
  hak_stats_t before = get();
  hak_stats_reset();
  hak_stats_t r = get();
  CHECK(r.os.mmap <= 1 && r.memory.mapped_peak == r.memory.mapped, "counters and peak restart (mmap %llu)",
        (unsigned long long)r.os.mmap);
  if (st.valid & HAK_STATS_HAVE_EVENTS)
    CHECK(r.blocks.small_allocated <= 256 && r.blocks.small_live == before.blocks.small_live &&
              row64(&r)->blocks_live == row64(&before)->blocks_live,
          "after reset: allocated %llu, live kept", (unsigned long long)r.blocks.small_allocated);

  /* HAKMEM_STATS=json: one JSON line on stderr at exit. */
  static char err[65536];
  const char *args[] = {argv[0], "child", NULL};
  ht_exec_t e = {"HAKMEM_STATS=json", args};
  CHECK(ht_exited0(ht_run_captured(ht_exec, &e, err, sizeof err, NULL, 0)), "child");
  size_t n = strlen(err);
  CHECK(n > 2 && strncmp(err, "{\"version\":1,", 13) == 0 && err[n - 1] == '\n' && err[n - 2] == '}' &&
            strchr(err, '\n') == err + n - 1,
        "one JSON line at exit: %.200s", err);
  if (st.valid & HAK_STATS_HAVE_EVENTS) CHECK(json_number(err, "small_live") >= 500, "child's live blocks");
  hak_free(first);
  printf("test_stats: struct, versioning, block counts, json, reset, mallinfo2, malloc_info, exit report: ok\n");
  return 0;
}
