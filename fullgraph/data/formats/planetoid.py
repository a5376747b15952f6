"""Planetoid (Yang et al. 2016; Kipf & Welling 2017): Cora, CiteSeer, PubMed in ``ind.<name>.*`` files.

The files split the nodes by role rather than by id: ``allx``/``ally`` hold the non-test nodes
``0 .. len(allx)-1``, ``tx``/``ty`` the test nodes in the (unsorted) order of ``test.index``, and
``graph`` is an adjacency dict. Kipf's loader reassembles them; the net effect, which this module
implements directly, is: node ``test.index[i]`` gets row ``i`` of ``tx``/``ty``. Ids in the test
range that ``test.index`` does not list (15 in CiteSeer) are isolated nodes with no data: they get
zero features and label ``-1`` and belong to no split.

The public split is ``train = range(len(y))``, ``val`` = the next 500 ids, ``test = test.index``.
Edges are returned exactly as listed (duplicates and self loops included); ``datasets`` cleans them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from fullgraph.data.formats._common import features_to_torch, labels_from_onehot, mask_from_ids, read_table
from fullgraph.data.graph import Graph
from fullgraph.data.safe_pickle import checked_csr, load_pickle
from fullgraph.errors import InputError

__all__ = ["load_planetoid", "planetoid_files", "PLANETOID_SUFFIXES"]

PLANETOID_SUFFIXES = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")
NUM_VAL = 500


def planetoid_files(folder: str | Path, name: str) -> list[Path]:
    return [Path(folder) / f"ind.{name}.{s}" for s in PLANETOID_SUFFIXES]


def _features(obj, path: Path) -> sp.csr_matrix:
    if isinstance(obj, np.ndarray) and obj.ndim == 2:
        return sp.csr_matrix(obj.astype(np.float32))
    return checked_csr(obj, str(path))


def _onehot(obj, path: Path, num_classes: int | None) -> np.ndarray:
    if not isinstance(obj, np.ndarray) or obj.ndim != 2:
        raise InputError(f"expected {path} to hold a one-hot label matrix [N, C] (got {type(obj).__name__})")
    if num_classes is not None and obj.shape[1] != num_classes:
        raise InputError(
            f"expected {num_classes} label columns in {path}, as in the other label files (got {obj.shape[1]})"
        )
    return obj


def _adjacency(obj, path: Path, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(obj, dict):
        raise InputError(f"expected {path} to hold a dict {{node: [neighbours]}} (got {type(obj).__name__})")
    try:
        src = np.fromiter((int(u) for u, nbrs in obj.items() for _ in nbrs), dtype=np.int64)
        dst = np.fromiter((int(v) for nbrs in obj.values() for v in nbrs), dtype=np.int64)
    except (TypeError, ValueError) as e:
        raise InputError(f"expected integer node ids in {path} (got {type(e).__name__}: {e})") from None
    top = max(int(src.max(initial=-1)), int(dst.max(initial=-1)), max((int(k) for k in obj), default=-1))
    if top >= num_nodes:
        raise InputError(f"expected node ids below {num_nodes} (the number of feature rows) in {path} (got {top})")
    return src, dst


def load_planetoid(folder: str | Path, name: str) -> Graph:
    """The Planetoid graph ``name`` (e.g. ``cora``) from ``folder/ind.<name>.*``, with the public split."""
    folder = Path(folder)
    paths = dict(zip(PLANETOID_SUFFIXES, planetoid_files(folder, name)))
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise InputError(
            f"expected the Planetoid files ind.{name}.{{{','.join(PLANETOID_SUFFIXES)}}} in {folder} "
            f"(missing: {', '.join(missing)})"
        )
    allx = _features(load_pickle(paths["allx"]), paths["allx"])
    tx = _features(load_pickle(paths["tx"]), paths["tx"])
    y = _onehot(load_pickle(paths["y"]), paths["y"], None)
    c = y.shape[1]
    ally = _onehot(load_pickle(paths["ally"]), paths["ally"], c)
    ty = _onehot(load_pickle(paths["ty"]), paths["ty"], c)
    test_ids = read_table(paths["test.index"], dtype=np.int64, what="test index", ncols=1, header=False).reshape(-1)

    n_known = allx.shape[0]
    if ally.shape[0] != n_known or ty.shape[0] != tx.shape[0] or tx.shape[0] != test_ids.size:
        raise InputError(
            f"expected matching row counts in {folder}: allx {allx.shape[0]} = ally {ally.shape[0]}, "
            f"tx {tx.shape[0]} = ty {ty.shape[0]} = test.index {test_ids.size}"
        )
    if tx.shape[1] != allx.shape[1]:
        raise InputError(f"expected tx and allx to have the same feature count (got {tx.shape[1]} and {allx.shape[1]})")
    if np.unique(test_ids).size != test_ids.size or (test_ids.size and test_ids.min() < n_known):
        raise InputError(
            f"expected distinct test ids >= {n_known} (the allx rows) in {paths['test.index']} "
            f"(got min {test_ids.min() if test_ids.size else None}, {test_ids.size - np.unique(test_ids).size} repeats)"
        )
    num_nodes = max(n_known, int(test_ids.max(initial=-1)) + 1)
    if len(y) + NUM_VAL > n_known:
        raise InputError(f"expected at least {len(y) + NUM_VAL} non-test nodes for the public split (got {n_known})")

    # features: allx rows keep their ids, tx row i goes to node test_ids[i], gaps stay zero
    tx_coo = tx.tocoo()
    ax_coo = allx.tocoo()
    feats = sp.csr_matrix(
        (np.concatenate([ax_coo.data, tx_coo.data]).astype(np.float32),
         (np.concatenate([ax_coo.row, test_ids[tx_coo.row]]), np.concatenate([ax_coo.col, tx_coo.col]))),
        shape=(num_nodes, allx.shape[1]),
    )
    labels = np.full(num_nodes, -1, dtype=np.int64)
    labels[:n_known] = labels_from_onehot(ally, str(paths["ally"]))
    labels[test_ids] = labels_from_onehot(ty, str(paths["ty"]))

    src, dst = _adjacency(load_pickle(paths["graph"]), paths["graph"], num_nodes)
    train = np.zeros(num_nodes, dtype=bool)
    train[: len(y)] = True
    val = np.zeros(num_nodes, dtype=bool)
    val[len(y): len(y) + NUM_VAL] = True
    return Graph.from_edges(
        torch.from_numpy(src), torch.from_numpy(dst), num_nodes,
        x=features_to_torch(feats, f"features of {name}"), y=torch.from_numpy(labels),
        train_mask=torch.from_numpy(train), val_mask=torch.from_numpy(val),
        test_mask=torch.from_numpy(mask_from_ids(test_ids, num_nodes, str(paths["test.index"]))),
        name=name, num_classes=c,
    )
