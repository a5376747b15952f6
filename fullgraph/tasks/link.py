"""Link prediction: the encoder's output row of a node is its embedding, the decoder scores pairs.

A training step recomputes the whole-graph encoder and scores ``--edge-batch`` B positive training
edges and B·k uniform negative pairs (``--negatives k``), with the binary cross-entropy of their
scores summed and divided by the step's pair count: every rank scores its share of the pairs (those
whose source node it owns) and the shares' sums add up to one process's loss and gradient. The
positives of a step are a slice of the training edges shuffled by ``(seed, epoch)``, the negatives
uniform draws keyed by ``(seed, epoch, step)``: every layout draws the same pairs. An epoch covers
every training edge (``ceil(E / B)`` steps, as OGB's examples do); B = 0 puts them all in one step
(PyG's ``link_pred.py``).

An endpoint's embedding lives with its owner: the rank that scores a pair asks the owner of its other
end for the row, once per step (``Engine.pair_rows``, ledger ``link/*``). Evaluation scores the
split's held-out positives and negatives the same way (``eval/link/*``), gathers every score and
computes the metric on each rank (``tasks.link_metrics``); the training metric scores as many
training edges as validation has positives (a fixed seeded sample) against the validation negatives,
as OGB's collab example does.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

from fullgraph.data.link_split import PAIR_FIELDS, LinkSplit
from fullgraph.ops.loss import scaled
from fullgraph.tasks.link_metrics import LINK_METRICS, link_metric, link_metrics

__all__ = ["LinkTask", "train_negatives", "published_link_metric"]

PAIR_COPIES = 8
"""Rows of ``--hidden`` floats a scored pair holds during a step: its two gathered rows and their product
kept for backward, their three gradients, and two for the decoder (the MLP's hidden layer and its gradient;
the dot product's temporaries)."""
EVAL_PAIRS = 1 << 20
"""Pairs scored at a time in evaluation (ogbl-citation2 has 86 million pairs with its negatives)."""

NODE_LABEL_FIELDS = ("classes", "multilabel", "numeric_labels", "train", "val", "test")
"""The fields of a graph's statistics (``Graph.summary``) that describe its node labels."""
PUBLISHED = {"collab": "hits@50", "ddi": "hits@20", "ppa": "hits@100", "citation2": "mrr"}
"""What OGB reports for each of its link datasets (matched in the split's name)."""


def published_link_metric(name: str) -> str | None:
    """OGB's metric for a split read from one of its link datasets' folders (``formats.ogb_link`` names the
    split ``<folder> <scheme> split (OGB)``), else ``None``."""
    if "(OGB)" not in name:
        return None
    name = name.lower()
    return next((m for key, m in PUBLISHED.items() if key in name), None)


def train_negatives(num_nodes: int, count: int, seed: int, epoch: int, step: int) -> torch.Tensor:
    """``count`` uniform pairs (src, dst), keyed by seed, epoch and step (the same in every layout)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, epoch, step, 0x11C]))
    return torch.from_numpy(rng.integers(0, num_nodes, size=(count, 2), dtype=np.int64))


class LinkTask:
    """Links: what ``--task link`` trains, on ``split``'s pairs."""

    name = "link"
    metrics = LINK_METRICS
    gathered_row_bytes = 16
    """The bytes of one scored pair in an evaluation's gather: its index and its score, float64."""
    joins_rows = True  # (tasks.node.NodeTask.joins_rows)

    def __init__(self, cfg, split: LinkSplit):
        self.cfg, self.split = cfg, split
        self.seed = cfg.optimization.seed
        e = split.train.shape[0]
        self.batch = min(cfg.task.edge_batch, e) if cfg.task.edge_batch else e  # (what a step holds: capped)
        self._order: tuple[int, torch.Tensor] | None = None  # (epoch, shuffled training edge ids)
        n = min(e, split.val.shape[0])
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0x11D]))
        self.sample_ids = torch.from_numpy(np.sort(rng.choice(e, n, replace=False)))
        self.train_sample = split.train[self.sample_ids]

    @property
    def typed(self) -> bool:
        """Whether the links are typed (a knowledge graph's triples: each pair scored by its relation)."""
        return self.split.typed

    @staticmethod
    def out_width(num_classes: int, hidden: int) -> int:
        """The encoder's output width: an embedding of ``--hidden`` columns."""
        return hidden

    def bind(self, engine, model) -> None:
        """Let the engine learn who owns which node (collective, once, before the first epoch)."""
        engine.bind_pairs()
        if engine.graph_nodes() != self.split.num_nodes:
            from fullgraph.errors import InputError

            raise InputError(f"expected a link split of the graph's {engine.graph_nodes()} nodes (got one of "
                             f"{self.split.num_nodes}: {self.split.name})")

    def memory(self, ranks: int) -> dict[str, int]:
        """What the task holds on one of ``ranks`` ranks, as the memory estimate takes it: a step's scored
        pairs (``pair_bytes``) and the split's tables, which every rank holds whole (``split_bytes``:
        16 million training triples and 13 million given negatives per held-out split are 1 GB)."""
        tables = [getattr(self.split, f) for f in PAIR_FIELDS] + list((self.split.relations or {}).values())
        return {"pair_bytes": self.step_bytes(ranks), "split_bytes": sum(t.numel() * t.element_size() for t in tables)}

    def step_bytes(self, ranks: int) -> int:
        """What a training step's scored pairs hold on one of ``ranks`` ranks (each scores the pairs whose
        source it owns: about its share; ``ranks``: those of one pair exchange, ``Mesh.pair_group``: a
        pipeline's last stage scores every pair), for the memory estimate before the first epoch."""
        pairs = self.batch * (1 + self.cfg.task.negatives)
        return PAIR_COPIES * 4 * self.cfg.model.hidden * math.ceil(pairs / ranks)

    def steps(self, epoch: int) -> int:
        """Every training edge once, or the first ``--steps-per-epoch`` slices of the epoch's shuffle."""
        every = math.ceil(self.split.train.shape[0] / self.batch)
        cap = self.cfg.task.steps_per_epoch
        return min(every, cap) if cap else every

    def dropout_epoch(self, epoch: int, step: int) -> int:
        """Each step its own dropout masks: the key's epoch counts steps too."""
        return (epoch << 24) + step

    def _positive_ids(self, epoch: int, step: int) -> torch.Tensor:
        if self._order is None or self._order[0] != epoch:
            rng = np.random.default_rng(np.random.SeedSequence([self.seed, epoch, 0x11B]))
            self._order = (epoch, torch.from_numpy(rng.permutation(self.split.train.shape[0])))
        return self._order[1][step * self.batch:(step + 1) * self.batch]

    def positives(self, epoch: int, step: int) -> torch.Tensor:
        return self.split.train[self._positive_ids(epoch, step)]

    def step_pairs(self, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The pairs a training step scores and their labels (positives first)."""
        return self.step_triples(epoch, step)[:2]

    def step_triples(self, epoch: int, step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """:meth:`step_pairs` and, for typed links, the pairs' relations (``None`` for untyped): a typed
        positive's negatives corrupt an end within its type (``data.typed.link_split.corrupted``)."""
        ids = self._positive_ids(epoch, step)
        pos, k = self.split.train[ids], self.cfg.task.negatives
        labels = torch.cat([torch.ones(pos.shape[0]), torch.zeros(pos.shape[0] * k)])
        if not self.typed:
            neg = train_negatives(self.split.num_nodes, pos.shape[0] * k, self.seed, epoch, step)
            return torch.cat([pos, neg]), labels, None
        from fullgraph.data.typed.link_split import corrupted

        rel = self.split.relation("train")[ids]
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, epoch, step, 0x11C]))
        neg, neg_rel = corrupted(pos, rel, self.split.ends, k, rng, self.cfg.task.corrupt)
        return torch.cat([pos, neg]), labels, torch.cat([rel, neg_rel])

    @staticmethod
    def decode(model, h_src: torch.Tensor, h_dst: torch.Tensor, rel: torch.Tensor | None) -> torch.Tensor:
        """The decoder's scores of rows ``h_src``, ``h_dst``: by relation where links are typed."""
        return model.decoder(h_src, h_dst) if rel is None else model.decoder(h_src, h_dst, rel.to(h_src.device))

    def loss(self, engine, model, out: torch.Tensor, epoch: int, step: int) -> torch.Tensor:
        pairs, labels, rel = self.step_triples(epoch, step)
        mine = engine.pair_share(pairs)
        h_src, h_dst = engine.pair_rows(out, pairs[mine], "link")
        scores = self.decode(model, h_src, h_dst, None if rel is None else rel[mine]).float()
        total = F.binary_cross_entropy_with_logits(scores, labels[mine].to(scores.device), reduction="sum")
        return scaled(total) / pairs.shape[0]

    def graph_summary(self, graph: dict) -> dict:
        """The ``graph`` block of ``summary.json`` without the node labels' fields (no link task reads them, and
        a folder without labels holds placeholders), with the split's pair counts."""
        return {k: v for k, v in graph.items() if k not in NODE_LABEL_FIELDS} | {"pairs": self.split.sizes()}

    def describe(self, engine) -> str:
        """The run's header: the graph and the pairs it is trained and judged on."""
        s = self.split.sizes()
        return (f"{engine.name} ({self.split.num_nodes} nodes, {engine.in_dim} features): links {s['train']} train, "
                f"{s['val']} + {s['val_neg']} val, {s['test']} + {s['test_neg']} test pairs ({self.split.name})")

    def metric(self, engine=None) -> str:
        chosen = self.cfg.optimization.metric
        if chosen != "auto":
            return chosen
        return published_link_metric(self.split.name) or "rocauc"

    def scores(self, engine, model, out: torch.Tensor, pairs: torch.Tensor,
               rel: torch.Tensor | None = None) -> torch.Tensor:
        """Every pair's score (``rel``: their relations, typed links), in ``pairs``' order, on every rank
        (each rank scores its share), ``EVAL_PAIRS`` at a time (the same count of exchanges on every rank:
        the pairs are the same)."""
        whole = torch.empty(pairs.shape[0], dtype=torch.float64)
        for start in range(0, pairs.shape[0], EVAL_PAIRS):
            chunk = pairs[start:start + EVAL_PAIRS]
            at = torch.nonzero(engine.pair_share(chunk)).flatten()
            h_src, h_dst = engine.pair_rows(out, chunk[at], "eval/link")
            got = (self.decode(model, h_src, h_dst, None if rel is None else rel[start:start + EVAL_PAIRS][at]).double()
                   if at.numel() else torch.zeros(0, dtype=torch.float64, device=out.device))  # (a rank of no rows)
            both = engine.gather_rows(torch.stack([at.to(got), got], 1), "eval/reduce").cpu()
            whole[start + both[:, 0].long()] = both[:, 1]
        return whole

    def _tables(self) -> dict[str, torch.Tensor]:
        """The pairs an evaluation scores, by name, in the order it scores them: each split's positives
        and negatives; the training sample's positives, and with negatives per positive, each sampled
        edge's source against the targets of as many validation negatives (shared ones are reused)."""
        s = self.split
        tables = {"val_neg": s.val_neg, "val": s.val, "test": s.test, "test_neg": s.test_neg,
                  "train": self.train_sample}
        if s.per_positive:
            n, per = self.train_sample.shape[0], s.per_positive
            tables["train_neg"] = torch.stack([self.train_sample[:, 0].repeat_interleave(per), s.val_neg[: n * per, 1]], 1)
        return tables

    def evaluation_pairs(self):
        """Every chunk of pairs an evaluation exchanges, in order (what ``plan.link`` counts)."""
        for pairs in self._tables().values():
            yield from pairs.split(EVAL_PAIRS)

    def _relations(self) -> dict[str, torch.Tensor | None]:
        """The relation of each pair of :meth:`_tables`' tables (``None`` each for untyped links)."""
        s = self.split
        if not s.typed:
            return dict.fromkeys(self._tables())
        out = {name: s.relation(name) for name in ("val_neg", "val", "test", "test_neg")}
        out["train"] = s.relation("train")[self.sample_ids]
        if s.per_positive:  # the sample's own relation on each of its borrowed negatives
            out["train_neg"] = out["train"].repeat_interleave(s.per_positive)
        return out

    def evaluate(self, engine, model, out: torch.Tensor) -> dict:
        """Every link metric of each split (``metrics``, by name; training: its sample), ``*_metric`` the
        chosen one, and the validation loss; for typed links also every metric of each scored relation, by
        its name (``by_relation``)."""
        metric, per = self.metric(), self.split.per_positive
        rels = self._relations()
        got = {name: self.scores(engine, model, out, pairs, rels[name]) for name, pairs in self._tables().items()}
        val_pos, val_neg = got["val"], got["val_neg"]
        record = {"metric": metric, "metrics": {
            "train": link_metrics(got["train"], got.get("train_neg", val_neg), per),
            "val": link_metrics(val_pos, val_neg, per), "test": link_metrics(got["test"], got["test_neg"], per)}}
        for split in ("train", "val", "test"):
            record[f"{split}_metric"] = record["metrics"][split][metric]
        both = torch.cat([val_pos, val_neg])
        labels = torch.cat([torch.ones(val_pos.numel()), torch.zeros(val_neg.numel())]).double()
        record["val_loss"] = float(F.binary_cross_entropy_with_logits(both, labels))
        if self.typed:
            record["by_relation"] = self.by_relation(got, rels)
        return record

    def sizes(self, engine=None) -> tuple[str, dict[str, int]]:
        """How many positive pairs judge the validation and test figures (the warning of a small split)."""
        return "positive pairs", {"validation": int(self.split.val.shape[0]), "test": int(self.split.test.shape[0])}

    def by_relation(self, got: dict, rels: dict) -> dict:
        """Every link metric of the validation and test pairs of each scored relation (its positives
        against its negatives: a positive's own, where the split gives each its own), by the relation's
        ``SRC___REL___DST``."""
        out, per = {}, self.split.per_positive
        for r in self.split.targets:
            mine = {name: got[name][rels[name] == r] for name in ("val", "val_neg", "test", "test_neg")}
            out[self.split.relation_names[r]] = {f"{split}_{m}": link_metric(m, mine[split], mine[f"{split}_neg"], per)
                                                 for split in ("val", "test") for m in LINK_METRICS}
        return out
