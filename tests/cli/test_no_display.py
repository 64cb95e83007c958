"""`irviz` where Qt cannot open a window: exit 2 with what to do, never Qt's abort and core dump."""
import ctypes
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from irviz.ui import display_check

# What decides Qt's platform: a test must not inherit the developer's desktop.
_DISPLAY_VARS = ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "XDG_SESSION_TYPE", "XDG_RUNTIME_DIR")


def _bare_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _DISPLAY_VARS}
    return {**env, **extra}


@pytest.mark.parametrize("argv", [["sample:mlp"], []], ids=["with-model", "no-model"])
def test_irviz_without_a_display_exits_2_and_points_to_the_headless_commands(argv):
    proc = subprocess.run([sys.executable, "-m", "irviz", *argv], capture_output=True, text=True,
                          timeout=60, env=_bare_env())
    assert proc.returncode == 2, (proc.returncode, proc.stderr)  # Qt's abort would be -6
    assert "no display to open a window on (DISPLAY is unset)" in proc.stderr
    for hint in ("irviz check MODEL", "irviz snapshot MODEL", "QT_QPA_PLATFORM=offscreen irviz MODEL"):
        assert hint in proc.stderr
    assert "qt.qpa" not in proc.stderr  # answered before Qt tried a platform plugin


def test_a_missing_xcb_library_names_the_debian_package(monkeypatch):
    asked = []
    monkeypatch.setattr(display_check, "unresolved_libraries",
                        lambda lib: asked.append(lib) or ["libxcb-cursor.so.0", "libxcb-icccm.so.4"])
    problem = display_check.display_problem({"DISPLAY": ":0"}, system="linux")
    assert asked and asked[0].name == "libqxcb.so"  # PySide6's own xcb plugin was examined
    assert "libxcb-cursor.so.0, libxcb-icccm.so.4 are missing" in problem
    assert "sudo apt-get install libxcb-cursor0 libxcb-icccm4" in problem
    assert "no display" not in problem


def test_a_library_without_a_known_package_says_how_to_find_it(monkeypatch):
    monkeypatch.setattr(display_check, "unresolved_libraries", lambda lib: ["libfancy.so.3"])
    problem = display_check.display_problem({"DISPLAY": ":0"}, system="linux")
    assert "libfancy.so.3" in problem and "apt-file search" in problem
    assert "sudo apt-get install" not in problem


@pytest.mark.parametrize("platform", ["offscreen", "minimal", "vnc:size=800x600", "wayland;offscreen"])
def test_a_platform_without_a_display_server_is_left_to_qt(platform, monkeypatch):
    # `irviz snapshot` runs offscreen; a chosen headless platform must never be refused
    monkeypatch.setattr(display_check, "unresolved_libraries", lambda lib: ["libxcb-cursor.so.0"])
    assert display_check.display_problem({"QT_QPA_PLATFORM": platform}, system="linux") is None


def test_macos_and_windows_are_not_checked():
    assert display_check.display_problem({}, system="darwin") is None
    assert display_check.display_problem({}, system="win32") is None
    assert display_check.display_problem({}, system="linux") is not None


def test_qt_tries_wayland_before_xcb_in_a_wayland_session():
    assert display_check.qt_platforms({"DISPLAY": ":0"}) == ["xcb"]
    assert display_check.qt_platforms({"WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":0"}) == ["wayland", "xcb"]
    assert display_check.qt_platforms({"XDG_SESSION_TYPE": "wayland"}) == ["wayland", "xcb"]
    assert display_check.qt_platforms({"QT_QPA_PLATFORM": "xcb:dpi=96;offscreen",
                                       "WAYLAND_DISPLAY": "w"}) == ["xcb", "offscreen"]


def test_a_wayland_compositor_socket_is_enough(tmp_path, monkeypatch):
    monkeypatch.setattr(display_check, "unresolved_libraries", lambda lib: [])
    env = {"WAYLAND_DISPLAY": "wayland-1", "XDG_RUNTIME_DIR": str(tmp_path)}
    assert "no Wayland compositor at" in display_check.display_problem(env, system="linux")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(tmp_path / "wayland-1"))
        assert display_check.display_problem(env, system="linux") is None
        # libwayland's default socket name, in a session that only says it is Wayland
        os.rename(tmp_path / "wayland-1", tmp_path / "wayland-0")
        session = {"XDG_SESSION_TYPE": "wayland", "XDG_RUNTIME_DIR": str(tmp_path)}
        assert display_check.display_problem(session, system="linux") is None


def test_an_unreachable_x_server_is_named(monkeypatch):
    try:
        ctypes.CDLL("libxcb.so.1")
    except OSError:
        pytest.skip("no libxcb.so.1 to probe the X server with")
    if Path("/tmp/.X11-unix/X97").exists():
        pytest.skip("an X server listens on :97 here")
    monkeypatch.setattr(display_check, "unresolved_libraries", lambda lib: [])
    problem = display_check.display_problem({"DISPLAY": ":97"}, system="linux")
    assert "cannot connect to the X server at DISPLAY=:97" in problem


@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("ldd")), reason="needs gcc and ldd")
def test_ldd_reports_a_library_that_is_gone(tmp_path):
    (tmp_path / "gone.c").write_text("int gone(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text("int gone(void);\nint plugin(void) { return gone(); }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libirvizgone.so.7"),
                    "-Wl,-soname,libirvizgone.so.7", str(tmp_path / "gone.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libplugin.so"), str(tmp_path / "plugin.c"),
                    str(tmp_path / "libirvizgone.so.7")], check=True)
    (tmp_path / "libirvizgone.so.7").unlink()
    assert display_check.unresolved_libraries(tmp_path / "libplugin.so") == ["libirvizgone.so.7"]


@pytest.mark.skipif(not shutil.which("Xvfb"), reason="needs Xvfb")
def test_a_running_x_server_is_accepted():
    # the guard against refusing a desktop that works: a real X server must pass the probe
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "640x480x24", "-nolisten", "tcp"],
                              pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as numbers:
            display = ":" + numbers.readline().strip()
        assert display != ":", "Xvfb did not report its display"
        assert display_check.x_server_error(display) is None
    finally:
        server.terminate()
        server.wait(timeout=10)
