"""The `irviz` command line: one module per command (check, export, compare, query, bisect, code,
targets, tune, snapshot, gui and the catalogue listings), the table of them and `main` in
`commands`, and what they share in `common`. The commands use `irviz.core` in-process, through a
Workspace."""
