"""Reading fullgraph's own dataset folder (the format: :mod:`fullgraph.data.formats.native`).

Loading (:func:`load_native`) checks, before building anything, that every file is there, that each
``.npy`` header agrees with ``meta.json`` (dtype and shape), that the shapes agree with the counts,
and that no file is shorter than its header says (a truncated copy); each problem is one
:class:`~fullgraph.errors.InputError`. The full sha256 check reads every byte, which for a 10^8-edge
graph takes seconds, so it is chosen by ``verify``: ``True`` always, ``False`` never, ``None`` (the
default) when the arrays total at most :data:`VERIFY_AUTO_MAX_BYTES` (512 MiB, well under a second
of hashing; the pages read then serve the load too). Arrays are mapped copy-on-write
(``mmap_mode="c"``): nothing is read until used, and an in-place write by later code changes a
private page instead of the file (a read-only map would turn such a write into a crash).

Versions 1, 2 and 3 are read (:data:`~fullgraph.data.formats.native.READ_VERSIONS`; 3 is 2 with
edge data files, checked and checksummed as the others). ``split`` picks one
of a version-2 (or 3) folder's fixed splits: split 0 from ``*_mask.npy`` as in version 1, split ``k`` as
row ``k`` of the ``[S, N]`` ``*_masks.npy`` maps; any other split is one error that says how many
the folder holds, never a silent fall back to split 0.

A typed graph's ``node_types`` record (any version; :mod:`.native`) is read into ``Graph.node_types``
and checked when ``meta.json`` is read, before any array: a record :class:`NodeTypes` refuses, or
one whose nodes, feature widths or relations disagree with the counts, is one ``InputError``
(``Graph`` then checks every edge, feature row and split against the types as it is built).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from fullgraph.data.formats.native import (
    _B1, _F4, _I4, _I8, EDGE_DATA_VERSION, EDGE_FILES, MASKS, META, NATIVE_FORMAT, READ_VERSIONS, SPLIT_MASKS,
    SPLITS, VERIFY_AUTO_MAX_BYTES, _dtype_name,
)
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops.node_types import NodeTypes

__all__ = ["load_native", "read_native_meta", "is_native_folder", "num_splits", "read_native_splits",
           "edge_kinds", "node_types"]


def is_native_folder(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds a ``meta.json`` naming this format (the arrays are not checked)."""
    try:
        meta = json.loads((Path(folder) / META).read_text(encoding="utf8"))
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("format") == NATIVE_FORMAT


def _need(cond: bool, folder: Path, text: str) -> None:
    if not cond:
        raise InputError(f"expected {text} in the fullgraph dataset {folder}/meta.json")


def read_native_meta(folder: str | os.PathLike) -> dict:
    """The checked ``meta.json`` of a native folder."""
    folder = Path(folder)
    path = folder / META
    if not folder.is_dir():
        raise InputError(f"expected a fullgraph dataset folder at {folder} (got {'a file' if folder.exists() else 'nothing'})")
    try:
        meta = json.loads(path.read_text(encoding="utf8"))
    except FileNotFoundError:
        raise InputError(f"expected {path} (not found: {folder} is not a fullgraph dataset folder)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"expected {path} to be readable (got {type(e).__name__}: {e})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"expected {path} to be JSON (got a syntax error at line {e.lineno}: {e.msg})") from None
    if not isinstance(meta, dict) or meta.get("format") != NATIVE_FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise InputError(f"expected format {NATIVE_FORMAT!r} in {path} (got {got!r})")
    if meta.get("version") not in READ_VERSIONS:
        known = f"{', '.join(map(str, READ_VERSIONS[:-1]))} or {READ_VERSIONS[-1]}"
        raise InputError(f"expected version {known} of the {NATIVE_FORMAT} format "
                         f"in {path} (got {meta.get('version')!r}; written by a newer fullgraph?)")
    counts = meta.get("counts")
    _need(isinstance(counts, dict), folder, "a 'counts' object")
    for k in ("num_nodes", "num_edges", "num_features", "num_classes"):
        v = counts.get(k)
        _need(isinstance(v, int) and not isinstance(v, bool) and v >= 0, folder, f"a non-negative integer counts.{k}")
    _need(counts["num_nodes"] >= 1, folder, "counts.num_nodes >= 1")
    _need(isinstance(counts.get("multilabel"), bool), folder, "a true/false counts.multilabel")
    sizes = counts.get("split_sizes")
    _need(isinstance(sizes, dict) and all(isinstance(sizes.get(s), int) for s in SPLITS), folder,
          "integer counts.split_sizes.train/val/test")
    _check_splits_meta(counts, folder)
    _need(meta.get("features") in ("dense", "sparse_csr"), folder, "'features' to be 'dense' or 'sparse_csr'")
    if meta["features"] == "sparse_csr":
        nnz = counts.get("feature_nnz")
        _need(isinstance(nnz, int) and nnz >= 0, folder, "an integer counts.feature_nnz for sparse features")
    _check_edge_meta(meta, counts, folder)
    _check_types_meta(meta, counts, folder)
    _need(isinstance(meta.get("files"), dict), folder, "a 'files' object")
    _need(isinstance(meta.get("name", ""), str), folder, "a string 'name'")
    return meta


def _check_splits_meta(counts: dict, folder: Path) -> None:
    """``num_splits`` (absent: 1, as in version 1) and, for several, each split's sizes."""
    s = counts.get("num_splits", 1)
    _need(isinstance(s, int) and not isinstance(s, bool) and s >= 1, folder, "an integer counts.num_splits >= 1")
    if s > 1:
        every = counts.get("split_sizes_all")
        _need(isinstance(every, list) and len(every) == s and all(
            isinstance(d, dict) and all(isinstance(d.get(k), int) for k in SPLITS) for d in every), folder,
            f"counts.split_sizes_all: {s} objects of integer train/val/test sizes")


def _count(counts: dict, key: str) -> bool:
    v = counts.get(key)
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _check_edge_meta(meta: dict, counts: dict, folder: Path) -> None:
    """``counts.edge_data`` (version 3 only) and the counts its kinds need."""
    if meta["version"] != EDGE_DATA_VERSION:
        _need("edge_data" not in counts, folder, f"counts.edge_data only in version {EDGE_DATA_VERSION}")
        return
    kinds = counts.get("edge_data")
    _need(isinstance(kinds, list) and kinds and all(k in EDGE_FILES for k in kinds) and len(set(kinds)) == len(kinds),
          folder, f"counts.edge_data: a list of the edge data kinds {', '.join(EDGE_FILES)} (version "
                  f"{EDGE_DATA_VERSION})")
    if "attr" in kinds:
        _need(_count(counts, "edge_features"), folder, "an integer counts.edge_features >= 1 with edge features")
    if "type" in kinds:
        _need(_count(counts, "num_relations"), folder, "an integer counts.num_relations >= 1 with edge types")


def node_types(meta: dict) -> NodeTypes | None:
    """The node types a native folder's ``meta.json`` records (``None``: a graph of one type); a
    damaged record is an ``InputError``."""
    return NodeTypes.of_record(meta)


def _check_types_meta(meta: dict, counts: dict, folder: Path) -> None:
    """A typed graph's ``node_types`` record (absent: one type), against the counts it must agree with."""
    try:
        types = node_types(meta)
    except InputError as err:
        raise InputError(f"{err} in {folder}/meta.json") from None
    if types is None:
        return
    _need(types.num_nodes == counts["num_nodes"], folder,
          f"node_types counting the {counts['num_nodes']} nodes (got {types.num_nodes}: {types.describe()})")
    f = counts["num_features"]
    _need(types.num_features == f or (types.num_features == 0 and f == 1), folder,
          f"node_types widths summing to the {f} feature columns (got {types.num_features})")
    if types.relations:
        kinds = counts.get("edge_data") or ()
        _need("type" in kinds and counts.get("num_relations") == types.num_relations, folder,
              f"edge types of the {types.num_relations} relations of node_types (got "
              f"{counts.get('num_relations') if 'type' in kinds else 'none'})")


def edge_kinds(meta: dict) -> tuple[str, ...]:
    """The kinds of edge data a native folder's (checked) ``meta.json`` says it holds (``()``: none)."""
    return tuple(k for k in EDGE_FILES if k in meta["counts"].get("edge_data", ()))


def num_splits(meta: dict) -> int:
    """How many fixed splits a native folder's (checked) ``meta.json`` says it holds."""
    return int(meta["counts"].get("num_splits", 1))


def _expected(meta: dict) -> dict[str, tuple[tuple[np.dtype, ...], tuple[int, ...]]]:
    """Every array the meta implies: name -> (allowed dtypes, shape from the counts)."""
    c = meta["counts"]
    n, e, f = c["num_nodes"], c["num_edges"], c["num_features"]
    out = {"indptr.npy": ((_I8,), (n + 1,)), "indices.npy": ((_I4, _I8), (e,))}
    if meta["features"] == "sparse_csr":
        nnz = c["feature_nnz"]
        out |= {"x_indptr.npy": ((_I8,), (n + 1,)), "x_indices.npy": ((_I8, _I4), (nnz,)),
                "x_values.npy": ((_F4,), (nnz,))}
    else:
        out["x.npy"] = ((_F4,), (n, f))
    out["y.npy"] = (((_F4,), (n, c["num_classes"])) if c["multilabel"] else
                    ((_F4,), (n,)) if c.get("numeric_labels") is True else ((_I8,), (n,)))
    for m in MASKS:
        out[f"{m}.npy"] = ((_B1,), (n,))
    if num_splits(meta) > 1:
        for m in SPLIT_MASKS:
            out[f"{m}.npy"] = ((_B1,), (num_splits(meta), n))
    kinds = edge_kinds(meta)
    if "weight" in kinds:
        out[EDGE_FILES["weight"]] = ((_F4,), (e,))
    if "attr" in kinds:
        out[EDGE_FILES["attr"]] = ((_F4,), (e, c["edge_features"]))
    if "type" in kinds:
        out[EDGE_FILES["type"]] = ((_I8,), (e,))
    return out


def _read_header(path: Path) -> tuple[np.dtype, tuple[int, ...], int]:
    """``(dtype, shape, data offset)`` from a ``.npy`` header."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version}")
            offset = f.tell()
    except (ValueError, OSError, EOFError, SyntaxError) as e:
        raise InputError(f"expected {path} to be a .npy array (got an unreadable header: {e})") from None
    if fortran:
        raise InputError(f"expected {path} in C order (got a Fortran-ordered array)")
    if dtype.hasobject:
        raise InputError(f"expected {path} to hold plain numbers (got Python objects, dtype {dtype})")
    return dtype, tuple(shape), offset


def _sha256_data(path: Path, offset: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        for block in iter(lambda: f.read(8 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_files(folder: Path, meta: dict, verify: bool | None) -> dict[str, int]:
    """Every check short of building the graph; returns each file's data offset."""
    expected = _expected(meta)
    files = meta["files"]
    missing = [name for name in expected if not (folder / name).is_file()]
    if missing:
        raise InputError(f"expected the file(s) {', '.join(missing)} in the fullgraph dataset {folder} "
                         f"(not found; meta.json lists them)")
    offsets = {}
    for name, (dtypes, shape) in expected.items():
        path = folder / name
        entry = files.get(name)
        if not isinstance(entry, dict) or not all(k in entry for k in ("dtype", "shape", "bytes")):
            raise InputError(f"expected an entry with dtype, shape and bytes for {name} in {folder}/meta.json")
        try:
            meta_dtype = np.dtype(entry["dtype"])
        except TypeError:
            raise InputError(f"expected a numpy dtype for {name} in {folder}/meta.json (got {entry['dtype']!r})") from None
        allowed = " or ".join(_dtype_name(d) for d in dtypes)
        if meta_dtype not in dtypes:
            raise InputError(f"expected {name} to be {allowed} in {folder}/meta.json (got {_dtype_name(meta_dtype)})")
        if list(entry["shape"]) != list(shape):
            raise InputError(f"expected {name} of shape {list(shape)} from the counts in {folder}/meta.json "
                             f"(got shape {entry['shape']} listed under 'files': the counts and files disagree)")
        dtype, file_shape, offset = _read_header(path)
        if dtype != meta_dtype:
            raise InputError(f"expected {path} to hold {_dtype_name(meta_dtype)} as meta.json says "
                             f"(got {_dtype_name(dtype)})")
        if file_shape != shape:
            raise InputError(f"expected {path} of shape {list(shape)} as meta.json says (got {list(file_shape)})")
        size = path.stat().st_size
        want = offset + math.prod(shape) * dtype.itemsize
        if size < want:
            raise InputError(f"expected {path} to hold {want} bytes (got {size}: the file is truncated)")
        if size != want or size != entry["bytes"]:
            raise InputError(f"expected {path} to be {entry['bytes']} bytes as meta.json says (got {size})")
        offsets[name] = offset
    if verify is None:
        verify = sum(files[name]["bytes"] for name in expected) <= VERIFY_AUTO_MAX_BYTES
    if verify:
        for name in expected:
            want = files[name].get("sha256")
            if not isinstance(want, str):
                raise InputError(f"expected a sha256 for {name} in {folder}/meta.json (got none)")
            got = _sha256_data(folder / name, offsets[name])
            if got != want:
                raise InputError(f"expected {folder / name} to have sha256 {want} as meta.json says "
                                 f"(got {got}: the file was changed or damaged)")
    return offsets


def _map(path: Path) -> torch.Tensor:
    """The array of ``path`` as a tensor over a copy-on-write memory map (no read yet)."""
    try:
        arr = np.load(path, mmap_mode="c", allow_pickle=False)
    except ValueError as e:  # numpy's "mmap length is greater than file size", and kin
        raise InputError(f"expected {path} to be a complete .npy array (got {e})") from None
    except OSError as e:
        raise InputError(f"expected {path} to be readable (got {type(e).__name__}: {e})") from None
    return torch.from_numpy(arr)


def _check_split(folder: Path, meta: dict, split: int) -> None:
    """Refuse a split the folder does not hold, before any file is read or hashed."""
    count = num_splits(meta)
    if isinstance(split, bool) or not isinstance(split, int) or not 0 <= split < count:
        which = "0" if count == 1 else f"in 0..{count - 1}"
        raise InputError(f"expected --split {which} for {folder} (it holds {count} fixed split"
                         f"{'s' if count > 1 else ''}) (got {split})")


def _split_masks(folder: Path, meta: dict, split: int) -> dict[str, torch.Tensor]:
    """The masks of fixed split ``split`` (checked by :func:`_check_split`), memory-mapped; their sizes
    checked against ``meta.json``."""
    if split == 0:
        masks = {m: _map(folder / f"{m}.npy") for m in MASKS}
        sizes, where = meta["counts"]["split_sizes"], {m: f"{m}.npy" for m in MASKS}
    else:
        masks = {m: _map(folder / f"{many}.npy")[split] for m, many in zip(MASKS, SPLIT_MASKS)}
        sizes = meta["counts"]["split_sizes_all"][split]
        where = {m: f"{many}.npy (row {split})" for m, many in zip(MASKS, SPLIT_MASKS)}
    for s, m in zip(SPLITS, MASKS):
        got = int(masks[m].sum())
        if got != sizes[s]:
            raise InputError(f"expected {sizes[s]} nodes in {folder}/{where[m]} as meta.json says (got {got})")
    return masks


def _features(folder: Path, meta: dict) -> torch.Tensor:
    c = meta["counts"]
    if meta["features"] != "sparse_csr":
        return _map(folder / "x.npy")
    crow, col, vals = (_map(folder / f"x_{k}.npy") for k in ("indptr", "indices", "values"))
    col = col if col.dtype == torch.int64 else col.to(torch.int64)
    if int(crow[0]) != 0 or int(crow[-1]) != vals.numel() or bool((crow[1:] < crow[:-1]).any()):
        raise InputError(f"expected x_indptr.npy in {folder} to rise from 0 to {vals.numel()} (got other values)")
    if col.numel() and (int(col.min()) < 0 or int(col.max()) >= c["num_features"]):
        raise InputError(f"expected feature column ids in [0, {c['num_features']}) in {folder}/x_indices.npy")
    with warnings.catch_warnings():  # torch's one-time "sparse CSR is in beta" notice
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, col, vals, size=(c["num_nodes"], c["num_features"]),
                                       check_invariants=False)


def read_native_splits(folder: str | os.PathLike, *, verify: bool | None = None) -> tuple[np.ndarray, ...]:
    """Every fixed split of a native folder as ``(train, val, test)`` bool arrays ``[S, N]`` (memory-mapped;
    ``S = 1`` for a folder with one): what converting the folder again keeps."""
    folder = Path(folder).expanduser()
    meta = read_native_meta(folder)
    _check_files(folder, meta, verify)
    names = SPLIT_MASKS if num_splits(meta) > 1 else MASKS
    return tuple(_map(folder / f"{m}.npy").numpy().reshape(num_splits(meta), -1) for m in names)


def load_native(folder: str | os.PathLike, *, verify: bool | None = None, split: int = 0) -> Graph:
    """The graph in a native folder, memory-mapped; see the module doc for the checks, ``verify``
    and ``split`` (which of the folder's fixed splits the masks are).

    Features, labels, masks, ``indptr`` and the edge data files (version 3: ``edge_weight.npy``,
    ``edge_attr.npy``, ``edge_type.npy``, in CSR order) stay memory-mapped (copy-on-write); a typed
    graph's ``node_types`` come from ``meta.json``. ``Graph`` needs int64
    edge ``indices``, so an int32 ``indices.npy`` is converted once: an ``8 E``-byte copy, the one
    array of the graph that is read into memory in full. Sparse feature column ids stored as int32
    are converted too. The structure is returned as stored (``fullgraph train --dataset FOLDER``
    preprocesses a folder whose meta says it is not preprocessed).
    """
    folder = Path(folder).expanduser()
    meta = read_native_meta(folder)
    _check_split(folder, meta, split)
    _check_files(folder, meta, verify)
    masks = _split_masks(folder, meta, split)
    indptr = _map(folder / "indptr.npy")
    indices = _map(folder / "indices.npy")
    if indices.dtype != torch.int64:
        indices = indices.to(torch.int64)
    x = _features(folder, meta)
    y = _map(folder / "y.npy")
    edge = {f"edge_{k}": _map(folder / EDGE_FILES[k]) for k in edge_kinds(meta)}
    if "edge_type" in edge:
        edge["num_relations"] = meta["counts"]["num_relations"]
    return Graph(indptr=indptr, indices=indices, x=x, y=y, name=meta.get("name") or folder.name,
                 num_classes=meta["counts"]["num_classes"], node_types=node_types(meta), **edge, **masks)
