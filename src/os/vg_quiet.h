/* vg_quiet.h — in the HAKMEM_VALGRIND build, memcheck's error reporting is
 * off for the calling thread between HAK_VG_ENTER() and HAK_VG_LEAVE(): the
 * free blocks HAKMEM reads and writes there (free lists, the double-free
 * stamp) are NOACCESS to memcheck, and those accesses are not the program's
 * errors. Nests. Empty in every other build. See front/valgrind.h. */
#ifndef HAK_VG_QUIET_H
#define HAK_VG_QUIET_H

#ifndef HAK_VALGRIND
#define HAK_VALGRIND 0
#endif

#if HAK_VALGRIND
#include <valgrind/memcheck.h>
#define HAK_VG_ENTER() VALGRIND_DISABLE_ERROR_REPORTING
#define HAK_VG_LEAVE() VALGRIND_ENABLE_ERROR_REPORTING
/* Metadata that holds pointers equal to blocks' starts (a page record's
 * start is its first block; the record before it ends there) is an ignored
 * range: memcheck's leak search skips it, or a leaked first block of a page
 * would read as still reachable. Accesses stay defined and unreported. */
#define HAK_VG_METADATA(p, n) VALGRIND_DISABLE_ADDR_ERROR_REPORTING_IN_RANGE((p), (n))
#define HAK_VG_METADATA_GONE(p, n) VALGRIND_ENABLE_ADDR_ERROR_REPORTING_IN_RANGE((p), (n))
#else
#define HAK_VG_ENTER() ((void)0)
#define HAK_VG_LEAVE() ((void)0)
#define HAK_VG_METADATA(p, n) ((void)0)
#define HAK_VG_METADATA_GONE(p, n) ((void)0)
#endif

#endif
