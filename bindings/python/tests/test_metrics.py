# SPDX-License-Identifier: MIT OR Apache-2.0
"""Runtime.metrics(): the Prometheus text exposition (ctest capi_python)."""

import errno
import re
import threading
import unittest

from tickwheel import Runtime, TickwheelError

from test_tickwheel import WAIT, wait_for

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
VALUE = r"(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]Inf|NaN)"
HELP_RE = re.compile(r"# HELP (%s) (.+)" % NAME)
TYPE_RE = re.compile(r"# TYPE (%s) (counter|gauge|histogram)" % NAME)
SAMPLE_RE = re.compile(r"(%s)(?:\{((?:%s)(?:,%s)*)?\})? (%s)" % (NAME, LABEL, LABEL, VALUE))
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse(text):
    """Strict 0.0.4 parse: {family: {"type", "help", "samples": {(name, labels): value}}}.
    Raises AssertionError on any violation."""
    assert text.endswith("\n"), "no final newline"
    families, order, current = {}, [], None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = "line %d: %r" % (n, line)
        m = HELP_RE.fullmatch(line) or TYPE_RE.fullmatch(line)
        if m:
            name = m.group(1)
            if current != name:
                assert name not in families, "family split or repeated: " + where
                families[name] = {"type": None, "help": None, "samples": {}}
                order.append(name)
                current = name
            fam = families[name]
            assert not fam["samples"], "HELP/TYPE after samples: " + where
            key = "help" if line.startswith("# HELP") else "type"
            assert fam[key] is None, "second %s: %s" % (key, where)
            fam[key] = m.group(2)
            continue
        m = SAMPLE_RE.fullmatch(line)
        assert m, "not a HELP, TYPE or sample line: " + where
        name = m.group(1)
        fam_name = name
        if current and families[current]["type"] == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                if name == current + suffix:
                    fam_name = current
        assert fam_name == current, "sample outside its family: " + where
        fam = families[fam_name]
        assert fam["type"] and fam["help"], "sample before HELP/TYPE: " + where
        # Every series carries runtime="<name>" (1.5): one runtime per text
        # here, so it is checked and dropped from the key.
        all_labels = LABEL_RE.findall(m.group(2) or "")
        assert any(k == "runtime" for k, _ in all_labels), "no runtime label: " + where
        labels = tuple(sorted(l for l in all_labels if l[0] != "runtime"))
        assert (name, labels) not in fam["samples"], "duplicate series: " + where
        fam["samples"][(name, labels)] = float(m.group(3))
    for name, fam in families.items():
        if fam["type"] == "counter":
            assert name.endswith("_total"), name
        if fam["type"] == "histogram":
            # One series per label set other than le (since 1.7, e.g. the
            # stage label of tickwheel_callback_stage_seconds).
            series = {}
            for (s, l), v in fam["samples"].items():
                if s == name + "_bucket":
                    rest = tuple(x for x in l if x[0] != "le")
                    series.setdefault(rest, []).append((float(dict(l)["le"]), v))
            assert series, name
            for rest, buckets in series.items():
                assert buckets[-1][0] == float("inf"), name
                assert all(a[0] < b[0] and a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), name
                assert buckets[-1][1] == fam["samples"][(name + "_count", rest)], name
                assert (name + "_sum", rest) in fam["samples"], name
    return families


def value(families, name, labels=()):
    for fam in families.values():
        if (name, labels) in fam["samples"]:
            return fam["samples"][(name, labels)]
    raise KeyError(name)


class MetricsTest(unittest.TestCase):
    def test_the_parser_rejects_bad_text(self):
        for bad in ("x 1\n", "# HELP x a\n# TYPE x gauge\nx 1 123\n", "# HELP x a\n# TYPE x gauge\nx 1",
                    "# HELP x a\n# TYPE x gauge\nx 1\nx 2\n", "# HELP x a\n# TYPE x counter\nx 1\n"):
            with self.assertRaises(AssertionError, msg=bad):
                parse(bad)

    def test_values_match_stats_at_quiescence(self):
        with Runtime(shards=2, workers=2) as rt:
            fired = threading.Semaphore(0)
            for i in range(20):
                rt.start(0.001 * (i % 3), fired.release)
            held = [rt.start(3600, lambda: None) for _ in range(6)]
            for t in held[:2]:
                self.assertTrue(t.stop())
            self.assertTrue(held[2].reset(7200))
            for _ in range(20):
                self.assertTrue(fired.acquire(timeout=WAIT))
            self.assertTrue(wait_for(lambda: rt.stats()["lateness_samples"] == 20
                                     and rt.stats()["fired"] == 20
                                     and rt.stats()["inbox"] == 0 and rt.stats()["pending"] == 4
                                     # a fired timer is released after its callback returns, so the
                                     # last one may still be live when the semaphore is acquired
                                     and rt.stats()["live"] == 4))
            text = rt.metrics()
            st = rt.stats()
            self.assertIsInstance(text, str)
            fams = parse(text)
            self.assertTrue(all(name.startswith("tickwheel_") for name in fams))
            self.assertEqual(value(fams, "tickwheel_timers_started_total"), st["started"])
            self.assertEqual(value(fams, "tickwheel_timers_started_total"), 26)
            self.assertEqual(value(fams, "tickwheel_timers_fired_total"), 20)
            self.assertEqual(value(fams, "tickwheel_timers_stopped_total"), 2)
            self.assertEqual(value(fams, "tickwheel_timers_reset_total"), 1)
            self.assertEqual(value(fams, "tickwheel_timers_live"), 4)
            self.assertEqual(value(fams, "tickwheel_timers_pending"), 4)
            self.assertEqual(value(fams, "tickwheel_shard_pending", (("shard", "0"),))
                             + value(fams, "tickwheel_shard_pending", (("shard", "1"),)), 4)
            self.assertEqual(value(fams, "tickwheel_callback_lateness_seconds_count"), st["lateness_samples"])
            self.assertEqual(fams["tickwheel_callback_lateness_seconds"]["type"], "histogram")
            self.assertAlmostEqual(value(fams, "tickwheel_callback_lateness_max_seconds"),
                                   st["lateness_max_ns"] / 1e9)
            # Since 1.7 (issue 34): the stages, saturation and memory.
            for stage in ("driver", "wait"):
                self.assertEqual(value(fams, "tickwheel_callback_stage_seconds_count", (("stage", stage),)),
                                 st["lateness_samples"])
            self.assertEqual(value(fams, "tickwheel_callback_stage_seconds_count", (("stage", "run"),)),
                             st["run_duration_samples"])
            self.assertEqual(st["run_duration_samples"], 20)
            self.assertLessEqual(st["driver_lateness_max_ns"], st["lateness_max_ns"])
            self.assertLessEqual(st["wait_lateness_max_ns"], st["lateness_max_ns"])
            for key in ("driver_lateness_p50_ns", "driver_lateness_p99_ns", "driver_lateness_p999_ns",
                        "wait_lateness_p50_ns", "wait_lateness_p99_ns", "wait_lateness_p999_ns",
                        "run_duration_p50_ns", "run_duration_p99_ns", "run_duration_p999_ns",
                        "run_duration_max_ns", "workers_busy", "waiting_for_worker", "callbacks_running",
                        "oldest_run_age_ns"):
                self.assertIsInstance(st[key], int, key)
            self.assertEqual(st["callbacks_running"], 0)
            self.assertEqual(value(fams, "tickwheel_timer_slots"), st["slots"])
            self.assertEqual(value(fams, "tickwheel_timer_resident_bytes"), st["resident_bytes"])
            self.assertGreater(st["resident_bytes"], 0)

    def test_from_a_callback_after_shutdown_and_after_close(self):
        rt = Runtime(shards=1, workers=1)
        got = []
        done = threading.Event()

        def cb():
            got.append(rt.metrics())
            done.set()

        rt.start(0, cb)
        self.assertTrue(done.wait(WAIT))
        parse(got[0])
        rt.start(3600, lambda: None)
        rt.shutdown()
        fams = parse(rt.metrics())
        self.assertEqual(value(fams, "tickwheel_shut_down"), 1)
        self.assertEqual(value(fams, "tickwheel_timers_cancelled_at_shutdown_total"), 1)
        rt.close()
        with self.assertRaises(TickwheelError) as cm:
            rt.metrics()
        self.assertEqual(cm.exception.errno, errno.ESHUTDOWN)

    def test_a_text_larger_than_the_first_buffer(self):
        # 64 shards: about 8 KB, past the binding's first 4 KB buffer (its retry).
        with Runtime(shards=64, workers=1) as rt:
            text = rt.metrics()
            self.assertGreater(len(text), 4096)
            fams = parse(text)
            self.assertEqual(len(fams["tickwheel_shard_pending"]["samples"]), 64)
            self.assertEqual(value(fams, "tickwheel_shards"), 64)

    def test_concurrent_scrapes(self):
        with Runtime(shards=2, workers=2) as rt:
            p = rt.start(0.001, lambda: None, period_s=0.001)
            errors = []

            def scrape():
                try:
                    for _ in range(50):
                        parse(rt.metrics())
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)

            threads = [threading.Thread(target=scrape) for _ in range(3)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            self.assertEqual(errors, [])
            self.assertTrue(p.stop_sync())


if __name__ == "__main__":
    unittest.main()
