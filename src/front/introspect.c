/* introspect.c — the public introspection and control calls that are not
 * glibc's: options at run time (the table is in policy/options.c). They
 * make sure start-up has run, so a program linked with libhakmem.a may call
 * them first thing. */
#include "front/init.h"
#include "policy/config.h"
#include "hakmem.h"

static void ensure_init(void) {
  if (!hak_init_done()) hak_init();
}

HAK_EXPORT int hak_option_get(const char *name, long long *value) {
  ensure_init();
  return option_get(name, value);
}

HAK_EXPORT int hak_option_set(const char *name, long long value) {
  ensure_init();
  return option_set(name, value);
}
