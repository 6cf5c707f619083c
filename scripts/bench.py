#!/usr/bin/env python3
"""HAKMEM benchmark runner: the entry point.  The runner lives in the hakbench
package beside this file (runner, statistics, report and chart, command line;
see hakbench/__init__.py); `scripts/bench.py --help` lists the modes."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hakbench.cli import main  # noqa: E402

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
