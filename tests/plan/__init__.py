"""Tests of fullgraph/plan/ (the memory estimate before launch) and of fullgraph/memory.py."""
