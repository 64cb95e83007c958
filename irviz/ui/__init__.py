"""PySide6 views. Never imports torch or TVM: everything compiler-side runs in irviz.engine."""
