"""The issues' performance targets, checked against one comparison run:
each HAKMEM build (fast, and standard when measured) against the best of
Debian's mimalloc, jemalloc and tcmalloc, in the same run."""
from .stats import median, ratio

DEBIAN = ("mimalloc", "jemalloc", "tcmalloc")
BUILDS = (("hakmem", "fast"), ("hakmem-std", "standard"))

# (workload, what the throughput is compared with, least ratio, peak RSS at
# most mimalloc's, builds judged). Issue 6: producer/consumer, re-creation
# and size mix 1.10x the best Debian peer with no more memory than mimalloc,
# and oversubscription 1.0x, in both builds; the Mixed loop 1.02x mimalloc
# in the fast build, on any loop of its shape ("not only on ours"): also on
# the two written with bench_slot_churn.
BOTH = ("hakmem", "hakmem-std")
TARGETS = (
    ("prodcons", "debian", 1.10, True, BOTH),
    ("xmalloc", "debian", 1.10, True, BOTH),
    ("stress", "debian", 1.10, True, BOTH),
    ("sizemix", "debian", 1.10, True, BOTH),
    ("oversub_8x", "debian", 1.00, False, BOTH),
    ("oversub_16x", "debian", 1.00, False, BOTH),
    ("random_mixed", "mimalloc", 1.02, False, ("hakmem",)),
    ("churn_toggle", "mimalloc", 1.02, False, ("hakmem",)),
    ("churn_fill", "mimalloc", 1.02, False, ("hakmem",)),
)


def _median(summary, w, n):
    s = summary.get((w, n))
    return s["median"] if s and s["n"] else None


def paired(summary, workload, mine, theirs, key):
    """Median over the rounds of mine's figure over theirs' in the same
    round (key "rounds": throughput, "rss_rounds": peak RSS), or None.  The
    machine's load drifts over a run by more than the margins judged here;
    a round's runs follow each other, so their ratio cancels most of it."""
    a = (summary.get((workload, mine)) or {}).get(key) or []
    b = (summary.get((workload, theirs)) or {}).get(key) or []
    rs = [x / y for x, y in zip(a, b) if x and y]
    return median(rs) if rs else None


def check(summary, workload, build, versus, least, rss_cap, names):
    """(text of the cell, met?) for one build on one target; None if not
    measured.  Judged on the median of the paired (round-by-round) ratios;
    the ratio of the medians is shown after it."""
    mine = _median(summary, workload, build)
    if mine is None:
        return None
    group = [n for n in (DEBIAN if versus == "debian" else (versus,)) if n in names]
    meds = [(_median(summary, workload, n), n) for n in group]
    meds = [(m, n) for m, n in meds if m]
    if not meds:
        return None
    best, who = max(meds)
    r_med = ratio(mine, best)
    r = paired(summary, workload, build, who, "rounds")
    if r is None:
        r = r_med
    met = r >= least
    text = "%.2f (%s; medians %.2f)" % (r, who, r_med)
    if rss_cap and "mimalloc" in names:
        rss = summary[(workload, build)]["rss_kb"]
        cap = summary[(workload, "mimalloc")]["rss_kb"]
        if rss and cap:
            q = paired(summary, workload, build, "mimalloc", "rss_rounds")
            if q is None:
                q = rss / cap
            met = met and q <= 1.0
            text += ", RSS %.1f/%.1f MB (paired %.3f)" % (rss / 1024.0, cap / 1024.0, q)
    return text, met


def targets_table(workloads, names, summary, markdown_table):
    """Markdown table of the targets this run can judge, or None."""
    present = {w.name for w in workloads}
    builds = [(b, label) for b, label in BUILDS if b in names]
    if not builds or not any(n in names for n in DEBIAN):
        return None
    rows = []
    for w, versus, least, rss_cap, judged in TARGETS:
        if w not in present:
            continue
        goal = "%.2fx %s%s" % (least, "best of " + ", ".join(DEBIAN) if versus == "debian"
                               else versus, "; RSS at most mimalloc's" if rss_cap else "")
        row, verdicts = [w, goal], []
        for b, _ in builds:
            if b not in judged:
                row.append("(no target)")
                continue
            c = check(summary, w, b, versus, least, rss_cap, names)
            row.append(c[0] if c else "-")
            if c:
                verdicts.append(c[1])
        if not verdicts:
            continue
        row.append("yes" if all(verdicts) else "no")
        rows.append(row)
    if not rows:
        return None
    return markdown_table(["workload", "target"] + ["%s build" % label for _, label in builds]
                          + ["met"], rows)
