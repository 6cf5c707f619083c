/* heap.c — first-class heaps: build a data structure in a heap of its own,
 * use and free its blocks from any thread, then drop the whole structure at
 * once with hak_heap_destroy (no walk over the nodes); or keep the blocks
 * and let the heap go with hak_heap_delete. */
#include <hakmem.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct node {
  struct node *next;
  char name[24];
} node_t;

static void *free_from_another_thread(void *p) {
  hak_free(p); /* a heap's block may be freed by any thread */
  return NULL;
}

int main(void) {
  hak_heap_t *h = hak_heap_new();
  if (!h) return 1;
  node_t *list = NULL;
  for (int i = 0; i < 100000; i++) {
    node_t *n = hak_heap_malloc(h, sizeof *n);
    if (!n) return 1;
    snprintf(n->name, sizeof n->name, "node %d", i);
    n->next = list;
    list = n;
  }
  int *counts = hak_heap_calloc(h, 64, sizeof(int));     /* zeroed */
  char *text = hak_heap_malloc(h, 8);
  strcpy(text, "grow me");
  text = hak_heap_realloc(h, text, 4096);                /* contents kept */
  double *vec = hak_heap_aligned_alloc(h, 64, 1024);     /* 64-byte aligned */
  if (!counts || counts[63] != 0 || strcmp(text, "grow me") != 0 || ((uintptr_t)vec & 63)) {
    printf("unexpected: heap calloc/realloc/aligned_alloc\n");
    return 1;
  }
  pthread_t t;
  pthread_create(&t, NULL, free_from_another_thread, text);
  pthread_join(t, NULL);
  printf("first node: %s; destroying the heap frees all 100000 nodes at once\n", list->name);
  hak_heap_destroy(h); /* every block of h is gone: list, counts, vec */

  /* hak_heap_delete: the heap goes, the blocks stay the program's */
  hak_heap_t *tmp = hak_heap_new();
  char *keep = hak_heap_malloc(tmp, 32);
  strcpy(keep, "still here");
  hak_heap_delete(tmp);
  printf("after hak_heap_delete: %s\n", keep);
  hak_free(keep);
  return 0;
}
