"""Tests of fullgraph.train."""
