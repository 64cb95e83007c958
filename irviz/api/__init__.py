"""The Python API: `irviz.show` and `irviz.report` from a notebook or a script (`notebook`)."""
