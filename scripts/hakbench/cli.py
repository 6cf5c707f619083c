"""HAKMEM benchmark runner (python3 standard library only).

Runs the programs in bench/ (built into <build-dir>/bench/) under HAKMEM and
under the peer allocators found on this machine, alternating allocators run by
run, and reports median throughput, its spread, peak resident memory and
memory system calls per operation.

  scripts/bench.py --build-dir build-fast            quick comparison (~3-5 min)
  scripts/bench.py --build-dir build-fast --full     more iterations, more runs
  scripts/bench.py --ab --a-env HAKMEM_PROFILE=speed --b-env HAKMEM_PROFILE=lean
  scripts/bench.py --soak 600 [--allocator hakmem,mimalloc]
  scripts/bench.py --instructions                    instructions, cache and TLB misses /op
  scripts/bench.py --locks                           lock acquisitions per Mop (observe build)
  scripts/bench.py --update-readme                   latest table into README.md
  scripts/bench.py --secure                          libhakmem-secure.so beside the fast build:
                                                     throughput ratio, geometric mean (make bench ARGS=--secure)

Allocators: hakmem (<build-dir>/libhakmem.so), glibc (no preload), mimalloc,
jemalloc and tcmalloc (Debian packages; scripts/install-peers.sh installs
them), and when present the optional peers mimalloc3, snmalloc and rpmalloc
from ../shared/peers (--peers-dir, $HAKMEM_PEERS_DIR).  Results go to bench/results/<date>.{md,csv,png}.
"""
import argparse
import os

from .ab import do_ab
from .allocators import ALL_ALLOCATORS, PEERS_DIR_ENV
from .common import ROOT
from .compare import do_compare
from .instructions import do_instructions
from .locks import do_locks
from .report import update_readme
from .soak import do_soak
from .workloads import WORKLOADS


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--build-dir",
                   help="build directory with libhakmem.so and bench/ (default build-fast)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--ab", action="store_true", help="A/B: two settings, alternating")
    mode.add_argument("--soak", type=int, metavar="SECONDS", help="soak run of bench_soak")
    mode.add_argument("--instructions", action="store_true",
                      help="instructions/op with callgrind (difference of two run lengths)")
    mode.add_argument("--locks", action="store_true",
                      help="process-wide lock acquisitions per million operations (observe "
                           "build, HAKMEM_STATS=1, difference of two run lengths)")
    mode.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--update-readme", action="store_true",
                   help="put the latest table between the bench markers in README.md "
                        "(alone: from the newest bench/results/<date>.md)")
    p.add_argument("--allow-contended", action="store_true",
                   help="--update-readme: write the table even when the CPU-availability "
                        "probes (bench_cpuprobe) read the machine as contended")
    p.add_argument("--readme", help=argparse.SUPPRESS)
    p.add_argument("--std-build-dir", metavar="DIR",
                   help="also measure the standard build's DIR/libhakmem.so as hakmem-std "
                        "(make bench builds it in build-bench-std)")
    p.add_argument("--full", action="store_true", help="more iterations and more runs")
    p.add_argument("--runs", type=int, help="runs per allocator (default 7, --full 11, --ab 10)")
    p.add_argument("--workloads", help="comma-separated workloads (see --list)")
    p.add_argument("--allocators", help="comma-separated subset of " + ",".join(ALL_ALLOCATORS))
    p.add_argument("--lib", action="append", metavar="NAME=PATH",
                   help="comparison and --instructions: also measure this library (or build "
                        "directory's libhakmem.so) as NAME, e.g. an older build; repeatable")
    p.add_argument("--peers-dir", metavar="DIR",
                   help="directory of the optional peers (libmimalloc3.so, libsnmallocshim.so, "
                        "librpmalloc.so); default $HAKMEM_PEERS_DIR, else ../shared/peers "
                        "beside the repository; '' for none")
    p.add_argument("--secure", action="store_true",
                   help="comparison: the build directory's libhakmem-secure.so beside its "
                        "libhakmem.so (only those two unless --allocators), and the ratio of "
                        "their throughputs per workload with its geometric mean; no strace runs")
    p.add_argument("--no-syscalls", action="store_true", help="skip the strace runs")
    p.add_argument("--observe-build", metavar="DIR",
                   help="observe build for --locks/--with-locks (default build-observe, "
                        "configured and built when needed)")
    p.add_argument("--with-locks", action="store_true",
                   help="comparison: add the lock-acquisition table (--locks) to the report")
    p.add_argument("--no-cache", action="store_true",
                   help="--instructions: skip the cachegrind runs (cache and TLB misses)")
    p.add_argument("--no-chart", action="store_true", help="skip the gnuplot chart")
    p.add_argument("--out-dir", help="where results go (default bench/results)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 if any run failed or checksums differ")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--wait-idle", type=int, metavar="SECONDS", default=0,
                   help="first wait up to SECONDS for other work on the machine to stop")
    p.add_argument("--reproduce", help=argparse.SUPPRESS)
    g_ab = p.add_argument_group("A/B (--ab)")
    for side in ("a", "b"):
        g_ab.add_argument("--%s-env" % side, default="",
                          help="environment for side %s, e.g. 'HAKMEM_PROFILE=lean'" % side.upper())
        g_ab.add_argument("--%s-lib" % side,
                          help="library to preload for side %s (path, a peer name, or 'none'"
                               " for glibc; default <build-dir>/libhakmem.so)" % side.upper())
        g_ab.add_argument("--%s-build" % side,
                          help="build directory whose libhakmem.so side %s uses" % side.upper())
        g_ab.add_argument("--label-%s" % side, help="name for side %s" % side.upper())
    g_soak = p.add_argument_group("soak (--soak SECONDS)")
    g_soak.add_argument("--allocator", help="allocator(s) to soak, comma-separated "
                                            "(default hakmem)")
    g_soak.add_argument("--soak-args", help="bench_soak arguments after SECONDS "
                                            "(default '1000000 400 1': EPOCH_OPS WS SEED [MIN MAX])")
    args = p.parse_args(argv)
    if args.peers_dir is not None:
        os.environ[PEERS_DIR_ENV] = args.peers_dir
    explicit_build_dir = args.build_dir is not None

    if not explicit_build_dir:
        if args.update_readme and not (args.ab or args.soak is not None or args.instructions
                                       or args.locks):
            return update_readme(out_dir=args.out_dir, readme=args.readme,
                                 allow_contended=args.allow_contended)
        args.build_dir = os.path.join(ROOT, "build-fast")
    if args.list:
        for w in WORKLOADS:
            print("%-16s %s %s   # %s" % (w.name, w.program, " ".join(w.args(w.quick)), w.desc))
        return 0
    if args.ab:
        return do_ab(args)
    if args.soak is not None:
        return do_soak(args)
    if args.instructions:
        return do_instructions(args)
    if args.locks:
        return do_locks(args)
    return do_compare(args)
