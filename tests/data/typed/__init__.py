"""Tests of fullgraph.data.typed: typed graphs and PyG's HeteroData."""
