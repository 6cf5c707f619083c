/* prefix.h — the HAK_PREFIX_ONLY build (CMake -DHAKMEM_PREFIX_ONLY=ON): HAKMEM
 * under its hak_ names only, with no malloc, free, operator new or glibc
 * introspection symbol of its own, so that it can be linked into a program
 * that keeps another malloc: a ThreadSanitizer or libFuzzer program, whose
 * runtime owns malloc, calls HAKMEM through include/hakmem.h.
 *
 * Included by malloc.c and api.c after every system header (a header
 * included later would have its declarations renamed): the entry points
 * are still written under their standard names, and these macros give them
 * hak_ names instead (function-like, so `struct mallinfo2` is untouched). */
#ifndef HAK_PREFIX_H
#define HAK_PREFIX_H

#ifndef HAK_PREFIX_ONLY
#define HAK_PREFIX_ONLY 0
#endif

#if HAK_PREFIX_ONLY
#define malloc(...)             hak_malloc(__VA_ARGS__)
#define free(...)               hak_free(__VA_ARGS__)
#define calloc(...)             hak_calloc(__VA_ARGS__)
#define realloc(...)            hak_realloc(__VA_ARGS__)
#define reallocarray(...)       hak_reallocarray(__VA_ARGS__)
#define aligned_alloc(...)      hak_aligned_alloc(__VA_ARGS__)
#define posix_memalign(...)     hak_posix_memalign(__VA_ARGS__)
/* not in hakmem.h: hidden, so they clash with nothing */
#define malloc_usable_size(...) hak_prefixed_usable_size(__VA_ARGS__)
#define memalign(...)           hak_prefixed_memalign(__VA_ARGS__)
#define valloc(...)             hak_prefixed_valloc(__VA_ARGS__)
#define pvalloc(...)            hak_prefixed_pvalloc(__VA_ARGS__)
#define malloc_trim(...)        hak_prefixed_trim(__VA_ARGS__)
#define malloc_stats(...)       hak_prefixed_stats(__VA_ARGS__)
#define mallinfo2(...)          hak_prefixed_mallinfo2(__VA_ARGS__)
#define mallinfo(...)           hak_prefixed_mallinfo(__VA_ARGS__)
#endif

#endif
