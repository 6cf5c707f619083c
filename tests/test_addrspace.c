/* test_addrspace - HAKMEM lives within an address-space limit (RLIMIT_AS,
 * `ulimit -v`) as glibc does.
 *
 *   test_addrspace          VmSize at main() is small; then, after the first
 *                           allocation, RLIMIT_AS is set to 256 MiB
 *   test_addrspace before   the limit is set before start-up (the program
 *                           re-executes itself under it)
 *
 * Under the limit it allocates 64 B blocks until malloc fails, frees them,
 * then 1 MiB blocks, then one 5 MiB block, then both kinds again: each kind
 * must reach at least 150 MiB (glibc reaches about 220 MiB), every failure
 * must be NULL with ENOMEM, and the allocator must work after it. The
 * figures reached are printed (run with HAKMEM_TEST_PLAIN=1 for glibc's). */
#include "hak_test.h"

#include <sys/resource.h>

#define LIMIT ((size_t)256 << 20)
#define NEED ((size_t)150 << 20)
#define CAP ((size_t)1 << 30) /* never reached under the limit */

static size_t vm_size_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL, "cannot open /proc/self/status");
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void set_limit(void)
{
    struct rlimit r = {LIMIT, LIMIT};
    CHECK(setrlimit(RLIMIT_AS, &r) == 0, "setrlimit: %s", strerror(errno));
}

/* Allocate blocks of `size` until malloc fails (or CAP), chained through
 * their first word; returns the chain and the bytes reached. */
static void *fill(size_t size, size_t *reached)
{
    void *head = NULL;
    size_t total = 0;
    while (total < CAP) {
        errno = 0;
        void **p = malloc(size);
        if (!p) {
            CHECK(errno == ENOMEM, "malloc(%zu) failed with errno %d, not ENOMEM", size, errno);
            break;
        }
        *p = head;
        head = p;
        total += size;
    }
    *reached = total;
    return head;
}

static void drain(void *head)
{
    while (head) {
        void *next = *(void **)head;
        free(head);
        head = next;
    }
}

static size_t round_of(size_t size, const char *what)
{
    size_t reached;
    void *chain = fill(size, &reached);
    printf("%s: %zu MiB of %zu B blocks\n", what, reached >> 20, size);
    /* Right after a failure, smaller requests and frees still work. */
    void *q = malloc(16);
    CHECK(q != NULL || size <= 16, "malloc(16) right after the limit was reached failed");
    drain(chain);
    free(q);
    CHECK(reached >= NEED, "%s: only %zu MiB of %zu B blocks under a %zu MiB limit (need %zu MiB)",
          what, reached >> 20, size, LIMIT >> 20, NEED >> 20);
    return reached;
}

int main(int argc, char **argv)
{
    int before = argc > 1 && strcmp(argv[1], "before") == 0;
    int child = argc > 1 && strcmp(argv[1], "child") == 0;
    if (before) { /* limit first, then start afresh under it */
        set_limit();
        execl("/proc/self/exe", argv[0], "child", (char *)NULL);
        HT_FAIL("exec /proc/self/exe: %s", strerror(errno));
    }
    size_t vm = vm_size_kb();
    hak_test_require_hakmem(child ? "test_addrspace(limit before start-up)" : "test_addrspace");
    printf("VmSize at main(): %zu kB\n", vm);
    if (!child) {
        /* The allocator's start-up reserves address space in proportion to
         * use: far below the 4 GiB it once took. */
        CHECK(vm < ((size_t)64 << 10), "VmSize at main() is %zu kB", vm);
        set_limit();
    }
    for (int pass = 1; pass <= 2; pass++) {
        round_of(64, pass == 1 ? "64 B, first pass" : "64 B, second pass");
        round_of((size_t)1 << 20, pass == 1 ? "1 MiB, first pass" : "1 MiB, second pass");
        char *big = malloc((size_t)5 << 20);
        CHECK(big != NULL, "malloc(5 MiB) under the limit failed (pass %d)", pass);
        memset(big, 1, (size_t)5 << 20);
        free(big);
    }
    printf("test_addrspace%s: OK\n", child ? " (limit before start-up)" : "");
    return 0;
}
