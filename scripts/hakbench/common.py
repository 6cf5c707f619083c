"""Paths, markers and small helpers every part of the runner shares."""
import os
import sys

# scripts/hakbench/common.py -> the repository.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
README_BEGIN = "<!-- bench:begin -->"
README_END = "<!-- bench:end -->"
BLOCK_BEGIN = "<!-- readme:begin -->"
BLOCK_END = "<!-- readme:end -->"
MEMORY_SYSCALLS = ("mmap", "munmap", "madvise", "brk", "mremap")
# Reported beside them, not in the total: glibc commits memory in its thread
# arenas with mprotect.
EXTRA_SYSCALLS = ("mprotect",)
INSTALL_HINT = "scripts/install-peers.sh"


def log(msg):
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def tail(text, lines=8):
    return "\n".join(text.strip().splitlines()[-lines:])


def fmt_duration(secs):
    secs = int(round(secs))
    return "%dm%02ds" % (secs // 60, secs % 60) if secs >= 60 else "%ds" % secs
