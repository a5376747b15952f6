"""Local kernels: sparse-dense products, the fused GCN layer, and the ``Block`` layers read."""

from fullgraph.ops.block import Block
from fullgraph.ops.gcn import gcn_layer
from fullgraph.ops.sparse import SparseOp, dropout, matmul, spmm

__all__ = ["Block", "SparseOp", "dropout", "gcn_layer", "matmul", "spmm"]
