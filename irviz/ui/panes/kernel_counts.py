"""What each kernel's machine code does, as columns of the Run pane's kernel table: instructions,
vector instructions and their width, FMAs, calls out.  The counts come from the engine's
``kernel_code`` for the step and target the run used, asked after the run's reply so Build & Run
is no slower; until they come (or when they are for something else) the cells say so."""
from __future__ import annotations


from irviz.core.views.counts_text import is_arm, widest, width_name, widths_text
from irviz.ui.panes.kernel_table import Column, Num, text_cell

PENDING = "…"

def _state(ctx: dict) -> dict:
    return ctx.get("counts") or {}


def _counts_of(k: dict, ctx: dict) -> dict | None:
    return (_state(ctx).get("kernels") or {}).get(k.get("name"))


def _missing(k: dict, ctx: dict):
    """The cell when there is no count to show, else None."""
    st = _state(ctx)
    if st.get("pending"):
        return text_cell(PENDING, f"counting the code of step {st.get('step')} for {st.get('target_name')}…")
    if st.get("error"):
        return text_cell("?", f"not counted: {st['error']}")
    if not st:
        return text_cell("", "no counts: Build & Run first")
    c = _counts_of(k, ctx)
    if c is None:
        return text_cell("—", f"{k.get('name')} is not a kernel of step {st.get('step')} once lowered")
    if c.get("error"):
        return text_cell("✗", c["error"])
    if st.get("kind") != "llvm":
        return text_cell("—", "a GPU kernel: see its source in the Code tab")
    return None


def _tip(ctx: dict) -> str:
    st = _state(ctx)
    where = f"step {st.get('step')}, {st.get('target_name')}"
    return where + (f" (not the run's step {ctx['run_step']})"
                    if ctx.get("run_step") is not None and ctx["run_step"] != st.get("step") else "")


def _number(key: str):
    def cell(k: dict, ctx: dict):
        none = _missing(k, ctx)
        if none is not None:
            return none
        v = int((_counts_of(k, ctx) or {}).get("counts", {}).get(key) or 0)
        item = Num(v, str(v))
        item.setToolTip(_tip(ctx))
        return item
    return cell


def _vector(k: dict, ctx: dict):
    none = _missing(k, ctx)
    if none is not None:
        return none
    c = (_counts_of(k, ctx) or {}).get("counts") or {}
    bits = c.get("vector_bits") or {}
    arm = is_arm(_state(ctx).get("target"))
    top = widest(bits)
    n = int(c.get("vector") or 0)
    item = Num(n, f"{n} {width_name(str(top), arm)}" if top else str(n))
    item.setToolTip(f"{widths_text(bits, arm) or 'no vector instructions'} · {_tip(ctx)}")
    return item


def _calls(k: dict, ctx: dict):
    none = _missing(k, ctx)
    if none is not None:
        return none
    c = (_counts_of(k, ctx) or {}).get("counts") or {}
    n = int(c.get("calls") or 0)
    item = Num(n, str(n))
    callees = ", ".join(f"{f}×{m}" for f, m in (c.get("callees") or {}).items())
    item.setToolTip(f"{callees or 'no calls out'} · {_tip(ctx)}")
    return item


COUNT_COLUMNS = [
    Column("Instr", _number("instructions"), tooltip="Instructions in the kernel's assembly"),
    Column("Vector", _vector, tooltip="Vector instructions and the widest register they use "
                                      "(xmm/ymm/zmm, NEON, SVE)"),
    Column("FMA", _number("fma"),
           tooltip="Fused multiply-adds (vector and scalar)"),
    Column("Calls out", _calls, tooltip="Calls out of the kernel (libm, the TVM runtime, a library)"),
]


def add_count_columns(table) -> None:
    """The count columns, after the time columns (before Binding)."""
    after = "%"
    for col in COUNT_COLUMNS:
        table.add_column(col, after=after)
        after = col.header
