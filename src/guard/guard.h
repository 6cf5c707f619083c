/* guard.h — what happens to pointers HAKMEM did not hand out: they go to the
 * C library's own allocator, and plainly invalid ones are reported, never
 * acted upon. */
#ifndef HAK_GUARD_H
#define HAK_GUARD_H

#include "hak_internal.h"

void   foreign_free(void *p) HAK_HIDDEN;
void  *foreign_realloc(void *p, size_t n) HAK_HIDDEN;
size_t foreign_usable_size(void *p) HAK_HIDDEN;
void   report_invalid(const char *what, const void *p) HAK_HIDDEN;

#endif
