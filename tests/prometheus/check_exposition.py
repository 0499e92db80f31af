#!/usr/bin/env python3
"""Runs a program that prints Prometheus text and checks the text with the
parser of the official Python client (Debian: python3-prometheus-client).

Checks: the text parses; each metric name has one HELP and one TYPE line
and each series one sample (the format's rules, which this parser lets
through and stricter ones, such as Go's, refuse); every histogram's buckets
are cumulative and its +Inf bucket equals its _count; every line of EXPECTED
("sample value", the sample written with its labels in sorted order) matches.

usage: check_exposition.py EXPECTED PROGRAM [ARGUMENTS...]
(PROGRAM may be an emulator, such as qemu-aarch64, followed by the program.)
"""
import math
import subprocess
import sys
from collections import defaultdict

from prometheus_client.parser import text_string_to_metric_families


def key(name, labels):
    inner = ",".join('{}="{}"'.format(k, v) for k, v in sorted(labels.items()))
    return "{}{{{}}}".format(name, inner)


def main():
    expected_path, command = sys.argv[1], sys.argv[2:]
    # Bytes decoded as they are: universal newlines would turn a raw carriage
    # return, legal inside a label value, into a line feed.
    text = subprocess.run(command, check=True, stdout=subprocess.PIPE).stdout.decode("utf-8")
    families = list(text_string_to_metric_families(text))
    samples = {}
    problems = []
    for kind in ("HELP", "TYPE"):
        names = [line.split()[2] for line in text.splitlines()
                 if line.startswith("# " + kind + " ")]
        for name in sorted(set(n for n in names if names.count(n) > 1)):
            problems.append("{} lines for {}: {}".format(kind, name, names.count(name)))
    for family in families:
        buckets = defaultdict(list)
        counts = {}
        for sample in family.samples:
            series = key(sample.name, sample.labels)
            if series in samples:
                problems.append("a series twice: " + series)
            samples[series] = sample.value
            if family.type != "histogram":
                continue
            series = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            if sample.name.endswith("_bucket"):
                buckets[series].append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_count"):
                counts[series] = sample.value
        for series, points in buckets.items():
            values = [value for _, value in sorted(points)]
            if values != sorted(values):
                problems.append("{} {}: buckets not cumulative".format(family.name, series))
            if sorted(points)[-1][0] != math.inf or values[-1] != counts.get(series):
                problems.append("{} {}: +Inf bucket differs from _count".format(family.name, series))

    with open(expected_path, encoding="utf-8", newline="\n") as expected:
        for line in expected:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            sample, value = line.rsplit(" ", 1)
            if sample not in samples:
                problems.append("missing: " + sample)
            elif samples[sample] != float(value):
                problems.append("{}: {} (expected {})".format(sample, samples[sample], value))

    print("parsed {} families, {} samples".format(len(families), len(samples)))
    for problem in problems:
        print("PROBLEM " + problem)
    if problems:
        return 1
    print("PASS: the exposition parses and holds the expected values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
