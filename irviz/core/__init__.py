"""The engine: torch + TVM + networkx. Never imports Qt (tests/core/test_layering.py checks)."""
