"""scripts/test.sh and tests/conftest.py name the same files: the serial pass collects exactly the
files conftest marks serial, and the units conftest starts first exist."""

import os
import re

from conftest import FIRST_UNITS, ROOT, SERIAL_FILES, XDIST_GROUPS


def test_the_serial_pass_collects_exactly_the_files_conftest_marks_serial():
    script = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    listed = re.search(r"^SERIAL_FILES=\(([^)]*)\)", script, re.MULTILINE)
    assert listed, "scripts/test.sh has no SERIAL_FILES=(...) line"
    assert sorted(os.path.basename(path) for path in listed.group(1).split()) == sorted(SERIAL_FILES)
    assert all(os.path.isfile(os.path.join(ROOT, path)) for path in listed.group(1).split())


def test_every_unit_started_first_is_a_test_file_or_a_named_group():
    tests = set(os.listdir(os.path.join(ROOT, "tests")))
    for unit in FIRST_UNITS:
        assert unit in XDIST_GROUPS or unit in tests, unit
