"""Tests of fullgraph.models."""
