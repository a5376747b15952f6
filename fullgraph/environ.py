"""Every environment variable fullgraph reads, in one place, each with what it means.

The rest of the package asks :func:`get` (or :func:`has`) by name, so that a reader finds here all
that the environment can change, and a name that is not listed is a programming error, not a
silent ``None``. The launcher builds its ranks' environment from :func:`snapshot`.
"""

from __future__ import annotations

import os

__all__ = ["VARIABLES", "get", "has", "snapshot"]

VARIABLES: dict[str, str] = {
    # fullgraph's own
    "FULLGRAPH_DATA": "the data root of named datasets, where --root is not given (fullgraph.data.datasets)",
    "FULLGRAPH_CACHE": "the cache folder of partitions, block rows and chunk maps (default "
                       "$XDG_CACHE_HOME/fullgraph, else ~/.cache/fullgraph)",
    "XDG_CACHE_HOME": "the user's cache folder, under which fullgraph/ is the default cache",
    "FULLGRAPH_DEVICE": "what --device auto means (cpu, cuda): the test suite sets cpu",
    "FULLGRAPH_ERROR_FILE": "set by fullgraph's launcher for each rank: where a failing rank leaves its one-line "
                            "reason (its presence also tells a rank it was started by that launcher)",
    "FULLGRAPH_PROGRESS_FILE": "set by the launcher for rank 0: where it reports each epoch for the launcher's bar",
    "FULLGRAPH_FAULT": "a testing hook, kill:RANK:EPOCH[:ONCE_FILE]: that rank kills itself as the epoch starts",
    "FULLGRAPH_CONNECT_TIMEOUT": "seconds a rank tries to reach the rendezvous store at MASTER_ADDR:MASTER_PORT, and "
                                 "rank 0 (when it hosts the store) waits for every rank to connect (default 60)",
    # torchrun's (fullgraph's launcher sets the same)
    "RANK": "this process's rank in the world",
    "WORLD_SIZE": "the number of processes",
    "LOCAL_RANK": "this process's rank on its machine",
    "LOCAL_WORLD_SIZE": "the processes on this machine",
    "MASTER_ADDR": "the rendezvous host",
    "MASTER_PORT": "the rendezvous port",
    "TORCHELASTIC_RESTART_COUNT": "torchrun --max-restarts: which attempt this is",
    "TORCHELASTIC_USE_AGENT_STORE": "torchrun: whether the agent's store serves the rendezvous",
}


def _known(name: str) -> str:
    if name not in VARIABLES:
        raise KeyError(f"{name} is not an environment variable fullgraph reads (fullgraph.environ.VARIABLES)")
    return name


def get(name: str, default: str | None = None) -> str | None:
    """The value of a listed variable, or ``default`` where it is unset."""
    return os.environ.get(_known(name), default)


def has(name: str) -> bool:
    """Whether a listed variable is set."""
    return _known(name) in os.environ


def snapshot() -> dict[str, str]:
    """This process's whole environment, as a child process would inherit it (the launcher's ranks)."""
    return dict(os.environ)
