"""Local kernels: the CSR toolkit, the one builder of Â, sparse-dense products, the fused GCN layer,
and the ``Block`` layers read."""

from fullgraph.ops.block import Block
from fullgraph.ops.gcn import gcn_layer
from fullgraph.ops.dropout import dropout
from fullgraph.ops.sparse import SparseOp, matmul, spmm

__all__ = ["Block", "SparseOp", "dropout", "gcn_layer", "matmul", "spmm"]
