/* test_lib_dirty.c — the memory libhakmem.so's own writable segments cost a
 * process: every process that preloads HAKMEM pays it, so it is bounded.
 *
 * Counts the pages of the library's writable PT_LOAD segments (.data,
 * .bss, the GOT) that this process holds privately (/proc/self/pagemap:
 * present and mapped exclusively; pages only read are the file's or the
 * kernel's zero page, which are neither), after some mallocs and frees in
 * two threads. The slice map's top table used to be 32 KiB of .data whose
 * 4096 pointers each needed a load-time relocation, so every page of it
 * was dirty in every process; it is .bss now, all zeros, and only the page
 * holding the top entries of the leaves in use is written.
 *
 * Prints the figure; fails above LIMIT_KIB. Skipped (77) when pagemap is
 * not readable. Runs under LD_PRELOAD=libhakmem.so. */
#include "hak_test.h"

#include <link.h>
#include <pthread.h>

#define LIMIT_KIB 44

static uintptr_t lib_base;
static size_t dirty_pages, total_pages;
static int pagemap_fd = -1;

static size_t private_pages(uintptr_t lo, uintptr_t hi) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 0;
  for (uintptr_t a = lo & ~(pg - 1); a < hi; a += pg) {
    uint64_t e;
    if (pread(pagemap_fd, &e, sizeof e, (off_t)(a / pg * sizeof e)) != (ssize_t)sizeof e)
      HT_FAIL("pread /proc/self/pagemap: %s", strerror(errno));
    /* bit 63 present, bit 61 file page or shared anonymous, bit 56
     * mapped exclusively (never for the shared zero page) */
    if ((e >> 63 & 1) && !(e >> 61 & 1) && (e >> 56 & 1)) n++;
    total_pages++;
  }
  return n;
}

static int each_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  (void)arg;
  if (info->dlpi_addr != lib_base) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W)) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    dirty_pages += private_pages(lo, lo + ph->p_memsz);
  }
  return 1;
}

static void *worker(void *arg) {
  void *b[256];
  for (int r = 0; r < 10; r++) {
    for (int i = 0; i < 256; i++) b[i] = malloc(ht_hide((size_t)(16 + i * 37)));
    for (int i = 0; i < 256; i++) free(b[i]);
  }
  return arg;
}

int main(void) {
  hak_test_require_hakmem("test_lib_dirty");
  if (!hak_test_owns) {
    printf("test_lib_dirty: skipped (not on HAKMEM)\n");
    return 77;
  }
  worker(NULL);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);

  Dl_info di;
  CHECK(dladdr((void *)hak_test_owns, &di) && di.dli_fbase, "dladdr(hak_owns)");
  lib_base = (uintptr_t)di.dli_fbase;
  pagemap_fd = open("/proc/self/pagemap", O_RDONLY);
  if (pagemap_fd < 0) {
    printf("test_lib_dirty: skipped (/proc/self/pagemap: %s)\n", strerror(errno));
    return 77;
  }
  dl_iterate_phdr(each_object, NULL);
  CHECK(total_pages > 0, "no writable segment found for %s", di.dli_fname);
  size_t kib = dirty_pages * (size_t)sysconf(_SC_PAGESIZE) / 1024;
  printf("test_lib_dirty: %zu KiB of %s's %zu KiB of writable segments are private (limit %d)\n", kib,
         di.dli_fname, total_pages * (size_t)sysconf(_SC_PAGESIZE) / 1024, LIMIT_KIB);
  CHECK(kib <= LIMIT_KIB, "%zu KiB of the library's own data dirtied", kib);
  return 0;
}
