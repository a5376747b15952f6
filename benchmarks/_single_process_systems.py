"""single_process.py's worker side: the graph it loads, and the two systems' training steps it
times (fullgraph's single-process step, and the GCN a PyG user writes in either adjacency form).

Only the standard library at the top: the worker's memory baseline is taken after its imports, and
torch and the systems are imported by the functions that build them.
"""

from __future__ import annotations

import ctypes
import gc
import math


def release_free_memory() -> None:
    """Return freed heap pages to the OS, so the RSS before the reset counts only live data."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def load_graph(name: str, root: str, rmat_scale: int, rmat_edges: int):
    if name == "rmat":
        from fullgraph.data.synthetic import rmat

        return rmat(rmat_scale, rmat_edges, num_features=128, seed=0)
    from fullgraph.data.datasets import load_dataset

    return load_dataset(name, root, split=0, seed=0, download=False)


def describe_graph(graph) -> dict:
    import torch

    x = graph.x
    nnz = x.values().numel() if x.layout == torch.sparse_csr else int(torch.count_nonzero(x))
    return {
        "name": graph.name, "nodes": graph.num_nodes, "edges": int(graph.indices.numel()),
        "features": int(x.shape[1]), "classes": int(graph.num_classes), "train_nodes": int(graph.train_mask.sum()),
        "x_layout": "sparse CSR" if x.layout == torch.sparse_csr else "dense",
        "x_density": nnz / (x.shape[0] * x.shape[1]),
    }


def build_fullgraph(graph, cfg: dict):
    """fullgraph's single-process step: ``SingleEngine`` and what ``Trainer.train_step`` and
    ``WeightUpdate.step`` do around it (no clipping, no schedule: Adam at a constant lr)."""
    import torch

    from fullgraph.models import build_model
    from fullgraph.ops import SparseOp
    from fullgraph.ops.dropout import keyed_dropout
    from fullgraph.parallel.engine import SingleEngine
    from fullgraph.optim.precision import Precision

    torch.manual_seed(cfg["seed"])
    model = build_model(cfg["model"], graph.num_features, graph.num_classes, layers=cfg["depth"],
                        hidden=cfg["hidden"], dropout=cfg["dropout"])
    engine = SingleEngine(graph, model.norm)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    precision = Precision(cfg["precision"], engine.device)
    form = "sparse SparseOp" if isinstance(engine.x, SparseOp) else "dense tensor"
    said = {"input_features": form, "adjacency_nnz": engine.block.adj.nnz, "precision": precision.name,
            "skipped_steps": 0, "loss_scale": precision.scale}  # updated by every step
    epoch = iter(range(1, 1 << 30))

    def step() -> float:
        model.train()
        opt.zero_grad(set_to_none=True)
        e = next(epoch)
        with keyed_dropout(cfg["seed"], e), precision.compute():  # the masks and autocast of `fullgraph train`
            loss = engine.step(model, e)  # forward, loss on the train nodes, backward
        precision.unscale([p for p in model.parameters() if p.grad is not None])
        if precision.dynamic and not precision.update(math.isfinite(engine.grad_norm(model))):
            said["skipped_steps"] += 1  # fp16 overflow: the step is skipped and the scale halves
        else:
            opt.step()
        said["loss_scale"] = precision.scale
        return loss

    return step, said


def build_pyg(graph, cfg: dict, form: str):
    """The GCN a PyG user writes: GCNConv layers, dense x, ReLU + dropout, Adam, cross-entropy."""
    import torch
    import torch.nn.functional as F
    import torch_geometric.transforms as T
    from torch_geometric.data import Data
    from torch_geometric.nn import GCNConv

    class GCN(torch.nn.Module):
        def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float):
            super().__init__()
            dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(GCNConv(dims[i], dims[i + 1], cached=True) for i in range(layers))
            self.dropout = dropout

        def forward(self, x, adj):
            x = F.dropout(x, p=self.dropout, training=self.training)
            for conv in self.convs[:-1]:
                x = F.dropout(conv(x, adj).relu(), p=self.dropout, training=self.training)
            return self.convs[-1](x, adj)

    src, dst = graph.edges()
    data = Data(x=graph.dense_x(), edge_index=torch.stack([src, dst]), y=graph.y,
                train_mask=graph.train_mask, num_nodes=graph.num_nodes)
    if form == "adj_t":
        data = T.ToSparseTensor(layout=torch.sparse_csr)(data)
        adj = data.adj_t
    else:
        adj = data.edge_index
    torch.manual_seed(cfg["seed"])
    model = GCN(graph.num_features, cfg["hidden"], graph.num_classes, cfg["depth"], cfg["dropout"])
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])

    def step() -> float:
        model.train()
        opt.zero_grad(set_to_none=True)
        out = model(data.x, adj)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        opt.step()
        return loss.item()

    return step, {"input_features": "dense tensor", "adjacency": "edge_index COO" if form != "adj_t" else "adj_t CSR"}
