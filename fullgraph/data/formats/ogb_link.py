"""OGB's link-property-prediction layout (ogbl-collab, -ddi, -ppa, -citation2), read as the graph an
encoder sees and the :class:`~fullgraph.data.link_split.LinkSplit` it is trained and scored on.

An unzipped ``http://snap.stanford.edu/ogb/data/linkproppred/<name>.zip`` holds (``ogb/io/README.md``,
``ogb/linkproppred/dataset.py``; text files headerless, comma-separated, gzip-compressed):

* ``raw/edge.csv.gz``: ``src,dst`` per line. This is already the *training* graph: OGB took the
  validation and test edges out of it. collab, ddi and ppa list each undirected edge once (collab once
  per year a pair wrote together); citation2's lines are directed citations.
* ``raw/node-feat.csv.gz`` (optional): a feature row per node (collab 128, ppa 58, citation2 128; ddi
  has none). ``raw/num-node-list.csv.gz`` and ``raw/num-edge-list.csv.gz``: the counts.
* collab only: ``raw/edge_weight.csv.gz`` and ``raw/edge_year.csv.gz``, one number per edge line
  (citation2's ``node_year.csv.gz`` is not read).
* ``split/<scheme>/{train,valid,test}.pt``: ``torch.save``'d dicts. collab/ddi/ppa: ``edge`` [n, 2] in
  each, ``edge_neg`` [m, 2] in valid and test (negatives shared by all positives; collab adds ``weight``
  and ``year``, not read). citation2: ``source_node`` and ``target_node`` [n], and in valid and test
  ``target_node_neg`` [n, K] (K = 1000 negatives *per positive*: ``LinkSplit.per_positive = K``,
  positive ``i``'s negatives are rows ``i·K .. i·K+K-1``, each ``(source_node[i], target_node_neg[i, j])``).

The ``.pt`` files are read by ``torch.load(weights_only=True)``, which runs no code a file names; OGB
saved numpy arrays in some of them, so numpy's array reconstructors (under numpy 1's module names
too) are allowed beside torch's own, and nothing else. Anything else (not a dict, a missing key, a
wrong shape or dtype, an id past the node count, a file that is no torch archive or pickle) is one
:class:`~fullgraph.errors.InputError` naming the file, what was expected and what was found.

The graph: the raw edges, made symmetric as OGB's examples do (``to_undirected``), each unordered
pair once per direction and self-loops dropped (what ``datasets.preprocess`` would leave). collab's
pairs listed once per year are merged: their weights summed (``edge_weight``), their latest year kept
as a one-column ``edge_attr``. A folder without node features (ddi) gets one constant column of ones:
OGB's ddi baselines learn a free embedding per node instead, which fullgraph does not offer for an
untyped graph, so the encoder then reads the structure alone. ``Graph`` also wants labels and three
non-empty masks, which link datasets do not have: the graph carries placeholders (every label 0 of 2
classes; train = all nodes but the last two, val = node N-2, test = node N-1). No link task reads
them, and ``detect.load_path`` refuses this layout for node tasks so that nobody trains on them.
"""

from __future__ import annotations

import contextlib
import re
import zipfile
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats._common import read_table_blocks, require_files
from fullgraph.data.formats.ogb_source import SPLIT_FILES, _columns, _split_name
from fullgraph.data.formats.ogb_layouts import _count
from fullgraph.data.graph import Graph
from fullgraph.data.link_split import LinkSplit
from fullgraph.data.splits import placeholder_labels
from fullgraph.errors import InputError

__all__ = ["is_ogb_link_folder", "load_ogb_link", "read_link_split", "read_split_file"]


def is_ogb_link_folder(folder: str | Path) -> bool:
    """Whether ``folder`` holds ``raw/edge.csv.gz`` and a ``split/<scheme>/train.pt``: the ``.pt`` split
    files are what tells the link layout from OGB's node layout, which shares the edge file."""
    folder = Path(folder)
    return (folder / "raw" / "edge.csv.gz").is_file() and any(p.is_file() for p in folder.glob("split/*/train.pt"))


# ------------------------------------------------------------------------------------ the .pt files
def _numpy_globals() -> list:
    """What a pickled numpy array of numbers names: its reconstructor, ``ndarray``, ``dtype`` and the
    numeric dtype classes (whose state is set on load), the scalar reconstructor, the two functions
    also under numpy 1's module path (``numpy.core``), which OGB's files were written with. Taken
    from numpy's own reductions, so the list follows numpy's private moves; object arrays stay out."""
    reconstruct = np.zeros(1).__reduce__()[0]
    scalar = np.float32(0).__reduce__()[0]
    allowed = [reconstruct, scalar, np.ndarray, np.dtype, *{type(np.dtype(c)) for c in "?bhilqBHILQefdgFDG"}]
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed += [(reconstruct, f"{mod}._reconstruct"), (scalar, f"{mod}.scalar")]
    return allowed


def _why(e: Exception, path: Path) -> str:
    """What a failed ``torch.load`` says, in one sentence: what its weights-only unpickler refused (and
    not its advice to allow it), else its first line; after saying what the file is when it is no
    zip archive (torch's format) and does not start as a pickle (torch's legacy format) does."""
    text = str(e)
    mark = "WeightsUnpickler error:"
    if mark in text:
        text = text[text.index(mark) + len(mark):]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    sentence = re.split(r"\.\s", lines[0])[0] if lines else ""
    why = f"{type(e).__name__}: {sentence[:200]}"
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        if not zipfile.is_zipfile(path):
            if head == b"PK":
                why = f"a damaged zip archive (cut short?); {why}"
            elif head[:1] != b"\x80":  # what torch's legacy format and any pickle of protocol 2+ start with
                why = f"a file that is neither a zip archive nor a pickle; {why}"
    except OSError:
        pass
    return why


def read_split_file(path: str | Path) -> dict:
    """The dict a split ``.pt`` file holds, read without running anything it names (module doc)."""
    path = Path(path)
    allow = getattr(torch.serialization, "safe_globals", None)  # torch < 2.5: numpy arrays are refused
    try:
        with allow(_numpy_globals()) if allow else contextlib.nullcontext():
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"expected the split file {path} (not found)") from None
    except Exception as e:  # whatever torch raises on a damaged or hostile file, the file is at fault
        raise InputError(f"expected {path} to be a torch.save'd dict of arrays, read without running code "
                         f"(got {_why(e, path)})") from None
    if not isinstance(obj, dict):
        raise InputError(f"expected {path} to hold a dict of arrays, as OGB's split files do (got "
                         f"{type(obj).__name__})")
    return obj


def _ids(split: dict, key: str, path: Path, n: int, ndim: int, width: int | None = None) -> np.ndarray:
    """``split[key]`` as int64 node ids of ``ndim`` dimensions (``[rows, width]`` when 2), each in ``[0, n)``."""
    if key not in split:
        raise InputError(f"expected the key {key!r} in {path} (found keys {sorted(map(str, split))})")
    a = split[key]
    a = a.numpy() if isinstance(a, torch.Tensor) and a.layout == torch.strided else a
    shape = "[n]" if ndim == 1 else f"[n, {width or 'K'}]"
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "iu" or a.ndim != ndim or \
            (width is not None and a.shape[1] != width) or (ndim == 2 and a.shape[1] == 0):
        got = f"{a.dtype} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise InputError(f"expected {path}[{key!r}] to be integer node ids {shape} (got {got})")
    a = a.astype(np.int64, copy=False)
    bad = np.flatnonzero((a < 0) | (a >= n))
    if bad.size:
        row = int(bad[0]) // (a.shape[1] if ndim == 2 else 1)
        raise InputError(f"expected node ids in [0, {n}) in {path}[{key!r}] (got {int(a.reshape(-1)[bad[0]])} "
                         f"at row {row + 1})")
    return a


def _pair_split(splits: dict, paths: dict, n: int) -> tuple[list, int]:
    """collab / ddi / ppa: ``edge`` tables, negatives shared by each split's positives."""
    tables = [_ids(splits["train"], "edge", paths["train"], n, 2, 2)]
    for s in ("valid", "test"):
        tables += [_ids(splits[s], "edge", paths[s], n, 2, 2), _ids(splits[s], "edge_neg", paths[s], n, 2, 2)]
    return tables, 0


def _source_target_split(splits: dict, paths: dict, n: int) -> tuple[list, int]:
    """citation2: ``source_node``/``target_node`` columns and ``target_node_neg`` [n, K] per positive."""
    tables, per_positive = [], {}
    for s in SPLIT_FILES:
        src, dst = (_ids(splits[s], k, paths[s], n, 1) for k in ("source_node", "target_node"))
        if src.size != dst.size:
            raise InputError(f"expected as many 'source_node' as 'target_node' entries in {paths[s]} (got "
                             f"{src.size} and {dst.size})")
        tables.append(np.stack([src, dst], 1))
        if s == "train":
            continue
        neg = _ids(splits[s], "target_node_neg", paths[s], n, 2)
        if neg.shape[0] != src.size:
            raise InputError(f"expected one row of negatives per positive, {src.size}, in "
                             f"{paths[s]}['target_node_neg'] (got {neg.shape[0]})")
        per_positive[s] = neg.shape[1]
        tables.append(np.stack([np.repeat(src, neg.shape[1]), neg.reshape(-1)], 1))
    if per_positive["valid"] != per_positive["test"]:
        raise InputError(f"expected as many negatives per positive in {paths['valid']} as in {paths['test']} (got "
                         f"{per_positive['valid']} and {per_positive['test']})")
    return tables, per_positive["valid"]


def read_link_split(folder: Path, scheme: str, n: int, name: str) -> LinkSplit:
    """The ``split/<scheme>`` files as a :class:`LinkSplit` over ``n`` nodes; the form (shared or
    per-positive negatives) is told by the training file's keys."""
    paths = {s: folder / "split" / scheme / f"{s}.pt" for s in SPLIT_FILES}
    require_files(paths.values(), f"OGB link split of {folder}")
    splits = {s: read_split_file(p) for s, p in paths.items()}
    train = splits["train"]
    if "edge" in train:
        tables, k = _pair_split(splits, paths, n)
    elif "source_node" in train and "target_node" in train:
        tables, k = _source_target_split(splits, paths, n)
    else:
        raise InputError(f"expected the key 'edge' (collab, ddi, ppa) or 'source_node' and 'target_node' (citation2) "
                         f"in {paths['train']} (found keys {sorted(map(str, train))})")
    return LinkSplit(n, *(torch.from_numpy(np.ascontiguousarray(t)) for t in tables), per_positive=k,
                     name=f"{name} {scheme} split (OGB)")


# ------------------------------------------------------------------------------------ the raw files
def _num_nodes(raw: Path, feat_f: Path) -> int:
    """The node count: ``num-node-list.csv.gz``, else the feature rows; a folder with neither is refused."""
    n = _count(raw / "num-node-list.csv.gz", "node count")
    if n is None and feat_f.is_file():
        n = sum(b.shape[0] for b in read_table_blocks(feat_f, dtype=np.float32, what="node features",
                                                      ncols=_columns(feat_f)))
    if n is None:
        raise InputError(f"expected the node count {raw / 'num-node-list.csv.gz'} in a folder without node features "
                         f"(not found)")
    if n < 3:
        raise InputError(f"expected at least 3 nodes in {raw} (got {n}): the placeholder node splits need three")
    return n


def _finite(block: np.ndarray, path: Path, row0: int) -> None:
    """Every value finite once stored as float32 (a value past its range would become inf with only numpy's
    warning), or one error naming the file and the line."""
    with np.errstate(over="ignore"):
        kept = block.reshape(block.shape[0], -1).astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(kept).all(axis=1))
    if bad.size:
        r = int(bad[0])
        raise InputError(f"expected finite numbers within float32's range in {path} (got "
                         f"{block.reshape(block.shape[0], -1)[r].tolist()} on line {row0 + r + 1})")


def _column(path: Path, rows: int, what: str, source: Path) -> np.ndarray:
    """A file of one finite number per edge line of ``source``, as float64 ``[rows]``."""
    out, at = np.empty(rows, np.float64), 0
    for b in read_table_blocks(path, dtype=np.float64, what=what, ncols=1):
        if at + b.shape[0] > rows:
            raise InputError(f"expected one line per edge of {source}, {rows}, in {path} (got more)")
        _finite(b, path, at)
        out[at:at + b.shape[0]] = b[:, 0]
        at += b.shape[0]
    if at != rows:
        raise InputError(f"expected one line per edge of {source}, {rows}, in {path} (got {at})")
    return out


def _raw_edges(raw: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``raw/edge.csv.gz`` as two int64 columns, ids checked and the count against ``num-edge-list``."""
    edge_f = raw / "edge.csv.gz"
    blocks = list(read_table_blocks(edge_f, dtype=np.int64, what="edge list", ncols=2))
    table = np.concatenate(blocks) if blocks else np.zeros((0, 2), np.int64)
    del blocks
    bad = np.flatnonzero(((table < 0) | (table >= n)).any(axis=1))
    if bad.size:
        raise InputError(f"expected node ids in [0, {n}) (the node count) in {edge_f} (got "
                         f"{table[bad[0]].tolist()} on line {int(bad[0]) + 1})")
    m = _count(raw / "num-edge-list.csv.gz", "edge count")
    if m is not None and m != table.shape[0]:
        raise InputError(f"expected {m} edges (num-edge-list.csv.gz) in {edge_f} (got {table.shape[0]})")
    return np.ascontiguousarray(table[:, 0]), np.ascontiguousarray(table[:, 1])


def _merged_pairs(src: np.ndarray, dst: np.ndarray, n: int, weight, year):
    """The distinct unordered pairs of the edges, self-loops left out, as sorted ``lo·n + hi`` keys, with
    each pair's weights summed and its latest year (``None`` where that file is absent)."""
    keep = src != dst
    lo, hi = np.minimum(src[keep], dst[keep]), np.maximum(src[keep], dst[keep])
    keys = lo * n + hi
    del lo, hi
    if weight is None and year is None:  # nothing to carry: an in-place sort, no permutation
        keys.sort()
        return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if keys.size else keys, None, None
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    first = np.ones(keys.size, bool)
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    w = None if weight is None or not keys.size else np.add.reduceat(weight[keep][order], starts)
    y = None if year is None or not keys.size else np.maximum.reduceat(year[keep][order], starts)
    return keys[first], w, y


def _encoder_graph(raw: Path, n: int, name: str) -> Graph:
    """The raw (training) edges made symmetric, collab's edge files merged as edge data (module doc)."""
    src, dst = _raw_edges(raw, n)
    files = {k: raw / f for k, f in (("weight", "edge_weight.csv.gz"), ("year", "edge_year.csv.gz"))}
    data = {k: _column(f, src.size, f"edge {k}s", raw / "edge.csv.gz") if f.is_file() else None
            for k, f in files.items()}
    keys, w, y = _merged_pairs(src, dst, n, data["weight"], data["year"])
    del src, dst, data
    lo, hi = keys // n, keys % n
    edge = {}
    if w is not None:
        edge["edge_weight"] = torch.from_numpy(np.concatenate([w, w]).astype(np.float32))
    if y is not None:
        edge["edge_attr"] = torch.from_numpy(np.concatenate([y, y]).astype(np.float32)[:, None])
    return Graph.from_edges(torch.from_numpy(np.concatenate([lo, hi])), torch.from_numpy(np.concatenate([hi, lo])), n,
                            x=_features(raw, n), name=name, **edge, **placeholder_labels(n))


def _features(raw: Path, n: int) -> torch.Tensor:
    """``node-feat.csv.gz`` as float32 ``[n, F]``, or one column of ones where the folder has none (ddi)."""
    feat_f = raw / "node-feat.csv.gz"
    if not feat_f.is_file():
        return torch.ones(n, 1)
    width = _columns(feat_f)
    x, at = np.empty((n, width), np.float32), 0
    for b in read_table_blocks(feat_f, dtype=np.float32, what="node features", ncols=width):
        if at + b.shape[0] > n:
            raise InputError(f"expected one feature row per node, {n}, in {feat_f} (got more)")
        _finite(b, feat_f, at)
        x[at:at + b.shape[0]] = b
        at += b.shape[0]
    if at != n:
        raise InputError(f"expected one feature row per node, {n}, in {feat_f} (got {at})")
    return torch.from_numpy(x)


def load_ogb_link(path: str | Path, *, name: str | None = None) -> tuple[Graph, LinkSplit]:
    """The OGB link-prediction dataset unpacked in ``path``: the encoder's graph (the training edges,
    symmetric, with placeholder labels and masks) and the published split (module doc)."""
    folder = Path(path)
    raw = folder / "raw"
    require_files([raw / "edge.csv.gz"], f"OGB link dataset in {folder}")
    name = name or folder.name or folder.resolve().name
    scheme = _split_name(folder, None)
    n = _num_nodes(raw, raw / "node-feat.csv.gz")
    split = read_link_split(folder, scheme, n, name)  # the small files first: a damaged split fails fast
    return _encoder_graph(raw, n, name), split
