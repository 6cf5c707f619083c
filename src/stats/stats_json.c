/* stats_json.c — the statistics as a JSON document (hak_stats_json,
 * HAKMEM_STATS=json). The schema is in docs/stats.md: one object per group
 * of hak_stats_t, in the order of stats_fields[]; a group this build does not
 * fill is left out (its name is missing from "valid"); class rows appear for
 * classes with any non-zero counter. Written with snprintf into the caller's
 * buffer, no allocation. */
#include "stats/stats.h"
#include "os/lock.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct writer {
  char *buf;
  size_t len, pos; /* pos counts what the whole document needs */
} writer_t;

static void out(writer_t *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *at = w->pos < w->len ? w->buf + w->pos : NULL;
  int n = vsnprintf(at, at ? w->len - w->pos : 0, fmt, ap);
  va_end(ap);
  if (n > 0) w->pos += (size_t)n;
}

static const char *const build_names[] = {"fast", "standard", "observe"};
static const char *const valid_names[] = {"memory", "os", "events", "hits"};

size_t stats_json(char *buf, size_t len) {
  hak_stats_t st;
  stats_gather(&st, true);
  writer_t w = {buf, buf ? len : 0, 0};
  if (w.len) w.buf[0] = 0;
  out(&w, "{\"version\":%u,\"build\":\"%s\",\"valid\":[", st.version, build_names[st.build]);
  for (unsigned b = 0, n = 0; b < 4; b++)
    if (st.valid & (1u << b)) out(&w, "%s\"%s\"", n++ ? "," : "", valid_names[b]);
  out(&w, "]");
  const char *group = NULL;
  for (unsigned i = 0; i < stats_nfields; i++) {
    const stats_field_t *f = &stats_fields[i];
    if (!(st.valid & f->valid)) continue;
    bool first = !group || strcmp(group, f->group) != 0;
    if (first) out(&w, "%s,\"%s\":{", group ? "}" : "", f->group);
    group = f->group;
    out(&w, "%s\"%s\":%llu", first ? "" : ",", f->name,
        (unsigned long long)*(const uint64_t *)((const uint8_t *)&st + f->offset));
  }
  if (group) out(&w, "}");
  if (st.valid & HAK_STATS_HAVE_EVENTS) {
    out(&w, ",\"classes\":[");
    for (unsigned k = 0, n = 0; k < HAK_STATS_CLASSES; k++) {
      const hak_stats_class_t *r = &st.classes[k];
      if (!(r->refills | r->flushes | r->blocks_taken | r->blocks_returned | r->blocks_live | r->cache_alloc_hits |
            r->cache_free_hits))
        continue;
      out(&w, "%s{\"class\":%u,\"block_size\":%llu,\"refills\":%llu,\"flushes\":%llu,\"blocks_taken\":%llu,"
              "\"blocks_returned\":%llu,\"blocks_live\":%llu",
          n++ ? "," : "", k, (unsigned long long)r->block_size, (unsigned long long)r->refills,
          (unsigned long long)r->flushes, (unsigned long long)r->blocks_taken, (unsigned long long)r->blocks_returned,
          (unsigned long long)r->blocks_live);
      if (st.valid & HAK_STATS_HAVE_HITS)
        out(&w, ",\"cache_alloc_hits\":%llu,\"cache_free_hits\":%llu", (unsigned long long)r->cache_alloc_hits,
            (unsigned long long)r->cache_free_hits);
      out(&w, "}");
    }
    out(&w, "]");
  }
#if HAK_OBSERVE
  out(&w, ",\"locks\":{");
  unsigned n = 0;
  for (hak_lock_t *l = atomic_load_explicit(&hak_lock_list, memory_order_acquire); l; l = l->list_next)
    out(&w, "%s\"%s\":%llu", n++ ? "," : "", l->name ? l->name : "unnamed",
        (unsigned long long)atomic_load_explicit(&l->acquisitions, memory_order_relaxed));
  out(&w, "}");
#endif
  out(&w, "}");
  return w.pos;
}

/* At exit: a buffer straight from mmap (not through the allocator, and not
 * counted, so the report does not change what it reports). */
void stats_print_json(int fd) {
  size_t need = stats_json(NULL, 0) + 4096; /* room for figures that grow meanwhile */
  char *buf = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return;
  size_t n = stats_json(buf, need - 1);
  if (n > need - 2) n = need - 2;
  buf[n++] = '\n';
  for (size_t off = 0; off < n;) {
    ssize_t k = write(fd, buf + off, n - off);
    if (k <= 0) break;
    off += (size_t)k;
  }
  munmap(buf, need);
}
