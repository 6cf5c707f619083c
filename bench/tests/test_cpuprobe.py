"""Unit tests of the CPU-availability probe's side of the runner
(scripts/hakbench/cpuprobe.py): parsing bench_cpuprobe's line, the verdict
over a run's probes, and the README refusal on a contended table.

    python3 -m unittest discover -s bench/tests -v
"""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))

from hakbench import common, cpuprobe, parse, report  # noqa: E402

# A real line of bench_cpuprobe (uncontended, 2 vCPUs).
LINE = ("bench_cpuprobe threads=2 reps=3 work=20000000 serial_s=0.010200 parallel_s=0.010700 "
        "ratio=1.0490 ratio_min=1.0100 ratio_max=1.0900 serial_min_s=0.010100 "
        "serial_max_s=0.010400 cpus=1.907 secs=0.0640 serial_all=0.010100,0.010200,0.010400 "
        "parallel_all=0.010600,0.010700,0.011300")


def probe(ratio, serial=0.010, when="before x", at=0.0, others=0.5):
    f = cpuprobe.parse_probe(LINE)
    f.update(ratio=ratio, ratio_max=ratio, serial_s=serial, parallel_s=serial * ratio,
             cpus=2 / ratio)
    return cpuprobe.Probe(when, at, fields=f, others=others)


class ParseProbeTest(unittest.TestCase):
    def test_line(self):
        f = cpuprobe.parse_probe("noise\n" + LINE + "\n")
        self.assertEqual(f["threads"], 2)
        self.assertEqual(f["reps"], 3)
        self.assertAlmostEqual(f["ratio"], 1.049)
        self.assertEqual(f["serial_all"], [0.0101, 0.0102, 0.0104])
        self.assertEqual(len(f["parallel_all"]), 3)

    def test_one_repetition_list(self):
        f = cpuprobe.parse_probe(LINE.replace("0.010100,0.010200,0.010400", "0.0101"))
        self.assertEqual(f["serial_all"], [0.0101])

    def test_bad_lines(self):
        with self.assertRaises(parse.ParseError):
            cpuprobe.parse_probe("bench_other threads=2")
        with self.assertRaises(parse.ParseError):
            cpuprobe.parse_probe(LINE.replace(" ratio=1.0490", ""))
        with self.assertRaises(parse.ParseError):
            cpuprobe.parse_probe(LINE.replace("serial_s=0.010200", "serial_s=0"))
        with self.assertRaises(parse.ParseError):
            cpuprobe.parse_probe(LINE.replace("0.010100,0.010200", "0.0101,x"))


class VerdictTest(unittest.TestCase):
    def test_quiet(self):
        v = cpuprobe.judge([probe(1.05), probe(1.10, 0.011), probe(1.02, 0.0105, "after x")])
        self.assertEqual(v["state"], "quiet")
        self.assertFalse(v["contended"])
        self.assertEqual(v["flags"], [[], [], []])
        self.assertAlmostEqual(v["ratio_median"], 1.05)
        self.assertAlmostEqual(v["ratio_worst"], 1.10)
        line = cpuprobe.verdict_line(v)
        self.assertIn("not contended", line)
        self.assertIn("median 1.05, worst 1.10", line)

    def test_threads_sharing_a_cpu(self):
        # one probe of three: the threads together took 2.4x one alone
        v = cpuprobe.judge([probe(1.05), probe(2.4, when="stress round 9"), probe(1.02)])
        self.assertTrue(v["contended"])
        self.assertEqual(v["contended_probes"], 1)
        self.assertEqual(v["flags"][0], [])
        self.assertIn("parallel/serial 2.40", v["flags"][1][0])
        self.assertEqual(v["ratio_worst_when"], "stress round 9")
        line = cpuprobe.verdict_line(v)
        self.assertIn("CONTENDED", line)
        self.assertIn("contended machine", line)
        self.assertNotIn("host", line)

    def test_host_took_the_cpu(self):
        # contended while the guest's other processes were idle: the host
        probes = [probe(1.05, others=0.0), probe(2.5, others=0.02), probe(2.0, others=0.6),
                  probe(2.0, others=float("nan"))]
        v = cpuprobe.judge(probes)
        self.assertEqual(v["contended_probes"], 3)
        self.assertEqual(v["host_probes"], 1)
        self.assertIn("1 of them with the guest otherwise idle: the host took the CPU",
                      cpuprobe.verdict_line(v))
        table = cpuprobe.probe_table(probes, v, report.markdown_table)
        self.assertIn("| 2% |", table)
        self.assertIn("| 60% |", table)

    def test_every_cpu_slowed(self):
        # the ratio stays low, but one thread alone took 3x the run's best
        v = cpuprobe.judge([probe(1.05, 0.010), probe(1.05, 0.030)])
        self.assertTrue(v["contended"])
        self.assertEqual(v["flags"][0], [])
        self.assertIn("3.00x the run's best", v["flags"][1][0])
        self.assertAlmostEqual(v["serial_worst_s"], 0.030)

    def test_limits_are_strict_bounds(self):
        lim = cpuprobe.RATIO_LIMIT
        self.assertFalse(cpuprobe.judge([probe(lim)])["contended"])
        self.assertTrue(cpuprobe.judge([probe(lim + 0.01)])["contended"])
        s = cpuprobe.SERIAL_LIMIT
        self.assertFalse(cpuprobe.judge([probe(1.0, 0.01), probe(1.0, 0.01 * s)])["contended"])

    def test_failed_probes(self):
        bad = cpuprobe.Probe("before x", 0.0, error="exit status 2")
        v = cpuprobe.judge([bad])
        self.assertEqual(v["state"], "unknown")
        self.assertFalse(v["contended"])
        self.assertIn("unknown", cpuprobe.verdict_line(v))
        self.assertIn("not probed", cpuprobe.verdict_line(cpuprobe.judge([])))
        v = cpuprobe.judge([bad, probe(1.0)])
        self.assertEqual(v["flags"], [None, []])
        self.assertEqual(v["ok"], 1)
        table = cpuprobe.probe_table([bad, probe(1.0)], v, report.markdown_table)
        self.assertIn("failed: exit status 2", table)
        self.assertIn("| ok |", table)

    def test_json(self):
        probes = [probe(1.05), probe(2.0)]
        v = cpuprobe.judge(probes)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            cpuprobe.write_json(path, probes, v)
            with open(path) as f:
                data = json.load(f)
        self.assertTrue(data["verdict"]["contended"])
        self.assertEqual(len(data["probes"]), 2)
        self.assertEqual(data["probes"][1]["fields"]["ratio"], 2.0)
        self.assertEqual(data["probes"][0]["flags"], [])
        self.assertEqual(data["probes"][0]["others"], 0.5)

    def test_probe_log_interval(self):
        calls = []

        def fake(build_dir, when):
            calls.append(when)
            return probe(1.0, when=when)
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "bench"))
            plog = cpuprobe.ProbeLog(d, quiet=True, runner=fake)
            self.assertFalse(plog.enabled)       # no bench_cpuprobe in the build
            self.assertIsNone(plog.probe("before x"))
            open(os.path.join(d, "bench", cpuprobe.PROGRAM), "w").close()
            plog = cpuprobe.ProbeLog(d, quiet=True, interval=3600, runner=fake)
            self.assertTrue(plog.due())
            plog.probe("before x")
            self.assertFalse(plog.due())
            plog.interval = 0
            self.assertTrue(plog.due())
        self.assertEqual(calls, ["before x"])


class ReadmeRefusalTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.readme = os.path.join(self.tmp.name, "README.md")
        with open(self.readme, "w") as f:
            f.write("x\n%s\nold\n%s\n" % (common.README_BEGIN, common.README_END))
        self.out = os.path.join(self.tmp.name, "results")
        os.makedirs(self.out)

    def tearDown(self):
        self.tmp.cleanup()

    def write_report(self, contended):
        with open(os.path.join(self.out, "2026-11-27.md"), "w") as f:
            f.write("# r\n%s\nnew table\n%s\n%s" % (
                common.BLOCK_BEGIN, common.BLOCK_END,
                cpuprobe.CONTENDED_MARK + "\n" if contended else ""))

    def readme_text(self):
        with open(self.readme) as f:
            return f.read()

    def test_refuse_readme(self):
        self.assertTrue(cpuprobe.refuse_readme(True, False))
        self.assertFalse(cpuprobe.refuse_readme(True, True))
        self.assertFalse(cpuprobe.refuse_readme(False, False))

    def test_contended_report_is_refused_without_the_flag(self):
        self.write_report(True)
        self.assertEqual(report.update_readme(out_dir=self.out, readme=self.readme), 1)
        self.assertIn("old", self.readme_text())
        self.assertEqual(report.update_readme(out_dir=self.out, readme=self.readme,
                                              allow_contended=True), 0)
        self.assertIn("new table", self.readme_text())

    def test_quiet_report_is_written(self):
        self.write_report(False)
        self.assertEqual(report.update_readme(out_dir=self.out, readme=self.readme), 0)
        self.assertIn("new table", self.readme_text())


if __name__ == "__main__":
    unittest.main()
