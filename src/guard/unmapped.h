/* unmapped.h — address ranges HAKMEM recently gave back to the OS (huge
 * blocks, over-aligned blocks, segments), so a block freed again after its
 * memory is gone is reported instead of handed to glibc's free, which would
 * crash on it: the registry no longer knows the range by then. */
#ifndef HAK_UNMAPPED_H
#define HAK_UNMAPPED_H

#include "hak_internal.h"

/* Remember [base, base + size) as unmapped by HAKMEM (call before munmap). */
void unmapped_note(const void *base, size_t size) HAK_HIDDEN;
/* p lies in a range HAKMEM unmapped lately, and nothing is mapped there now. */
bool unmapped_recently(const void *p) HAK_HIDDEN;

#endif
