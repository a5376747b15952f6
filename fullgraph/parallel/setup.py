"""Before any rank starts: load the graph once, check the layout against it, partition (cached) and
write the partition folder that every rank reads its own part from."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from fullgraph.data.load import load_graph
from fullgraph.options import PAIR_TASKS
from fullgraph.plan import model_memory_options, variable_bytes

__all__ = ["prepare_partition_dir", "prepare_block_rows_dir", "prepare_chunk_file", "node_parts", "prepare_run",
           "RunInputs", "input_widths", "graph_of_inputs"]

log = logging.getLogger("fullgraph")


def _method(partitioner: str) -> tuple[str, str]:
    """``--partitioner`` as (method, what it balances): fennel, made for the graphs whose ranks are
    short of memory, always balances the memory of this run's model."""
    if partitioner.startswith("metis-"):
        return "metis", partitioner.removeprefix("metis-")
    return partitioner, "memory" if partitioner == "fennel" else "nodes"


def native_folder_as_stored(cfg) -> Path | None:
    """The native dataset folder ``cfg`` names when the graph a run trains on is that folder's files
    as they are (preprocessed, its stored split, no feature normalization), else ``None``. Such a
    folder can be partitioned from its files, one part at a time, without loading the graph (its
    edges' data too: ``partition.stream_store`` writes the same parts as the in-memory writer)."""
    from fullgraph.data.detect import detect, looks_like_path
    from fullgraph.data.load import feature_norm_of

    if not looks_like_path(cfg.data.dataset) or cfg.data.split != 0 or feature_norm_of(cfg) != "none":
        return None
    det = detect(cfg.data.dataset)
    return Path(det.path) if det.kind == "native" and det.options.get("preprocessed") else None


def _partition_key(cfg, parts: int, identity: str) -> str:
    """The cache key of a partition: the graph's ``identity`` (its fingerprint, or its folder's
    checksums) and the dataset as the run names it (the parts record that name, which the ranks'
    summary reports: one graph under two names gets two partitions), the partitioner, parts, seed,
    METIS's sample and the model a memory balance is for."""
    method, weight = _method(cfg.parallel.partitioner)
    named = hashlib.sha256(cfg.data.dataset.encode()).hexdigest()[:8]
    key = f"{identity[:20]}-{named}-{cfg.parallel.partitioner}-{parts}-{cfg.optimization.seed}"
    if cfg.parallel.metis_sample != 1.0 and method == "metis":
        key += f"-q{cfg.parallel.metis_sample:g}"
    if weight == "memory":  # balanced for one model: another model gets its own parts
        opts = json.dumps(model_memory_options(cfg), sort_keys=True)
        key += "-" + hashlib.sha256(opts.encode()).hexdigest()[:12]
    return key


def _partition_meta(cfg, parts: int, key: str) -> dict:
    """``partition.json``'s ``meta``: how the partition was made."""
    method, weight = _method(cfg.parallel.partitioner)
    return {"dataset": cfg.data.dataset, "method": cfg.parallel.partitioner, "parts": parts,
            "seed": cfg.optimization.seed,
            "weight": weight, **({"balanced_for": model_memory_options(cfg)} if weight == "memory" else {}),
            "metis_sample": cfg.parallel.metis_sample if method == "metis" else None,
            "feature_norm": cfg.data.feature_norm, "cache_key": hashlib.sha256(key.encode()).hexdigest()[:16]}


def _memory_cost(cfg):
    return functools.partial(variable_bytes, model_opts=model_memory_options(cfg))


def _check_parts(parts: int, num_nodes: int) -> None:
    if parts > num_nodes:
        from fullgraph.errors import InputError

        raise InputError(f"expected at most one part per node (got {parts} parts for {num_nodes} nodes)")


def _cached(target: Path, out) -> bool:
    """Whether ``target`` is a usable cached partition (a stale or damaged entry is rebuilt, never trusted)."""
    from fullgraph.partition.store import load_meta

    if out is not None or not (target / "partition.json").is_file():
        return False
    try:
        load_meta(target)
        return True
    except Exception:  # noqa: BLE001
        return False


def prepare_partition_dir(cfg, parts: int, out: str | Path | None = None, graph=None) -> Path:
    """The folder of ``cfg.data.dataset`` cut into ``parts`` parts by ``cfg.parallel.partitioner``; made once and
    reused (keyed by the graph's fingerprint, method, parts and seed) unless ``out`` is given.

    With ``fennel`` on a native folder used as stored (:func:`native_folder_as_stored`) and no
    ``graph`` given, nothing is loaded: the partitioner streams the folder's structure and the parts
    are written one at a time from its files (:func:`_stream_partition_dir`), so the memory follows
    the nodes and the largest part, not the edges."""
    from fullgraph.partition import cache_root, cached_partition, check_node_part, save_partition
    from fullgraph.partition.book import PartitionBook

    method, weight = _method(cfg.parallel.partitioner)
    folder = native_folder_as_stored(cfg) if graph is None and method == "fennel" else None
    if folder is not None:
        return _stream_partition_dir(cfg, parts, folder, out)
    graph = load_graph(cfg) if graph is None else graph
    _check_parts(parts, graph.num_nodes)
    key = _partition_key(cfg, parts, graph.fingerprint())
    target = Path(out) if out is not None else cache_root() / "parts" / key
    if _cached(target, out):
        return target
    t0 = time.perf_counter()
    if weight == "memory":
        from fullgraph.partition.balance import fennel_by_memory, metis_by_memory

        if method == "fennel":
            node_part = check_node_part(fennel_by_memory(graph, parts, cfg.optimization.seed, _memory_cost(cfg)),
                                        graph.num_nodes, parts)
        else:
            node_part = metis_by_memory(graph, parts, cfg.optimization.seed, cfg.parallel.metis_sample,
                                        _memory_cost(cfg))
    else:
        node_part = cached_partition(graph, parts, method, cfg.optimization.seed, weight=weight,
                                     sample=cfg.parallel.metis_sample if method == "metis" else 1.0)
    t1 = time.perf_counter()
    book = PartitionBook.build(graph, node_part)
    t2 = time.perf_counter()
    save_partition(book, graph, target, _partition_meta(cfg, parts, key))
    t3 = time.perf_counter()
    log.info("partitioned %s into %d parts (%s): replication factor %.3f -> %s (%.1f s: %s %.1f s, book %.1f s, "
             "files %.1f s)", graph.name, parts, cfg.parallel.partitioner, book.replication_factor, target, t3 - t0,
             method, t1 - t0, t2 - t1, t3 - t2)
    return target


def _stream_partition_dir(cfg, parts: int, folder: Path, out) -> Path:
    """:func:`prepare_partition_dir` for fennel on a native folder, without loading the graph: fennel
    reads the structure in row blocks, one pass at a time, and ``save_partition_streaming`` writes
    the same folder ``save_partition`` would, one part at a time. The cache key names the folder's
    file checksums (its ``meta.json``) instead of the loaded graph's fingerprint."""
    from fullgraph.data.formats.native_read import read_native_meta
    from fullgraph.partition import cache_root
    from fullgraph.partition.balance import fennel_by_memory
    from fullgraph.partition.store import load_meta
    from fullgraph.partition.stream_store import save_partition_streaming

    doc = read_native_meta(folder)
    _check_parts(parts, int(doc["counts"]["num_nodes"]))
    key = _partition_key(cfg, parts, hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest())
    target = Path(out) if out is not None else cache_root() / "parts" / key
    if _cached(target, out):
        return target
    t0 = time.perf_counter()
    node_part = fennel_by_memory(folder, parts, cfg.optimization.seed, _memory_cost(cfg))
    t1 = time.perf_counter()
    save_partition_streaming(folder, node_part, target, _partition_meta(cfg, parts, key), num_parts=parts)
    t2 = time.perf_counter()
    log.info("partitioned %s into %d parts (fennel, streamed from its files): replication factor %.3f -> %s "
             "(%.1f s: fennel %.1f s, files %.1f s)", folder, parts, load_meta(target)["replication_factor"],
             target, t2 - t0, t1 - t0, t2 - t1)
    return target


def prepare_chunk_file(cfg, partition_dir, graph=None) -> Path:
    """The node → chunk map of a pipeline / hybrid run: every part of ``partition_dir`` cut into
    ``cfg.parallel.num_chunks`` chunks by ``cfg.parallel.chunker``, written once under the cache folder."""
    from fullgraph.partition import cache_root
    from fullgraph.partition.chunks import cached_chunks
    from fullgraph.partition.store import load_meta
    graph = load_graph(cfg) if graph is None else graph
    parts = int(load_meta(partition_dir)["parts"])
    return cached_chunks(graph, node_parts(partition_dir, graph.num_nodes), parts, cfg.parallel.num_chunks,
                         cfg.parallel.chunker, cfg.optimization.seed, cache_root() / "chunks")


def node_parts(partition_dir, num_nodes: int):
    """The node → part map of ``partition_dir`` (read from its parts' inner nodes)."""
    import torch

    from fullgraph.partition import load_part
    from fullgraph.partition.store import load_meta

    parts = int(load_meta(partition_dir)["parts"])
    node_part = torch.zeros(num_nodes, dtype=torch.int64)
    for i in range(parts if parts > 1 else 0):  # one part (a pipeline) is every node: nothing to read
        node_part[load_part(partition_dir, i, features=False).inner] = i
    return node_part


def prepare_block_rows_dir(cfg, out: str | Path | None = None, graph=None) -> Path:
    """The block rows of ``cfg``'s SpMM grid (:mod:`fullgraph.partition.blockrows`), written to ``out``,
    or once under the cache folder, keyed by the graph's fingerprint, the normalization, the grid and
    the seed."""
    from fullgraph.models import model_spec
    from fullgraph.partition import cache_root
    from fullgraph.partition.blockrows import load_block_rows_meta, save_block_rows

    graph = load_graph(cfg) if graph is None else graph
    norm = model_spec(cfg.model.name).norm  # the SpMM layouts take only models whose spec names it
    R = cfg.parallel.mesh.block_rows
    permute = cfg.parallel.permute and cfg.parallel.mesh.spmm  # tensor's one block row is the node order
    order = "perm" if permute else "order"
    key = f"{graph.fingerprint()[:20]}-{norm}-r{R}-{order}-s{cfg.optimization.seed}"
    target = Path(out) if out is not None else cache_root() / "blockrows" / key
    if out is None and (target / "blockrows.json").is_file():
        try:
            load_block_rows_meta(target)
            return target
        except Exception:  # a damaged cache entry is rebuilt, never trusted
            pass
    save_block_rows(graph, norm, R, permute, cfg.optimization.seed, target)
    log.info("cut %s into %d block rows for %s -> %s", graph.name, R, cfg.parallel.mode, target)
    return target


@dataclass(frozen=True)
class RunInputs:
    """What the ranks of a distributed run read, made once before they start: the folder of parts
    (or of SpMM block rows) and, for the pipeline and the hybrid, the node → chunk map."""

    partition_dir: str | None = None
    chunk_file: str | None = None
    link_file: str | None = None
    """A link task's split (``data.link_split.LinkSplit``), which every rank reads whole."""

    def flags(self) -> list[str]:
        """The ranks' command-line flags that point at these inputs (the launcher passes them on)."""
        out = ["--partition-dir", self.partition_dir] if self.partition_dir is not None else []
        out += ["--link-file", self.link_file] if self.link_file is not None else []
        return out + (["--chunk-file", self.chunk_file] if self.chunk_file is not None else [])

    def apply(self, cfg) -> None:
        """Point ``cfg`` at these inputs (the ranks of a torchrun launch, which got no flags)."""
        for name in ("partition_dir", "chunk_file"):
            if getattr(self, name) is not None:
                setattr(cfg.parallel, name, getattr(self, name))
        if self.link_file is not None:
            cfg.task.link_file = self.link_file


def prepare_run(cfg) -> RunInputs:
    """Everything the ranks of a distributed run read, made before they start (what ``cfg`` already
    points at is checked, not made again)."""
    from fullgraph.parallel.graph import check_parts
    from fullgraph.partition.store import load_meta
    layout = cfg.parallel.mesh
    graph, link_file = None, cfg.task.link_file
    if cfg.task.name in PAIR_TASKS and link_file is None:  # the split every rank reads, and its encoder's graph
        graph, link_file = _link_inputs(cfg)
    if layout.reads_block_rows:  # every rank reads its own block row (tensor: the one), cut here once
        folder = cfg.parallel.partition_dir or str(prepare_block_rows_dir(cfg, graph=graph))
        _check_edge_layout(cfg, folder)
        return RunInputs(folder, link_file=link_file)
    chunked = layout.chunked
    if chunked and graph is None:
        graph = load_graph(cfg)  # else prepare_partition_dir loads it only if it must
    pdir = cfg.parallel.partition_dir
    if pdir is not None:
        check_parts(load_meta(pdir), layout.graph_ways, pdir)
    else:
        pdir = str(prepare_partition_dir(cfg, layout.graph_ways, graph=graph))
    chunk_file = str(prepare_chunk_file(cfg, pdir, graph=graph)) if chunked else None
    return RunInputs(pdir, chunk_file, link_file)


def _link_inputs(cfg):
    """A pair task's encoder graph and the file of its split (a link's, or an edge task's labelled edges), written
    once (keyed by both) for the ranks."""
    from fullgraph.data.load import load_edge_split, load_link_graph
    from fullgraph.partition import cache_root

    graph, split = load_link_graph(cfg) if cfg.task.name == "link" else (load_graph(cfg), load_edge_split(cfg))
    kind = "links" if cfg.task.name == "link" else "edges"
    target = cache_root() / kind / f"{graph.fingerprint()[:20]}-{split.fingerprint()[:20]}.npz"
    if not target.is_file():
        split.save(target)
    return graph, str(target)


def _check_edge_layout(cfg, folder: str) -> None:
    """Refuse before any rank starts a built-in model that reads the edge features a block-row layout
    does not hand it (the ranks would each refuse it, ``registry.check_edge_data``)."""
    from fullgraph.ops.edge_data import EdgeFacts
    from fullgraph.parallel.registry import edge_kinds_read, edge_layout_error
    from fullgraph.partition.blockrows import load_block_rows_meta

    edges = EdgeFacts.of_record(load_block_rows_meta(folder))
    error = edge_layout_error(cfg.parallel.mode, cfg.model.name, edge_kinds_read(cfg.model.name), edges)
    if error is not None:
        raise error


def input_widths(cfg, graph=None) -> tuple[int, int, object]:
    """The feature width, class count and node types (``None``: one type) of ``cfg``'s graph, as this rank
    can read them cheaply: from ``graph`` when it is loaded, else from the partition folder's
    ``partition.json`` (a rank of a distributed run), else by loading the graph."""
    if graph is None and cfg.parallel.partition_dir is not None and cfg.parallel.mesh.distributed \
            and not cfg.parallel.mesh.reads_block_rows:
        from fullgraph.partition.store import load_meta, meta_node_types

        meta = load_meta(cfg.parallel.partition_dir)
        return int(meta["num_features"]), int(meta["num_classes"]), meta_node_types(meta)
    graph = load_graph(cfg) if graph is None else graph
    return graph.num_features, graph.num_classes, graph.node_types


def graph_of_inputs(cfg, dataset_given: bool):
    """``cfg`` checked against the graph its ``--partition-dir`` (a partition or SpMM block-row
    folder) was made from, which is what its ranks will train on: with ``--dataset`` given, that
    dataset must be the folder's graph (the same fingerprint), else one ``InputError`` names both;
    without it, the run takes the folder's graph, and ``cfg`` returned names it (so that
    ``config.json``, ``evaluate`` and ``predict`` see the graph the run trained)."""
    pdir = cfg.parallel.partition_dir
    if pdir is None:
        return cfg
    from fullgraph.errors import InputError
    from fullgraph.partition.blockrows import load_block_rows_meta
    from fullgraph.partition.store import load_meta

    meta = load_block_rows_meta(pdir) if cfg.parallel.mesh.reads_block_rows else load_meta(pdir)
    if not dataset_given:
        source = (meta.get("meta") or {}).get("dataset")  # what the folder was made from, as it was named then
        if not source:
            raise InputError(f"expected --dataset with --partition-dir {pdir} (its {meta.get('graph')!r} graph does "
                             f"not record the dataset it came from)")
        return cfg.with_options(dataset=source)
    graph = load_graph(cfg)
    if meta.get("fingerprint") != graph.fingerprint():
        raise InputError(f"expected --partition-dir made from --dataset {cfg.data.dataset} (got {pdir}, made from "
                         f"{meta.get('graph')!r}, another graph): give the dataset it was made from, or partition "
                         f"{cfg.data.dataset} anew")
    return cfg
