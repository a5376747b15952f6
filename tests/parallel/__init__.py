"""Tests of fullgraph.parallel."""
