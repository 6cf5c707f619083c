"""Statistics behind the tables and verdicts: median, mean, CV, percentiles, the
Mann-Whitney U test, a bootstrap interval of the delta of medians, drift, and
per-operation figures from the difference of two run lengths."""
import math
import random
import statistics

from .common import EXTRA_SYSCALLS, MEMORY_SYSCALLS


def median(values):
    values = list(values)
    if not values:
        return float("nan")
    return statistics.median(values)


def mean(values):
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def cv(values):
    """Coefficient of variation: sample standard deviation / mean (0 for n=1)."""
    values = list(values)
    if not values:
        return float("nan")
    if len(values) < 2:
        return 0.0
    m = statistics.fmean(values)
    if m == 0:
        return float("nan")
    return statistics.stdev(values) / m


def ratio(a, b):
    """a / b, NaN when either side is missing or b is zero."""
    if a is None or b is None:
        return float("nan")
    try:
        if b == 0 or math.isnan(a) or math.isnan(b):
            return float("nan")
    except TypeError:
        return float("nan")
    return a / b


def percentile(values, p):
    """Linear-interpolation percentile (p in 0..100), as numpy's default."""
    values = sorted(values)
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    rank = (len(values) - 1) * p / 100.0
    lo = int(math.floor(rank))
    hi = min(lo + 1, len(values) - 1)
    frac = rank - lo
    return values[lo] + (values[hi] - values[lo]) * frac


def _mw_counts(m, n, memo={}):
    """Number of orderings of m A's and n B's for each value of U (A above B)."""
    key = (m, n)
    if key in memo:
        return memo[key]
    if m == 0 or n == 0:
        res = [1]
    else:
        a = _mw_counts(m - 1, n)    # largest value is an A: it beats all n B's
        b = _mw_counts(m, n - 1)    # largest value is a B: it beats nothing
        res = [0] * (m * n + 1)
        for u, c in enumerate(a):
            res[u + n] += c
        for u, c in enumerate(b):
            res[u] += c
    memo[key] = res
    return res


def mann_whitney_u(a, b):
    """Two-sided Mann-Whitney U test.  Returns (U of a, p-value).

    Exact distribution when there are no ties and both samples have at most 30
    values; otherwise the normal approximation with tie and continuity
    corrections."""
    a, b = list(a), list(b)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return float("nan"), float("nan")
    u = 0.0
    for x in a:
        for y in b:
            if x > y:
                u += 1.0
            elif x == y:
                u += 0.5
    pooled = a + b
    ties = len(set(pooled)) != len(pooled)
    if not ties and n1 <= 30 and n2 <= 30:
        counts = _mw_counts(n1, n2)
        total = float(sum(counts))
        k = int(round(u))
        p_le = sum(counts[:k + 1]) / total
        p_ge = sum(counts[k:]) / total
        return u, min(1.0, 2.0 * min(p_le, p_ge))
    n = n1 + n2
    mu = n1 * n2 / 2.0
    tie_term = 0.0
    for v in set(pooled):
        t = pooled.count(v)
        tie_term += t ** 3 - t
    var = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return u, 1.0
    z = (abs(u - mu) - 0.5) / math.sqrt(var)
    if z < 0:
        z = 0.0
    return u, min(1.0, math.erfc(z / math.sqrt(2.0)))


def bootstrap_delta_ci(a, b, resamples=2000, seed=12345, level=0.95):
    """Bootstrap confidence interval of (median(b) - median(a)) / median(a), in %."""
    a, b = list(a), list(b)
    if not a or not b:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    deltas = []
    for _ in range(resamples):
        ma = statistics.median(rng.choices(a, k=len(a)))
        mb = statistics.median(rng.choices(b, k=len(b)))
        if ma != 0:
            deltas.append((mb - ma) / ma * 100.0)
    if not deltas:
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0 * 100.0
    return percentile(deltas, tail), percentile(deltas, 100.0 - tail)


def verdict(a, b, alpha=0.05, higher_is_better=True, label_a="A", label_b="B"):
    """Compare samples a and b (e.g. ops/s of two builds).

    A difference is called only when the two-sided Mann-Whitney p-value is
    below alpha AND the bootstrap 95% interval of the delta of medians
    excludes zero; otherwise the delta is within the noise."""
    a, b = list(a), list(b)
    ma, mb = median(a), median(b)
    delta = ratio(mb - ma, ma) * 100.0 if a and b else float("nan")
    _, p = mann_whitney_u(a, b)
    lo, hi = bootstrap_delta_ci(a, b)
    significant = (not math.isnan(p) and p < alpha and not math.isnan(lo)
                   and (lo > 0 or hi < 0))
    if significant:
        better = (delta > 0) == higher_is_better
        text = "%s %s than %s by %.1f%% (p=%.3g)" % (
            label_b, "better" if better else "worse", label_a, abs(delta), p)
    elif len(a) < 4 or len(b) < 4:
        text = "not enough runs for a verdict (need >= 4 per side)"
    else:
        text = "no difference outside the noise (p=%.3g)" % p
    return {"median_a": ma, "median_b": mb, "delta_pct": delta, "p": p,
            "ci_low": lo, "ci_high": hi, "significant": significant, "text": text}


def drift(values, window):
    """(mean of first window, mean of last window, change in %)."""
    values = list(values)
    if not values:
        return float("nan"), float("nan"), float("nan")
    window = max(1, min(window, len(values)))
    first = mean(values[:window])
    last = mean(values[-window:])
    return first, last, ratio(last - first, first) * 100.0


def syscalls_per_op(short, long_):
    """Memory system calls per operation from two runs of different length.

    short/long_: (ops, {syscall: calls}).  The difference of the two cancels
    start-up and warm-up.  Returns ({name: per_op}, total_per_op)."""
    ops_s, calls_s = short
    ops_l, calls_l = long_
    dops = ops_l - ops_s
    if dops <= 0:
        raise ValueError("the long run must do more operations than the short one")
    per = {}
    for name in MEMORY_SYSCALLS + EXTRA_SYSCALLS:
        per[name] = (calls_l.get(name, 0) - calls_s.get(name, 0)) / dops
    return per, sum(per[name] for name in MEMORY_SYSCALLS)


def instructions_per_op(short, long_):
    """(ops, Ir) of two run lengths -> instructions per operation."""
    ops_s, ir_s = short
    ops_l, ir_l = long_
    if ops_l <= ops_s:
        raise ValueError("the long run must do more operations than the short one")
    return (ir_l - ir_s) / float(ops_l - ops_s)


def soak_stats(epochs):
    """Summary of bench_soak epochs (list of dicts)."""
    if not epochs:
        raise ValueError("no epochs")
    tput = [e["ops_per_sec"] for e in epochs]
    ns = [e["ns_per_op"] for e in epochs]
    rss = [e["rss_kb"] for e in epochs]
    n = len(epochs)
    window = max(1, n // 10)
    # Epoch 0 carries the warm-up (first-touch page faults): drift is measured
    # from the epochs after it when there are enough.
    body = slice(1, None) if n >= 3 else slice(0, None)
    t_first, t_last, t_drift = drift(tput[body], window)
    r_first, r_last, r_drift = drift(rss[body], window)
    return {
        "epochs": n, "window": window,
        "ops_per_sec_mean": mean(tput), "ops_per_sec_median": median(tput),
        "cv": cv(tput[body]), "first_epoch_ops_per_sec": tput[0],
        "tput_first": t_first, "tput_last": t_last, "tput_drift_pct": t_drift,
        "rss_first_kb": r_first, "rss_last_kb": r_last, "rss_drift_pct": r_drift,
        "rss_drift_kb": r_last - r_first, "rss_max_kb": max(rss), "rss_min_kb": min(rss),
        "ns_p50": percentile(ns, 50), "ns_p99": percentile(ns, 99),
        "ns_p999": percentile(ns, 99.9), "ns_max": max(ns),
    }
