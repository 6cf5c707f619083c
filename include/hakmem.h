/* hakmem.h — public API of HAKMEM, a fast general-purpose malloc for Linux.
 *
 * Every function here is the same allocator that backs the interposed
 * malloc/free family; the hak_ names exist so a program can call HAKMEM
 * explicitly (for example when linking libhakmem.a next to another malloc).
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ---- first-class heaps (docs/api.md, "Heaps") -----------------------------
 * A heap the program creates and allocates from, from any thread: the
 * thread that created it without a lock (about the cost of malloc), any
 * other thread under the heap's lock. Its blocks are freed with
 * free()/hak_free from any thread (each free takes the heap's lock), or all
 * at once by hak_heap_destroy. A NULL heap means the
 * process's ordinary allocator (hak_heap_malloc(NULL, n) is hak_malloc(n)). */
typedef struct hak_heap hak_heap_t;

hak_heap_t *hak_heap_new(void);
void  *hak_heap_malloc(hak_heap_t *heap, size_t size);
void  *hak_heap_calloc(hak_heap_t *heap, size_t count, size_t size);
void  *hak_heap_realloc(hak_heap_t *heap, void *ptr, size_t size);
void  *hak_heap_aligned_alloc(hak_heap_t *heap, size_t alignment, size_t size);
/* Free every block of the heap at once and the heap itself (work per page,
 * none per block); pointers into it must not be used any more. */
void   hak_heap_destroy(hak_heap_t *heap);
/* The heap goes away; its live blocks stay valid, owned by the process. */
void   hak_heap_delete(hak_heap_t *heap);

/* ---- statistics (docs/stats.md) -------------------------------------------
 * One set of counters, the one HAKMEM_STATS=1 prints at exit. What a build
 * counts differs (docs/build.md): `valid` says which groups hold figures. */
#define HAK_STATS_VERSION 1
#define HAK_STATS_CLASSES 96

#define HAK_STATS_HAVE_MEMORY 0x1u  /* memory: every build */
#define HAK_STATS_HAVE_OS     0x2u  /* os: every build */
#define HAK_STATS_HAVE_EVENTS 0x4u  /* blocks, events, classes (but the hits): standard and observe */
#define HAK_STATS_HAVE_HITS   0x8u  /* classes[].cache_alloc_hits/cache_free_hits: observe */

typedef struct hak_stats_class {
  uint64_t block_size;
  uint64_t refills;          /* times a thread cache was refilled from pages */
  uint64_t flushes;          /* times a full thread cache gave blocks back */
  uint64_t blocks_taken;     /* blocks taken from pages (into a cache or to the program) */
  uint64_t blocks_returned;  /* blocks given back to their pages */
  uint64_t blocks_live;      /* taken - returned since start-up (never reset) */
  uint64_t cache_alloc_hits; /* mallocs served by the thread cache (observe) */
  uint64_t cache_free_hits;  /* frees taken by the thread cache (observe) */
} hak_stats_class_t;

typedef struct hak_stats {
  uint32_t version;          /* in: HAK_STATS_VERSION; out: the library's */
  uint32_t size;             /* in: sizeof(hak_stats_t); out: bytes written */
  uint32_t build;            /* 0 fast, 1 standard, 2 observe */
  uint32_t valid;            /* HAK_STATS_HAVE_* */
  struct {                   /* bytes */
    uint64_t mapped;         /* mapped from the OS now */
    uint64_t mapped_peak;    /* highest `mapped` since start-up or hak_stats_reset */
    uint64_t committed;      /* mapped minus free memory known not resident (purged or never touched) */
    uint64_t in_use;         /* slices holding pages of blocks, plus huge mappings: blocks and thread caches */
    uint64_t free_slices;    /* free slices of mapped segments */
    uint64_t free_resident;  /* of those, freed but not yet purged */
    uint64_t huge_blocks;    /* blocks with a mapping of their own */
    uint64_t huge_bytes;     /* their mappings */
    uint64_t process_resident;      /* the whole process's resident memory (VmRSS) */
    uint64_t process_resident_peak; /* its peak (VmHWM; hak_stats_reset resets it) */
  } memory;
  struct {                   /* blocks up to 256 KiB counted where they leave and reach their pages */
    uint64_t small_allocated, small_freed, small_live;                /* blocks */
    uint64_t small_bytes_allocated, small_bytes_freed, small_bytes_live;
    uint64_t large_allocated, large_freed;  /* blocks of 256 KiB..~2 MiB (slice runs) */
    uint64_t huge_allocated, huge_freed;    /* blocks with a mapping of their own */
  } blocks;
  struct {                   /* system calls, and how many failed */
    uint64_t mmap, mmap_failed, munmap, munmap_failed;
    uint64_t madvise, madvise_failed, mremap, mremap_failed;
    uint64_t name, name_failed;             /* prctl(PR_SET_VMA_ANON_NAME) */
    uint64_t thp_advise;                    /* madvise(MADV_[NO]HUGEPAGE) on segments */
    uint64_t hugetlb, hugetlb_fallback;     /* segments on 2 MiB pages; fallbacks to normal pages */
  } os;
  struct {                   /* cold-path events */
    uint64_t segment_map, segment_unmap, segment_reuse;
    uint64_t page_alloc, page_retire, purge_bytes;
    uint64_t refill, flush, remote_free_blocks, remote_free_batches, remote_collect;
    uint64_t page_abandon, page_adopt;
    uint64_t foreign_free, foreign_realloc, foreign_usable_size;
    uint64_t thread_init, thread_exit, shared_heap_alloc;
  } events;
  hak_stats_class_t classes[HAK_STATS_CLASSES];
} hak_stats_t;

/* Fill *st. Set st->version and st->size first (HAK_STATS_INIT does):
 * the library writes at most st->size bytes. Returns 0, or -1 with errno
 * EINVAL (st NULL, or size smaller than the struct's fixed header). */
#define HAK_STATS_INIT {HAK_STATS_VERSION, sizeof(hak_stats_t), 0, 0, {0}, {0}, {0}, {0}, {{0}}}
int    hak_stats_get(hak_stats_t *st);
/* The same figures as a JSON document (docs/stats.md), snprintf-style:
 * writes at most len bytes (NUL included) and returns the length the whole
 * document needs, without the NUL. */
size_t hak_stats_json(char *buf, size_t len);
/* Restart the counters and the peaks from now (live figures are kept). */
void   hak_stats_reset(void);
/* Print the counters (per size class and per event) to stderr, as text. */
void   hak_stats_print(void);

/* Return cached free memory to the OS now; returns 1 if anything was released. */
int    hak_trim(void);

/* Process-wide collection, callable from any thread: the calling thread's
 * caches go back to their pages, the blocks other threads freed into every
 * thread's pages are collected (also those of threads that are idle), pages
 * left empty are retired, and free memory is returned to the OS. force:
 * also wait briefly for threads busy in the allocator, and unmap cached
 * segments and huge mappings (what malloc_trim(0) does). Blocks in other
 * threads' caches stay there. Returns 1 if anything was released. */
int    hak_collect(bool force);

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
