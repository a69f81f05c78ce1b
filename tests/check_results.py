#!/usr/bin/env python3
"""After a ctest stage: list every skipped GoogleTest case with its reason
and fail on any that tests/skips.allow does not name; list integration tests
that passed only on their rerun.

Usage: check_results.py RESULTS_DIR ALLOW_FILE [CTEST_LOG]
RESULTS_DIR holds one gtest XML report per test binary (capsule_test writes
them there); CTEST_LOG is ctest's Testing/Temporary/LastTest.log."""
import fnmatch
import glob
import os
import re
import sys
import xml.etree.ElementTree as ET


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


def skips(results_dir):
    out = []
    for report in sorted(glob.glob(os.path.join(results_dir, "*.xml"))):
        binary = os.path.basename(report)[:-4]
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
    return out


def retried(ctest_log):
    """Tests whose log shows a failed run before a passed one."""
    if not ctest_log or not os.path.exists(ctest_log):
        return []
    runs = {}
    name = None
    with open(ctest_log, errors="replace") as f:
        for line in f:
            m = re.match(r'^\d+/\d+ Test: (\S+)$', line.strip())
            if m:
                name = m.group(1)
            elif name and line.startswith("Test Passed."):
                runs.setdefault(name, []).append(True)
                name = None
            elif name and line.startswith("Test Failed."):
                runs.setdefault(name, []).append(False)
                name = None
    return [n for n, r in runs.items() if len(r) > 1 and r[-1] and not r[0]]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    results_dir, allow_file = sys.argv[1], sys.argv[2]
    rules = load_allow(allow_file)
    bad = []
    found = skips(results_dir)
    for binary, name, msg in found:
        rule = next((r for r in rules if fnmatch.fnmatchcase(name, r[0]) and r[1] in msg), None)
        verdict = f"allowed ({rule[1]})" if rule else "NOT ALLOWED"
        print(f"skip: {binary}: {name}: {msg} -- {verdict}")
        if not rule:
            bad.append(name)
    print(f"check_results: {len(found)} skipped case(s) in {results_dir}, {len(bad)} not on {allow_file}")
    again = retried(sys.argv[3] if len(sys.argv) == 4 else None)
    if again:
        print(f"check_results: passed only when rerun (flaky, fix them): {' '.join(again)}")
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
