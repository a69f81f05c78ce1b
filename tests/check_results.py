#!/usr/bin/env python3
"""After a ctest stage: list every skipped GoogleTest case with its reason
and fail on any that tests/skips.allow does not name; fail when a test that
ran left no report, or when ctest counted a test as skipped whose output
shows a failure; list integration tests that passed only on their rerun.

Usage: check_results.py RESULTS_DIR ALLOW_FILE CTEST_LOG
RESULTS_DIR holds the gtest XML reports of one label (capsule_test writes
them there): <binary>/<binary>.<Suite>.<Case>.xml for a binary whose cases
are ctest entries of their own, <binary>.xml for one run as a whole.
CTEST_LOG is ctest's Testing/Temporary/LastTest.log of that stage: which
tests ran, with which report, and what they printed."""
import fnmatch
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET

# What a test prints when it failed even though ctest may call it skipped:
# gtest_discover_tests marks a case skipped whenever "[  SKIPPED ]" shows up
# in its output, whatever the exit code, so a failure in the suite's
# tear-down or a sanitizer report at exit after a GTEST_SKIP would pass.
FAILURE_MARKS = re.compile(
    r"^\[  FAILED  \]|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error: |"
    r"^==\d+==ABORTING", re.M)


def load_allow(path):
    rules = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            if len(parts) != 2:
                sys.exit(f"{path}:{n}: expected '<Suite.Test> <reason text>', got {line!r}")
            rules.append((parts[0], parts[1]))
    return rules


def binary_of(results_dir, report):
    first = os.path.relpath(report, results_dir).split(os.sep)[0]
    return first[:-4] if first.endswith(".xml") else first


def skips(results_dir):
    out = []
    reports = glob.glob(os.path.join(results_dir, "**", "*.xml"), recursive=True)
    for report in sorted(reports):
        binary = binary_of(results_dir, report)
        try:
            root = ET.parse(report).getroot()
        except ET.ParseError as e:
            sys.exit(f"{report}: unreadable gtest report ({e}); did {binary} crash while writing it?")
        for case in root.iter("testcase"):
            s = case.find("skipped")
            if s is None:
                continue
            name = f"{case.get('classname')}.{case.get('name')}"
            out.append((binary, name, (s.get("message") or "").replace("\n", " ").strip()))
    return out, len(reports)


def ctest_runs(ctest_log):
    """Each test run in the log, in order: name, report path, outcome
    ('passed', 'failed', 'skipped' or None), output."""
    runs = []
    cur = None
    in_output = False
    with open(ctest_log, errors="replace") as f:
        for line in f:
            m = re.match(r'^\d+/\d+ Test: (\S+)$', line.rstrip("\n"))
            if m:
                cur = {"name": m.group(1), "report": None, "outcome": None, "output": []}
                runs.append(cur)
                in_output = False
                continue
            if cur is None:
                continue
            if line.startswith("Command: "):
                r = re.search(r'"--gtest_output=xml:([^"]+)"', line)
                cur["report"] = r.group(1) if r else None
            elif line.startswith("Output:"):
                in_output = True
            elif line.startswith("<end of output>"):
                in_output = False
            elif in_output:
                cur["output"].append(line)
            elif line.startswith("Test Passed."):
                cur["outcome"] = "passed"
            elif line.startswith("Test Failed."):
                cur["outcome"] = "failed"
            elif line.startswith("Skip regular expression found") or line.startswith("Skip return code"):
                cur["outcome"] = "skipped"
    return runs


def retried(runs):
    """Tests whose log shows a failed run before a passed one."""
    by_name = {}
    for r in runs:
        if r["outcome"] in ("passed", "failed"):
            by_name.setdefault(r["name"], []).append(r["outcome"] == "passed")
    return [n for n, ok in by_name.items() if len(ok) > 1 and ok[-1] and not ok[0]]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    results_dir, allow_file, ctest_log = sys.argv[1:]
    if not os.path.exists(ctest_log):
        sys.exit(f"check_results: {ctest_log} is missing: did ctest run?")
    rules = load_allow(allow_file)
    problems = []
    found, nreports = skips(results_dir)
    for binary, name, msg in found:
        rule = next((r for r in rules if fnmatch.fnmatchcase(name, r[0]) and r[1] in msg), None)
        verdict = f"allowed ({rule[1]})" if rule else "NOT ALLOWED"
        print(f"skip: {binary}: {name}: {msg} -- {verdict}")
        if not rule:
            problems.append(f"skip not on {allow_file}: {name}")
    runs = ctest_runs(ctest_log)
    results_abs = os.path.realpath(results_dir)
    for r in runs:
        report = r["report"]
        if report and os.path.realpath(report).startswith(results_abs + os.sep) and not os.path.exists(report):
            problems.append(f"no report from {r['name']} ({report}): it crashed or never started")
        if r["outcome"] == "skipped" and FAILURE_MARKS.search("".join(r["output"])):
            problems.append(f"{r['name']}: ctest counts it skipped, but its output shows a failure")
    print(f"check_results: {len(runs)} test run(s), {nreports} report(s), {len(found)} skipped case(s) "
          f"in {results_dir}, {len(problems)} problem(s)")
    again = retried(runs)
    if again:
        print(f"check_results: passed only when rerun (flaky, fix them): {' '.join(again)}")
    for p in problems:
        print(f"check_results: FAIL: {p}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
