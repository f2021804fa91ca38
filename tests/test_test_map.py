"""tests/README.md, the map from each kerasgen module to its tests, cannot go stale
silently: every module of the package (`kerasgen/**/*.py`) has a row, and every test
file it names exists.

It reads files only (no kerasgen import), so it runs in milliseconds.
"""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "kerasgen"
MAP = TESTS / "README.md"
ROW = re.compile(r"^\|\s*`kerasgen/(?P<module>[A-Za-z0-9_/]+\.py)`\s*\|(?P<tests>[^|]*)\|",
                 re.MULTILINE)
TEST_FILE = re.compile(r"\btest_[A-Za-z0-9_]+\.py\b")


def _rows():
    """{module file name: the test files its row names} of the map's table."""
    return {m["module"]: TEST_FILE.findall(m["tests"]) for m in ROW.finditer(MAP.read_text(
        encoding="utf-8"))}


def test_every_module_has_a_row_naming_its_tests():
    rows = _rows()
    modules = sorted(path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py"))
    missing = [name for name in modules if name not in rows]
    assert not missing, (f"tests/README.md must map every kerasgen module to its tests. "
                         f"Received no row for: {missing}. Add a row per module.")
    empty = [name for name in modules if not rows[name]]
    assert not empty, f"These rows of tests/README.md name no test file: {empty}."
    gone = [name for name in rows if not (PACKAGE / name).exists()]
    assert not gone, f"tests/README.md maps modules that no longer exist: {gone}."


def test_every_test_file_the_map_names_exists():
    named = set(TEST_FILE.findall(MAP.read_text(encoding="utf-8")))
    absent = sorted(name for name in named if not (TESTS / name).is_file())
    assert not absent, (f"tests/README.md names test files that do not exist: {absent}. "
                        "Fix the map (a renamed or removed test file).")
