#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# junit-to-tap.py PREFIX FILE.xml: one line per test case of a JUnit report (pytest's or node --test's):
# "PASS<TAB>name" or "FAIL<TAB>name<TAB>first line of the failure". An empty or unreadable report is one FAIL.
import sys
import xml.etree.ElementTree as ET

prefix, path = sys.argv[1], sys.argv[2]
try:
    cases = list(ET.parse(path).getroot().iter("testcase"))
except Exception as e:  # noqa: BLE001 - any broken report is a failure to show
    print(f"FAIL\t{prefix}: the test run left no readable report\t{e}")
    sys.exit(0)
if not cases:
    print(f"FAIL\t{prefix}: no test ran")
for c in cases:
    name = c.get("name", "?")
    cls = c.get("classname", "")
    if cls and cls != "test":
        name = f"{cls.split('.')[-1]}::{name}"
    bad = c.find("failure")
    if bad is None:
        bad = c.find("error")
    skipped = c.find("skipped")
    if bad is not None:
        msg = (bad.get("message") or bad.text or "").strip().splitlines()
        print(f"FAIL\t{prefix} {name}\t{msg[0][:300] if msg else ''}")
    elif skipped is not None:
        print(f"SKIP\t{prefix} {name}\t{(skipped.get('message') or '').strip()[:200]}")
    else:
        print(f"PASS\t{prefix} {name}")
