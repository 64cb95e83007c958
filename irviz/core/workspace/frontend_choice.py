"""Which capture and importer open a model: what was asked, else the model file's, else the
defaults."""
from __future__ import annotations

from irviz.core.errors import IRImportError

DEFAULT_IMPORTER = "exported_program"


def choose_frontend(loaded, capture=None, importer=None, maps=()) -> tuple[str, str, str]:
    """(capture, importer, why): what was asked, else the model file's IRVIZ_CAPTURE /
    IRVIZ_IMPORTER, else: symbolic_trace when course maps are given, and the course importer for
    a symbolic_trace graph (TVM's exported_program importer reads torch.export graphs only).
    `why` says what was chosen and why when it was not asked for ("" otherwise)."""
    why = []
    has_maps = bool(maps) or bool(getattr(loaded, "course_maps", ()))
    if capture is None:
        if getattr(loaded, "capture", None):
            capture = loaded.capture
            why.append(f"capture {capture} (the model file's IRVIZ_CAPTURE)")
        elif has_maps:
            capture = "symbolic_trace"
            why.append("capture symbolic_trace (course maps call_module_map / call_function_map "
                       "work on symbolic_trace graphs)")
        else:
            capture = "export"
    if importer is None:
        if getattr(loaded, "importer", None):
            importer = loaded.importer
            why.append(f"importer {importer} (the model file's IRVIZ_IMPORTER)")
        elif capture == "symbolic_trace":
            importer = "course"
            why.append("importer course (a symbolic_trace graph is imported with the course's from_fx)")
        else:
            importer = DEFAULT_IMPORTER
    if capture == "symbolic_trace" and importer != "course":
        raise IRImportError(f"the {importer} importer reads torch.export graphs, not symbolic_trace graphs",
                            hint="use --importer course with --capture symbolic_trace (or leave "
                                 "--importer out, and the course importer is chosen)")
    if maps and capture != "symbolic_trace":
        raise IRImportError("importer map files (call_function_map / call_module_map) apply to "
                            "symbolic_trace graphs; this model is captured with torch.export",
                            hint="use --capture symbolic_trace with --importer-map, or leave --capture out")
    return capture, importer, "; ".join(why)
