#!/usr/bin/env python3
"""Tests check_exposition.py's handling of the program's output, with a
stand-in for the Prometheus client's parser that records the text it is
given (so it runs where the client is not installed).

usage: check_exposition_test.py
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_exposition.py")

RECORDING_PARSER = textwrap.dedent("""\
    import os
    def text_string_to_metric_families(text):
        with open(os.environ["RECORDED_TEXT"], "w", encoding="utf-8", newline="") as out:
            out.write(text)
        return []
    """)


class CheckExpositionTest(unittest.TestCase):
    def run_script(self, output):
        """Runs the script on a program that prints `output`; returns the
        text the parser received."""
        with tempfile.TemporaryDirectory() as directory:
            package = os.path.join(directory, "prometheus_client")
            os.mkdir(package)
            open(os.path.join(package, "__init__.py"), "w").close()
            with open(os.path.join(package, "parser.py"), "w") as parser:
                parser.write(RECORDING_PARSER)
            expected = os.path.join(directory, "expected")
            open(expected, "w").close()
            recorded = os.path.join(directory, "recorded")
            environment = dict(os.environ, PYTHONPATH=directory, RECORDED_TEXT=recorded)
            program = [sys.executable, "-c",
                       "import sys; sys.stdout.buffer.write({!r})".format(output.encode("utf-8"))]
            subprocess.run([sys.executable, SCRIPT, expected] + program, check=True,
                           env=environment, stdout=subprocess.DEVNULL)
            with open(recorded, encoding="utf-8", newline="") as text:
                return text.read()

    def test_a_raw_carriage_return_in_a_label_value_reaches_the_parser(self):
        # The text format escapes only backslash, double quote and line feed;
        # a carriage return in a bus name is written as it is.
        output = 'sluice_queue_depth{bus="a\rb"} 0\n'
        self.assertEqual(self.run_script(output), output)

    def test_utf8_is_decoded(self):
        output = 'sluice_queue_depth{bus="f\u00fcr"} 0\n'
        self.assertEqual(self.run_script(output), output)


if __name__ == "__main__":
    unittest.main()
