"""Partitions on disk, and a cache of node → part maps.

Layout written by :func:`save_partition` (one folder per part, so rank ``i`` reads only its own)::

    out_dir/
      partition.json          # metadata: what was partitioned, how, the stats, the file list
      part-0/part.pt          # torch.save of Part.state_dict(): tensors, ints and strings only
      part-1/part.pt
      ...

``partition.json`` (example for Cora in 2 parts)::

    {
      "format": "fullgraph-partition",
      "version": 1,
      "graph": "cora",
      "fingerprint": "f7886276…",      # Graph.fingerprint() of the partitioned graph (sha256)
      "method": "metis", "parts": 2, "seed": 0, "weight": "nodes",
      "num_nodes": 2708, "num_edges": 10556, "num_features": 1433, "num_classes": 7,
      "multilabel": false, "sparse_features": true, "global_num_train": 140,
      "edge_data": [...], "edge_features": d, "num_relations": R,   # edges with data only (EdgeFacts)
      "node_types": {"names": [...], "counts": [...], ...},        # a typed graph only (NodeTypes)
      "replication_factor": 0.0905, "cut_edges": 412, "imbalance": 1.029,
      "part_stats": [{"part": 0, "inner": 1315, "halo": 99, "halo_ratio": 0.075, "edges": 5452, "send": 146},
                     {"part": 1, "inner": 1393, "halo": 146, "halo_ratio": 0.105, "edges": 5104, "send": 99}],
      "files": [{"part": 0, "path": "part-0/part.pt", "bytes": 426992, "sha256": "d929…"},
                {"part": 1, "path": "part-1/part.pt", "bytes": 438896, "sha256": "cf4c…"}],
      "meta": {...}                    # whatever else the caller passed
    }

A part holds global ids, and a typed graph's node types follow from those (ids are contiguous per
type), so the types travel as the one ``node_types`` record of ``partition.json``
(:func:`meta_node_types` reads it back), not in any part file.

Part files are read with ``torch.load(weights_only=True)`` (no code runs on load) and checked
against the size and sha256 recorded in ``partition.json``; any problem is an ``InputError``.
Memory: a part is streamed into its file by ``torch.save`` and hashed on the way (no copy of the
part's bytes in memory), and read back by hashing the file in blocks and loading it from the same
open file (one copy: the part itself). Only one part is made at a time when writing.

Writes are atomic: everything goes to a temporary sibling folder that is renamed into place at
the end, so an interrupted run never leaves a half-written partition (a previous partition in
``out_dir`` is replaced only once the new one is complete). A folder that exists, is not empty
and holds no ``partition.json`` is never overwritten. Two writers make this folder: :func:`save_partition`
from a :class:`PartitionBook` of a graph in memory, and
:func:`fullgraph.partition.stream_store.save_partition_streaming` from a dataset folder read in
blocks; they share the folder's commit (:class:`PartitionWriter`) and the making of
``partition.json`` (:func:`partition_doc`), so the two folders cannot drift apart.

Cache. :func:`cached_partition` keeps METIS results (``node_part``) under
``$FULLGRAPH_CACHE/partitions`` (default ``~/.cache/fullgraph/partitions``, or the ``cache_dir``
argument), one file per (graph fingerprint, method, parts, seed, weight), so a second run does not
repartition. The cheap methods (random, contiguous, permuted) are recomputed: that is faster
than reading a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
import warnings
from pathlib import Path

import torch

import fullgraph.environ as environ
from fullgraph.data.files import read_json
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError
from fullgraph.ops.node_types import NodeTypes
from fullgraph.partition.book import Part, PartitionBook
from fullgraph.partition.partitioners import check_node_part, partition_nodes

__all__ = ["FORMAT", "FORMAT_VERSION", "save_partition", "load_meta", "load_part", "cache_root",
           "cached_partition", "meta_node_types"]

FORMAT = "fullgraph-partition"
FORMAT_VERSION = 1
META_FILE = "partition.json"
CACHE_VERSION = 1
_READ_BLOCK = 1 << 24  # bytes per read when hashing a part file
_CACHED_METHODS = ("metis",)
_REQUIRED = ("graph", "fingerprint", "parts", "num_nodes", "num_edges", "num_classes", "global_num_train",
             "files")


def _part_file(i: int) -> str:
    return f"part-{i}/part.pt"


class _HashingFile:
    """A binary file that hashes and counts every byte written through it, so that a part file's
    sha256 comes from the very bytes ``torch.save`` streams to disk (the same bytes as a save into
    memory would give), without holding them."""

    def __init__(self, f):
        self._f, self.sha256, self.bytes = f, hashlib.sha256(), 0

    def write(self, data) -> int:
        view = memoryview(data)
        self.sha256.update(view)
        self.bytes += view.nbytes
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


def _checked_state(path: Path, entry: dict, mmap: bool = False):
    """Part file ``path`` loaded, after checking its size and sha256 against ``entry``: hashed in
    blocks, then read by ``torch.load`` from the same open file (so what is loaded is what was
    hashed), holding one copy of the part in memory, not two. ``mmap``: the tensors are mapped from
    the file instead, so those never touched (a pipeline stage's features) are never read in."""
    try:
        with open(path, "rb") as f:
            sha, size, buf = hashlib.sha256(), 0, bytearray(_READ_BLOCK)
            view = memoryview(buf)
            while k := f.readinto(buf):
                sha.update(view[:k])
                size += k
            if size != entry["bytes"] or sha.hexdigest() != entry["sha256"]:
                raise InputError(f"expected {path} to match {META_FILE} ({entry['bytes']} bytes, sha256 "
                                 f"{str(entry['sha256'])[:12]}…) (got {size} bytes with another checksum: "
                                 "corrupt or replaced)")
            del view, buf
            f.seek(0)
            try:
                if mmap:
                    return torch.load(str(path), mmap=True, weights_only=True)
                return torch.load(f, weights_only=True)
            except Exception as e:  # noqa: BLE001 — any unpickling failure means a bad file
                raise InputError(f"expected a readable part file at {path} (got {type(e).__name__}: {e})") from None
    except OSError as e:
        raise InputError(f"expected part file {path} (got {type(e).__name__}: {e})") from None


def checked_meta(meta: dict | None) -> dict:
    """A copy of the caller's partition metadata, refused now (before any work) unless it can be
    written as JSON."""
    meta = dict(meta or {})
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as e:
        raise InputError(f"expected JSON-serializable partition metadata (got {e})") from None
    return meta


def graph_facts(graph: Graph) -> dict:
    """What ``partition.json`` records of the partitioned graph. A writer that never holds the
    graph (:mod:`fullgraph.partition.stream_store`) fills the same keys from its own reading."""
    return {"graph": graph.name, "fingerprint": graph.fingerprint(), "num_nodes": graph.num_nodes,
            "num_edges": graph.num_edges, "num_features": graph.num_features, "num_classes": int(graph.num_classes),
            "multilabel": graph.multilabel, "sparse_features": graph.x.layout == torch.sparse_csr,
            "global_num_train": int(graph.train_mask.sum()), **graph.edge_facts().record(),
            **(graph.node_types.record() if graph.node_types is not None else {})}


def partition_doc(facts: dict, stats: list[dict], cut_edges: int, files: list[dict], meta: dict) -> dict:
    """The content of ``partition.json``, in its key order, from the graph's facts
    (:func:`graph_facts`), the per-part statistics (``PartitionBook.stats()``'s rows) and the file
    entries. The replication factor and the imbalance are derived here from the statistics, so both
    writers compute them the same way, with the same integer sums."""
    inner = [r["inner"] for r in stats]
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "graph": facts["graph"], "fingerprint": facts["fingerprint"],
        "method": meta.get("method"), "parts": len(stats), "seed": meta.get("seed"), "weight": meta.get("weight"),
        "metis_sample": meta.get("metis_sample"),
        **{k: facts[k] for k in ("num_nodes", "num_edges", "num_features", "num_classes", "multilabel",
                                 "sparse_features", "global_num_train")},
        **{k: facts[k] for k in ("edge_data", "edge_features", "num_relations", "node_types") if k in facts},
        "replication_factor": sum(r["halo"] for r in stats) / facts["num_nodes"], "cut_edges": int(cut_edges),
        "imbalance": max(inner) / (sum(inner) / len(inner)), "part_stats": stats, "files": files, "meta": meta,
    }


class PartitionWriter:
    """A partition folder being written: part files go into a temporary sibling folder, which
    :meth:`commit` renames into place once ``partition.json`` is there, so that a reader never
    sees half a partition. Use it as a context manager: leaving the block by an exception removes
    the temporary folder.

    Made before any long computation: it refuses at once a target that is a file, or a non-empty
    folder holding no ``partition.json`` (someone else's files)."""

    def __init__(self, out_dir):
        self.out = Path(out_dir)
        out = self.out
        if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / META_FILE).exists())):
            raise InputError(f"expected {out} to be a partition folder or a new/empty folder "
                             f"(got an existing {'folder without ' + META_FILE if out.is_dir() else 'file'}); "
                             "refusing to overwrite it")
        self.files: list[dict] = []
        self.tmp: Path | None = None

    def __enter__(self) -> PartitionWriter:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.out.parent / f".{self.out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.tmp.mkdir()
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is not None and self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def write_part(self, part: Part) -> None:
        """Part ``part.part_id`` (the next one: parts are written in order), streamed into its
        file by ``torch.save`` and hashed on the way (no copy of the part's bytes in memory)."""
        i, rel = len(self.files), _part_file(len(self.files))
        if part.part_id != i:
            raise ValueError(f"parts are written in order: expected part {i} (got {part.part_id})")
        (self.tmp / rel).parent.mkdir()
        with open(self.tmp / rel, "wb") as f:
            out_file = _HashingFile(f)
            torch.save(part.state_dict(), out_file)
            f.flush()
            os.fsync(f.fileno())
        self.files.append({"part": i, "path": rel, "bytes": out_file.bytes, "sha256": out_file.sha256.hexdigest()})

    def commit(self, doc: dict) -> Path:
        """Write ``partition.json`` and move the folder into place (replacing an earlier partition
        only now that the new one is complete)."""
        with open(self.tmp / META_FILE, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        old = None
        if self.out.exists():
            old = self.out.parent / f".{self.out.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self.out.rename(old)
        self.tmp.rename(self.out)
        self.tmp = None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.out


def save_partition(book: PartitionBook, graph: Graph, out_dir, meta: dict | None = None) -> Path:
    """Write ``book`` (a partition of ``graph``) to ``out_dir`` in the layout above; returns the path.

    ``meta`` is recorded as is (it must be JSON-serializable); its ``method``, ``seed``, ``weight``
    and ``metis_sample`` entries are also lifted to the top level. The same folder, without the
    graph in memory: :func:`fullgraph.partition.stream_store.save_partition_streaming`.
    """
    if graph is not book.graph and graph.fingerprint() != book.graph.fingerprint():
        raise InputError(f"expected the graph the partition book was built from (got {graph.name!r} "
                         f"with another fingerprint)")
    meta = checked_meta(meta)
    with PartitionWriter(out_dir) as writer:
        for i in range(book.num_parts):
            part = book._parts.get(i) or book._make_part(i)  # not kept: one part's features at a time
            writer.write_part(part)
            del part
        doc = partition_doc(graph_facts(graph), book.stats(), book.summary()["cut_edges"], writer.files, meta)
        return writer.commit(doc)


def load_meta(out_dir) -> dict:
    """The parsed, checked ``partition.json`` of a partition folder."""
    path = Path(out_dir) / META_FILE
    if not path.is_file():
        raise InputError(f"expected a partition folder with {META_FILE} (got none at {path})")
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError(f"expected a {FORMAT!r} file at {path} (got format {doc.get('format') if isinstance(doc, dict) else None!r})")
    if doc.get("version") != FORMAT_VERSION:
        raise InputError(f"expected partition format version {FORMAT_VERSION} in {path} "
                         f"(got {doc.get('version')!r}); partition the graph again")
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise InputError(f"expected {path} to hold {', '.join(missing)} (missing)")
    files = doc["files"]
    if not isinstance(doc["parts"], int) or doc["parts"] < 1 or not isinstance(files, list) \
            or len(files) != doc["parts"] \
            or any(not isinstance(e, dict) or {"path", "bytes", "sha256"} - set(e) for e in files):
        raise InputError(f"expected {path} to list one file per part (got parts={doc['parts']!r} and "
                         f"{len(files) if isinstance(files, list) else 'no'} file entries)")
    types = meta_node_types(doc, path)  # a damaged record refused with the rest, not when a model reads it
    if types is not None and types.num_nodes != doc["num_nodes"]:
        raise InputError(f"expected the node_types in {path} to count its {doc['num_nodes']} nodes (got "
                         f"{types.num_nodes})")
    return doc


def meta_node_types(doc: dict, where=META_FILE) -> NodeTypes | None:
    """The node types a ``partition.json`` (or ``blockrows.json``) records: ``None`` for a graph of one
    type; a damaged record is one ``InputError`` naming ``where``."""
    try:
        return NodeTypes.of_record(doc)
    except InputError as err:
        raise InputError(f"{err} in {where}") from None


def load_part(out_dir, i: int, fingerprint: str | None = None, *, features: bool = True) -> Part:
    """Read part ``i`` of the partition in ``out_dir`` (only that part's file).

    ``fingerprint``, when given, must equal the partitioned graph's (``Graph.fingerprint()``).
    ``features=False`` maps the file instead of reading it: the part's ``x`` is then backed by the
    file and costs no memory until read (a pipeline stage after the first never reads it).
    """
    out = Path(out_dir)
    doc = load_meta(out)
    parts = doc["parts"]
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < parts:
        raise InputError(f"expected a part index in [0, {parts}) for {out} (got {i!r})")
    if fingerprint is not None and fingerprint != doc["fingerprint"]:
        raise InputError(f"expected the partition in {out} to be of this graph (got fingerprint "
                         f"{doc['fingerprint'][:12]}…, the graph has {fingerprint[:12]}…); partition it again")
    entry = doc["files"][i]
    path = out / entry["path"]
    part = Part.from_state(_checked_state(path, entry, mmap=not features), where=str(path))
    if part.part_id != i or part.num_parts != parts or part.global_num_nodes != doc["num_nodes"]:
        raise InputError(f"expected {path} to be part {i} of {parts} over {doc['num_nodes']} nodes (got part "
                         f"{part.part_id} of {part.num_parts} over {part.global_num_nodes})")
    return part


# ------------------------------------------------------------------------------------ cache
def cache_root() -> Path:
    """``$FULLGRAPH_CACHE``, else ``$XDG_CACHE_HOME/fullgraph``, else ``~/.cache/fullgraph``."""
    env = environ.get("FULLGRAPH_CACHE")
    if env:
        return Path(env)
    xdg = environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "fullgraph"


def _cache_key(graph: Graph, parts: int, method: str, seed: int, weight: str, sample: float) -> dict:
    key = {"version": CACHE_VERSION, "fingerprint": graph.fingerprint(), "method": method, "parts": int(parts),
           "seed": int(seed), "weight": weight}
    return key | ({"sample": float(sample)} if sample != 1.0 else {})  # keys of earlier caches stay valid


def cached_partition(graph: Graph, parts: int, method: str = "metis", seed: int = 0, cache_dir=None,
                     weight: str = "nodes", sample: float = 1.0) -> torch.Tensor:
    """``partition_nodes(graph, parts, method, seed, weight, sample)``, read from the cache when it is there.

    ``cache_dir`` (default ``cache_root()/partitions``) holds one small file per key. A missing,
    unreadable or mismatching cache file is recomputed and rewritten; a cache that cannot be
    written only warns.
    """
    if method not in _CACHED_METHODS:
        return partition_nodes(graph, parts, method, seed, weight, sample)
    key = _cache_key(graph, parts, method, seed, weight, sample)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    folder = Path(cache_dir) if cache_dir is not None else cache_root() / "partitions"
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in graph.name)[:40]
    path = folder / f"{safe_name}-{method}-p{parts}-s{seed}-{weight}-{digest}.pt"
    if path.is_file():
        try:
            state = torch.load(path, weights_only=True)
            if isinstance(state, dict) and state.get("key") == key:
                return check_node_part(state["node_part"], graph.num_nodes, int(parts))
        except Exception:  # noqa: BLE001 — a bad cache entry is recomputed, never trusted
            pass
    node_part = partition_nodes(graph, parts, method, seed, weight, sample)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        torch.save({"key": key, "node_part": node_part}, tmp)
        os.replace(tmp, path)
    except OSError as e:
        warnings.warn(f"could not write the partition cache at {folder} ({e}); continuing without it",
                      stacklevel=2)
    return node_part
