/* options.c — options at run time: read any option, change those marked
 * settable (purge policy, cache sizes), and see the others refused. */
#include <hakmem.h>

#include <errno.h>
#include <stdio.h>

int main(void) {
  long long dirty, delay, profile;
  hak_option_get("HAKMEM_DIRTY_MAX", &dirty);
  hak_option_get("purge_delay_ms", &delay);   /* prefix optional, any case */
  hak_option_get("profile", &profile);
  printf("dirty max %lld bytes, purge delay %lld ms, profile %lld\n", dirty, delay, profile);

  /* A latency-sensitive phase is over: hand memory back sooner. */
  if (hak_option_set("dirty_max", 1 << 20) != 0 || hak_option_set("purge_delay_ms", 10) != 0) return 1;
  /* Smaller thread caches (threads pick them up at their next refill). */
  if (hak_option_set("tcache_max", 32) != 0) return 1;

  int rc = hak_option_set("profile", 2);
  printf("set profile: %s\n", rc == EPERM ? "EPERM (read at start-up only)" : "unexpected");
  rc = hak_option_set("purge_delay_ms", -5);
  printf("set purge_delay_ms=-5: %s\n", rc == ERANGE ? "ERANGE" : "unexpected");
  rc = hak_option_get("no_such_option", &dirty);
  printf("get no_such_option: %s\n", rc == ENOENT ? "ENOENT" : "unexpected");
  return 0;
}
