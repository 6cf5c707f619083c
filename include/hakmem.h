/* hakmem.h — public API of HAKMEM, a fast general-purpose malloc for Linux.
 *
 * Every function here is the same allocator that backs the interposed
 * malloc/free family; the hak_ names exist so a program can call HAKMEM
 * explicitly (for example when linking libhakmem.a next to another malloc).
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 1
#define HAKMEM_VERSION_PATCH 0

void  *hak_malloc(size_t size);
void   hak_free(void *ptr);
void  *hak_calloc(size_t count, size_t size);
void  *hak_realloc(void *ptr, size_t size);
void  *hak_reallocarray(void *ptr, size_t count, size_t size);
void  *hak_aligned_alloc(size_t alignment, size_t size);
int    hak_posix_memalign(void **out, size_t alignment, size_t size);
size_t hak_usable_size(const void *ptr);

/* Print the allocator's counters (per size class and per event) to stderr. */
void   hak_stats_print(void);

/* Return cached free memory to the OS now; returns 1 if anything was released. */
int    hak_trim(void);

/* Non-zero if ptr lies in memory that HAKMEM manages. */
int    hak_owns(const void *ptr);

/* ---- options (docs/options.md) --------------------------------------------
 * name: an option's environment variable, with or without the HAKMEM_
 * prefix, in any case ("HAKMEM_DIRTY_MAX", "dirty_max"). Sizes are in bytes,
 * delays in milliseconds, choices by number (HAKMEM_THP: 0 system, 1 never,
 * 2 auto, 3 always; HAKMEM_STATS: 0 off, 1 text, 2 json).
 * Both return 0 on success or an errno value: ENOENT (no such option),
 * EINVAL (value is NULL), EPERM (the option is read at start-up only),
 * ERANGE (value outside the option's range, or a cache size above its
 * start-up value). */
int    hak_option_get(const char *name, long long *value);
int    hak_option_set(const char *name, long long value);

#ifdef __cplusplus
}
#endif

#endif /* HAKMEM_H */
