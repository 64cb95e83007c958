"""A session on disk: step scripts that load back, diffs, steps.json and the HTML report."""
