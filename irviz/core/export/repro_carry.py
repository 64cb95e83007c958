"""What irviz adds to TVM when it builds a step, written into a repro folder so that repro.py does
the same without irviz.

* ``irviz_lowerings.py``: the legalizations TVM lacks for the ops irviz's passes emit
  (``R.ewise_fma``); repro.py gives them to LegalizeOps as irviz's build does. Without them plain
  TVM cannot build such a module, and a repro of wrong numbers would show a build failure instead.
* ``irviz_externs.py``: irviz's library functions (``irviz.torch.*``, called through
  ``call_dps_packed``), registered before the build; they need torch.
* ``irviz_registers_<file>.py``: a copy of the opened IR file, run for the functions it registers
  with ``tvm.register_global_func`` (the extern calls of the module that TVM itself does not have).

``carry(out, mods, ir_path)`` writes what the modules need and returns the repro's INFO entries.
"""
from __future__ import annotations

import inspect
import re
import shutil
from pathlib import Path

LOWERINGS_FILE = "irviz_lowerings.py"
EXTERNS_FILE = "irviz_externs.py"

_HEADER = ('"""{what}, copied from irviz ({source}) so that repro.py does what irviz does, '
           'without irviz."""\n')


def _externs(mod) -> set[str]:
    """Extern symbols the Relax functions of `mod` call (call_dps_packed, call_packed)."""
    from tvm import relax

    found: set[str] = set()

    def visit(e):
        if isinstance(e, relax.ExternFunc):
            found.add(str(e.global_symbol))

    for f in mod.functions.values():
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f, visit)
    own = set()  # the module's own PrimFuncs, called by name: linked in by the build
    for gv, f in mod.functions.items():
        own.add(gv.name_hint)
        sym = f.attrs.get("global_symbol") if getattr(f, "attrs", None) is not None else None
        if sym is not None:
            own.add(str(sym))
    return found - own


def _registered_by_user(name: str) -> bool:
    """True for a global function this process has that TVM's own runtime does not provide: one a
    user's file registered (TVM's builtins live under the vm., relax., runtime. ... prefixes)."""
    import tvm

    if name.split(".")[0] in ("vm", "relax", "runtime", "tvm", "ffi", "testing", "topi", "cblas",
                              "cublas", "cudnn", "mkl", "dnnl"):
        return False
    return tvm.get_global_func(name, allow_missing=True) is not None


def _library_source() -> str:
    """library_names + library_functions as one file that imports only tvm (and torch when run)."""
    from irviz.core import library_names
    from irviz.core.backend import library_functions

    names = inspect.getsource(library_names)
    funcs = inspect.getsource(library_functions)
    funcs = re.sub(r"^from irviz\.core\.library_names import .*\n", "", funcs, flags=re.M)
    funcs = funcs.replace("from __future__ import annotations\n", "")
    return (_HEADER.format(what="irviz's library functions (irviz.torch.*)",
                           source="core/library_names.py + core/backend/library_functions.py")
            + names.split('"""', 2)[2] + "\n" + funcs.split('"""', 2)[2])


def carry(out: Path, mods, ir_path=None, all_lowerings: bool = False) -> dict:
    """Write the files the modules `mods` need besides TVM into `out` (see the module doc), every
    lowering irviz has when `all_lowerings`;
    returns {"lowerings": {"file", "ops"} | None, "externs": {"file", "names"} | None,
    "register_files": [{"file", "folder"}], "registered": [names]} for repro.py's INFO."""
    from irviz.core.backend import legalize
    from irviz.core.library_names import PREFIX

    for stale in out.glob("irviz_*.py"):
        stale.unlink()
    ops = sorted(legalize.CUSTOM_LEGALIZE_MAP) if all_lowerings else \
        sorted({op for m in mods for op in legalize.ops_needing_custom_legalize(m)})
    info: dict = {"lowerings": None, "externs": None, "register_files": [], "registered": []}
    if ops:
        src = inspect.getsource(legalize)
        (out / LOWERINGS_FILE).write_text(
            _HEADER.format(what="The lowerings TVM lacks for ops irviz's passes emit",
                           source="core/backend/legalize.py") + src.split('"""', 2)[2],
            encoding="utf-8")
        info["lowerings"] = {"file": LOWERINGS_FILE, "ops": ops}
    externs = sorted(set().union(*(_externs(m) for m in mods))) if mods else []
    library = [n for n in externs if n.startswith(PREFIX)]
    if library:
        (out / EXTERNS_FILE).write_text(_library_source(), encoding="utf-8")
        info["externs"] = {"file": EXTERNS_FILE, "names": library}
    user = [n for n in externs if not n.startswith(PREFIX) and _registered_by_user(n)]
    if user and ir_path is not None and Path(ir_path).is_file():
        name = f"irviz_registers_{re.sub(r'[^0-9A-Za-z_]', '_', Path(ir_path).stem)}.py"
        shutil.copyfile(ir_path, out / name)
        info["register_files"] = [{"file": name, "folder": str(Path(ir_path).resolve().parent)}]
    info["registered"] = user
    return info


def describe(info: dict) -> list[str]:
    """README lines for what `carry` wrote."""
    lines = []
    if info.get("lowerings"):
        lines.append(f"{info['lowerings']['file']}: irviz's lowering of "
                     f"{', '.join(info['lowerings']['ops'])} (TVM has none); repro.py gives it to "
                     "LegalizeOps, as irviz's build does.")
    if info.get("externs"):
        lines.append(f"{info['externs']['file']}: irviz's library functions "
                     f"({', '.join(info['externs']['names'])}), registered before the build "
                     "(needs torch).")
    for f in info.get("register_files") or ():
        lines.append(f"{f['file']}: a copy of the opened file, run for the functions it registers "
                     f"({', '.join(info['registered'])}); its folder {f['folder']} is importable.")
    if info.get("registered") and not info.get("register_files"):
        lines.append(f"The module calls {', '.join(info['registered'])}, registered in irviz's "
                     "process by a file this folder does not hold: register them before running.")
    return lines
