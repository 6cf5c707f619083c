"""HAKMEM benchmark runner, split by concern (python3 standard library only).

  common        paths, report markers, log/tail helpers
  parse         the programs' result lines and the tools' reports (strace, valgrind, stats)
  stats         median, CV, Mann-Whitney U, bootstrap, verdicts, per-op differences
  allocators    HAKMEM, glibc and the peers found on this machine
  workloads     the benchmark programs and their arguments
  runner        running and timing programs, under strace and valgrind too
  cpuprobe      the CPU-availability probe (bench_cpuprobe) and its verdict
  report        formatting, tables, markdown/csv reports, the README block
  chart         gnuplot charts
  compare / ab / soak / instructions / locks    the runner's modes
  cli           the command line (scripts/bench.py is its entry point)
"""
