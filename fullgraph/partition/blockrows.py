"""Block rows of Â for the algebraic (SpMM) layouts, cut once and read one per rank.

An SpMM layout (CAGNET, MG-GCN) splits the nodes into ``R`` block rows (:func:`row_blocks`: balanced
runs of the node order, or of a seeded permutation). The process(es) of block row ``i`` need only
that row's share of everything: the rows of Â (and of Âᵀ when Â is not symmetric) with their global
column ids, the feature, label and split rows, and a few global counts. :class:`BlockRow` holds
exactly that; :func:`block_row` cuts it from a graph in memory, :func:`save_block_rows` writes every
block row to a folder and :func:`load_block_row` reads one back, so that after the launcher has
prepared the folder no rank parses the raw dataset.

Layout on disk::

    out_dir/
      blockrows.json      # format, version, graph, fingerprint, norm, blocks, permute, seed, counts,
                          # per-block non-zeros (as cut and as in node order), one entry per file,
                          # the edge data's facts and a typed graph's node_types (as partition.json)
      row-0.pt            # torch.save of BlockRow.state_dict(): tensors, ints and strings only
      row-1.pt
      ...

Files are read with ``torch.load(weights_only=True)`` (no code runs on load) and checked against the
size and sha256 in ``blockrows.json``. Writes are atomic: a temporary sibling folder is renamed into
place when complete.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from fullgraph.data.files import read_json, sha256_file
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops.adjacency import normalized, normalized_data
from fullgraph.ops.csr import csr_rows, indptr_from_rows, row_ids, take_rows
from fullgraph.ops.sparse import SparseOp
from fullgraph.partition.partitioners import random_permutation
from fullgraph.partition.store import meta_node_types

__all__ = ["BlockRow", "row_blocks", "node_counts", "column_counts", "block_row", "save_block_rows", "load_block_rows_meta", "load_block_row",
           "FORMAT", "META_FILE"]

FORMAT = "fullgraph-blockrows"
FORMAT_VERSION = 1
META_FILE = "blockrows.json"


def row_blocks(num_nodes: int, blocks: int, permute: bool, seed: int) -> list[torch.Tensor]:
    """The nodes of each block row: balanced consecutive runs of the node order, or of a seeded
    random permutation of it (each run sorted, so a block keeps the graph's local order)."""
    order = random_permutation(num_nodes, seed) if permute else torch.arange(num_nodes)
    return [torch.sort(part).values for part in torch.tensor_split(order, blocks)]


def node_counts(num_nodes: int, nprocs: int) -> list[int]:
    """Tensor parallelism's rows per process: balanced consecutive runs of the node order (the
    block rows of a one-block-row folder, each process taking its run of the dense matrices)."""
    return [len(t) for t in torch.tensor_split(torch.arange(num_nodes), nprocs)]


def column_counts(width: int, nprocs: int) -> list[int]:
    """Tensor parallelism's columns per process of a ``width``-wide matrix's column slices."""
    return [len(t) for t in torch.tensor_split(torch.arange(width), nprocs)]


@dataclass(eq=False)
class BlockRow:
    """Block row ``index`` of ``blocks``: rows ``rows`` (global ids, ascending) of Â and, unless Â is
    symmetric (``at_indptr`` empty), of Âᵀ, with global column ids; the features, labels and splits
    of those rows; and the global counts the loss and the statistics need."""

    index: int
    blocks: int
    num_nodes: int
    rows: torch.Tensor
    a_indptr: torch.Tensor
    a_indices: torch.Tensor
    a_values: torch.Tensor
    at_indptr: torch.Tensor
    at_indices: torch.Tensor
    at_values: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    num_train: int
    num_val: int
    num_test: int
    num_features: int
    num_classes: int
    name: str
    norm: str

    @property
    def symmetric(self) -> bool:
        return self.at_indptr.numel() == 0

    def state_dict(self) -> dict:
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, torch.Tensor) and v.layout == torch.sparse_csr:  # sparse features by part
                out["x_crow"], out["x_col"], out["x_val"] = v.crow_indices(), v.col_indices(), v.values()
                out["x_shape"] = list(v.shape)
            else:
                out[f.name] = v
        return out

    @classmethod
    def from_state(cls, state: dict, where: str) -> "BlockRow":
        state = dict(state)
        if "x_crow" in state:
            state["x"] = torch.sparse_csr_tensor(state.pop("x_crow"), state.pop("x_col"), state.pop("x_val"),
                                                 size=tuple(state.pop("x_shape")), check_invariants=False)
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in state]
        if missing:
            raise InputError(f"expected a block-row file at {where} holding {', '.join(missing)} (missing)")
        return cls(**{n: state[n] for n in names})

    def adjacency(self, col_blocks: list[torch.Tensor], transpose: bool = False) -> list[SparseOp]:
        """These rows of Â (or Âᵀ) cut into one ``SparseOp`` per block of columns (node sets that
        partition the columns), columns numbered within their block."""
        if transpose and not self.symmetric:
            ip, ix, vals = self.at_indptr, self.at_indices, self.at_values
        else:
            ip, ix, vals = self.a_indptr, self.a_indices, self.a_values
        where_block = torch.empty(self.num_nodes, dtype=torch.int64)
        where_pos = torch.empty(self.num_nodes, dtype=torch.int64)
        for k, nodes in enumerate(col_blocks):
            where_block[nodes], where_pos[nodes] = k, torch.arange(nodes.numel())
        n = self.rows.numel()
        r = row_ids(ip)
        cb = where_block[ix]
        out = []
        for k, nodes in enumerate(col_blocks):
            sel = cb == k
            out.append(SparseOp(indptr_from_rows(r[sel], n), where_pos[ix[sel]], vals[sel], (n, int(nodes.numel())),
                                symmetric=False))
        return out


def _rows_of(ip: torch.Tensor, ix: torch.Tensor, vals: torch.Tensor, rows: torch.Tensor):
    sub, pos = csr_rows(ip, rows)
    return sub, ix[pos].contiguous(), vals[pos].contiguous()


class _Cutter:
    """Â (and Âᵀ) of one graph, computed once, cut into any block row."""

    def __init__(self, graph: Graph, norm: str):
        self.graph, self.norm = graph, norm
        edata = graph.edge_data()  # only a weight reaches these layouts: in Â's values
        if edata is None:
            self.ip, self.ix, self.vals = normalized(graph.indptr, graph.indices, norm)
        else:
            self.ip, self.ix, self.vals, _ = normalized_data(graph.indptr, graph.indices, norm, edata)
        self.t = None
        if norm != "gcn":  # D^-1/2 (A+I) D^-1/2 of a symmetric graph is symmetric; the others are not
            at = SparseOp(self.ip, self.ix, self.vals, (graph.num_nodes,) * 2, symmetric=False).At
            self.t = (at.crow_indices().long(), at.col_indices().long(), at.values())
        g = graph
        self.counts = [int(m.sum()) for m in (g.train_mask, g.val_mask, g.test_mask)]

    def cut(self, rows: torch.Tensor, index: int, blocks: int) -> BlockRow:
        g = self.graph
        a = _rows_of(self.ip, self.ix, self.vals, rows)
        empty = (torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), torch.zeros(0))
        at = _rows_of(*self.t, rows) if self.t is not None else empty
        return BlockRow(
            index=index, blocks=blocks, num_nodes=g.num_nodes, rows=rows.clone(), a_indptr=a[0], a_indices=a[1],
            a_values=a[2], at_indptr=at[0], at_indices=at[1], at_values=at[2], x=take_rows(g.x, rows),
            y=g.y[rows].clone(), train_mask=g.train_mask[rows].clone(), val_mask=g.val_mask[rows].clone(),
            test_mask=g.test_mask[rows].clone(), num_train=self.counts[0], num_val=self.counts[1],
            num_test=self.counts[2], num_features=g.num_features, num_classes=int(g.num_classes), name=g.name,
            norm=self.norm)


def block_row(graph: Graph, norm: str, blocks: int, index: int, permute: bool, seed: int) -> BlockRow:
    """Block row ``index`` of ``blocks``, cut from a graph in memory (tests and one-off callers)."""
    return _Cutter(graph, norm).cut(row_blocks(graph.num_nodes, blocks, permute, seed)[index], index, blocks)


def block_nnz(graph: Graph, norm: str, blocks: int, permute: bool, seed: int) -> list[int]:
    """Non-zeros of Â per block row (the load-balance statistic MG-GCN's permutation improves)."""
    deg = graph.indptr.diff() + (1 if norm == "gcn" else 0)
    return [int(deg[b].sum()) for b in row_blocks(graph.num_nodes, blocks, permute, seed)]


def save_block_rows(graph: Graph, norm: str, blocks: int, permute: bool, seed: int, out_dir) -> Path:
    """Write every block row of ``graph`` to ``out_dir`` (atomically; see the module docstring)."""
    out = Path(out_dir)
    if blocks > graph.num_nodes:
        raise InputError(f"expected at most one block row per node (got {blocks} block rows for {graph.num_nodes} "
                         f"nodes)")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / META_FILE).exists())):
        raise InputError(f"expected {out} to be a block-row folder or a new/empty folder (got something else); "
                         "refusing to overwrite it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        cutter = _Cutter(graph, norm)
        files = []
        for i, rows in enumerate(row_blocks(graph.num_nodes, blocks, permute, seed)):
            rel = f"row-{i}.pt"
            torch.save(cutter.cut(rows, i, blocks).state_dict(), tmp / rel)
            files.append({"row": i, "path": rel, "bytes": (tmp / rel).stat().st_size, "sha256": sha256_file(tmp / rel)})
        doc = {"format": FORMAT, "version": FORMAT_VERSION, "graph": graph.name, "fingerprint": graph.fingerprint(),
               "norm": norm, "blocks": blocks, "permute": bool(permute), "seed": int(seed),
               "num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
               "block_nnz": block_nnz(graph, norm, blocks, permute, seed),
               "block_nnz_unpermuted": block_nnz(graph, norm, blocks, False, seed), "files": files,
               **graph.edge_facts().record(), **(graph.node_types.record() if graph.node_types is not None else {})}
        (tmp / META_FILE).write_text(json.dumps(doc, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_block_rows_meta(out_dir) -> dict:
    """The parsed, checked ``blockrows.json`` of a block-row folder."""
    path = Path(out_dir) / META_FILE
    if not path.is_file():
        raise InputError(f"expected a block-row folder with {META_FILE} (got none at {path})")
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != FORMAT_VERSION:
        raise InputError(f"expected a {FORMAT!r} version {FORMAT_VERSION} file at {path}; prepare the folder again")
    if not isinstance(doc.get("files"), list) or len(doc["files"]) != doc.get("blocks"):
        raise InputError(f"expected {path} to list one file per block row (got {doc.get('blocks')!r} block rows)")
    meta_node_types(doc, path)  # a damaged record refused with the rest
    return doc


def load_block_row(out_dir, index: int, *, blocks: int, norm: str, permute: bool, seed: int) -> BlockRow:
    """Block row ``index`` of the folder, refused unless it was cut for this grid and normalization."""
    out = Path(out_dir)
    doc = load_block_rows_meta(out)
    want = {"blocks": blocks, "norm": norm, "permute": bool(permute), "seed": int(seed)}
    got = {k: doc.get(k) for k in want}
    if got != want:
        raise InputError(f"expected block rows cut for {want} in {out} (got {got}); prepare the folder again")
    entry = doc["files"][index]
    path = out / entry["path"]
    if not path.is_file() or path.stat().st_size != entry["bytes"] or sha256_file(path) != entry["sha256"]:
        raise InputError(f"expected {path} to match {META_FILE} ({entry['bytes']} bytes, sha256 "
                         f"{str(entry['sha256'])[:12]}…) (got a missing, corrupt or replaced file)")
    try:
        state = torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001 — any unpickling failure means a bad file
        raise InputError(f"expected a readable block-row file at {path} (got {type(e).__name__}: {e})") from None
    row = BlockRow.from_state(state, str(path))
    if row.index != index or row.blocks != blocks:
        raise InputError(f"expected {path} to be block row {index} of {blocks} (got {row.index} of {row.blocks})")
    return row
