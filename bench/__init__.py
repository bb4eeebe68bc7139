"""hostd benchmarks: ``python -m bench`` (see docs/performance.md)."""
