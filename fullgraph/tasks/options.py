"""``TaskOptions``: which task a run trains (``--task``) and the options of link prediction.

A section of ``TrainConfig`` of its own (the ``task`` group of ``--help``, the ``[task]`` TOML table);
its rules against the other sections (the layouts a task runs under, the options only node labels
take) are ``fullgraph.tasks.check_task``'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from fullgraph.data.edge_labels import DEFAULT_EDGE_SPLIT
from fullgraph.data.link_split import DEFAULT_LINK_SPLIT
from fullgraph.options import PAIR_TASKS, TASK_NAMES, Section, need, opt

__all__ = ["TaskOptions", "TASK_NAMES", "DECODERS", "LINK_ONLY", "TASK_OPTIONS"]

DECODERS = ("auto", "dot", "mlp", "distmult", "transe", "rotate")
"""``--decoder``'s built-in choices (``tasks.decoders``; ``auto``: ``dot`` for links, ``mlp`` for an edge's label);
a user's is ``FILE.py:build`` or ``module:build``."""
LINK_ONLY = ("link_split", "edge_batch", "steps_per_epoch", "negatives", "decoder", "target_relation", "corrupt",
             "edge_split", "edge_holdout")
"""The options of the tasks that score pairs (each refused, when set, with a task that does not take it)."""
TASK_OPTIONS = {"link": LINK_ONLY[:-2], "edge": ("edge_batch", "steps_per_epoch", "decoder", "edge_split", "edge_holdout")}
"""Which of :data:`LINK_ONLY` each pair task takes (``edge-regression``: as ``edge``)."""


@dataclass
class TaskOptions(Section):
    """What the model's output is trained for: node labels, or links between nodes."""

    name: str = opt("node",
        "The task: ``node`` (classify nodes by their labels), ``node-regression`` (a number per node), ``link`` (predict "
        "edges: the encoder's embeddings of two nodes scored by the decoder; ``fullgraph.tasks.link``), ``edge`` (a "
        "class per labelled edge) or ``edge-regression`` (a number per labelled edge; ``fullgraph.tasks.edge``).",
        flag="task")
    link_split: str = opt(DEFAULT_LINK_SPLIT,
        "Link prediction on a graph without a split of its own: the fractions TRAIN,VAL,TEST of its undirected "
        "edges (drawn with ``seed``; held-out edges leave the encoder's graph in both directions).")
    edge_batch: int = opt(0,
        "Link prediction: positive training edges per step (each step recomputes the whole-graph encoder; an epoch "
        "covers every training edge); 0: all of them in one step per epoch.")
    steps_per_epoch: int = opt(0,
        "Link prediction: at most this many steps of ``edge_batch`` positives an epoch (each a slice of the epoch's "
        "shuffled training edges); 0: every training edge each epoch. For graphs whose training edges take hours an "
        "epoch (a knowledge graph's millions of triples), as OGB's examples count steps.")
    negatives: int = opt(1, "Link prediction: uniform negative pairs per positive in a training step.")
    decoder: str = opt("auto",
        "Link prediction: how two embeddings make a score: ``dot`` (their dot product; ``auto``), ``mlp`` (their "
        "Hadamard product through a two-layer MLP), per relation of typed links ``distmult`` (a diagonal per relation), "
        "``transe`` (a translation) or ``rotate`` (a rotation in the complex plane), or a user's ``FILE.py:build`` / "
        "``module:build`` (``build(width)``, or ``build(width, num_relations)`` for typed links, returns a module "
        "mapping two [n, width] tensors, and for typed links their [n] relations, to [n] scores). Edge tasks: ``mlp`` "
        "(``auto``: the two embeddings concatenated through a two-layer MLP to a logit per class, or a number), or a "
        "user's ``build(width, outputs)``.")
    edge_split: str = opt(DEFAULT_EDGE_SPLIT,
        "Edge tasks (``edge``, ``edge-regression``): the fractions TRAIN,VAL,TEST of the labelled edges, drawn with "
        "``seed`` (the edges stay in the encoder's graph unless ``edge_holdout``).")
    edge_holdout: bool = opt(False,
        "Edge tasks: take the validation and test edges out of the encoder's graph, in both directions (by default "
        "the encoder passes messages over every edge, labelled or held out).")
    target_relation: str = opt("",
        "Link prediction on a typed graph: the relations whose edges are split and scored, in OGB's spelling "
        "``SRC___REL___DST`` (comma-separated for several); a held-out edge's reverse relation edge leaves the "
        "encoder's graph too.")
    corrupt: str = opt("tail",
        "Typed links: which end of a triple a negative replaces, within its node type: ``tail``, or ``both`` (the "
        "head or the tail by a fair coin).")

    link_file: str | None = opt(None,
        "Link prediction under several processes: the split's file, written once by the launcher and read by "
        "every rank (``LinkSplit.save``).", hidden=True)

    @property
    def scores_pairs(self) -> bool:
        """Whether the task scores pairs of nodes (``options.PAIR_TASKS``: links, labelled edges)."""
        return self.name in PAIR_TASKS

    def _check(self) -> None:
        need(self.edge_batch >= 0, "edge_batch", self.edge_batch, ">= 0 (0: every training edge in one step)")
        need(self.steps_per_epoch >= 0, "steps_per_epoch", self.steps_per_epoch, ">= 0 (0: every training edge)")
        need(1 <= self.negatives <= 1000, "negatives", self.negatives, "in [1, 1000]")
        need(self.decoder in DECODERS or ":" in self.decoder, "decoder", self.decoder,
             f"one of {', '.join(DECODERS)}, or a user's FILE.py:build or module:build")
        from fullgraph.data.link_split import parse_link_split

        parse_link_split(self.link_split)
        from fullgraph.data.edge_labels import parse_edge_split

        parse_edge_split(self.edge_split)
