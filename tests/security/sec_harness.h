/* sec_harness.h - runs each case of a bug-class program in a child process
 * and says whether the allocator in use noticed the bug.
 *
 * usage: PROGRAM [CASE...]   (no CASE: all of them; --list: their names)
 * Prints one line per case: "<case> <verdict> <first line of the report>",
 * verdict one of
 *   detected      the child died on a signal after printing a message (glibc's
 *                 "free(): double free detected", HAKMEM's abort line), or it
 *                 finished after a clear report line on stderr ("hakmem: free:
 *                 double free 0x... (ignored)"), or the allocator gave its
 *                 defined answer to an impossible request (NULL + ENOMEM)
 *   crashed       died on a signal without a word
 *   not-detected  finished, nothing said
 *   hang          still running after 5 s
 * A case that cannot run at all (harness failure) exits 2: verdict "error".
 * (The child and its capture: ht_run_captured of hak_test.h.) */
#ifndef SEC_HARNESS_H
#define SEC_HARNESS_H

#include "../hak_test.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;
    void (*run)(void);
} sec_case_t;

/* The allocator answered an impossible request as defined: say so. */
static inline void sec_handled(const char *what)
{
    fprintf(stderr, "sec: handled: %s\n", what);
}

/* Non-zero when HAKMEM is the allocator (preloaded). */
static inline int sec_on_hakmem(void) { return dlsym(RTLD_DEFAULT, "hak_owns") != NULL; }

/* Some allocator traffic after the bug, so checks on later calls can fire. */
static inline void sec_churn(size_t size)
{
    void *v[64];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 64; i++) v[i] = malloc(ht_hide(size));
        for (int i = 0; i < 64; i++) free(v[i]);
    }
}

static void sec_child(void *c)
{
    alarm(5);
    ((const sec_case_t *)c)->run();
}

static int sec_run_one(const sec_case_t *c)
{
    char buf[4096];
    int st = ht_run_captured(sec_child, (void *)c, buf, sizeof buf, NULL, 0);
    /* first non-empty line of what the child said */
    char *line = buf;
    while (*line == '\n') line++;
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    const char *verdict;
    if (ht_killed_by(st, SIGALRM)) verdict = "hang";
    else if (WIFSIGNALED(st)) verdict = *line ? "detected" : "crashed";
    else if (WEXITSTATUS(st) != 0) verdict = "error";
    else verdict = *line ? "detected" : "not-detected";
    char sig[32] = "";
    if (WIFSIGNALED(st)) snprintf(sig, sizeof sig, "[signal %d] ", WTERMSIG(st));
    printf("%-28s %-13s %s%s\n", c->name, verdict, sig, line);
    return strcmp(verdict, "error") == 0 ? 2 : 0;
}

static inline int sec_main(int argc, char **argv, const sec_case_t *cases, size_t ncases)
{
    int rc = 0;
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < ncases; i++) puts(cases[i].name);
        return 0;
    }
    for (size_t i = 0; i < ncases; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++) want |= strcmp(argv[a], cases[i].name) == 0;
        if (want && sec_run_one(&cases[i])) rc = 2;
    }
    return rc;
}

#define SEC_MAIN(cases)                                                        \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        setvbuf(stdout, NULL, _IOLBF, 0);                                      \
        return sec_main(argc, argv, cases, sizeof cases / sizeof cases[0]);    \
    }

#ifdef __cplusplus
}
#endif

#endif
