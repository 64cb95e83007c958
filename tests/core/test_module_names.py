"""A module's file name says what it is wherever it is met: in a traceback, an import or a search
result, `run.py` or `session.py` alone does not say which of two rooms it comes from."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "irviz"
# every package has these; the folder names them
PER_PACKAGE = {"__init__.py", "__main__.py"}


def repeated_names(root: Path) -> dict[str, list[str]]:
    where = defaultdict(list)
    for p in root.rglob("*.py"):
        if "__pycache__" not in p.parts and p.name not in PER_PACKAGE:
            where[p.name].append(str(p.relative_to(root.parent)))
    return {name: sorted(paths) for name, paths in where.items() if len(paths) > 1}


def test_the_scan_finds_a_repeated_name(tmp_path):
    for folder in ("irviz/a", "irviz/b", "irviz/c"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "irviz/a/run.py").write_text("")
    (tmp_path / "irviz/b/run.py").write_text("")
    (tmp_path / "irviz/c/other.py").write_text("")
    assert repeated_names(tmp_path / "irviz") == {"run.py": ["irviz/a/run.py", "irviz/b/run.py"]}


def test_no_module_name_repeats_across_the_package():
    assert repeated_names(PACKAGE) == {}
