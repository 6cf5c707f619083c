/* rlimit_exec BYTES PROGRAM [ARGS...] - run PROGRAM with RLIMIT_AS (the
 * `ulimit -v` limit) set to BYTES, so any test can be run under an
 * address-space limit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s BYTES PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    char *end;
    unsigned long long bytes = strtoull(argv[1], &end, 0);
    if (*end || bytes == 0) {
        fprintf(stderr, "%s: bad byte count '%s'\n", argv[0], argv[1]);
        return 2;
    }
    struct rlimit r = {(rlim_t)bytes, (rlim_t)bytes};
    if (setrlimit(RLIMIT_AS, &r) != 0) {
        fprintf(stderr, "%s: setrlimit: %s\n", argv[0], strerror(errno));
        return 2;
    }
    execvp(argv[2], argv + 2);
    fprintf(stderr, "%s: exec %s: %s\n", argv[0], argv[2], strerror(errno));
    return 127;
}
