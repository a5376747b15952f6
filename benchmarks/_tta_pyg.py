"""time_to_accuracy.py's PyG side: mini-batch GraphSAGE training with PyG's own samplers and layers.

The model is what fullgraph's ``--model sage --layers 3 --hidden 256 --norm layer`` computes, written
with PyG's layers: ``dropout → SAGEConv(mean) → LayerNorm → ReLU`` per hidden layer, ``dropout →
SAGEConv`` last (dropout 0.5, on the input too); Adam with the same weight decay (5e-4, fullgraph's
default). Two trainers:

* ``pyg-neighbor``: ``NeighborLoader`` over the training nodes, fanouts 15/10/5, shuffled, ``batch``
  seed nodes per step; the loss on the seed nodes (PyG's ``examples/graph_sage_unsup``/products style);
* ``pyg-cluster``: ClusterGCN as PyG's ``examples/cluster_gcn_reddit.py`` sets it up: ``ClusterData``
  (METIS, ``recursive=False``) into parts of ~150 nodes (Reddit's 1500 parts of 233k nodes), and
  ``ClusterLoader`` joining ``batch`` random parts per step; the loss on the training nodes of the
  step's subgraph (steps without any are skipped).

Evaluation, after every epoch (a pass over the training nodes), is one full-graph forward pass over a
transposed CSR ``adj_t`` (exactly the model's function; the example's layer-wise ``NeighborLoader``
inference computes the same on CPU, more slowly). Sampling runs in the training process
(``num_workers=0``): the machine has 2 cores, and the sampling time is part of the epoch.
"""

from __future__ import annotations

import time

import torch
from torch.nn import functional as F

CLUSTER_NODES = 150  # nodes per METIS part, as cluster_gcn_reddit.py's 1500 parts of Reddit
FANOUTS = (15, 10, 5)


class SAGE(torch.nn.Module):
    def __init__(self, in_dim: int, hidden: int, classes: int, layers: int = 3, dropout: float = 0.5):
        from torch_geometric.nn import SAGEConv

        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(SAGEConv(dims[i], dims[i + 1], aggr="mean") for i in range(layers))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(hidden) for _ in range(layers - 1))
        self.p = dropout

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(F.dropout(x, self.p, self.training), edge_index)
            if i < len(self.convs) - 1:
                x = F.relu(self.norms[i](x))
        return x


def to_pyg(graph):
    """A PyG ``Data`` of the very graph and split fullgraph trains on (dense features, as a PyG
    user holds them), and the ``adj_t`` evaluation runs over."""
    from torch_geometric import transforms as T
    from torch_geometric.data import Data

    src, dst = graph.edges()
    x = graph.x.to_dense() if graph.x.layout != torch.strided else graph.x
    data = Data(x=x, edge_index=torch.stack([src, dst]), y=graph.y, train_mask=graph.train_mask,
                val_mask=graph.val_mask, test_mask=graph.test_mask, num_nodes=graph.num_nodes)
    adj_t = T.ToSparseTensor(layout=torch.sparse_csr)(Data(edge_index=data.edge_index,
                                                           num_nodes=graph.num_nodes)).adj_t
    return data, adj_t


def cluster_data(data):
    """``ClusterData`` of ``data`` (METIS into parts of ~``CLUSTER_NODES`` nodes) and its seconds."""
    from torch_geometric.loader import ClusterData

    t0 = time.perf_counter()
    parts = max(2, round(data.num_nodes / CLUSTER_NODES))
    cd = ClusterData(data, num_parts=parts, recursive=False, save_dir=None, log=False)
    return cd, time.perf_counter() - t0


def loader(kind: str, data, batch: int, clusters=None):
    if kind == "pyg-neighbor":
        from torch_geometric.loader import NeighborLoader

        return NeighborLoader(data, num_neighbors=list(FANOUTS), batch_size=batch, shuffle=True,
                              input_nodes=data.train_mask, num_workers=0)
    from torch_geometric.loader import ClusterLoader

    return ClusterLoader(clusters, batch_size=batch, shuffle=True, num_workers=0)


def metric_value(metric: str, logits, y) -> float:
    from fullgraph.tasks.metrics import counts, roc_auc_columns, score_columns

    if metric == "rocauc":
        return roc_auc_columns(*score_columns(logits, y))
    num, den = counts(logits, y)
    return num / den if den else 0.0


def _step(kind, model, opt, batch) -> float | None:
    if kind == "pyg-neighbor":
        n = batch.batch_size
        rows, y = slice(0, n), batch.y[:n]
    else:
        rows = batch.train_mask
        if not bool(rows.any()):
            return None
        y = batch.y[rows]
    opt.zero_grad()
    loss = F.cross_entropy(model(batch.x, batch.edge_index)[rows], y)
    loss.backward()
    opt.step()
    return float(loss.detach())


def train(kind: str, data, adj_t, metric: str, *, lr: float, batch: int, seed: int, max_epochs: int,
          patience: int, time_limit: float, clusters=None, weight_decay: float = 5e-4) -> dict:
    """One run: epochs of mini-batch steps, each followed by a full-graph evaluation, until
    ``patience`` evaluations bring no better validation metric, ``max_epochs``, or ``time_limit``
    seconds of training and evaluation. Returns the epochs as fullgraph's metrics.jsonl writes them
    (``epoch``, ``loss``, ``epoch_time_s`` with the sampling, ``eval_time_s``, ``val_metric``, ...)."""
    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = SAGE(data.num_features, 256, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    batches = loader(kind, data, batch, clusters)
    setup = time.perf_counter() - t0
    epochs, spent, best, since = [], 0.0, -1.0, 0
    for epoch in range(1, max_epochs + 1):
        model.train()
        t1, losses = time.perf_counter(), []
        for b in batches:
            loss = _step(kind, model, opt, b)
            if loss is not None:
                losses.append(loss)
            if spent + time.perf_counter() - t1 > time_limit:
                break
        t2 = time.perf_counter()
        rec = {"epoch": epoch, "loss": sum(losses) / max(1, len(losses)), "steps": len(losses),
               "epoch_time_s": t2 - t1, "metric": metric} | _evaluate(model, data, adj_t, metric)
        rec["eval_time_s"] = time.perf_counter() - t2
        epochs.append(rec)
        spent += rec["epoch_time_s"] + rec["eval_time_s"]
        best, since = (rec["val_metric"], 0) if rec["val_metric"] > best else (best, since + 1)
        if since >= patience or spent > time_limit:
            break
    stopped = "time limit" if spent > time_limit else None
    return {"epochs": epochs, "setup_s": setup, "stopped": stopped, "metric": metric}


def _evaluate(model, data, adj_t, metric: str) -> dict:
    model.eval()
    with torch.no_grad():
        logits = model(data.x, adj_t)
    return {f"{s}_metric": metric_value(metric, logits[data[f"{s}_mask"]], data.y[data[f"{s}_mask"]])
            for s in ("train", "val", "test")}
