#!/usr/bin/env python3
"""Runs a program that writes a Chrome trace (sluice/trace/chrome_trace.hpp)
to a file and prints "admitted N" and "refused N"; checks the file with the
jsonschema package (Debian: python3-jsonschema) against chrome_trace.schema.json
and then what a viewer needs: duration events (B, E) nest on each track, in
the file's order and in time order; every
flow start (s) has exactly one end (f) and every end a start; one "admitted"
instant per admitted message, one dispatch slice per flow, and the refusal
counts adding up to what the program refused, and its lane events (the
program's "lane_events N") as instants. With --lossy (a trace whose
ring lost events, as the program's "lost N" says): the schema, the nesting
and a "lost" instant for every loss; the counts cannot add up.

usage: check_chrome_trace.py [--lossy] SCHEMA OUTPUT_FILE PROGRAM [ARGUMENTS...]
(the program is run with OUTPUT_FILE as its last argument)
"""
import json
import subprocess
import sys
from collections import Counter, defaultdict

import jsonschema


def main():
    arguments = sys.argv[1:]
    lossy = arguments[0] == "--lossy"
    if lossy:
        arguments = arguments[1:]
    schema_path, output_path, command = arguments[0], arguments[1], arguments[2:]
    printed = subprocess.run(command + [output_path], check=True, stdout=subprocess.PIPE).stdout
    counts = dict(line.split() for line in printed.decode().splitlines() if line.strip())
    with open(schema_path, encoding="utf-8") as schema_file:
        schema = json.load(schema_file)
    with open(output_path, encoding="utf-8") as trace_file:
        trace = json.load(trace_file)
    jsonschema.validate(trace, schema, cls=jsonschema.Draft7Validator)

    problems = []
    stacks = defaultdict(list)
    starts, ends = Counter(), Counter()
    admitted = refused = slices = lost = lane_events = 0
    for event in trace["traceEvents"]:
        track = (event["pid"], event["tid"])
        phase = event["ph"]
        if phase == "B":
            stacks[track].append(event["name"])
        elif phase == "E":
            if not stacks[track] or stacks[track].pop() != event["name"]:
                problems.append("an E without its B on {}: {}".format(track, event))
            elif event["name"].startswith("type "):
                slices += 1
        elif phase == "s":
            starts[event["id"]] += 1
        elif phase == "f":
            ends[event["id"]] += 1
        elif phase == "i" and event["name"] == "admitted":
            admitted += 1
        elif phase == "i" and event["name"] == "refused":
            refused += event["args"]["count"]
        elif phase == "i" and event["name"] == "lost":
            lost += event["args"]["events"]
        elif phase == "i" and event["name"].startswith("lane "):
            lane_events += 1
    for track, stack in stacks.items():
        if stack:
            problems.append("B without E on {}: {}".format(track, stack))
    # Viewers order a track's events by time: the slices nest in that order too.
    by_time = defaultdict(list)
    for event in trace["traceEvents"]:
        if event["ph"] in ("B", "E"):
            by_time[(event["pid"], event["tid"])].append(event)
    for track, events in by_time.items():
        depth = 0
        for event in sorted(events, key=lambda e: e["ts"]):
            depth += 1 if event["ph"] == "B" else -1
            if depth < 0:
                problems.append("in time order an E comes before its B on {}".format(track))
                break
    if lost != int(counts["lost"]):
        problems.append("lost {} != {}".format(lost, counts["lost"]))
    if lossy:
        if lost == 0:
            problems.append("a lossy run lost nothing")
        if problems:
            print("\n".join(problems[:20]))
            return 1
        print("{} events, {} lost, schema and nesting ok".format(len(trace["traceEvents"]), lost))
        return 0
    if lost != 0:
        problems.append("the run lost {} events".format(lost))
    if starts != ends or any(n != 1 for n in starts.values()):
        problems.append("flows do not pair one to one")
    expected = int(counts["admitted"])
    for name, seen in (("admitted instants", admitted), ("flows", len(starts)),
                       ("dispatch slices", slices)):
        if seen != expected:
            problems.append("{} {} != admitted {}".format(name, seen, expected))
    if lane_events != int(counts["lane_events"]):
        problems.append("lane events {} != {}".format(lane_events, counts["lane_events"]))
    if refused != int(counts["refused"]) or refused == 0:
        problems.append("refused {} != {}".format(refused, counts["refused"]))
    if problems:
        print("\n".join(problems[:20]))
        return 1
    print("{} events, {} flows, schema and structure ok".format(len(trace["traceEvents"]), expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
