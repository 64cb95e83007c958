"""Bisect the program that generated the first wrong token, on that step's inputs as torch had them.

    found = bisect_generation(progs, step=3, torch_tokens=result["torch_tokens"])
    found["program"], found["first_bad"]["pass"], found["diverging"]["first_op"]

Step 0 (the first generated token) comes from the prefill, on the prompt. Step k > 0 comes from
the decode call that took token k - 1 at position prompt + k - 1. Its inputs are rebuilt in torch
eager (the prefill wrapper, then k - 1 decode calls fed torch generate's own tokens), so the
reference is exact: TVM's cache, which may have drifted over the earlier steps, plays no part.
The expected outputs are the torch wrapper's on those inputs (the logits and the updated cache).

Then backend.step_bisect checks the program's steps up to its cursor (the module the generation
built) on those inputs, each step built as it is with the weights passed by name; at the first
bad step, when it computes wrong numbers, the intermediates name the binding (and its op) whose
value first leaves torch's.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from types import SimpleNamespace

import numpy as np
import torch

from irviz.core.errors import RequestError

__all__ = ["program_of_step", "step_inputs", "bisect_generation", "bisect_message"]


def program_of_step(step: int) -> str:
    return "prefill" if int(step) == 0 else "decode"


def _numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def step_inputs(progs, step: int, torch_tokens: list[int]) -> tuple[str, tuple, int | None]:
    """(program, its inputs as torch tensors, the position or None) of generated token `step`."""
    step = int(step)
    prompt = progs.prompt
    if step == 0:
        # a prefill that takes the cache too starts from an empty one
        return "prefill", (prompt, *progs.layout.zeros(prompt.device))[:progs.prefill.inputs], None
    if len(torch_tokens) < step:
        raise RequestError(f"decode step {step} takes torch's token {step - 1}, but only "
                           f"{len(torch_tokens)} torch tokens were given", "generate more tokens first")
    S = int(prompt.shape[1])
    if S + step - 1 >= progs.layout.max_len:
        raise RequestError(f"decode step {step} writes position {S + step - 1}, past the cache's "
                           f"{progs.layout.max_len} positions")
    prefill, decode = progs.prefill.loaded.module, progs.decode.loaded.module
    with torch.no_grad():
        cache = tuple(prefill(prompt)[1:])
        for i in range(step - 1):
            tok = torch.tensor([[int(torch_tokens[i])]], dtype=torch.int64)
            cache = tuple(decode(tok, torch.tensor([S + i], dtype=torch.int64), *cache)[1:])
    tok = torch.tensor([[int(torch_tokens[step - 1])]], dtype=torch.int64)
    return "decode", (tok, torch.tensor([S + step - 1], dtype=torch.int64), *cache), S + step - 1


def _reference(program, inputs: tuple, params: dict):
    from irviz.core.backend.step_bisect import Reference
    from irviz.core.tvm_compat import var_name

    with torch.no_grad():
        out = program.loaded.module(*inputs)
    names = [var_name(p) for p in program.session.steps[0].mod["main"].params][:len(inputs)]
    return Reference(inputs=[_numpy(x) for x in inputs], expected=[_numpy(x) for x in out],
                     what="torch", params=params, input_names=names)


def _at_step_inputs(captured, inputs: tuple):
    """The program's capture, its example inputs replaced by the step's (what the intermediates'
    torch run and TVM run take)."""
    loaded = dataclasses.replace(captured.loaded, example_inputs=tuple(inputs))
    out = copy.copy(captured)
    out.loaded = loaded
    return out


def _op_of(mod, binding: str | None) -> str | None:
    """'relax.subtract' or the called kernel's name, for the binding with this id in main."""
    import tvm
    from tvm import relax

    from irviz.core.backend.intermediates_match import main_bindings
    from irviz.core.tvm_compat import callee_name
    from irviz.core.views.provenance import binding_ids

    if not binding:
        return None
    ids = binding_ids(mod["main"])
    for b in main_bindings(mod):
        if ids.get(b.var.__chandle__()) != binding:
            continue
        v = b.value
        if not isinstance(v, relax.Call):
            return type(v).__name__
        if isinstance(v.op, tvm.ir.Op):
            if v.op.name in ("relax.call_tir", "relax.call_dps_packed") and v.args:
                return callee_name(v.args[0]) or v.op.name
            return str(v.op.name)
        return callee_name(v.op)
    return None


def _diverging(program, index: int, inputs: tuple, params: dict, atol, rtol, say) -> dict:
    from irviz.core.backend.diverging import diverging_bindings
    from irviz.core.backend.intermediates import compare_intermediates

    say(f"Bisect: comparing intermediates at step {index}", 0.97)
    st = program.session.steps[index]
    try:
        marks = diverging_bindings(compare_intermediates(st, _at_step_inputs(program.captured, inputs),
                                                         params=params, atol=atol, rtol=rtol))
    except Exception as exc:  # the verdict stands without the op
        from irviz.core.errors import IrvizError, tvm_error_text

        text = exc.message if isinstance(exc, IrvizError) else tvm_error_text(exc, with_type=True)
        return {"error": (text or "failed").splitlines()[0]}
    marks["first_op"] = _op_of(st.mod, marks.get("first"))
    return marks


def _up_to_cursor(session):
    """The session as far as the generation ran it: its steps up to the cursor (the module that
    was built), nothing planned, no failed pass beyond."""
    return SimpleNamespace(steps=session.steps[:session.cursor + 1], error=None, pipeline=[])


def bisect_generation(progs, step: int, torch_tokens: list[int] | None = None, *, atol=None, rtol=None,
                      progress=None) -> dict:
    """Bisect the program that generated token `step` on its inputs there (see the module doc).
    torch_tokens: torch generate's tokens (None: generated here, `step` of them). The result is
    step_bisect's dict with program, token_step, position, inputs and diverging."""
    from irviz.core.backend.step_bisect import bisect
    from irviz.core.generate.programs import tvm_target

    say = progress or (lambda *a, **k: None)
    t0 = time.perf_counter()
    step = int(step)
    if step < 0:
        raise RequestError(f"token step {step}: steps count from 0 (the prefill's token)")
    if torch_tokens is None and step > 0:
        from irviz.core.generate import static_cache as sc

        say(f"Bisect: torch generate for the {step} tokens before step {step}", 0.02)
        torch_tokens = sc.torch_reference(progs.lm, progs.prompt, step)
    say(f"Bisect: torch's inputs of token step {step}", 0.03)
    name, inputs, position = step_inputs(progs, step, list(torch_tokens or []))
    program = progs.program(name)
    params = {k: _numpy(v) if isinstance(v, torch.Tensor) else v for k, v in progs.params().items()}
    ref = _reference(program, inputs, params)
    result = bisect(_up_to_cursor(program.session), ref, atol=atol, rtol=rtol, progress=progress,
                    target=tvm_target(progs.target)).as_dict()
    fb = result["first_bad"]
    result["diverging"] = (_diverging(program, fb["index"], inputs, params, atol, rtol, say)
                           if fb and fb.get("stage") == "compare" else None)
    result.update(program=name, token_step=step, position=position,
                  inputs=_inputs_text(name, step, position, progs),
                  seconds=round(time.perf_counter() - t0, 3))
    result["message"] = bisect_message(result)
    return result


def _inputs_text(name: str, step: int, position, progs) -> str:
    if name == "prefill":
        return f"the {int(progs.prompt.shape[1])}-token prompt"
    filled = "the prefill" if step == 1 else f"the prefill and {step - 1} decode calls"
    return (f"torch's token {step - 1} at position {position}, the KV cache as {filled} in torch eager "
            "left it")


def bisect_message(r: dict) -> str:
    """The bisect's verdict in one line, for the CLI and the GUI."""
    fb = r.get("first_bad")
    head = f"bisect of the {r['program']} program on token step {r['token_step']}'s inputs ({r['inputs']})"
    if fb is None:
        return (f"{head}: every step matches {r.get('reference')} (checked {len(r.get('steps_checked') or [])}"
                f" of {len(r.get('candidates') or [])} steps that changed the module); no single pass "
                "breaks this step's numbers beyond the tolerance: the tokens part through error built up "
                "over the steps, or a logit margin smaller than the tolerance")
    why = (fb.get("reason") or "").splitlines()[0] if fb.get("reason") else ""
    text = f"{head}: first bad pass step {fb['index']} {fb['pass']} ({fb['stage']}): {why}"
    d = r.get("diverging") or {}
    if d.get("error"):
        text += f"; intermediates not compared: {d['error']}"
    elif d.get("first"):
        op = f" = {d['first_op']}" if d.get("first_op") else ""
        text += f"; the first binding to diverge from torch is {d['first']}{op} (FX {d.get('first_fx')})"
    elif fb.get("stage") == "compare":
        text += "; no binding diverges from torch on its own"
    return text
