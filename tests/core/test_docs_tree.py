"""docs/architecture.md lists the modules of every room; these tests keep that list true of the
tree, so a module added or removed without its line fails here instead of going stale silently.
They also check that the relative links between README.md and docs/ lead somewhere."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# folders of Python files that are not rooms of the code: sample models, listed by `irviz samples`
NOT_ROOMS = {"irviz/samples"}

_MARKER = re.compile(r"^<!-- files: (\S+?)/? -->$")
_ENTRY = re.compile(r"^- `([^`]+)`")


def listed_files(text: str) -> dict[str, list[str]]:
    """{folder: [file names]} from each `<!-- files: FOLDER/ -->` marker and the bullet list of
    `- `NAME.py`: ...` lines right under it."""
    rooms: dict[str, list[str]] = {}
    folder = None
    for line in text.splitlines():
        m = _MARKER.match(line.strip())
        if m:
            folder = m.group(1)
            assert folder not in rooms, f"{folder} is listed twice in {ARCHITECTURE.name}"
            rooms[folder] = []
            continue
        if folder is None:
            continue
        e = _ENTRY.match(line)
        if e:
            rooms[folder].append(e.group(1))
        else:
            folder = None
    return rooms


def package_folders() -> set[str]:
    """Every folder under irviz/ that holds a .py module, as a path from the repository root."""
    return {p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "irviz").rglob("*.py")
            if "__pycache__" not in p.parts}


def test_listing_parser_reads_a_marked_list():
    text = ("<!-- files: irviz/a/ -->\n- `x.py`: one\n- `y.py`: two\n\nprose\n"
            "- `z.py`: not under a marker\n<!-- files: irviz/b -->\n- `w.py`: three\n")
    assert listed_files(text) == {"irviz/a": ["x.py", "y.py"], "irviz/b": ["w.py"]}


def test_architecture_lists_every_module_of_every_room():
    rooms = listed_files(ARCHITECTURE.read_text(encoding="utf-8"))
    assert rooms, f"no `<!-- files: FOLDER/ -->` lists found in {ARCHITECTURE}"
    problems = []
    for folder in sorted(package_folders() - NOT_ROOMS - set(rooms)):
        problems.append(f"{folder}/ has Python modules but no file list in docs/architecture.md")
    for folder, names in sorted(rooms.items()):
        if len(names) != len(set(names)):
            problems.append(f"{folder}/: a file is listed twice")
        present = {p.name for p in (ROOT / folder).glob("*.py")}
        for name in sorted(present - set(names)):
            problems.append(f"{folder}/{name} exists but docs/architecture.md does not list it")
        for name in sorted(set(names) - present):
            problems.append(f"{folder}/{name} is listed in docs/architecture.md but does not exist")
    assert not problems, "\n".join(problems)


def _slug(heading: str) -> str:
    # GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def test_relative_links_between_readme_and_docs_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
