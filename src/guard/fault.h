/* fault.h — the secure build's SIGSEGV/SIGBUS handler, which names faults
 * in HAKMEM's guard pages and zero-size blocks (guard/fault.c). */
#ifndef HAK_FAULT_H
#define HAK_FAULT_H

#include "hak_internal.h"

/* Once, at start-up, unless HAKMEM_FAULT_HANDLER=0; nothing in the other
 * builds. */
void fault_handler_install(void) HAK_HIDDEN;

#endif
