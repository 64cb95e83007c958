"""Built-in help: what each pane shows (from the pane table) and the keyboard shortcuts
(Help ▸ Shortcuts / About)."""
from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout

from irviz.ui import pane_table
from irviz.version import __version__

# (shortcut, what it does): the keys of the actions in window_chrome, written for people
SHORTCUTS = [
    ("Ctrl+O", "Open a model file (.py with get_model(), an IR file, a .pt2 exported program, or a step_NN_*.py exported by irviz), choosing the capture (torch.export or symbolic_trace), the importer and course map files; or drop it on the window"),
    ("F10", "Step: apply the next planned pass"),
    ("Shift+F10", "Step back"),
    ("F5", "Run to end: apply every planned pass"),
    ("Ctrl+Home", "Jump to step 0 (the imported module)"),
    ("Ctrl+R", "Build & Run the current step, compare with PyTorch"),
    ("Esc", "Cancel what the engine is doing (the session is replayed to the last good step)"),
    ("Ctrl+F", "Search in the focused pane (name, op, shape)"),
    ("Alt+Down / Alt+Up", "Next / previous diff hunk"),
    ("Ctrl+0", "Fit the graphs to their panes"),
    ("Ctrl+E", "Export the current step"),
    ("Ctrl+Shift+E", "Export the whole trace"),
    ("Ctrl+Shift+T", "Toggle light / dark theme"),
    ("F1", "This help"),
    ("Ctrl+Q", "Quit"),
]

LINKING = ("Selecting an FX node highlights the Relax bindings it became and the TensorIR functions "
           "they call; selecting a Relax binding or a TensorIR function highlights the rest. The "
           "links follow the passes (provenance is carried through fusion).")

CAPTURE = ("When torch.export cannot capture a model, the engine tries its fallbacks in order; the "
           "toolbar then says which one captured it (its tooltip: what was tried and assumed). When "
           "nothing captures the whole model, it is cut at torch.compile's graph breaks: the "
           "toolbar chooses the graph (k of N, its ops and inputs) that the panes, the passes and "
           "Build & Run work on, compared with PyTorch on that graph's own captured inputs. The "
           "code between the graphs runs in Python and is not compiled.")


def _plain(text: str) -> str:
    return text.replace("&&", "\0").replace("&", "").replace("\0", "&")


def menus_html(window) -> str:
    """Every menu command of `window` with what it does (its tooltip), read off the menu bar
    itself so the page cannot miss one."""
    out = []
    for menu_action in window.menuBar().actions():
        menu = menu_action.menu()
        if menu is None:
            continue
        items = []
        for a in menu.actions():
            if a.isSeparator() or not a.text():
                continue
            name = _plain(a.text())
            tip = a.toolTip() if a.toolTip() and _plain(a.toolTip()) != name.rstrip("…") else ""
            sub = ", ".join(_plain(s.text()) for s in a.menu().actions() if s.text() and s.isEnabled()) if a.menu() else ""
            items.append(f"<li><b>{html.escape(name)}</b>"
                         + (f" — {html.escape(tip)}" if tip else "")
                         + (f": {html.escape(sub)}" if sub else "") + "</li>")
        out.append(f"<p><b>{html.escape(_plain(menu_action.text()))}</b></p><ul>{''.join(items)}</ul>")
    return "".join(out)


def help_html(window=None) -> str:
    rows = "".join(f"<tr><td style='padding-right:14px'><b>{html.escape(k)}</b></td>"
                   f"<td>{html.escape(v)}</td></tr>" for k, v in SHORTCUTS)
    panes = "".join(f"<p><b>{html.escape(r.title)}</b> — {html.escape(r.help)}</p>"
                    for r in pane_table.rows())
    menus = f"<h3>Menus</h3>{menus_html(window)}" if window is not None else ""
    return (f"<h3>Panes</h3>{panes}<h3>Cross-linking</h3><p>{html.escape(LINKING)}</p>"
            f"<h3>Capture fallbacks and graph breaks</h3><p>{html.escape(CAPTURE)}</p>{menus}"
            f"<h3>Shortcuts</h3><table>{rows}</table>")


def about_html() -> str:
    return (f"<h3>irviz {html.escape(__version__)}</h3>"
            "<p>See what TVM does to a PyTorch model: the torch.fx graph, the Relax graph, the "
            "TensorIR functions, every pass with its diff, and whether the compiled result still "
            "computes the same numbers, and how fast.</p>"
            "<p>The compiler runs in a separate engine process; if it crashes the session is "
            "replayed to the last good step.</p>")


class HelpDialog(QDialog):
    def __init__(self, parent=None, about: bool = False):
        super().__init__(parent)
        self.setWindowTitle("About irviz" if about else "irviz help")
        self.setModal(False)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        browser = QTextBrowser()
        browser.setOpenExternalLinks(True)
        browser.setHtml(about_html() if about else help_html(parent))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(browser)
        lay.addWidget(buttons)
        self.resize(460 if about else 640, 260 if about else 620)
