"""Tests of fullgraph.data."""
