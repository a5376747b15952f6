"""Tests of fullgraph.partition."""
