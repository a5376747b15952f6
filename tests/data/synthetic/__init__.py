"""Tests of fullgraph.data.synthetic: the generated graphs."""
