"""Tests of fullgraph.comm."""
