/* test_addrspace_share - under an address-space limit (RLIMIT_AS, `ulimit
 * -v`; with the argument `data`, RLIMIT_DATA, `ulimit -d`, which counts
 * private writable mappings) HAKMEM's reserve of segments leaves the
 * program's own mappings (thread stacks, a runtime's arenas, files) their
 * share.
 *
 * Segments are cut from runs of address space reserved several at a time
 * (src/os/reserve.c); the unused rest of a run counts against the limit. A
 * first run of 8 segments (16 MiB) under a limit of VmSize + 48 MiB left the
 * program's own mmap calls 31 MiB (glibc leaves 46; the same under
 * RLIMIT_DATA = VmData + 48 MiB) and python3, whose arenas are its own
 * mappings, hit MemoryError after 3 MiB of bytearrays where glibc gave 18
 * MiB. Under a limit runs are at most 1/32 of it (the lower of the two). The
 * program sets the limit at main() (no segment mapped yet), allocates blocks
 * of a few classes (the first segment), then maps 256 KiB regions itself
 * until mmap fails: at least 38 MiB of the 48 must be its. */
#include "hak_test.h"

#include <sys/mman.h>
#include <sys/resource.h>

#define HEADROOM ((size_t)48 << 20)
#define NEED ((size_t)38 << 20)
#define CHUNK ((size_t)256 << 10)

static size_t vm_size_kb(const char *key) /* without malloc: no segment before the limit */
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "open /proc/self/status");
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    CHECK(n > 0, "read /proc/self/status");
    buf[n] = 0;
    const char *v = strstr(buf, key);
    CHECK(v != NULL, "no %s line", key);
    return (size_t)strtoul(v + strlen(key), NULL, 10);
}

int main(int argc, char **argv)
{
    int data = argc > 1 && strcmp(argv[1], "data") == 0;
    const char *key = data ? "VmData:" : "VmSize:";
    size_t vm0 = vm_size_kb(key);
    struct rlimit r = {(rlim_t)(vm0 << 10) + HEADROOM, (rlim_t)(vm0 << 10) + HEADROOM};
    CHECK(setrlimit(data ? RLIMIT_DATA : RLIMIT_AS, &r) == 0, "setrlimit: %s", strerror(errno));
    hak_test_require_hakmem("test_addrspace_share");

    static void *blocks[1200];
    unsigned nb = 0;
    for (unsigned i = 0; i < 1000; i++) blocks[nb++] = malloc(64);
    for (unsigned i = 0; i < 150; i++) blocks[nb++] = malloc(4096);
    for (unsigned i = 0; i < 20; i++) blocks[nb++] = malloc(40000);
    for (unsigned i = 0; i < nb; i++) {
        CHECK(blocks[i] != NULL, "malloc %u failed under the limit", i);
        memset(blocks[i], 1, 64);
    }
    size_t vm1 = vm_size_kb(key);

    static void *maps[4096];
    size_t got = 0;
    unsigned nm = 0;
    while (nm < 4096) {
        void *m = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) break;
        maps[nm++] = m;
        got += CHUNK;
    }
    for (unsigned i = 0; i < nm; i++) munmap(maps[i], CHUNK);
    /* and the allocator still works under the limit afterwards */
    void *p = malloc(1 << 20);
    CHECK(p != NULL, "malloc(1 MiB) after the program's mappings were unmapped");
    free(p);
    for (unsigned i = 0; i < nb; i++) free(blocks[i]);
    printf("test_addrspace_share: %s = %s at main() %zu KiB + %zu MiB; %s after %u blocks %zu KiB; "
           "the program's own mmap calls got %zu MiB\n",
           data ? "RLIMIT_DATA" : "RLIMIT_AS", data ? "VmData" : "VmSize", vm0, HEADROOM >> 20,
           data ? "VmData" : "VmSize", nb, vm1, got >> 20);
    CHECK(got >= NEED, "the program's mappings got %zu MiB of the %zu MiB allowed (need %zu): the allocator "
          "holds address space it does not use", got >> 20, HEADROOM >> 20, NEED >> 20);
    printf("test_addrspace_share: OK\n");
    return 0;
}
