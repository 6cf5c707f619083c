/* test_early - allocation before main, from constructors and libraries, and
 * the allocation-heavy parts of libc.
 *
 *  - a .preinit_array function (runs before any shared library's
 *    constructor, so before HAKMEM's own) mallocs, frees and keeps a block;
 *  - libearly_needed.so (DT_NEEDED) allocates in its constructor;
 *  - a constructor with priority 101 mallocs/frees, calls dlsym for a missing
 *    symbol and dlerror (which allocates), strdup; a default constructor too;
 *  - main checks and frees all those blocks (and reallocs one);
 *  - libearly_dlopen.so, loaded with dlopen, allocates in its constructor; the
 *    program frees that block; at dlclose its destructor frees and mallocs;
 *  - strdup/strndup, getline/getdelim, qsort (which allocates for big
 *    arrays), printf with huge widths and long doubles, asprintf,
 *    open_memstream, fmemopen, regcomp/regexec, glob, scandir, realpath,
 *    getcwd(NULL), setlocale/newlocale, iconv, getpwuid (NSS), tmpfile;
 *  - a destructor and an atexit handler that free and allocate at exit.
 *
 * usage: test_early PATH/TO/libearly_dlopen.so
 */
#include "hak_test.h"

#include <dirent.h>
#include <glob.h>
#include <iconv.h>
#include <limits.h>
#include <locale.h>
#include <malloc.h>
#include <pwd.h>
#include <regex.h>

char *early_needed_block(void);
char *early_needed_string(void);
void *early_needed_big(void);

static unsigned long g_checks;
#define C(cond, ...) do { g_checks++; CHECK(cond, __VA_ARGS__); } while (0)

/* ---- before main -------------------------------------------------------- */

static char *g_preinit_block;
static int g_preinit_ran;

static void preinit_fn(int argc, char **argv, char **envp)
{
    (void)argc; (void)argv; (void)envp;
    void *p = malloc(24);
    free(p);
    g_preinit_block = malloc(777);
    if (g_preinit_block)
        memset(g_preinit_block, 0x71, 777);
    void *q = calloc(10, 10);
    p = realloc(q, 5000);
    free(p);
    g_preinit_ran = 1;
}
__attribute__((section(".preinit_array"), used)) static void (*const g_preinit_ptr)(int, char **, char **) =
    preinit_fn;

static char *g_ctor101_block, *g_ctor101_dup, *g_ctor101_dlerror;
static char *g_ctor_block;
static int g_ctor101_ran, g_ctor_ran;

__attribute__((constructor(101))) static void ctor101(void)
{
    for (int i = 0; i < 100; i++) {
        void *p = malloc((size_t)i * 13);
        free(p);
    }
    g_ctor101_block = malloc(40000);
    if (g_ctor101_block)
        memset(g_ctor101_block, 0x65, 40000);
    /* dlerror allocates its message buffer */
    void *sym = dlsym(RTLD_DEFAULT, "hakmem_test_no_such_symbol_at_all");
    const char *err = dlerror();
    if (!sym && err)
        g_ctor101_dlerror = strdup(err);
    g_ctor101_dup = strdup("constructor 101");
    g_ctor101_ran = 1;
}

__attribute__((constructor)) static void ctor_default(void)
{
    g_ctor_block = malloc(100);
    if (g_ctor_block)
        strcpy(g_ctor_block, "default constructor");
    g_ctor_ran = 1;
}

static char *g_exit_block;
static void at_exit_handler(void)
{
    /* runs during exit: free, allocate, free */
    if (g_exit_block && strcmp(g_exit_block, "freed at exit") != 0) {
        static const char msg[] = "test_early: FAIL: block for the atexit handler was changed\n";
        if (write(2, msg, sizeof msg - 1) < 0) {}
        _exit(1);
    }
    free(g_exit_block);
    char *p = malloc(5000);
    if (p)
        memset(p, 1, 5000);
    free(p);
}

static char *g_dtor_block;
__attribute__((destructor(101))) static void dtor101(void)
{
    free(g_dtor_block);
    void *p = malloc(64);
    free(p);
}

/* ---- helpers ------------------------------------------------------------ */

static int all_bytes(const void *p, int c, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != (unsigned char)c)
            return 0;
    return 1;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_before_main(void)
{
    C(g_preinit_ran, "the .preinit_array function did not run");
    C(g_preinit_block && all_bytes(g_preinit_block, 0x71, 777), "block from .preinit_array broken");
    char *r = realloc(g_preinit_block, 70000);
    C(r && all_bytes(r, 0x71, 777), "realloc of the .preinit_array block lost contents");
    free(r);
    C(g_ctor101_ran && g_ctor_ran, "constructors did not run");
    C(g_ctor101_block && all_bytes(g_ctor101_block, 0x65, 40000), "block from constructor 101 broken");
    free(g_ctor101_block);
    C(g_ctor101_dlerror && strstr(g_ctor101_dlerror, "hakmem_test_no_such_symbol_at_all"),
      "dlerror in a constructor: %s", g_ctor101_dlerror ? g_ctor101_dlerror : "(null)");
    free(g_ctor101_dlerror);
    C(g_ctor101_dup && !strcmp(g_ctor101_dup, "constructor 101"), "strdup in constructor 101 broken");
    free(g_ctor101_dup);
    C(g_ctor_block && !strcmp(g_ctor_block, "default constructor"), "block from the default constructor broken");
    free(g_ctor_block);

    char *nb = early_needed_block();
    C(nb && all_bytes(nb, 0x4e, 1000), "block from the DT_NEEDED library's constructor broken");
    nb = realloc(nb, 3000);
    C(nb && all_bytes(nb, 0x4e, 1000), "realloc of the DT_NEEDED library's block lost contents");
    free(nb);
    char *ns = early_needed_string();
    C(ns && !strcmp(ns, "allocated in the constructor of a DT_NEEDED library"), "strdup in the library broken");
    free(ns);
    void *big = early_needed_big();
    C(big && all_bytes(big, 0, 3 << 20), "calloc(3 MiB) in the DT_NEEDED library's constructor not zeroed");
    free(big);
}

static void test_dlopen(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    C(h != NULL, "dlopen(%s) failed: %s", path, dlerror());
    char *(*blk)(void) = (char *(*)(void))dlsym(h, "early_dlopen_block");
    void (*report)(int *) = (void (*)(int *))dlsym(h, "early_dlopen_report_to");
    C(blk && report, "dlsym in libearly_dlopen.so failed");
    char *b = blk();
    C(b && all_bytes(b, 0x6d, 5000), "block from the dlopen'ed library's constructor broken");
    free(b);
    static int flag;
    report(&flag);
    C(dlclose(h) == 0, "dlclose failed: %s", dlerror());
    C(flag == 1, "the dlopen'ed library's destructor %s", flag ? "found its block changed" : "did not run");
    /* a failing dlopen allocates an error message */
    void *none = dlopen("/nonexistent/libhakmem_test_missing.so", RTLD_NOW);
    C(none == NULL, "dlopen of a missing file succeeded");
    const char *e = dlerror();
    C(e && strstr(e, "libhakmem_test_missing"), "dlerror after a failed dlopen: %s", e ? e : "(null)");
}

static void test_libc(void)
{
    /* strdup / strndup */
    char *s = strdup("hello, world");
    C(s && !strcmp(s, "hello, world"), "strdup");
    char *t = strndup(s, 5);
    C(t && !strcmp(t, "hello"), "strndup");
    free(s);
    free(t);

    /* tmpfile + getline / getdelim, with one very long line */
    FILE *f = tmpfile();
    C(f != NULL, "tmpfile failed");
    for (int i = 0; i < 2000; i++)
        fprintf(f, "%d:%.*s\n", i, i % 300, "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
    for (int i = 0; i < 200000; i++)
        fputc('x', f);
    fputc('\n', f);
    rewind(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int nlines = 0;
    size_t longest = 0;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (nlines < 2000) {
            int num = atoi(line);
            C(num == nlines, "getline: line %d starts with %d", nlines, num);
        }
        if ((size_t)len > longest)
            longest = (size_t)len;
        nlines++;
    }
    C(nlines == 2001 && longest == 200001, "getline read %d lines, longest %zu", nlines, longest);
    rewind(f);
    len = getdelim(&line, &cap, ':', f);
    C(len == 2 && !strcmp(line, "0:"), "getdelim");
    free(line);
    fclose(f);

    /* qsort: glibc allocates a temporary array for big inputs */
    size_t n = 300000;
    uint32_t *v = malloc(n * sizeof *v);
    C(v != NULL, "malloc failed");
    ht_rng r = { 5 };
    for (size_t i = 0; i < n; i++)
        v[i] = (uint32_t)ht_next(&r);
    qsort(v, n, sizeof *v, cmp_u32);
    for (size_t i = 1; i < n; i++)
        C(v[i - 1] <= v[i], "qsort result not sorted at %zu", i);
    free(v);
    char **strs = malloc(20000 * sizeof *strs);
    C(strs != NULL, "malloc failed");
    for (int i = 0; i < 20000; i++) {
        C(asprintf(&strs[i], "%08x-%d", (unsigned)ht_next(&r), i) > 0, "asprintf failed");
    }
    qsort(strs, 20000, sizeof *strs, cmp_str);
    for (int i = 1; i < 20000; i++)
        C(strcmp(strs[i - 1], strs[i]) <= 0, "qsort of strings not sorted");
    for (int i = 0; i < 20000; i++)
        free(strs[i]);
    free(strs);

    /* printf: huge widths and precisions, long doubles (printf allocates) */
    FILE *devnull = fopen("/dev/null", "w");
    C(devnull != NULL, "fopen /dev/null failed");
    int w = fprintf(devnull, "%*d|%.*f|%.3000Lf|%s", 100000, 42, 5000, 1.0 / 3.0, 1e4000L, "end");
    C(w > 100000 + 5000 + 3000, "fprintf with huge widths returned %d", w);
    fclose(devnull);
    char *big = NULL;
    w = asprintf(&big, "%0*d%.2000Le", 70000, 7, 3.0e-4000L);
    C(w > 72000 && big && big[69999] == '7', "asprintf with a huge width returned %d", w);
    free(big);
    char buf[64];
    snprintf(buf, sizeof buf, "%.5Lg %'d %e", 1.5e300L, 1234567, 2.5);
    C(strstr(buf, "1.5e+300") != NULL, "snprintf: %s", buf);

    /* open_memstream / fmemopen */
    char *ms = NULL;
    size_t msz = 0;
    FILE *m = open_memstream(&ms, &msz);
    C(m != NULL, "open_memstream failed");
    for (int i = 0; i < 100000; i++)
        fprintf(m, "%d,", i);
    fclose(m);
    C(msz > 500000 && !strncmp(ms, "0,1,2,", 6), "open_memstream produced %zu bytes", msz);
    FILE *fm = fmemopen(ms, msz, "r");
    C(fm != NULL, "fmemopen failed");
    int a = -1, b = -1;
    C(fscanf(fm, "%d,%d,", &a, &b) == 2 && a == 0 && b == 1, "fmemopen read");
    fclose(fm);
    free(ms);

    /* regex */
    regex_t re;
    C(regcomp(&re, "^([a-z]+)-([0-9]{2,})(x|y)*$", REG_EXTENDED) == 0, "regcomp failed");
    regmatch_t mt[4];
    C(regexec(&re, "hakmem-2025xyx", 4, mt, 0) == 0 && mt[1].rm_eo == 6, "regexec did not match");
    C(regexec(&re, "Hakmem-2", 4, mt, 0) == REG_NOMATCH, "regexec matched");
    regfree(&re);

    /* glob, scandir, realpath, getcwd */
    glob_t g;
    int gr = glob("/proc/self/*", 0, NULL, &g);
    C(gr == 0 && g.gl_pathc > 10, "glob(/proc/self/*) = %d", gr);
    globfree(&g);
    struct dirent **names = NULL;
    int nn = scandir("/proc/self", &names, NULL, alphasort);
    C(nn > 10, "scandir(/proc/self) = %d", nn);
    for (int i = 0; i < nn; i++)
        free(names[i]);
    free(names);
    char *rp = realpath("/proc/self/../self/./", NULL);
    C(rp != NULL, "realpath(NULL buffer) failed");
    free(rp);
    char *cwd = getcwd(NULL, 0);
    C(cwd != NULL && cwd[0] == '/', "getcwd(NULL, 0) failed");
    free(cwd);

    /* locales and iconv (dlopen of gconv modules) */
    setlocale(LC_ALL, "C.UTF-8");
    locale_t loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    C(loc != (locale_t)0, "newlocale failed");
    freelocale(loc);
    iconv_t cd = iconv_open("UTF-16LE", "UTF-8");
    if (cd != (iconv_t)-1) {
        char in[] = "h\xc3\xa9llo", out[64];
        char *ip = in, *op = out;
        size_t il = strlen(in), ol = sizeof out;
        C(iconv(cd, &ip, &il, &op, &ol) != (size_t)-1 && op - out == 10, "iconv conversion failed");
        iconv_close(cd);
    }
    setlocale(LC_ALL, "C");

    /* NSS (may find nothing in a container: only the calls matter) */
    struct passwd *pw = getpwuid(getuid());
    if (pw)
        C(pw->pw_name != NULL, "getpwuid returned an entry without a name");
    endpwent();
}

int main(int argc, char **argv)
{
    hak_test_require_hakmem("test_early");
    C(argc == 2, "usage: test_early PATH/TO/libearly_dlopen.so");
    test_before_main();
    test_dlopen(argv[1]);
    test_libc();
    g_exit_block = strdup("freed at exit");
    g_dtor_block = malloc(200);
    C(atexit(at_exit_handler) == 0, "atexit failed");
    printf("test_early: OK: %lu checks: blocks from .preinit_array, constructor(101), a DT_NEEDED "
           "library's constructor and a dlopen'ed library's constructor freed by main; dlerror/strdup in "
           "constructors; dlclose destructor; getline, qsort, printf/asprintf with huge widths, "
           "open_memstream, fmemopen, regex, glob, scandir, realpath, getcwd, locales, iconv, NSS; "
           "atexit and destructor allocation%s\n",
           g_checks, hak_test_owns ? "" : " [plain]");
    return 0;
}
