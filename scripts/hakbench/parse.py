"""Parsing: the benchmark programs' result and epoch lines, and the reports of
strace -c and valgrind; environment assignments given on the command line."""
import re
import shlex


class ParseError(ValueError):
    """A program's output or a tool's report could not be understood."""


_INT_RE = re.compile(r"^[+-]?\d+$")


def _convert(value):
    if _INT_RE.match(value):
        return int(value)
    try:
        return float(value)
    except ValueError:
        return value


def parse_fields(line):
    """'prog a=1 b=2.5 c=x' -> {'program': 'prog', 'a': 1, 'b': 2.5, 'c': 'x'}."""
    tokens = line.split()
    if not tokens or "=" in tokens[0]:
        raise ParseError("no program name at the start of %r" % line)
    out = {"program": tokens[0]}
    for tok in tokens[1:]:
        key, sep, value = tok.partition("=")
        if not sep or not key:
            raise ParseError("token %r in %r is not key=value" % (tok, line))
        out[key] = _convert(value)
    return out


REQUIRED_RESULT_KEYS = ("ops", "secs", "ops_per_sec", "checksum")


def parse_result(text, program=None):
    """The result line of a benchmark program's stdout.

    The result line is the last line that starts with the program's name (any
    name starting with "bench_" when program is None), carries ops_per_sec=
    and is not a per-epoch line (no epoch=)."""
    found = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        name = line.split(None, 1)[0]
        if program is not None and name != program:
            continue
        if program is None and not name.startswith("bench_"):
            continue
        if "ops_per_sec=" not in line or " epoch=" in line:
            continue
        found = line
    if found is None:
        raise ParseError("no result line%s in output: %r"
                         % (" of " + program if program else "", text[-300:]))
    fields = parse_fields(found)
    for key in REQUIRED_RESULT_KEYS:
        if key not in fields:
            raise ParseError("result line lacks %s=: %r" % (key, found))
        if not isinstance(fields[key], (int, float)):
            raise ParseError("%s= is not a number in %r" % (key, found))
    if fields["ops_per_sec"] < 0 or fields["ops"] < 0:
        raise ParseError("negative figures in %r" % found)
    return fields


def parse_epochs(text):
    """Per-epoch lines of bench_soak, in order."""
    epochs = []
    for line in text.splitlines():
        line = line.strip()
        if " epoch=" not in line or not line.startswith("bench_"):
            continue
        f = parse_fields(line)
        for key in ("epoch", "ops", "secs", "ops_per_sec", "ns_per_op", "rss_kb"):
            if key not in f:
                raise ParseError("epoch line lacks %s=: %r" % (key, line))
        epochs.append(f)
    return epochs


_STRACE_ROW = re.compile(
    r"^\s*(?P<pct>[\d.]+)\s+(?P<secs>[\d.]+)\s+(?P<usecs>\d+)\s+(?P<calls>\d+)"
    r"\s+(?:(?P<errors>\d+)\s+)?(?P<name>[A-Za-z_][\w]*)\s*$")


def parse_strace_summary(text):
    """Calls per system call from `strace -c` output (all personalities).

    Returns {name: calls}; the 'total' row is left out."""
    calls = {}
    seen_header = False
    for line in text.splitlines():
        if line.lstrip().startswith("% time"):
            seen_header = True
            continue
        m = _STRACE_ROW.match(line)
        if not m:
            continue
        name = m.group("name")
        if name == "total":
            continue
        calls[name] = calls.get(name, 0) + int(m.group("calls"))
    if not seen_header:
        raise ParseError("no strace -c summary table in %r" % text[-300:])
    return calls


def parse_callgrind_total(text):
    """Total Ir of a callgrind output file ('totals:' or 'summary:' line), or
    of valgrind's stderr ('Collected : N')."""
    for pattern in (r"^totals:\s+(\d+)", r"^summary:\s+(\d+)", r"Collected\s*:\s*(\d+)"):
        m = re.search(pattern, text, re.MULTILINE)
        if m:
            return int(m.group(1))
    raise ParseError("no totals/summary line in callgrind output")


def parse_cachegrind_summary(text):
    """{event: count} from a cachegrind output file ('events:' and 'summary:'
    lines, e.g. Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw)."""
    events = summary = None
    for line in text.splitlines():
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("summary:"):
            summary = line.split()[1:]
    if not events or summary is None:
        raise ParseError("no events/summary line in cachegrind output")
    if len(summary) != len(events) or not all(v.isdigit() for v in summary):
        raise ParseError("cachegrind summary %r does not match events %r" % (summary, events))
    return dict(zip(events, (int(v) for v in summary)))


def parse_env_assignments(spec):
    """'A=1 B="x y"' -> {'A': '1', 'B': 'x y'}."""
    env = {}
    for tok in shlex.split(spec or ""):
        key, sep, value = tok.partition("=")
        if not sep or not key:
            raise ParseError("%r is not NAME=VALUE" % tok)
        env[key] = value
    return env
