"""Tests of fullgraph.data.formats: the readers and converters of each on-disk form."""
