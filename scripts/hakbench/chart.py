"""gnuplot charts: HAKMEM relative to its peers, and a soak's epochs."""
import math
import os
import shutil
import subprocess
import tempfile

from .common import INSTALL_HINT, log, tail
from .stats import ratio


def gnuplot_available():
    return shutil.which("gnuplot") is not None


def run_gnuplot(script, what):
    if not gnuplot_available():
        log("gnuplot not found: no %s chart (install it with %s)" % (what, INSTALL_HINT))
        return False
    res = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if res.returncode != 0:
        log("gnuplot failed for the %s chart:\n%s" % (what, tail(res.stderr)))
        return False
    return True


def gp_quote(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def chart_bound(values, low):
    """Log-scale axis bound that keeps 1 and every ratio inside, with a margin."""
    if low:
        lo = min(values + [1.0])
        return 2.0 ** (math.floor(math.log2(lo / 1.15) * 2) / 2) if lo > 0 else 0.25
    hi = max(values + [1.0])
    return 2.0 ** (math.ceil(math.log2(hi * 1.15) * 2) / 2)


def chart_comparison(png_path, workloads, allocators, summary, title_suffix=""):
    """Two panels: throughput and peak RSS of HAKMEM relative to each peer (or,
    without HAKMEM, of every allocator relative to glibc)."""
    workloads = [w for w in workloads if w.compared]
    names = [a.name for a in allocators]
    if "hakmem" in names:
        others = [n for n in names if n != "hakmem"]
        series = [("vs " + o, "hakmem", o) for o in others]
        t1 = "HAKMEM throughput / peer throughput (higher is better)"
        t2 = "HAKMEM peak RSS / peer peak RSS (lower is better)"
    elif "glibc" in names:
        others = [n for n in names if n != "glibc"]
        series = [(o, o, "glibc") for o in others]
        t1 = "throughput relative to glibc (higher is better)"
        t2 = "peak RSS relative to glibc (lower is better)"
    else:
        return False
    if not series:
        return False
    tp_all, rs_all = [], []
    with tempfile.TemporaryDirectory(prefix="bench-gp.") as d:
        data = os.path.join(d, "data.txt")
        with open(data, "w", encoding="utf-8") as f:
            f.write("workload " + " ".join(gp_quote(s[0]) for s in series) + " "
                    + " ".join(gp_quote(s[0]) for s in series) + "\n")
            for w in workloads:
                tp, rs = [], []
                for _, num, den in series:
                    r1 = ratio(summary[(w.name, num)]["median"], summary[(w.name, den)]["median"])
                    r2 = ratio(summary[(w.name, num)]["rss_kb"], summary[(w.name, den)]["rss_kb"])
                    ok1 = not math.isnan(r1) and r1 > 0
                    ok2 = not math.isnan(r2) and r2 > 0
                    tp.append("%.4f" % r1 if ok1 else "?")
                    rs.append("%.4f" % r2 if ok2 else "?")
                    if ok1:
                        tp_all.append(r1)
                    if ok2:
                        rs_all.append(r2)
                f.write(gp_quote(w.name) + " " + " ".join(tp) + " " + " ".join(rs) + "\n")
        k = len(series)
        script = """
set terminal pngcairo size 1100,860 font ",10"
set output %(out)s
set termoption noenhanced
set datafile missing "?"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside top center horizontal
set grid ytics
set xtics rotate by -25 nomirror
set logscale y 2
set multiplot layout 2,1 title %(title)s
set title %(t1)s
set ylabel "ratio (log scale)"
set yrange [%(y1lo)g:%(y1hi)g]
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front
plot for [i=2:%(k1)d] %(data)s using i:xtic(1) title columnheader(i)
set title %(t2)s
set yrange [%(y2lo)g:%(y2hi)g]
plot for [i=%(k2)d:%(k3)d] %(data)s using i:xtic(1) title columnheader(i)
unset multiplot
""" % {"out": gp_quote(png_path), "title": gp_quote("HAKMEM benchmarks" + title_suffix),
       "t1": gp_quote(t1), "t2": gp_quote(t2), "data": gp_quote(data),
       "k1": k + 1, "k2": k + 2, "k3": 2 * k + 1,
       "y1lo": chart_bound(tp_all, low=True), "y1hi": chart_bound(tp_all, low=False),
       "y2lo": chart_bound(rs_all, low=True), "y2hi": chart_bound(rs_all, low=False)}
        return run_gnuplot(script, "comparison")


def chart_soak(png_path, epochs, name, seconds):
    with tempfile.TemporaryDirectory(prefix="bench-gp.") as d:
        data = os.path.join(d, "soak.txt")
        with open(data, "w", encoding="utf-8") as f:
            for e in epochs:
                f.write("%s %s %s\n" % (e.get("elapsed", e["epoch"]), e["ops_per_sec"] / 1e6,
                                        e["rss_kb"] / 1024.0))
        script = """
set terminal pngcairo size 1000,700 font ",10"
set output %(out)s
set termoption noenhanced
set multiplot layout 2,1 title %(title)s
set grid
set xlabel "seconds"
set xrange [0:*]
set ylabel "M ops/s per epoch"
set yrange [0:*]
plot %(data)s using 1:2 with lines notitle
set ylabel "RSS MB"
plot %(data)s using 1:3 with lines notitle
unset multiplot
""" % {"out": gp_quote(png_path), "data": gp_quote(data),
       "title": gp_quote("soak: %s, %d s, %d epochs" % (name, seconds, len(epochs)))}
        return png_path if run_gnuplot(script, "soak") else None
