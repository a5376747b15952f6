"""Tests of fullgraph.ops."""
