"""``LayerTimer``: what the model's own layers cost on this machine, the compute of ``plan.epoch_time``'s
model. Each distinct layer kind is timed on a synthetic block of a rank's shape (rows per call,
source rows per row, non-zeros per row, the first layer on the real input features), as training or
evaluation runs it, and a chunked engine's training call with the history-table copies around it.

Each kind is timed in rounds, and its timings are kept: the estimate uses their median, and
``using(k)`` those of round k (``using("min")``, ``using("max")``: the least, the most), so that the
plan can say how far its estimates move within the timings' own spread (``plan.ranking``: two layouts
whose gap moves more than it measures are a tie, not a pick).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import MappingProxyType

import torch

from fullgraph.plan.epoch_time import LayerCalls, out_width

__all__ = ["LayerTimer", "STATISTICS"]

STATISTICS = MappingProxyType({"min": min, "median": statistics.median, "max": max})
"""How a kind's timings make its cost: the median (the estimate), the least and the most (its spread)."""


class LayerTimer:
    """Times the model's own layers on this machine, on ``threads`` threads (a rank's).

    A layer is timed per distinct kind (class, parameter shapes, first or not) and block shape
    (rows per call, source rows per row, non-zeros per row), on a synthetic block of at most
    ``max_entries`` activation entries, and scaled by the rows it stands for: forward and backward
    with dropout masks as training draws them, or the evaluation's forward. The first layer reads
    rows of the real input features (dense or sparse, as they are), the others random activations.

    Each kind is timed once when first asked for; ``settle`` times every kind met so far again, in
    rounds over all of them, up to ``rounds`` timings each, and from then on a kind costs the median
    of its timings. On a shared machine one timing of the same call can be 1.5 times another taken
    seconds later (and a reference kernel timed next to it does not move with it, so it cannot be
    corrected away); every layer of a kind scales with its timing, so one unlucky timing moved whole
    layouts by 30-40 % between estimates. Rounds spread over the whole estimate make a kind's timings
    independent draws, and their median rejects the unlucky one. What the median cannot say is how
    sure it is: ``spread`` reports each kind's least, median and most, and under ``using(k)`` every
    kind costs its timing of round k instead (or under ``using("min")``, ``using("max")``, the least or
    the most of them), which shows what the same estimate gives within that spread.
    """

    def __init__(self, model, features, threads: int = 1, max_entries: int = 1 << 21, seed: int = 0,
                 rounds: int = 3):
        self.model, self.threads, self.max_entries, self.seed = model, threads, max_entries, seed
        self.rounds = rounds
        if features.layout == torch.sparse_csr:
            from fullgraph.ops import SparseOp

            features = SparseOp.from_tensor(features)
        self.features, self.num_rows = features, features.shape[0]
        self._samples: dict[tuple, list[float]] = {}  # a kind's seconds per row, one per timing
        self._measure: dict[tuple, Callable[[], float]] = {}  # how to time it again
        self.statistic: str | int = "median"  # of a kind's timings, what it costs (``using``)

    def seconds(self, model, calls: LayerCalls, train: bool) -> float:
        """The time of ``calls`` (``model`` must be the timer's own)."""
        if calls.rows == 0 or not calls.layers:
            return 0.0
        per_call, chunked = calls.rows / calls.calls, calls.calls > 1
        return calls.calls * sum(self._layer(i, per_call, calls.src_rows / calls.rows, calls.nnz / calls.rows, train,
                                             chunked) for i in calls.layers)

    def post_seconds(self, model, rows: int, train: bool) -> float:
        """``post`` (the node-wise output map) over ``rows`` rows."""
        if rows == 0:
            return 0.0
        n = self._sample_rows(rows, out_width(self.model))
        return self._per_row(("post", n, train), lambda: self._timed(lambda: self._run_post(n, train)) / n) * rows

    def step_seconds(self, params: int) -> float:
        """Adam's step over ``params`` parameters, as the trainer's optimizer takes it (weight decay
        on), timed on at most ``max_entries`` of them (two significant digits) and scaled."""
        if params == 0:
            return 0.0
        n = _two_digits(min(params, self.max_entries))
        return self._per_row(("adam", n), lambda: self._timed(_adam_step(n)) / n) * params

    def sample(self, fewer_than: int | None = None) -> None:
        """Time every kind met so far once more (those with fewer than ``fewer_than`` timings, if
        given). A caller that measures over a long time (the cluster benchmark) samples between its
        runs, so that the medians stand for the same minutes as them."""
        for key, measure in self._measure.items():
            if fewer_than is None or len(self._samples[key]) < fewer_than:
                self._samples[key].append(measure())

    def settle(self) -> None:
        """Time every kind met so far again until each has ``rounds`` timings: one round over all the
        kinds at a time, so that a kind's timings lie far apart (see the class docstring)."""
        for _ in range(self.rounds - 1):
            self.sample(fewer_than=self.rounds)

    @contextmanager
    def using(self, statistic: str | int) -> Iterator["LayerTimer"]:
        """Within the block, every kind costs the ``statistic`` of its timings: ``min``, ``median`` or
        ``max``, or the timing of round ``k`` (an int: its k-th timing, the median where it has fewer).
        The kinds' k-th timings were taken in the same round over all of them (``settle``), close in
        time: an estimate made under round k is the estimate that round's machine gave, so that
        estimates of two layouts under the same round share that round's luck."""
        if not isinstance(statistic, int) and statistic not in STATISTICS:
            raise ValueError(f"expected a round or one of {', '.join(STATISTICS)}, got {statistic!r}")
        before, self.statistic = self.statistic, statistic
        try:
            yield self
        finally:
            self.statistic = before

    def spread(self) -> dict:
        """The timings' spread: how many each kind has (``rounds``: the fewest), and the largest
        ``(most - least) / median`` over the kinds (``relative``), with that kind's least, median and
        most seconds per row."""
        if not self._samples:
            return {"kinds": 0, "rounds": 0, "relative": 0.0}
        stats = [(min(s), statistics.median(s), max(s)) for s in self._samples.values()]
        lo, mid, hi = max(stats, key=lambda t: (t[2] - t[0]) / t[1] if t[1] > 0 else 0.0)
        return {"kinds": len(stats), "rounds": min(len(s) for s in self._samples.values()),
                "relative": (hi - lo) / mid if mid > 0 else 0.0, "min": lo, "median": mid, "max": hi}

    # -- internals

    def _per_row(self, key: tuple, measure: Callable[[], float]) -> float:
        """The ``statistic`` (median, least or most) of ``key``'s timings (seconds per row), timing it
        with ``measure`` if it has none."""
        if key not in self._samples:
            self._samples[key], self._measure[key] = [measure()], measure
        samples, k = self._samples[key], self.statistic
        if isinstance(k, int):
            return samples[k] if k < len(samples) else statistics.median(samples)
        return STATISTICS[k](samples)

    def _sample_rows(self, rows: float, width: float) -> int:
        """Rows to time: all of them up to ``max_entries`` entries, at two significant digits (so that
        parts of nearly the same size share one timing), no more than the graph has."""
        return _two_digits(min(int(rows), int(self.max_entries // max(1.0, width)), self.num_rows))

    def _layer(self, i: int, rows: float, src_ratio: float, degree: float, train: bool,
               chunked: bool = False) -> float:
        layer = self.model.layers[i]
        kind = (type(layer).__name__, tuple(tuple(p.shape) for p in layer.parameters()), i == 0,
                getattr(layer, "last", None))
        layers = self.model.layers
        out = layers[i + 1].in_width if i + 1 < len(layers) else out_width(self.model)
        n = self._sample_rows(rows, max(layer.in_width, out) * max(1.0, src_ratio))
        chunked = chunked and i > 0 and train  # a chunk's first layer reads features, as any call does
        key = (kind, n, round(src_ratio, 1), round(degree), train, chunked)
        per_row = self._per_row(key, lambda: self._timed(self.layer_step(i, n, src_ratio, degree, train, chunked)) / n)
        return per_row * rows

    def _timed(self, fn, runs: int = 7, budget_s: float = 1.0, span_s: float = 0.2, most: int = 200) -> float:
        """The median of the runs after a warm-up: ``runs`` of them, more (up to ``most``) until they
        span ``span_s``, fewer (at least three) once they take ``budget_s``, one when one run alone
        does. The median, not the fastest: an epoch runs each layer many times and meets the usual
        run, not the luckiest one, and a single lucky timing would scale every layer of its kind. The
        span: seven runs of a chunk's small call take milliseconds, which one busy moment of the
        machine can fill entirely (a Squirrel estimate came out 15 times too slow that way)."""
        from fullgraph.ops.dropout import keyed_dropout

        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            with keyed_dropout(self.seed, 1):
                fn()  # warm-up: allocator, caches, lazy initialization
                times: list[float] = []
                while True:
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
                    n, total = len(times), sum(times)
                    if times[0] > budget_s or (n >= 3 and total >= budget_s) or (n >= runs and total >= span_s) \
                            or n >= most:
                        return statistics.median(times)
        finally:
            torch.set_num_threads(before)

    def _block(self, n: int, src_ratio: float, degree: float):
        """A random block of ``n`` rows, ``degree`` entries each, reading ``src_ratio × n`` rows, whose
        entries carry the edge data the model cannot run without (random, of the right kinds)."""
        from fullgraph.ops import Block, SparseOp
        from fullgraph.ops.edge_data import EdgeFacts, random_edge_data

        g = torch.Generator().manual_seed(self.seed)
        src = min(self.num_rows, max(n, int(round(n * src_ratio))))
        d = max(1, int(round(degree)))
        indptr = torch.arange(0, n * d + 1, d, dtype=torch.int64)
        cols = torch.randint(0, src, (n * d,), generator=g).view(n, d).sort(dim=1).values.flatten()
        op = SparseOp(indptr, cols, torch.full((n * d,), 1.0 / d), (n, src), symmetric=False)
        return Block(op, self.model.norm, src_ids=torch.arange(src), dst_ids=torch.arange(n),
                     edata=random_edge_data(getattr(self.model, "edge_needs", EdgeFacts()), n * d, g)), src

    def layer_step(self, i: int, rows: int, src_ratio: float = 1.0, degree: float = 1.0, train: bool = True,
                   chunked: bool = False):
        """One call of layer ``i`` over ``rows`` rows, ready to run: the block and its input are built
        here, once, so that only the call's own work is timed: the first layer's ``pre`` on the real
        features (its calls include it), a later layer's gather of its source rows in a random order
        (a layout assembles a call's sources from the rows it holds: own and halo; ``index_select``
        forward, ``index_add`` backward), and the layer. ``chunked``: a training call of a chunked
        engine instead (``chunk_step``). ``benchmarks/probes/corun.py`` runs it in processes sharing
        the cores."""
        if chunked and i > 0 and train:
            return self.chunk_step(i, rows, src_ratio, degree)
        block, src = self._block(rows, src_ratio, degree)
        layer, model = self.model.layers[i], self.model
        h0 = torch.rand(rows, model.layers[0].in_width) if model.uses_h0 else None
        if i == 0:
            x, ids = _feature_rows(self.features, src), torch.arange(src)
        else:
            g = torch.Generator().manual_seed(self.seed)
            h = torch.rand(src, layer.in_width, generator=g).requires_grad_(train)
            where = torch.randperm(src, generator=g)

        def step() -> None:
            model.train(train)
            with torch.set_grad_enabled(train):
                out = layer(block, model.pre(x, ids) if i == 0 else h.index_select(0, where), h0)
                if train:
                    out.backward(torch.ones_like(out))
            model.zero_grad(set_to_none=True)
            if i != 0:
                h.grad = None

        return step

    def chunk_step(self, i: int, rows: int, src_ratio: float = 1.0, degree: float = 1.0):
        """One training call of layer ``i`` on a chunk of ``rows`` rows as the chunked engines
        (``parallel/pipeline.py``) run it: the chunk's rows written to the layer's history table, the
        other chunks' rows read from it, both concatenated into the layer's input, and backward the
        other chunks' gradients added into the table of gradients and the chunk's own gathered from
        it. For narrow layers these copies cost as much as the layer itself."""
        block, src = self._block(rows, src_ratio, degree)
        layer, model = self.model.layers[i], self.model
        h0 = torch.rand(rows, model.layers[0].in_width) if model.uses_h0 else None
        g = torch.Generator().manual_seed(self.seed)
        width, table_rows = layer.in_width, src + rows  # the part's table: this chunk, its sources, others
        table, grads = torch.rand(table_rows, width, generator=g), torch.zeros(table_rows, width)
        where = torch.randperm(table_rows, generator=g)
        dst, others = where[:rows], where[rows:src]
        own = torch.rand(rows, width, generator=g).requires_grad_()

        def step() -> None:
            model.train(True)
            table[dst] = own.detach()
            read = table[others].requires_grad_()
            out = layer(block, torch.cat([own, read]), h0)
            out.backward(torch.ones_like(out))
            grads.index_add_(0, others, read.grad)
            _ = own.grad + grads[dst]
            model.zero_grad(set_to_none=True)
            own.grad = None

        return step

    def _run_post(self, n: int, train: bool) -> None:
        model = self.model
        model.train(train)
        with torch.set_grad_enabled(train):
            h = torch.rand(n, out_width(model), requires_grad=train)
            # a model that reads every layer (jumping knowledge) takes them all: the same rows for each
            out = model.post([h] * model.num_layers if getattr(model, "reads_every_layer", False) else h, torch.arange(n))
            if train:
                out.sum().backward()
        model.zero_grad(set_to_none=True)


def _two_digits(n: int) -> int:
    """``n`` (at least 1) cut to two significant digits: sizes that nearly agree share one timing."""
    n = max(1, n)
    step = 10 ** max(0, len(str(n)) - 2)
    return n // step * step


def _adam_step(n: int):
    """One optimizer step over ``n`` parameters with gradients, ready to run (its state built by the
    warm-up step)."""
    p = torch.zeros(n, requires_grad=True)
    p.grad = torch.rand(n)
    return torch.optim.Adam([p], lr=0.01, weight_decay=5e-4).step


def _feature_rows(features, n: int):
    """The first ``n`` rows of the input features as the model reads them (dense, or ``SparseOp``)."""
    from fullgraph.ops import SparseOp

    if isinstance(features, SparseOp):
        return features.rows(n)
    return features[:n]
