"""The split that keeps the window alive: core never imports Qt, ui never imports torch/TVM."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "irviz"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_never_imports_qt():
    offenders = {str(p.relative_to(ROOT)): _imports(p) & {"PySide6", "shiboken6", "PyQt5", "PyQt6"}
                 for p in (ROOT / "core").rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}


def test_ui_never_imports_torch_or_tvm_statically():
    offenders = {str(p.relative_to(ROOT)): _imports(p) & {"torch", "tvm", "tvm_ffi"}
                 for p in (ROOT / "ui").rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}


def test_importing_the_ui_loads_neither_torch_nor_tvm():
    # Transitive check: what the GUI process really has in sys.modules after importing every ui module.
    code = (
        "import importlib, pkgutil, sys\n"
        "import irviz.ui\n"
        "for m in pkgutil.walk_packages(irviz.ui.__path__, 'irviz.ui.'):\n"
        "    importlib.import_module(m.name)\n"
        "import irviz.cli.main, irviz.protocol.commands\n"
        "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('torch', 'tvm', 'tvm_ffi'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={"QT_QPA_PLATFORM": "offscreen", **__import__("os").environ})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------------------------------------
# no import cycles, function-local imports included (import-linter's layers check the order; this
# checks that nothing hides a cycle behind a lazy import)

# cycles being removed elsewhere; emptied when they are
ALLOWED_CYCLES: list[set[str]] = []


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def import_graph(root: Path) -> dict[str, set[str]]:
    """{module: irviz modules it imports}, every import statement counted wherever it sits (but
    under `if TYPE_CHECKING:`), relative imports resolved; `from pkg import name` counts pkg, and pkg.name when a module."""
    mods = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p

    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        deps = set()
        tree = ast.parse(p.read_text(), filename=str(p))
        for node in ast.walk(tree):
            if _type_checking_only(node):  # read by the type checker, never run
                node.body = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            for n in names:
                if n.split(".")[0] == root.name and (r := resolve(n)) and r != m:
                    deps.add(r)
        graph[m] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def room(module: str) -> str:
    """irviz.core.X for anything in or under irviz.core.X."""
    return ".".join(module.split(".")[:3])


def core_module_cycles(root: Path = ROOT) -> list[set[str]]:
    graph = import_graph(root)
    return [c for c in cycles(graph) if any(m.startswith("irviz.core.") for m in c)]


def core_room_cycles(root: Path = ROOT) -> list[set[str]]:
    rooms: dict[str, set[str]] = {}
    for m, deps in import_graph(root).items():
        if not m.startswith("irviz.core."):
            continue
        rooms.setdefault(room(m), set()).update(
            room(d) for d in deps if d.startswith("irviz.core.") and room(d) != room(m))
    return cycles(rooms)


def test_no_import_cycle_in_core():
    assert core_module_cycles() == []


def test_no_cycle_between_the_rooms_of_core():
    assert core_room_cycles() == []


def test_no_import_cycle_in_irviz_but_the_known_ones():
    found = cycles(import_graph(ROOT))
    assert [c for c in found if c not in ALLOWED_CYCLES] == []


def test_the_cycle_check_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "irviz"
    (pkg / "core" / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a" / "__init__.py").write_text("")
    (pkg / "core" / "a" / "x.py").write_text("def f():\n    from ..b import y\n")
    (pkg / "core" / "b.py").write_text("from irviz.core.a.x import f\n")
    assert core_module_cycles(pkg) == [{"irviz.core.a.x", "irviz.core.b"}]
    assert core_room_cycles(pkg) == [{"irviz.core.a", "irviz.core.b"}]
    # an import only the type checker reads is no cycle
    (pkg / "core" / "a" / "x.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b import y\n")
    assert core_module_cycles(pkg) == []


MAX_LINES = 600          # a module past this has two jobs; split it by job
ENGINE_MAX_LINES = 400   # the engine stays a thin loop over the Workspace


def test_no_module_grows_past_its_size():
    sizes = {p: len(p.read_text().splitlines()) for p in ROOT.rglob("*.py")}
    assert sizes, "the scan sees the package"
    too_big = {str(p.relative_to(ROOT.parent)): n for p, n in sizes.items() if n > MAX_LINES}
    assert too_big == {}
    engine = {str(p.relative_to(ROOT.parent)): n for p, n in sizes.items()
              if p.parent.name == "engine" and n > ENGINE_MAX_LINES}
    assert engine == {}
