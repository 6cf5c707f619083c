/* test_hugepage.c — HAKMEM_THP and HAKMEM_HUGE_PAGES, run once per setting
 * (ctest sets the variable): the segments holding this program's blocks
 * carry the advice the setting asks for (VmFlags "hg" = MADV_HUGEPAGE, "nh" =
 * MADV_NOHUGEPAGE, "ht" = hugetlb, in /proc/self/smaps), auto advises only
 * once a segment is 3/4 in use, dense only segments of small-class pages
 * and only once the program holds many such pages that fill (a small
 * program is never advised), the counters say what happened (explicit
 * huge pages: every segment is either a success or a silent fallback), and
 * the blocks work. Linked with libhakmem.so. */
#include "hak_test.h"
#include "hakmem.h"

#include <stdbool.h>

/* The VmFlags of the mapping holding p, from /proc/self/smaps. */
static void vmflags_of(const void *p, char *out, size_t len) {
  FILE *f = fopen("/proc/self/smaps", "re");
  CHECK(f, "smaps");
  char line[512];
  int in = 0;
  out[0] = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
      continue;
    }
    if (in && strncmp(line, "VmFlags:", 8) == 0) {
      snprintf(out, len, "%.200s", line + 8);
      break;
    }
  }
  fclose(f);
  CHECK(out[0], "no VmFlags for %p", p);
}

/* AnonHugePages (KiB) of the mappings holding any of the n blocks; *room
 * is set if one of them covers an aligned 2 MiB range, where a huge page can
 * be (the secure build's guard pages split a segment's mapping). */
static unsigned long anon_huge_kb(unsigned char *const *blk, int n, bool *room) {
  FILE *f = fopen("/proc/self/smaps", "re");
  CHECK(f, "smaps");
  char line[512];
  unsigned long sum = 0, kb, two = 2ul << 20;
  int in = 0;
  *room = false;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      in = 0;
      for (int i = 0; i < n && !in; i++) in = (uintptr_t)blk[i] >= lo && (uintptr_t)blk[i] < hi;
      if (in && (lo + two - 1) / two * two + two <= hi) *room = true;
      continue;
    }
    if (in && sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) sum += kb;
  }
  fclose(f);
  return sum;
}

/* Whether the system lets a MADV_HUGEPAGE range have transparent huge
 * pages ("always" or "madvise" selected). */
static bool thp_possible(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
  if (!f) return false;
  char line[128] = "";
  bool ok = fgets(line, sizeof line, f) && (strstr(line, "[always]") || strstr(line, "[madvise]"));
  fclose(f);
  return ok;
}

static bool has_flag(const char *flags, const char *f) {
  char pat[8];
  snprintf(pat, sizeof pat, " %s", f);
  return strstr(flags, pat) != NULL;
}

static hak_stats_t stats(void) {
  hak_stats_t st = HAK_STATS_INIT;
  CHECK(hak_stats_get(&st) == 0, "stats");
  return st;
}

/* HAKMEM_THP=dense: 24 MiB of 1 KiB blocks, written, fill page after page
 * of their class (a heap holding a full page of the class cuts the next),
 * so once the program holds 12 MiB of such pages their new pages come from
 * segments advised before their first write, which take huge pages; a
 * large block cut meanwhile is in a segment that is not advised. */
static void dense_phase(void) {
  enum { N = 24 * 1024, LAST = 1024 };
  static unsigned char *b[N];
  for (int i = 0; i < N; i++) {
    CHECK((b[i] = hak_malloc(1024)) != NULL, "malloc");
    memset(b[i], i & 0xff, 1024);
  }
  void *large = hak_malloc(300 << 10);
  CHECK(large, "malloc");
  memset(large, 1, 300 << 10);
  char flags[256];
  vmflags_of(b[N - 1], flags, sizeof flags);
  hak_stats_t st = stats();
  CHECK(has_flag(flags, "hg") && st.os.thp_advise >= 1, "dense: 24 MiB of 1 KiB blocks, last not advised: %s", flags);
  vmflags_of(large, flags, sizeof flags);
  CHECK(!has_flag(flags, "hg"), "dense: a large block's segment advised: %s", flags);
  vmflags_of(b[0], flags, sizeof flags);
  CHECK(!has_flag(flags, "hg"), "dense: the first blocks' segment advised (too early): %s", flags);
  bool room;
  unsigned long huge_kb = anon_huge_kb(b + N - LAST, LAST, &room);
  if (room && thp_possible()) CHECK(huge_kb > 0, "dense: the last MiB of blocks holds no huge page");
  for (int i = 0; i < N; i++) {
    CHECK(b[i][0] == (i & 0xff) && b[i][1023] == (i & 0xff), "contents");
    hak_free(b[i]);
  }
  hak_free(large);
  printf("test_hugepage: dense: %lu KiB of huge pages in the mappings of the last %d blocks\n", huge_kb, LAST);
}

int main(void) {
  hak_test_name = "test_hugepage";
  const char *thp = getenv("HAKMEM_THP") ? getenv("HAKMEM_THP") : "system";
  bool huge = getenv("HAKMEM_HUGE_PAGES") && strcmp(getenv("HAKMEM_HUGE_PAGES"), "1") == 0;
  long long mode;
  CHECK(hak_option_get("thp", &mode) == 0, "thp option");

  /* One small block: its segment is sparse. */
  char *one = hak_malloc(1000);
  CHECK(one, "malloc");
  memset(one, 1, 1000);
  char flags[256];
  vmflags_of(one, flags, sizeof flags);
  hak_stats_t st = stats();
  if (huge) {
    CHECK(st.os.hugetlb + st.os.hugetlb_fallback >= 1, "each segment: hugetlb or a fallback");
    if (st.valid & HAK_STATS_HAVE_EVENTS)
      CHECK(st.os.hugetlb + st.os.hugetlb_fallback == st.events.segment_map, "%llu + %llu != %llu segments",
            (unsigned long long)st.os.hugetlb, (unsigned long long)st.os.hugetlb_fallback,
            (unsigned long long)st.events.segment_map);
    if (st.os.hugetlb) CHECK(has_flag(flags, "ht"), "hugetlb segment: %s", flags);
  } else {
    CHECK(st.os.hugetlb == 0 && st.os.hugetlb_fallback == 0, "no hugetlb unless asked");
  }
  if (strcmp(thp, "always") == 0 && !has_flag(flags, "ht")) {
    CHECK(mode == 3 && has_flag(flags, "hg") && st.os.thp_advise >= 1, "always: MADV_HUGEPAGE at once: %s", flags);
  } else if (strcmp(thp, "never") == 0 && !has_flag(flags, "ht")) {
    CHECK(mode == 1 && has_flag(flags, "nh") && st.os.thp_advise >= 1, "never: MADV_NOHUGEPAGE: %s", flags);
  } else if (strcmp(thp, "auto") == 0 && !has_flag(flags, "ht")) {
    CHECK(mode == 2 && !has_flag(flags, "hg") && st.os.thp_advise == 0, "auto: a sparse segment is not advised: %s", flags);
    /* Fill it: 64 KiB blocks take a slice each, 4 per 256 KiB. */
    void *big[64];
    for (int i = 0; i < 64; i++) CHECK((big[i] = hak_malloc(60000)) != NULL, "malloc");
    vmflags_of(one, flags, sizeof flags);
    st = stats();
    CHECK(has_flag(flags, "hg") && st.os.thp_advise >= 1, "auto: dense segment advised: %s", flags);
    for (int i = 0; i < 64; i++) hak_free(big[i]);
  } else if (strcmp(thp, "dense") == 0) {
    CHECK(mode == 4 && !has_flag(flags, "hg") && st.os.thp_advise == 0, "dense: a small program is not advised: %s", flags);
    dense_phase();
  } else if (strcmp(thp, "system") == 0) {
    CHECK(mode == 0 && !has_flag(flags, "hg") && !has_flag(flags, "nh") && st.os.thp_advise == 0,
          "system: no advice: %s", flags);
  }
  CHECK(st.os.madvise_failed == 0, "no advice refused");

  /* The memory works: 32 MiB written and checked, then freed. */
  enum { N = 512 };
  static unsigned char *b[N];
  for (int i = 0; i < N; i++) {
    CHECK((b[i] = hak_malloc(65536)) != NULL, "malloc");
    memset(b[i], i & 0xff, 65536);
  }
  /* always: the segments are advised before anything is written to them,
   * so their first faults can take huge pages (the first write, the
   * segment's header, used to come before the advice: its 4 KiB page gave
   * the 2 MiB range a page table, and no huge page was ever faulted in). */
  bool room;
  unsigned long huge_kb = anon_huge_kb(b, N, &room);
  if (strcmp(thp, "always") == 0 && !huge && room && thp_possible())
    CHECK(huge_kb > 0, "always: 32 MiB of blocks in advised segments, no huge page among them");
  /* never: not even the page the header is on (a system set to "always"
   * gave it a huge page before the advice came). */
  if (strcmp(thp, "never") == 0) CHECK(huge_kb == 0, "never: %lu KiB of huge pages", huge_kb);
  for (int i = 0; i < N; i++) {
    CHECK(b[i][0] == (i & 0xff) && b[i][65535] == (i & 0xff), "contents");
    hak_free(b[i]);
  }
  hak_free(one);
  hak_trim();
  st = stats();
  printf("test_hugepage: THP=%s HUGE_PAGES=%d: thp_advise %llu, hugetlb %llu, fallback %llu: ok\n", thp, huge,
         (unsigned long long)st.os.thp_advise, (unsigned long long)st.os.hugetlb,
         (unsigned long long)st.os.hugetlb_fallback);
  return 0;
}
