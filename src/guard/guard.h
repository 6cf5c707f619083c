/* guard.h — what happens to pointers HAKMEM did not hand out: they go to the
 * C library's own allocator, and plainly invalid ones are reported, never
 * acted upon. */
#ifndef HAK_GUARD_H
#define HAK_GUARD_H

#include "hak_internal.h"

void   foreign_free(void *p) HAK_HIDDEN;
void  *foreign_realloc(void *p, size_t n) HAK_HIDDEN;
size_t foreign_usable_size(void *p) HAK_HIDDEN;
/* "hakmem: <fn>: <problem> 0x... (ignored)" on stderr, without allocating. */
void   report_bad(const char *fn, const char *problem, const void *p) HAK_HIDDEN;
#define report_invalid(fn, p) report_bad((fn), "invalid pointer", (p))

#endif
