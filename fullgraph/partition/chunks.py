"""Chunks: the sets of nodes a pipeline stage processes together (GNNPipe's chunks).

``make_chunks`` cuts every part of a partition into ``K`` chunks (a pure pipeline has one part: the
whole graph) and returns one global ``node_chunk`` map: global chunk ``k`` is the union of the
parts' chunk ``k``. METIS runs on each part's induced subgraph, so a chunk is a connected, local
piece of its part and few of its in-neighbours lie in other chunks (the fewer, the less staleness);
``random`` is the locality-free control.

``ChunkSet`` then cuts one part's block into per-chunk blocks. A chunk's block has the chunk's
nodes as rows (dst) and as columns first the chunk's nodes, then its *others*: every other local
node (another chunk of this part, or a halo node) that one of its nodes reads. Values are the
full-graph ``Â`` entries, so the blocks of all chunks together hold exactly the part's block.
With ``induced=True`` the others are dropped (every cross-chunk edge is cut, GPipe's naive
micro-batching); the kept entries keep their full-graph values.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch

from fullgraph.errors import InputError
from fullgraph.ops.block import Block
from fullgraph.ops.csr import csr_rows, indptr_from_rows, row_ids
from fullgraph.ops.sparse import SparseOp
from fullgraph.partition.partitioners import metis_csr, random_permutation

__all__ = ["CHUNKERS", "make_chunks", "cached_chunks", "load_chunks", "ChunkSet", "Chunk"]

CHUNKERS = ("metis", "random")


def _induced_csr(indptr: torch.Tensor, indices: torch.Tensor, nodes: torch.Tensor, num_nodes: int):
    """In-edge CSR of the subgraph induced by ``nodes`` (sorted global ids), in local ids."""
    local = torch.full((num_nodes,), -1, dtype=torch.int64)
    local[nodes] = torch.arange(nodes.numel())
    offs, pos = csr_rows(indptr, nodes)
    cols = local[indices[pos]]
    keep = cols >= 0
    return indptr_from_rows(row_ids(offs)[keep], nodes.numel()), cols[keep]


def make_chunks(graph, node_part: torch.Tensor, num_parts: int, chunks: int, method: str = "metis",
                seed: int = 0) -> torch.Tensor:
    """``node_chunk [N]``: every part of ``node_part`` cut into ``chunks`` non-empty chunks."""
    if method not in CHUNKERS:
        raise InputError(f"expected --chunker to be one of {', '.join(CHUNKERS)} (got {method!r})")
    n = graph.num_nodes
    sizes = torch.bincount(node_part, minlength=num_parts)
    if chunks < 1 or chunks > int(sizes.min()):
        where = "nodes" if num_parts == 1 else "nodes in the smallest part"
        raise InputError(f"expected 1 <= --chunks <= {int(sizes.min())} (the {where}) (got --chunks {chunks})")
    node_chunk = torch.empty(n, dtype=torch.int64)
    for w in range(num_parts):
        nodes = torch.nonzero(node_part == w).flatten()
        if chunks == 1:
            labels = torch.zeros(nodes.numel(), dtype=torch.int64)
        elif method == "metis":
            ip, ix = _induced_csr(graph.indptr, graph.indices, nodes, n)
            labels = metis_csr(ip, ix, chunks, seed + w, name=f"{graph.name} part {w}")
        else:
            perm = random_permutation(nodes.numel(), seed + w)
            labels = torch.empty(nodes.numel(), dtype=torch.int64)
            labels[perm] = torch.arange(nodes.numel()) * chunks // nodes.numel()
        node_chunk[nodes] = labels
    return node_chunk


def cached_chunks(graph, node_part: torch.Tensor, num_parts: int, chunks: int, method: str, seed: int,
                  folder: Path) -> Path:
    """Write ``make_chunks(...)`` to a file under ``folder`` (once per key) and return its path:
    every rank loads the same map instead of re-running METIS."""
    key = {"fingerprint": graph.fingerprint(), "parts": hashlib.sha256(node_part.numpy().tobytes()).hexdigest(),
           "chunks": chunks, "method": method, "seed": seed}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    path = Path(folder) / f"chunks-{method}-k{chunks}-s{seed}-{digest}.pt"
    if path.is_file():
        try:
            state = torch.load(path, weights_only=True)
            if state.get("key") == key:
                return path
        except Exception:  # noqa: BLE001 - a damaged cache entry is rebuilt, never trusted
            pass
    node_chunk = make_chunks(graph, node_part, num_parts, chunks, method, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    torch.save({"key": key, "node_chunk": node_chunk}, tmp)
    os.replace(tmp, path)
    return path


def load_chunks(path, num_nodes: int, chunks: int, fingerprint: str | None = None) -> torch.Tensor:
    """The node → chunk map written by :func:`cached_chunks`; ``fingerprint``, when given, must be the
    graph's it was cut from (a chunk file of another graph would train with a meaningless chunking)."""
    try:
        state = torch.load(path, weights_only=True)
        node_chunk = state["node_chunk"]
    except Exception as e:  # noqa: BLE001
        raise InputError(f"expected a chunk file written by fullgraph at {path} (got: {e})") from None
    made_from = (state.get("key") or {}).get("fingerprint")
    if fingerprint is not None and made_from != fingerprint:
        raise InputError(f"expected the chunk file {path} to be of this run's graph (got one made from the graph "
                         f"with fingerprint {str(made_from)[:12]}…, not {fingerprint[:12]}…); let the launcher make it")
    if node_chunk.shape != (num_nodes,) or int(node_chunk.min()) < 0 or int(node_chunk.max()) >= chunks:
        raise InputError(f"expected {num_nodes} chunk ids in [0, {chunks}) in {path} (got {tuple(node_chunk.shape)} "
                         f"ids in [{int(node_chunk.min())}, {int(node_chunk.max())}])")
    return node_chunk


@dataclass
class Chunk:
    """One chunk of a part. ``dst``: its local inner ids (ascending); ``others``: the local ids of the
    other columns of its block; ``others_chunk``: their chunk ids; ``block``: ``[|dst|, |dst| +
    |others|]``. Halo exchange within the group, for the chunk's rows only: ``send_idx`` (local inner
    ids, grouped by peer; ``send_pos`` the same rows as positions in ``dst``), ``send_counts``,
    ``recv_counts`` and ``recv_idx`` (local halo ids, grouped by owner)."""

    index: int
    dst: torch.Tensor
    others: torch.Tensor
    others_chunk: torch.Tensor
    block: Block
    send_idx: torch.Tensor
    send_pos: torch.Tensor
    send_counts: list[int]
    recv_counts: list[int]
    recv_idx: torch.Tensor

    @property
    def size(self) -> int:
        return self.dst.numel()


class ChunkSet:
    """The chunks of one part (see the module docstring)."""

    def __init__(self, part, local_chunk: torch.Tensor, chunks: int, norm: str, induced: bool = False):
        self.num_chunks = chunks
        self.local_chunk = local_chunk
        n_inner, n_local = part.num_inner, part.num_local
        whole = part.block(norm)
        base, edata = whole.adj, whole.edata
        indptr, cols, vals = base.indptr.long(), base.indices.long(), base.values
        inner_chunk = local_chunk[:n_inner]
        send_off, recv_off = part.send_offsets.tolist(), part.recv_offsets.tolist()
        halo_chunk = local_chunk[n_inner:]
        lookup = torch.full((n_local,), -1, dtype=torch.int64)
        global_ids = part.local_nodes
        self.chunks: list[Chunk] = []
        for k in range(chunks):
            dst = torch.nonzero(inner_chunk == k).flatten()
            offs, pos = csr_rows(indptr, dst)
            c, v = cols[pos], vals[pos]
            rows = row_ids(offs)
            lookup[dst] = torch.arange(dst.numel())
            inside = lookup[c] >= 0
            if induced:
                inside = inside | ((c >= n_inner) & (local_chunk[c] == k))
                others = torch.unique(c[(lookup[c] < 0) & inside])
                keep = inside
            else:
                others = torch.unique(c[lookup[c] < 0])
                keep = torch.ones_like(inside)
            lookup[others] = dst.numel() + torch.arange(others.numel())
            c, v, rows = lookup[c[keep]], v[keep], rows[keep]
            ip = indptr_from_rows(rows, dst.numel())
            block = Block(SparseOp(ip, c, v, (dst.numel(), dst.numel() + others.numel()), symmetric=False), norm,
                          src_ids=global_ids[torch.cat([dst, others])], dst_ids=global_ids[dst],
                          edata=None if edata is None else edata.take(pos[keep]))
            lookup[dst] = -1
            lookup[others] = -1
            send, send_counts, recv, recv_counts = [], [], [], []
            for q in range(part.num_parts):
                s = part.send_idx[send_off[q]:send_off[q + 1]]
                s = s[inner_chunk[s] == k]
                send.append(s)
                send_counts.append(s.numel())
                h = torch.arange(recv_off[q], recv_off[q + 1])
                h = h[halo_chunk[h] == k]
                recv.append(n_inner + h)
                recv_counts.append(h.numel())
            send_idx = torch.cat(send)
            where = torch.full((n_inner,), -1, dtype=torch.int64)
            where[dst] = torch.arange(dst.numel())
            self.chunks.append(Chunk(k, dst, others, local_chunk[others], block, send_idx, where[send_idx],
                                     send_counts, recv_counts, torch.cat(recv)))

    def __iter__(self):
        return iter(self.chunks)

    def __getitem__(self, k: int) -> Chunk:
        return self.chunks[k]

    def __len__(self) -> int:
        return len(self.chunks)

    def to(self, device) -> "ChunkSet":
        for ch in self.chunks:
            for name in ("dst", "others", "others_chunk", "send_idx", "send_pos", "recv_idx"):
                setattr(ch, name, getattr(ch, name).to(device))
            ch.block = ch.block.to(device)
        return self
