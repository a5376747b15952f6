"""Checkpoints of a run, and resuming from one exactly.

A checkpoint holds everything the next epoch reads, so that a run resumed from it computes the same
bits as one that never stopped: the model and Adam's state, the best-so-far weights and metrics,
the loop's own record (epoch, losses, patience), the layout's state (the pipeline's current and
historical activation tables) and the global random state. Dropout masks, boundary samples and the
chunk order are keyed by ``(seed, epoch)``, so they need no saving: epoch t draws the same whether
or not epoch t - 1 ran in this process.

Layout on disk (``RUN/checkpoint/``)::

    epoch-000012/        a complete checkpoint: torch.distributed.checkpoint files + manifest.json
    epoch-000014/        the newest; the last KEEP are kept
    .tmp-epoch-000016/   one being written (renamed when complete, so a crash leaves only this)

State that differs between ranks is saved under the rank's own name (``rank3/meta``, ``rank3/rng``,
a pipeline stage's ``rank3/model/...`` and activation tables): torch.distributed.checkpoint treats
tensors of the same name on different ranks as copies of one tensor, so they must not share one.
Weights that every rank holds bit for bit (graph and SpMM layouts) are saved once, under
``shared/``, which is exactly what that rule is for.

``manifest.json`` (written last, before the rename) lists every file with its SHA-256; a checkpoint
whose files do not match it is refused with one line, and the one before it is used. Reading never unpickles anything but torch.distributed.checkpoint's own metadata classes
(:class:`SafeReader`), and tensors are read with ``weights_only``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from fullgraph.comm.ledger import CATEGORIES
from fullgraph.errors import InputError
from fullgraph.train.disk import CHECKPOINT_DIR, _PREFIX, checkpoint_epoch, complete_checkpoints, writing

log = logging.getLogger("fullgraph")

__all__ = ["CHECKPOINT_DIR", "KEEP", "LoopState", "SafeReader", "save_checkpoint", "load_checkpoint",
           "complete_checkpoints", "checkpoint_epoch"]

KEEP = 2
"""Complete checkpoints kept: the newest, and one to fall back on if the newest is damaged."""
_TMP = ".tmp-epoch-"


@dataclass
class LoopState:
    """The training loop's own record, which a resumed run carries on from."""

    epoch: int = 0
    best: dict = field(default_factory=dict)
    bad_evals: int = 0
    losses: list = field(default_factory=list)
    times: list = field(default_factory=list)
    comm_per_epoch: list = field(default_factory=list)
    bubbles: list = field(default_factory=list)
    update: dict = field(default_factory=dict)
    """The learning-rate schedule's and fp16 loss scale's state (``WeightUpdate.state``)."""

    def record(self, epoch_record: dict) -> None:
        """Keep what the summary needs of an epoch's record (its time, loss, bytes moved, bubble)."""
        self.times.append(epoch_record["epoch_time_s"])
        self.losses.append(epoch_record["loss"])
        if "comm_bytes" in epoch_record:
            self.comm_per_epoch.append(epoch_record["comm_bytes"])
        if "bubble_fraction" in epoch_record:
            self.bubbles.append(epoch_record["bubble_fraction"])


# ---------------------------------------------------------------------------------- safe reading
_METADATA_CLASSES = {
    ("torch.distributed.checkpoint.metadata", n) for n in (
        "Metadata", "TensorStorageMetadata", "TensorProperties", "ChunkStorageMetadata", "MetadataIndex",
        "StorageMeta", "BytesStorageMetadata", "_MEM_FORMAT_ENCODING")
} | {("torch.distributed.checkpoint.filesystem", "_StorageInfo"), ("torch", "Size"),
      ("torch.serialization", "_get_layout"), ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"),
      ("collections", "OrderedDict")}


class _MetadataUnpickler(pickle.Unpickler):
    """Resolves only torch.distributed.checkpoint's metadata classes, ``torch.Size``, dtypes and
    layouts: the ``.metadata`` file of a checkpoint is a pickle, and a foreign one could otherwise
    call any importable function as it is read."""

    def find_class(self, module: str, name: str):
        if (module, name) in _METADATA_CLASSES or (module == "torch" and isinstance(getattr(torch, name, None),
                                                                                  torch.dtype)):
            return super().find_class(module, name)
        raise InputError(f"expected a torch.distributed.checkpoint metadata file (it refers to {module}.{name}, "
                         f"which a checkpoint's metadata never does)")


_READER = None


def SafeReader(path):  # noqa: N802 - used as the class it makes
    """A ``FileSystemReader`` of ``path`` whose metadata is read by :class:`_MetadataUnpickler`.
    (The class is made on first use: importing torch.distributed.checkpoint costs over a second,
    which a run that never checkpoints should not pay.)"""
    global _READER
    if _READER is None:
        import torch.distributed.checkpoint as dcp

        class _SafeReader(dcp.FileSystemReader):
            def read_metadata(self, *args, **kwargs):
                rank = kwargs.get("rank")
                with self.fs.create_stream(self._get_metadata_path(rank), "rb") as f:
                    metadata = _MetadataUnpickler(f).load()
                if getattr(metadata, "storage_meta", None) is not None:
                    metadata.storage_meta.load_id = self.load_id
                return metadata

        _READER = _SafeReader
    return _READER(path)


# ---------------------------------------------------------------------------------- the files
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _write_manifest(folder: Path, epoch: int, fingerprint: str | None, options: dict | None) -> None:
    """The files' digests, the graph's fingerprint and the options the weights were trained with
    (``trained_options``: a resume compares them with the run's ``config.json``)."""
    files = {p.name: _sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps({"epoch": epoch, "graph_fingerprint": fingerprint, "options": options,
                               "files": files}, indent=1))
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    tmp.rename(folder / "manifest.json")


def check_checkpoint(folder: Path) -> int:
    """The epoch of a complete, undamaged checkpoint folder; an ``InputError`` saying what is wrong
    otherwise."""
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise InputError(f"checkpoint {folder} is incomplete (no manifest.json)")
    try:
        meta = json.loads(manifest.read_text())
        files, epoch = dict(meta["files"]), int(meta["epoch"])
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(f"checkpoint {folder} has a damaged manifest.json ({err})") from None
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            raise InputError(f"checkpoint {folder} is missing {name}")
        if _sha256(path) != digest:
            raise InputError(f"checkpoint {folder} is damaged: {name} does not match its SHA-256")
    return epoch


@contextmanager
def _one_process_quiet():
    """torch.distributed.checkpoint warns that it 'assumes a single process' whenever no process
    group exists, which is exactly the single-process run's case: not worth a line per checkpoint."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


# ---------------------------------------------------------------------------------- state
def _prefix(rank: int) -> str:
    return f"rank{rank}"


def _weights_scope(engine) -> str:
    """Where the weights, best weights and Adam's moments are saved: under ``shared/`` when every
    rank holds the same bits (graph and SpMM layouts sum their gradients before identical steps), so
    that torch.distributed.checkpoint writes them once and every rank reads them back; under the
    rank's own name where they differ (a pipeline stage trains its own layers)."""
    return "shared" if engine.replicates_weights else _prefix(engine.rank)


def _pack(rank: int, model, optimizer, engine, loop: LoopState, best_state: dict | None) -> dict:
    """This rank's state as flat named tensors (the loop's record as JSON in a uint8 tensor: floats
    written by ``repr`` read back exactly)."""
    p = _prefix(rank)
    w = _weights_scope(engine)
    own = set(model.owned_tables()) if hasattr(model, "owned_tables") else set()  # a rank's own rows: its name
    out = {f"{p if k in own else w}/model/{k}": v.detach() for k, v in model.state_dict().items()}
    if best_state is not None:
        out |= {f"{p if k in own else w}/best/{k}": v for k, v in best_state.items()}
    params = [q for g in optimizer.param_groups for q in g["params"]]
    for pid, st in optimizer.state_dict()["state"].items():
        scope = p if getattr(params[pid], "node_owned", False) else w
        out |= {f"{scope}/optim/{pid}/{k}": (v if torch.is_tensor(v) else torch.tensor(v)) for k, v in st.items()}
    out |= {f"{p}/engine/{k}": v for k, v in engine.state_tensors().items()}
    out[f"{p}/rng/cpu"] = torch.get_rng_state()
    if engine.ledger is not None:  # bytes recorded since the epoch's totals: they count in the next epoch
        out[f"{p}/ledger"] = torch.tensor([engine.ledger.bytes.get(c, 0) for c in CATEGORIES], dtype=torch.int64)
    record = json.dumps({"loop": asdict(loop), "has_best": best_state is not None}).encode()
    out[f"{p}/meta"] = torch.frombuffer(bytearray(record), dtype=torch.uint8)
    return out


def _barrier(engine) -> None:
    if engine.comm is not None:
        engine.comm.barrier("meta/checkpoint")


def save_checkpoint(run: str | Path, epoch: int, *, model, optimizer, engine, loop: LoopState,
                    best_state: dict | None, options: dict | None = None) -> Path:
    """Write this epoch's checkpoint (collective: every rank calls it) and keep the last ``KEEP``.
    ``options``: what the weights are trained with, recorded in the manifest."""
    t0 = time.perf_counter()
    root = Path(run) / CHECKPOINT_DIR
    tmp, final = root / f"{_TMP}{epoch:06d}", root / f"{_PREFIX}{epoch:06d}"
    distributed = engine.comm is not None
    if engine.is_main:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    _barrier(engine)  # the folder exists before anyone writes into it
    import torch.distributed.checkpoint as dcp

    state = _pack(engine.rank, model, optimizer, engine, loop, best_state)
    # a failure here reaches every rank (torch.distributed.checkpoint gathers them); rank 0 removes the folder
    with writing(tmp, run=run, partial=[tmp] if engine.is_main else []):
        with _one_process_quiet():
            dcp.save(state, storage_writer=dcp.FileSystemWriter(tmp), no_dist=not distributed,
                     process_group=engine.comm.world_group if distributed else None)
        if engine.is_main:  # torch.distributed.checkpoint has gathered every rank's files by now
            _write_manifest(tmp, epoch, engine.fingerprint, options)
    if engine.is_main:
        size = sum(f.stat().st_size for f in tmp.iterdir())
        log.info("checkpoint of epoch %d: %.1f MiB in %.2f s", epoch, size / 2**20, time.perf_counter() - t0)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in complete_checkpoints(run)[KEEP:]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier(engine)
    return final


def load_checkpoint(run: str | Path, *, model, optimizer, engine) -> tuple[LoopState, dict | None, Path]:
    """Restore this rank's state from the newest undamaged checkpoint of ``run``; returns the loop's
    record, the best-so-far weights and the folder used. A damaged checkpoint is reported in one
    line and the one before it is used; none at all is an ``InputError``."""
    problems, folders = [], complete_checkpoints(run)
    for i, folder in enumerate(folders):
        try:
            check_checkpoint(folder)
        except InputError as err:
            problems.append(str(err))
            if i + 1 < len(folders):  # the last one's problem is in the error below: no "one before" to use
                log.warning("%s; using the one before it", err)
            continue
        _check_graph(folder, engine.fingerprint)
        return (*_restore(folder, model=model, optimizer=optimizer, engine=engine), folder)
    raise InputError(f"expected a complete checkpoint in {Path(run) / CHECKPOINT_DIR} to resume from (got "
                     + ("; ".join(problems) if problems else "none") + ")")


def _check_graph(folder: Path, fingerprint: str | None) -> None:
    """A checkpoint resumes only on the graph it was trained on: a dataset changed on disk since (new
    edges, features or splits) would carry trained weights and optimizer state into another problem."""
    made_on = json.loads((folder / "manifest.json").read_text()).get("graph_fingerprint")
    if made_on and fingerprint and made_on != fingerprint:
        raise InputError(f"expected the graph checkpoint {folder} was trained on (fingerprint {made_on[:12]}…; got "
                         f"{fingerprint[:12]}…: the dataset changed on disk since): restore it, or start a new run")


def _restore(folder: Path, *, model, optimizer, engine) -> tuple[LoopState, dict | None]:
    import torch.distributed.checkpoint as dcp

    reader = SafeReader(folder)
    p, w = _prefix(engine.rank) + "/", _weights_scope(engine) + "/"
    mine = {k: v for k, v in reader.read_metadata().state_dict_metadata.items() if k.startswith((p, w))}
    if f"{p}meta" not in mine:
        raise InputError(f"expected checkpoint {folder} to hold the state of rank {engine.rank} (it was written by "
                         f"another layout or process count)")
    state = {k: torch.empty(tuple(m.size), dtype=m.properties.dtype) for k, m in mine.items()}
    distributed = engine.comm is not None
    with _one_process_quiet():
        dcp.load(state, storage_reader=SafeReader(folder), no_dist=not distributed,
                 process_group=engine.comm.world_group if distributed else None)
    record = json.loads(bytes(state[f"{p}meta"].tolist()).decode())

    def part(name: str) -> dict:
        scopes = {w, p} if name in ("model", "best", "optim") else {p}  # node-owned rows sit under the rank's name
        return {k[len(q):]: v for q in (f"{s}{name}/" for s in scopes) for k, v in state.items() if k.startswith(q)}

    dev = next(model.parameters()).device
    model.load_state_dict({k: v.to(dev) for k, v in part("model").items()})
    best = {k: v.to(dev) for k, v in part("best").items()} if record["has_best"] else None
    opt = optimizer.state_dict()
    opt["state"] = {}
    for key, v in part("optim").items():
        pid, name = key.split("/", 1)
        opt["state"].setdefault(int(pid), {})[name] = v
    optimizer.load_state_dict(opt)
    engine.load_state_tensors({k: v.to(engine.device) for k, v in part("engine").items()}, model)
    torch.set_rng_state(state[f"{p}rng/cpu"])
    if engine.ledger is not None:  # as the uninterrupted run's ledger stood after the checkpoint
        engine.ledger.take()
        for c, nbytes in zip(CATEGORIES, state[f"{p}ledger"].tolist()):
            if nbytes:
                engine.ledger.record(c, nbytes)
    return LoopState(**record["loop"]), best
