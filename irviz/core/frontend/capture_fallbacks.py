"""When torch.export cannot capture a model: the fallbacks, in order, and one message when none works.

irviz's capture is ``torch.export.export(..., strict=False)`` (non-strict: Python runs forward()
itself, so more models export than with strict tracing).  When that fails, ``fall_back`` tries:

1. **torch.export with the branches' eager values**: irviz runs the model once in eager torch,
   recording what each ``bool(tensor)`` (``if x.sum() > 0:``) and each ``bool_tensor.item()``
   (Longformer's ``is_global_attn``) gave at each source line, then exports again answering the
   conditions torch.export cannot decide with those values.  The graph holds the branches the
   example inputs take; each assumption (its line, value and module) goes to the capture's notes.
2. **draft export** (``torch.export.draft_export``, where torch has it): torch's own guesses for
   data-dependent conditions, with run-time assertions irviz removes (TVM cannot check them).  In
   torch 2.13 its guess does not follow the example inputs reliably (on ``y = self.lin(x)``,
   ``if y.sum() > 0:`` went either way from run to run, whatever the sum's sign), so it only
   serves when its graph gives eager torch's numbers.
3. **torch.fx.symbolic_trace** (the course's capture, imported with the course importer), where the
   model's forward() traces without tensor values.

A fallback's graph must give eager torch's numbers on the example inputs before it is used (the
build is compared with eager torch afterwards too).  When nothing captures the model, one
CaptureError lists what was tried and why each failed, with the guard, the source line and the
module of the data-dependent branch.
"""
from __future__ import annotations

import collections
import inspect
import linecache
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from irviz.core.errors import CaptureError

FALLBACKS = ("export with eager branch values", "draft export", "symbolic_trace")
_GUARD = re.compile(r"data-dependent expression (.+?) \(unhinted")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)')


def fall_back(loaded, export_error: CaptureError, cause: BaseException, user_files: list[str],
              finish: Callable, symbolic_trace: Callable):
    """The first fallback that captures `loaded` and matches eager torch, as a Captured whose
    `notes` say which one was used and what it assumed; else one CaptureError naming them all.

    finish(ep, edit) decomposes an ExportedProgram, applies edit to the decomposed program and
    reads its graph (capture.py's own tail); symbolic_trace(loaded) is capture.py's other capture.
    """
    tried = [("torch.export (non-strict)", _why_export_failed(loaded, export_error, cause, user_files))]
    try:
        ep, assumed = _export_with_eager_values(loaded)
        captured = finish(ep, _strip_assertions)
        _check_numbers(captured.exported.module(), loaded)
    except Exception as e:
        tried.append(("torch.export with eager branch values", _short(e)))
    else:
        captured.fallback = "torch.export with eager branch values"
        captured.notes = (_used(tried, captured.fallback),
                          *(f"assumed {a}" for a in assumed))
        return captured
    try:
        ep, assumed = _draft_export(loaded, user_files)
        captured = finish(ep, _strip_assertions)
        _check_numbers(captured.exported.module(), loaded)
    except Exception as e:
        tried.append(("draft export", _short(e)))
    else:
        captured.fallback = "draft export"
        captured.notes = (_used(tried, "draft export"),
                          *(f"draft export assumed {a}" for a in assumed))
        return captured
    if loaded.dynamic_shapes is not None:
        tried.append(("symbolic_trace", "not tried: the model has dynamic shapes "
                                        "(get_dynamic_shapes), which symbolic_trace does not keep"))
    else:
        try:
            captured = symbolic_trace(loaded)
            with torch.no_grad():
                _check_numbers(captured.fx_module, loaded)
        except Exception as e:
            tried.append(("symbolic_trace", _short(e)))
        else:
            captured.fallback = "symbolic_trace"
            captured.notes = (_used(tried, "symbolic_trace"),)
            return captured
    lines = [f"torch.export could not capture {loaded.name}, and neither could irviz's fallbacks; tried:"]
    lines += [f"  {i}. {what}: {why}" for i, (what, why) in enumerate(tried, 1)]
    raise CaptureError("\n".join(lines), hint=export_error.hint,
                       detail=export_error.detail) from None


def _used(tried, name: str) -> str:
    failed = "; ".join(f"{what} failed: {why.splitlines()[0]}" for what, why in tried)
    return f"captured with {name} ({failed})"


# ---------------------------------------------------------------------------------------------
# torch.export with the branches' eager values


def _call_site() -> tuple[str, int]:
    f = sys._getframe(2)  # 0: here, 1: the patched method, 2: the line that asked
    return f.f_code.co_filename, f.f_lineno


def _eager_values(loaded) -> dict:
    """{(file, line): [value of each bool(tensor) / bool_tensor.item() there, in order]}."""
    seen: dict = collections.defaultdict(list)
    real_bool, real_item = torch.Tensor.__bool__, torch.Tensor.item

    def as_bool(t):
        v = real_bool(t)
        seen[_call_site()].append(v)
        return v

    def item(t):
        v = real_item(t)
        if t.dtype == torch.bool:
            seen[_call_site()].append(v)
        return v

    torch.Tensor.__bool__, torch.Tensor.item = as_bool, item
    try:
        with torch.no_grad():
            loaded.module(*loaded.example_inputs)
    finally:
        torch.Tensor.__bool__, torch.Tensor.item = real_bool, real_item
    return seen


def _export_with_eager_values(loaded):
    """(ExportedProgram, what it assumed): torch.export, where each condition it cannot decide
    gets the value the same line's same occurrence had in eager torch."""
    seen = _eager_values(loaded)
    if not seen:
        raise CaptureError("not used: forward() asks no bool(tensor) or bool .item() in eager torch")
    count: collections.Counter = collections.Counter()
    used: list = []
    real_bool, real_item = torch.Tensor.__bool__, torch.Tensor.item

    def answer(site, fallback):
        i = count[site]
        count[site] += 1
        if i < len(seen.get(site, ())):
            used.append((site, seen[site][i]))
            return seen[site][i]
        return fallback()

    def as_bool(t):
        site = _call_site()
        try:
            v = real_bool(t)
        except Exception:  # a data-dependent guard: the eager value, if this line had one
            return answer(site, lambda: real_bool(t))
        count[site] += 1
        return v

    def item(t):  # a SymBool would only fail later, in the `if`: answer now
        return answer(_call_site(), lambda: real_item(t)) if t.dtype == torch.bool else real_item(t)

    torch.Tensor.__bool__, torch.Tensor.item = as_bool, item
    try:
        ep = torch.export.export(loaded.module, tuple(loaded.example_inputs),
                                 dynamic_shapes=loaded.dynamic_shapes, strict=False)
    finally:
        torch.Tensor.__bool__, torch.Tensor.item = real_bool, real_item
    assumed = []
    for (fname, line), value in dict.fromkeys(used):
        code = linecache.getline(fname, line).strip()
        mod = module_at(loaded.module, fname, line)
        assumed.append(f"`{code}` is {value} at {Path(fname).name}:{line}" + (f" in {mod}" if mod else "")
                       + ", as on the example inputs (inputs that change it are computed as if it held)")
    return ep, assumed


# ---------------------------------------------------------------------------------------------
# draft export


def _draft_export(loaded, user_files):
    """(ExportedProgram, what it assumed) from torch.export.draft_export; raises when torch has
    no draft export or it fails."""
    draft = getattr(torch.export, "draft_export", None)
    if draft is None:
        raise CaptureError(f"this torch ({torch.__version__}) has no torch.export.draft_export")
    ep = draft(loaded.module, tuple(loaded.example_inputs), dynamic_shapes=loaded.dynamic_shapes,
               strict=False)
    report = getattr(ep, "_report", None)
    assumed = []
    for f in getattr(report, "failures", ()) or ():
        data = getattr(f, "data", {}) or {}
        kind = getattr(getattr(f, "failure_type", None), "name", "")
        if kind != "DATA_DEPENDENT_ERROR":  # a guard on a shape, or a fake kernel: not an assumption
            raise CaptureError(f"draft export reported {kind.lower().replace('_', ' ') or 'a failure'}"
                               f"{': ' + str(data.get('expr') or data.get('op')) if data else ''}")
        stack = data.get("user_stack") or []
        names = getattr(report, "str_to_filename", {}) or {}
        what, where = f"{data.get('expr')}", ""
        for fr in reversed(stack):
            fname = names.get(fr.get("filename"), str(fr.get("filename", "")))
            if fr.get("name") in ("_wrapped_call_impl", "_call_impl"):
                continue
            code = (fr.get("loc") or "").strip()
            what = f"`{code}` ({what})" if code else what
            where = f" at {Path(fname).name}:{fr.get('line')}"
            mod = module_at(loaded.module, fname, fr.get("line"))
            where += f" in {mod}" if mod else ""
            break
        assumed.append(f"{what} is {data.get('result')}{where}, as on the example inputs "
                       "(inputs that change it are computed as if it held)")
    return ep, assumed


def _strip_assertions(ep):
    """Remove run-time assertions on data-dependent values (and what only they used): TVM cannot
    check them, and what they assumed is in the notes."""
    g = ep.graph
    for n in list(g.nodes):
        if n.op == "call_function" and n.target in (torch.ops.aten._assert_scalar.default,
                                                    torch.ops.aten.sym_constrain_range_for_size.default):
            g.erase_node(n)
    g.eliminate_dead_code()
    ep.graph_module.recompile()
    return ep


# ---------------------------------------------------------------------------------------------
# checks and messages


def _check_numbers(fn, loaded):
    """CaptureError unless fn(*example_inputs) gives eager torch's outputs."""
    from torch.utils._pytree import tree_leaves

    with torch.no_grad():
        want = [t for t in tree_leaves(loaded.module(*loaded.example_inputs)) if isinstance(t, torch.Tensor)]
        got = [t for t in tree_leaves(fn(*loaded.example_inputs)) if isinstance(t, torch.Tensor)]
    if len(want) != len(got):
        raise CaptureError(f"its graph gives {len(got)} outputs, eager torch {len(want)}")
    for i, (a, b) in enumerate(zip(want, got)):
        if a.shape != b.shape or not torch.allclose(a.double(), b.double(), rtol=1e-4, atol=1e-5,
                                                    equal_nan=True):
            err = (a.double() - b.double()).abs().max().item() if a.shape == b.shape else "shape"
            raise CaptureError(f"its graph's output {i} differs from eager torch on the example "
                               f"inputs (max abs error {err})")


def _why_export_failed(loaded, error: CaptureError, cause: BaseException, user_files) -> str:
    """torch.export's failure in one line, with the data-dependent guard, its line and module."""
    text = str(cause)
    guard = _GUARD.search(text)
    if not guard:
        return _short(error).removeprefix("torch.export failed: ")
    frames = [(f, int(ln), code.strip()) for f, ln, code in _FRAME.findall(text)]
    frames += [(fr.filename, fr.lineno, (fr.line or "").strip())
               for fr in traceback.extract_tb(cause.__traceback__)]
    frames = [fr for fr in frames if "/torch/" not in fr[0].replace("\\", "/")]
    mine = [fr for fr in frames if fr[0] in user_files] or frames
    out = f"data-dependent guard {guard.group(1)}"
    if mine:
        f, line, code = mine[-1]
        out += f" at {Path(f).name}:{line}" + (f" `{code}`" if code else "")
        mod = module_at(loaded.module, f, line)
        out += f" in {mod}" if mod else ""
    return f"{out} ({type(cause).__name__})"


def module_at(root: torch.nn.Module, filename: str, line) -> str:
    """'encoder.layer.0.attention.self (LongformerSelfAttention)': the first submodule whose
    class's source holds filename:line ('' when none does)."""
    try:
        target, line = str(Path(filename).resolve()), int(line)
    except (TypeError, ValueError, OSError):
        return ""
    seen: dict[type, bool] = {}
    for path, m in root.named_modules():
        cls = type(m)
        if cls not in seen:
            seen[cls] = _class_holds(cls, target, line)
        if seen[cls]:
            return f"{path} ({cls.__name__})" if path else cls.__name__
    return ""


def _class_holds(cls, target: str, line: int) -> bool:
    try:
        if str(Path(inspect.getsourcefile(cls)).resolve()) != target:
            return False
        lines, start = inspect.getsourcelines(cls)
    except (TypeError, OSError):
        return False
    return start <= line < start + len(lines)


def _short(e: BaseException) -> str:
    if isinstance(e, CaptureError):  # its first line, and where in the user's code
        lines = [ln.strip() for ln in e.message.split("\n")]
        return " ".join([lines[0]] + [ln for ln in lines[1:] if ln.startswith("at ")])
    first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")
    first = first if len(first) <= 240 else first[:240] + "..."
    out = f"{type(e).__name__}: {first}" if first else type(e).__name__
    here = str(Path(__file__).resolve().parents[2])  # irviz's own frames are not the user's line
    user = [fr for fr in traceback.extract_tb(e.__traceback__)
            if not _is_library(fr.filename) and not fr.filename.startswith(here)]
    if user:
        out += f" at {Path(user[-1].filename).name}:{user[-1].lineno}: {(user[-1].line or '').strip()}"
    return out


def _is_library(path: str) -> bool:
    p = path.replace("\\", "/")
    return "/site-packages/" in p or "/dist-packages/" in p or "/lib/python3" in p or p.startswith("<")
