"""`display_problem() -> str | None`: can Qt open a window here? Asked before any QApplication exists.

Qt answers a missing display or a missing system library of its platform plugin with qFatal: a
core dump (exit 134) after a message that names neither the fix nor the headless alternatives. This
module predicts the same outcome without loading Qt's GUI: it follows Qt 6's choice of platform
plugins (QT_QPA_PLATFORM, else wayland when WAYLAND_DISPLAY or XDG_SESSION_TYPE=wayland, then xcb),
asks `ldd` which libraries each plugin cannot resolve, and says which Debian/Ubuntu packages hold
them. Pure standard library: the GUI process must not pay for (or import) torch and TVM here.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

# The libraries PySide6's xcb and wayland plugins (and the Qt libraries under them) load from the
# system, as `ldd` lists them for PySide6 6.11 on Debian 12, with the package holding each one
# (same names on Ubuntu 22.04 and 24.04).
DEBIAN_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libXau.so.6": "libxau6",
    "libXdmcp.so.6": "libxdmcp6",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0",
    "libwayland-egl.so.1": "libwayland-egl1",
    "libGL.so.1": "libgl1",
    "libGLX.so.0": "libglx0",
    "libGLdispatch.so.0": "libglvnd0",
    "libEGL.so.1": "libegl1",
    "libOpenGL.so.0": "libopengl0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libpng16.so.16": "libpng16-16",
}

# Every platform plugin but these draws without a display server (offscreen, minimal, vnc, eglfs,
# linuxfb, ...): a user who picked one knows what they asked for.
_DISPLAY_PLATFORMS = ("xcb", "wayland")

HEADLESS_HINT = """\
  irviz check MODEL                              load, import, run the passes, build, run, compare
  irviz snapshot MODEL --steps N --out FILE.png  the window after N steps, rendered to a PNG
  QT_QPA_PLATFORM=offscreen irviz MODEL          the app with no visible window (scripts, tests)"""


def qt_platforms(env: dict[str, str]) -> list[str]:
    """The platform plugins Qt 6 will try, in order (mirrors QGuiApplicationPrivate's choice)."""
    chosen = env.get("QT_QPA_PLATFORM", "")
    if chosen:
        # "wayland;xcb" is a fallback list; "xcb:option=value" carries plugin options
        return [part.split(":", 1)[0].strip() for part in chosen.split(";") if part.strip()]
    order = []
    if env.get("WAYLAND_DISPLAY") or env.get("XDG_SESSION_TYPE") == "wayland":
        order.append("wayland")
    order.append("xcb")
    return order


def plugin_file(platform: str) -> Path | None:
    """PySide6's shared library for `platform` (None when this PySide6 is laid out differently)."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "Qt" / "plugins" / "platforms"
    base = "wayland" if platform.startswith("wayland") else platform
    for name in (f"libq{base}.so", f"libq{base}-generic.so", f"libq{base}-egl.so"):
        if (folder / name).is_file():
            return folder / name
    return None


def unresolved_libraries(library: Path) -> list[str]:
    """The sonames the dynamic loader cannot find for `library` or anything it pulls in (via ldd)."""
    ldd = shutil.which("ldd")
    if ldd is None:  # nothing to ask; Qt's own message has to do
        return []
    try:
        out = subprocess.run([ldd, str(library)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    missing: list[str] = []
    for line in out.splitlines():
        name, _, where = line.strip().partition("=>")
        if where.strip() == "not found" and name.strip() not in missing:
            missing.append(name.strip())
    return missing


def x_server_error(display: str) -> str | None:
    """Why libxcb cannot connect to `display` (None when it can, or when libxcb is not there to ask)."""
    try:
        xcb = ctypes.CDLL("libxcb.so.1")
    except OSError:
        return None
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    connection = xcb.xcb_connect(display.encode(), None)
    try:
        if xcb.xcb_connection_has_error(connection):
            return f"cannot connect to the X server at DISPLAY={display}"
    finally:
        xcb.xcb_disconnect(connection)
    return None


def wayland_error(env: dict[str, str]) -> str | None:
    """Why there is no Wayland compositor to connect to (None when its socket exists)."""
    name = env.get("WAYLAND_DISPLAY") or "wayland-0"  # libwayland's own default
    runtime = env.get("XDG_RUNTIME_DIR")
    socket = Path(name) if os.path.isabs(name) else Path(runtime) / name if runtime else None
    if socket is not None and socket.exists():
        return None
    if not env.get("WAYLAND_DISPLAY"):
        return "WAYLAND_DISPLAY is unset"
    where = socket or f"WAYLAND_DISPLAY={name}, with XDG_RUNTIME_DIR unset"
    return f"no Wayland compositor at {where}"


def install_hint(missing: list[str]) -> str:
    """`sudo apt-get install ...` for the Debian/Ubuntu packages holding `missing`, and the rest by name."""
    packages = sorted({DEBIAN_PACKAGES[so] for so in missing if so in DEBIAN_PACKAGES})
    unknown = [so for so in missing if so not in DEBIAN_PACKAGES]
    lines = []
    if packages:
        lines.append("On Debian/Ubuntu install them with:\n  sudo apt-get install " + " ".join(packages))
    if unknown:
        lines.append("Find the package for " + ", ".join(unknown) + " with `apt-file search NAME` "
                     "(Debian/Ubuntu) or `dnf provides '*/NAME'` (Fedora).")
    return "\n".join(lines)


def display_problem(env: dict[str, str] | None = None, system: str | None = None) -> str | None:
    """A message saying why Qt could not open a window and what to do, or None when it can.

    Only Linux and the BSDs are checked: macOS and Windows have no display to lack."""
    env = dict(os.environ if env is None else env)
    system = sys.platform if system is None else system
    if system.startswith(("darwin", "win", "cygwin")):
        return None
    platforms = qt_platforms(env)
    if not platforms or any(not p.startswith(_DISPLAY_PLATFORMS) for p in platforms):
        return None
    reasons: list[str] = []
    missing_libs: dict[str, list[str]] = {}
    for platform in platforms:
        if platform.startswith("wayland"):
            no_server = wayland_error(env)
        else:
            no_server = None if env.get("DISPLAY") else "DISPLAY is unset"
        if no_server:
            reasons.append(no_server)
            continue
        plugin = plugin_file(platform)
        missing = unresolved_libraries(plugin) if plugin else []
        if missing:
            missing_libs[platform] = missing
            continue
        if platform == "xcb":
            no_server = x_server_error(env["DISPLAY"])
            if no_server:
                reasons.append(no_server)
                continue
        return None
    if missing_libs:
        parts = []
        for platform, missing in missing_libs.items():
            parts.append(f"irviz: Qt's {platform} platform plugin cannot load: the system libraries "
                         f"{', '.join(missing)} are missing.\n{install_hint(missing)}")
        return "\n".join(parts) + "\nMeanwhile, without a window:\n" + HEADLESS_HINT
    return (f"irviz: no display to open a window on ({'; '.join(dict.fromkeys(reasons))}).\n"
            "Over SSH, `ssh -X` forwards your display. Without a display, irviz still works:\n"
            + HEADLESS_HINT)
