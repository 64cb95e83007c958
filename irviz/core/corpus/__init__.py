"""Many models × pipelines × targets, each `irviz check` in its own process, as Ray tasks.

    isolate    one command in its own process group: a timeout, a memory cap, its peak RSS
    rows       one row: the check command, and its verdict read from exit code and JSON
    store      the results file: rows streamed in atomically, what a rerun skips, the counts
    html_table the results as a sortable HTML table
    pool       the Ray driver: local workers or a cluster, rows as they finish, Ctrl-C keeps them

Nothing here imports torch or TVM (the checks run in child processes); Ray is imported only by
`pool`, when a run starts.
"""
