"""Build any step for the CPU, run it, compare with the reference, time it."""
