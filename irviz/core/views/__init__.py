"""What the panes show, computed from IR: graphs and their layout, diffs, provenance, the code
highlighter and the latency chart.

Kept free of torch at import time: the GUI process imports the plain-Python helpers here
(highlight, latency_chart, layout)."""
