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
 * A case that cannot run at all (harness failure) exits 2: verdict "error". */
#ifndef SEC_HARNESS_H
#define SEC_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;
    void (*run)(void);
} sec_case_t;

/* Keep values and pointers away from the optimizer. */
static inline size_t sec_hide(size_t x) { __asm__ volatile("" : "+r"(x)); return x; }
static inline void *sec_hide_ptr(void *p) { __asm__ volatile("" : "+r"(p)::"memory"); return p; }

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
        for (int i = 0; i < 64; i++) v[i] = malloc(sec_hide(size));
        for (int i = 0; i < 64; i++) free(v[i]);
    }
}

static int sec_run_one(const sec_case_t *c)
{
    int fd[2];
    if (pipe(fd) != 0) { perror("pipe"); return 2; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 2; }
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        close(fd[1]);
        alarm(5);
        c->run();
        _exit(0);
    }
    close(fd[1]);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    /* first non-empty line of what the child said */
    char *line = buf;
    while (*line == '\n') line++;
    char *nl = strchr(line, '\n');
    if (nl) *nl = 0;
    const char *verdict;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) verdict = "hang";
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
