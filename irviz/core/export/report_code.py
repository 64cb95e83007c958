"""The code of a run's slowest kernels in report.html: assembly for an LLVM target, the source for
a GPU one, each with its counts, so the page shows what the time was spent running."""
from __future__ import annotations

import html

from irviz.core.backend.kernel_code import kernel_code
from irviz.core.views.counts_text import counts_line

SLOWEST = 5  # kernels shown per run
MAX_LINES = 400  # per kernel: the rest is in the exported NAME.s / NAME.cu


def _code_html(text: str, lexer: str) -> str:
    from pygments import highlight

    from irviz.core.views.highlight import code_lexer, html_formatter

    lines = text.splitlines()
    more = len(lines) - MAX_LINES
    shown = "\n".join(lines[:MAX_LINES])
    body = highlight(shown, code_lexer(lexer), html_formatter())
    tail = f'\n<span class="note">… {more} more lines in the exported file</span>' if more > 0 else ""
    return f'<div class="diff"><pre>{body}{tail}</pre></div>'


def slowest_kernels_html(mod, kernels: list[dict], target=None, n: int = SLOWEST) -> str:
    """`kernels`: the run's [{name, ms, ...}]; the `n` slowest shown with their code on `target`
    (the session's). A kernel that does not compile says why; the report never fails for it."""
    slowest = sorted((k for k in kernels if k.get("name")), key=lambda k: -(k.get("ms") or 0))[:n]
    if not slowest:
        return ""
    e = html.escape
    out = [f"<details><summary>Code of the {len(slowest)} slowest kernels</summary>"]
    for k in slowest:
        name = k["name"]
        try:
            code = kernel_code(mod, target, only=name)
        except Exception as exc:  # not a kernel of this step once lowered, or no codegen here
            out.append(f"<h4>{e(name)}</h4><p class=note>no code: {e(str(exc).splitlines()[0])}</p>")
            continue
        kc = code.kernels[name]
        fmt = code.formats()[0]
        head = f"<h4>{e(name)} · {e(code.target_name)} {e(fmt)} · {(k.get('ms') or 0):.3f} ms</h4>"
        if kc.error:
            out.append(f"{head}<p class=err>{e(kc.error)}</p>")
            continue
        out.append(f"{head}<p class=note>{e(counts_line(code.kind, kc.counts, kc.launch))}</p>"
                   + _code_html(kc.code.get(fmt, ""), code.lexer(fmt)))
    out.append("</details>")
    return "".join(out)
