/* test_purger_join: with the background purger on, joining many threads must
 * not deadlock. pthread_join frees a dead thread's TLS vector while holding
 * glibc's stack-cache lock (once the cached stacks pass 40 MiB); a free slow
 * path that found a purge deadline set used to start the purger thread
 * there, and pthread_create waits for that same lock: the process hung in
 * pthread_join forever (bench_thread_mem under HAKMEM_BACKGROUND_PURGE=1).
 *
 * Shape: the main thread fills its one-block caches (so the TLS vector's
 * free takes the slow path), 64 threads with default 8 MiB stacks touch
 * every class and wait; their exits leave pages that arm the deadline; main
 * joins them. Run with HAKMEM_BACKGROUND_PURGE=1; a watchdog thread turns a
 * hang into a failure (not an alarm: the hung thread has every signal
 * blocked, as the purger start blocks them around pthread_create). */
#include "hak_test.h"

#include <pthread.h>

#define THREADS 64

static pthread_barrier_t done;

static void every_class(void) {
  for (size_t s = 16; s <= 32768; s = s < 128 ? s + 16 : s + s / 8) {
    char *p = malloc(s);
    CHECK(p != NULL, "malloc(%zu)", s);
    memset(p, 1, s);
    free(p);
  }
}

static void *worker(void *arg) {
  (void)arg;
  every_class();
  pthread_barrier_wait(&done);
  return NULL;
}

static void *watchdog(void *arg) {
  (void)arg;
  sleep(20);
  static const char msg[] = "test_purger_join: FAIL: pthread_join hung (purger started under glibc's lock)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

int main(void) {
  hak_test_name = "test_purger_join";
  hak_test_require_hakmem(hak_test_name);
  pthread_t dog;
  CHECK(pthread_create(&dog, NULL, watchdog, NULL) == 0, "pthread_create");
  every_class();
  for (int round = 0; round < 3; round++) {
    pthread_t t[THREADS];
    pthread_barrier_init(&done, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, NULL) == 0, "pthread_create");
    pthread_barrier_wait(&done);
    usleep(150 * 1000); /* past the purge delay: the deadline is due at the next slow path */
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    pthread_barrier_destroy(&done);
  }
  printf("test_purger_join: OK: 3 rounds of %d threads joined with the background purger on\n", THREADS);
  return 0;
}
