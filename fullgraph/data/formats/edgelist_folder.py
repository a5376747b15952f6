"""A folder of plain files as one graph: ``edges``, ``features``, ``labels`` and optionally ``train``,
``val`` and ``test``, each with one of the extensions of :data:`.edgelist.FOLDER_FILES` (the reader of each
file is :mod:`.edgelist`). What ``fullgraph train --dataset FOLDER`` and ``--dataset edgelist --root
FOLDER`` read; a link task reads a folder without labels."""

from __future__ import annotations

from pathlib import Path

from fullgraph.data.formats.edgelist import FOLDER_FILES, SPLIT_STEMS, load_edgelist
from fullgraph.data.graph import Graph
from fullgraph.errors import InputError

__all__ = ["load_edgelist_folder", "find_folder_files"]


def find_folder_files(folder: str | Path) -> dict[str, Path | None]:
    """The files of :data:`FOLDER_FILES` in ``folder``, by stem (``None``: absent). Two files of one
    stem are refused: which of ``features.npy`` and ``features.npz`` is the user's data is theirs to say."""
    folder = Path(folder)
    found: dict[str, Path | None] = {}
    for stem, exts in FOLDER_FILES.items():
        paths = [folder / f"{stem}{ext}" for ext in exts if (folder / f"{stem}{ext}").is_file()]
        if len(paths) > 1:
            raise InputError(f"expected one {stem} file in {folder} (got {' and '.join(p.name for p in paths)}; "
                             f"move the ones not to be read elsewhere)")
        found[stem] = paths[0] if paths else None
    return found


def _names(stem: str) -> str:
    return ", ".join(f"{stem}{e}" for e in FOLDER_FILES[stem])


def load_edgelist_folder(folder: str | Path, *, seed: int = 0, num_classes: int | None = None,
                         labels_optional: bool = False, numeric: bool = False) -> Graph:
    """A graph from a folder holding ``edges``, ``features``, ``labels`` and optionally ``train``,
    ``val`` and ``test`` files, each with one of the extensions of :data:`FOLDER_FILES`: what
    ``fullgraph train --dataset FOLDER`` and ``--dataset edgelist --root FOLDER`` read. ``seed``
    (``--split``) seeds the per-class split of a folder without split files; split files are one
    fixed split, so any other value than 0 is refused there rather than ignored. ``num_classes``: as
    for :func:`load_edgelist`. ``labels_optional`` (a link task): a folder without labels loads, with
    placeholder ones; a node task is told it needs them, or ``--task link``. ``numeric`` (node regression): a
    number per node in the labels file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"expected --root to be a folder holding edges.txt, features.npy and labels.txt "
                         f"(got {folder}, which is not a folder)")
    files = find_folder_files(folder)
    missing = [stem for stem in ("edges", "features", "labels") if files[stem] is None]
    if missing == ["labels"] and labels_optional:
        return load_edgelist(files["edges"], files["features"], None, name=folder.name)
    if missing:
        hint = ": --task link trains a folder without labels" if missing == ["labels"] else ""
        raise InputError(f"expected {'; '.join(f'one of {_names(m)}' for m in missing)} in {folder} (got none){hint}")
    splits = [files[s] for s in SPLIT_STEMS]
    if any(splits) and not all(splits):
        got = ", ".join(p.name for p in splits if p is not None)
        raise InputError(f"expected all three split files (train, val, test) or none in {folder} (got only {got})")
    if all(splits) and seed != 0:
        raise InputError(f"expected --split 0 for {folder} (its train, val and test files are one fixed split) "
                         f"(got {seed})")
    return load_edgelist(files["edges"], files["features"], files["labels"], train=splits[0], val=splits[1],
                         test=splits[2], name=folder.name, seed=seed, num_classes=num_classes, numeric=numeric)
