"""The peer compiler's part of a trace folder: ``peer/peer.json`` (the whole report),
``peer/kernels/NN_<kernel>.cpp`` (Inductor's C++ for a generated kernel) or ``.txt`` (the call of a
library kernel), and a section of report.html: the FX nodes side by side and the kernels, each
linking to its code.

    write_peer(out_dir, report)   # report: irviz.core.peer.inductor_peer's dict
"""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from irviz.core.errors import ExportError

__all__ = ["peer_html", "write_peer"]

_MARK = "<!-- peer -->"


def _file_name(i: int, k: dict) -> str:
    stem = re.sub(r"[^\w.#-]+", "_", k["name"])[:80]
    return f"{i:02d}_{stem}.{'cpp' if k.get('kind') == 'generated' else 'txt'}"


def _ms(x) -> str:
    return "–" if x is None else f"{x:.4f}"


def peer_html(report: dict, files: dict[str, str] | None = None) -> str:
    """The report.html section (a <section> element)."""
    e = html.escape
    files = files or {}
    head = (f'<section id="peer"><h2>torch.compile (inductor{", freezing" if report.get("freezing") else ""}) '
            f"beside TVM</h2>")
    if report.get("error"):
        return f"{head}<p>Not compiled: {e(report['error'])}</p></section>"
    s = report["summary"]
    out = [head,
           f"<p>{len(report['kernels'])} Inductor kernels add up to {report['total_ms']:.3f} ms; the "
           f"compiled model alone takes {report['compiled_ms']:.3f} ms ({report['threads']} threads, "
           f"compiled in {report['compile_seconds']:.1f} s).</p>"]
    if report.get("options"):
        out.append(f"<p>Compiled with {e(json.dumps(report['options'], sort_keys=True))}.</p>")
    if not report.get("reliable", True):
        out.append(f"<p><b>Unreliable:</b> {e(report['reason'] or '')}</p>")
    out.append(f"<p>{e(report['attribution'])}. TVM is slower on nodes worth {s['tvm_loses_ms']:.3f} ms "
               f"and faster on nodes worth {s['tvm_wins_ms']:.3f} ms.</p><ul>")
    out += [f"<li>TVM loses: {e(x['text'])}</li>" for x in s["tvm_loses"][:5]]
    out += [f"<li>TVM wins: {e(x['text'])}</li>" for x in s["tvm_wins"][:5]]
    out += [f"<li><b>Unsure</b>, left out of the above: {e(x['text'])}</li>" for x in s.get("unsure") or ()]
    out.append("</ul><h3>Per FX node</h3><p>ms: the node's share of its kernels' time; faster: its "
               "group's verdict (the FX nodes whole kernels compute on both sides).</p><table><tr>"
               "<th>FX node</th><th>op</th><th>group</th><th>TVM kernel</th><th>TVM ms</th>"
               "<th>Inductor kernel</th><th>Inductor ms</th><th>faster</th></tr>")
    for r in report["by_fx_node"]:
        t, i = r["tvm"], r["inductor"]
        links = ", ".join(f'<a href="peer/kernels/{e(files[k])}">{e(k)}</a>' if k in files else e(k)
                          for k in i["kernels"]) or "–"
        out.append(f"<tr><td>{e(r['fx_node'])}</td><td>{e(str(r['target']))}</td><td>{e(r['group'])}</td>"
                   f"<td>{e(', '.join(t['kernels']) or '–')}</td><td>{_ms(t['ms'])}</td><td>{links}</td>"
                   f"<td>{_ms(i['ms'])}</td><td>{_faster(r)}</td></tr>")
    out.append("</table><h3>Inductor's kernels</h3><table><tr><th>kernel</th><th>kind</th><th>calls</th>"
               "<th>ms</th><th>FX nodes</th><th>provenance</th></tr>")
    for k in report["kernels"]:
        name = (f'<a href="peer/kernels/{e(files[k["name"]])}">{e(k["name"])}</a>' if k["name"] in files
                else e(k["name"]))
        out.append(f"<tr><td>{name}</td><td>{e(k['kind'])}</td><td>{k['calls']}</td><td>{_ms(k['ms'])}</td>"
                   f"<td>{e(', '.join(k['fx_nodes']))}</td><td>{e(k.get('provenance_note') or '')}</td></tr>")
    out.append("</table></section>")
    return "\n".join(out)


def _faster(row: dict) -> str:
    if row.get("unsure"):
        return f'<span title="{html.escape(row["unsure"])}">unsure</span>'
    return html.escape(row["faster"] or "–")


def write_peer(out_dir, report: dict) -> dict:
    """Write the peer's files into an exported trace folder and its section into report.html
    (replacing one written before). Returns {"json": path, "kernels": {kernel: file}}."""
    out = Path(out_dir)
    files: dict[str, str] = {}
    try:
        kdir = out / "peer" / "kernels"
        kdir.mkdir(parents=True, exist_ok=True)
        for p in kdir.iterdir():  # an earlier export's kernels
            if p.is_file():
                p.unlink()
        for i, k in enumerate(report.get("kernels") or ()):
            files[k["name"]] = _file_name(i, k)
            (kdir / files[k["name"]]).write_text(k.get("code") or "", encoding="utf-8")
        (out / "peer" / "peer.json").write_text(json.dumps(report, indent=2, default=str) + "\n",
                                                encoding="utf-8")
        page = out / "report.html"
        if page.exists():
            text = page.read_text(encoding="utf-8")
            text = re.sub(re.escape(_MARK) + ".*?" + re.escape(_MARK) + "\n?", "", text, flags=re.S)
            section = f"{_MARK}\n{peer_html(report, files)}\n{_MARK}\n"
            text = text.replace("</body>", section + "</body>") if "</body>" in text else text + section
            page.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write the peer's files in {out}: {exc}") from exc
    return {"json": "peer/peer.json", "kernels": files}
