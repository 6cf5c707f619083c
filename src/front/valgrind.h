/* valgrind.h — memcheck support (CMake -DHAKMEM_VALGRIND=ON, like mimalloc's
 * MI_TRACK_VALGRIND): the entry points tell memcheck which blocks the program
 * holds, so it reports leaks, use after free, uninitialised reads and
 * overflows into a block's slack on HAKMEM's blocks as it does on glibc's.
 *
 * - An allocated block is MALLOCLIKE (addressable, undefined unless zeroed)
 *   for the bytes asked for; the rest of its size class is NOACCESS until
 *   malloc_usable_size says the program may use it.
 * - A freed block is FREELIKE (NOACCESS).
 * - HAKMEM itself reads and writes free blocks (free lists, the double-free
 *   stamp): between HAK_VG_ENTER and HAK_VG_LEAVE memcheck's error reporting
 *   is off for the thread, so those accesses are not the program's errors;
 *   memcheck reads NOACCESS bytes as defined, so metadata stays defined.
 * - realloc always moves, so memcheck's block sizes stay exact.
 * In every other build the macros are empty and the code is unchanged. */
#ifndef HAK_VALGRIND_H
#define HAK_VALGRIND_H

#include "hak_internal.h"
#include "os/vg_quiet.h"

#if HAK_VALGRIND
/* A block of n bytes asked for, handed to the program (p may be NULL). */
void  *vg_allocated(void *p, size_t n, bool zeroed) HAK_HIDDEN;
/* The program frees p (before HAKMEM touches it). */
void   vg_freeing(void *p) HAK_HIDDEN;
/* The program was told it may use u bytes of p. */
void   vg_usable(void *p, size_t u) HAK_HIDDEN;
void  *vg_realloc(void *p, size_t n) HAK_HIDDEN;
#define HAK_VG_RETURN_ALLOC(expr, n, zeroed) \
  do { HAK_VG_ENTER(); void *vg_p_ = (expr); HAK_VG_LEAVE(); return vg_allocated(vg_p_, (n), (zeroed)); } while (0)
#define HAK_VG_ALLOCATED(p, n) ((void)vg_allocated((p), (n), false))
#define HAK_VG_FREEING(p) vg_freeing(p)
#define HAK_VG_USABLE(p, u) vg_usable((p), (u))
#else
#define HAK_VG_RETURN_ALLOC(expr, n, zeroed) return (expr)
#define HAK_VG_ALLOCATED(p, n) ((void)0)
#define HAK_VG_FREEING(p) ((void)0)
#define HAK_VG_USABLE(p, u) ((void)0)
#endif

#endif
