"""Graph parallelism at a lower communication precision equals one process that rounds the same rows
the same way (issue 15), and its ledger counts the bytes that were sent.

The reference is written out here: one process, the whole graph, where every edge between two parts
reads its source row from a rounded copy made for the destination's part (forward: the row rounded
as it would travel; backward: that part's gradient of it rounded again before it is added to the
owner's), with the codec ``fullgraph.comm.precision`` that tests/comm/test_precision.py checks
against torch's casts and a hand-made integer rounding.

Tolerance: the two differ in the order of each row's sums, as fp32 graph parallelism does
(tests/_equality.py). A value that differs in its last bit can then round to the other neighbour
(bf16: one entry in ~2^16 near a rounding boundary; int8: when ``y + u`` straddles an integer),
which moves that entry by one step of the lower precision. So the losses and weights are compared
within ROUNDED_RTOL: tens of such flips over ten epochs move a loss by far less, while rounding the
wrong rows, the wrong direction or with the wrong key moves it by more (checked by breaking each).
"""

from __future__ import annotations

import pytest
import torch

from fullgraph.comm.precision import PRECISIONS, row_bytes, round_rows, wire_site
from fullgraph.config import TrainConfig
from fullgraph.models import MODELS
from fullgraph.ops import Block, SparseOp
from fullgraph.ops.dropout import current_key
from fullgraph.parallel.engine import SingleEngine
from fullgraph.train.trainer import Trainer

from tests.distributed import ledger, planned_bytes, run_ranks
from tests.parallel.test_graph_parallel import write_partition

EPOCHS, LAYERS, HIDDEN = 10, 3, 16
ROUNDED_RTOL = 2e-4


def config(model: str, precision: str) -> dict:
    return dict(model=model, layers=LAYERS, hidden=HIDDEN, dropout=0.5, epochs=EPOCHS, eval_every=EPOCHS, seed=0,
                lr=0.01, comm_precision=precision)


class _Rounded(torch.autograd.Function):
    """The copy of ``h`` that one part receives: rounded forward, its gradient rounded backward."""

    @staticmethod
    def forward(ctx, h, precision, layer):
        ctx.precision, ctx.layer, ctx.key = precision, layer, current_key()
        return round_rows(h, precision, rows=torch.arange(h.shape[0]), site=wire_site(layer, False))

    @staticmethod
    def backward(ctx, g):
        return round_rows(g, ctx.precision, rows=torch.arange(g.shape[0]), site=wire_site(ctx.layer, True),
                          key=ctx.key), None, None


class RoundedHalos(SingleEngine):
    """One process; layers after the first read cross-part edges from the destination part's copy."""

    def __init__(self, graph, norm: str, node_part: torch.Tensor, precision: str):
        super().__init__(graph, norm)
        self.precision, P, n = precision, int(node_part.max()) + 1, graph.num_nodes
        adj = self.block.adj
        rows = torch.repeat_interleave(torch.arange(n), adj.indptr.diff())
        cross = node_part[rows] != node_part[adj.indices]
        cols = torch.where(cross, (1 + node_part[rows]) * n + adj.indices, adj.indices)
        self.parts = P
        self.cross_block = Block(SparseOp(adj.indptr, cols, adj.values, (n, (P + 1) * n), symmetric=False), norm,
                                 src_ids=torch.arange(n).repeat(P + 1))

    def forward(self, model, epoch: int, training: bool):
        layer = iter(range(1, model.num_layers))

        def fetch(h):
            i = next(layer)
            return torch.cat([h] + [_Rounded.apply(h, self.precision, i) for _ in range(self.parts)])

        return model([self.block] + [self.cross_block] * (model.num_layers - 1), self.x, fetch=fetch)


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_lower_precision_graph_parallel_equals_rounded_single_process(cora, model, tmp_path):
    book = write_partition(cora, 2, "metis", tmp_path / "parts")
    halo_total = sum(p.num_halo for p in book.parts)
    precisions = ("bf16", "fp16", "int8")
    runs = [{"name": p, "partition_dir": str(tmp_path / "parts"), "config": config(model, p)} for p in precisions]
    got = run_ranks("train_runs", 2, {"runs": runs}, tmp_path)
    for precision in precisions:
        cfg = TrainConfig.of(**config(model, precision), progress="none")
        trainer = Trainer(cfg, engine=RoundedHalos(cora, MODELS[model].norm, book.node_part, precision))
        ref = trainer.build().train()
        run = got[precision]
        ref_losses = torch.tensor(ref.losses, dtype=torch.float64)
        assert torch.allclose(run["losses"], ref_losses, rtol=ROUNDED_RTOL, atol=0), (precision, run["losses"], ref_losses)
        for name, value in trainer.model.state_dict().items():
            assert torch.allclose(run["state"][name], value, rtol=ROUNDED_RTOL, atol=ROUNDED_RTOL * value.abs().max()), \
                (precision, name)
        # the ledger: each halo row of layers 1..L-1 once each way, at its encoded size, as the plan says
        expected = halo_total * row_bytes(HIDDEN, precision) * (LAYERS - 1)
        assert run["comm"]["halo/fwd"] == expected == run["comm"]["halo/bwd"], (precision, run["comm"])
        plan = planned_bytes(config(model, precision) | dict(parallel="graph", nprocs=2), cora, halo_total)
        assert ledger(run["comm"]) == plan, precision



def test_pipeline_and_hybrid_send_their_rows_at_the_precision_asked(cora, tmp_path):
    """The chunk stream (GCNII's H0 with it), the hybrid's chunk halos and the evaluation's rows travel
    encoded: the ledger counts the encoded bytes, exactly as the plan says, and training stays close to
    fp32's (a row decoded with a wrong scale or width, or not decoded, would not)."""
    from tests.parallel.test_pipeline import prepare

    book, pdir, cfile = prepare(cora, 2, 4, tmp_path)
    _, pdir1, cfile1 = prepare(cora, 1, 4, tmp_path)
    halo_rows = sum(p.num_halo for p in book.parts)
    pipeline = dict(parallel="pipeline", partition_dir=pdir1, chunk_file=cfile1, chunks=4)
    hybrid = dict(parallel="hybrid", partition_dir=pdir, chunk_file=cfile, chunks=4, graph_ways=2, stages=2)
    runs = {}
    for layout, opts, nprocs in (("pipeline", pipeline, 2), ("hybrid", hybrid, 4)):
        runs[layout] = [{"name": p, "config": dict(config("gcnii", p), layers=4, **opts)} for p in PRECISIONS]
        got = run_ranks("chunked_runs", nprocs, {"runs": runs[layout]}, tmp_path / layout)
        fp32 = got["fp32"]["losses"]
        for run in runs[layout]:
            p, comm = run["name"], got[run["name"]]["comm"]
            assert ledger(comm) == planned_bytes(dict(run["config"], nprocs=nprocs), cora, halo_rows if layout == "hybrid"
                                                 else 0), (layout, p)
            per_row = row_bytes(HIDDEN, p) + row_bytes(HIDDEN, p)  # the layer's input and H0, one boundary
            assert comm["pipe/fwd"] == comm["pipe/bwd"] == cora.num_nodes * per_row, (layout, p, comm)
            if p != "fp32":
                gap = (got[p]["losses"] - fp32).abs().max().item()
                assert 0 < gap < 0.02 * fp32.abs().max().item(), (layout, p, got[p]["losses"], fp32)


SPMM_GRIDS = [(2, "spmm-1d", 0, ("fp16",)), (4, "spmm-1.5d", 2, ("bf16", "int8")), (4, "spmm-2d", 0, ("int8",)),
              (8, "spmm-3d", 0, ("bf16", "int8"))]


@pytest.mark.parametrize("nprocs, mode, c, precisions", SPMM_GRIDS)
def test_spmm_layouts_send_their_rows_at_the_precision_asked(shared_data, cora, nprocs, mode, c, precisions, tmp_path):
    """The SpMM layouts' dense broadcasts, reductions and redistributions travel encoded: the ledger
    is the plan's volume exactly, the categories that carry only dense rows are stated here again from
    the grid, every rank ends with the same weights (the c replicas of a 1.5D block row decode one
    sum), and training stays within 2 % of one fp32 process (a wrong width, scale or site would not)."""
    from fullgraph.comm.precision import row_bytes as rb
    from fullgraph.comm.mesh import Mesh
    from fullgraph.data.load import load_graph
    from tests.parallel.test_spmm import products

    one = dict(config("gcn", "fp32"), dataset="cora", root=str(shared_data))
    base = dict(one, parallel=mode, replication=c)
    cfg = TrainConfig.of(**one, progress="none")
    reference = torch.tensor(Trainer(cfg, load_graph(cfg)).build().train().losses, dtype=torch.float64)
    runs = [{"name": p, "config": dict(base, comm_precision=p)} for p in precisions]
    got = run_ranks("spmm_runs", nprocs, {"runs": runs}, tmp_path)
    n, widths = cora.num_nodes, products("gcn", cora.num_features, cora.num_classes, HIDDEN, LAYERS)
    q, cols, depth = Mesh.for_mode(mode, nprocs, replication=c).grid
    for run in runs:
        p, comm = run["name"], got[run["name"]]["comm"]
        assert ledger(comm) == planned_bytes(dict(run["config"], nprocs=nprocs), cora), (mode, p, comm)
        if mode in ("spmm-1d", "spmm-1.5d"):  # (R - 1) receivers of every block row; 1.5D: reduce-scatter + gather
            assert comm["spmm/bcast"] == (q - 1) * n * sum(rb(w, p) for w in widths), (mode, p)
            assert comm.get("spmm/reduce", 0) == 2 * (cols - 1) * n * sum(rb(w, p) for w in widths), (mode, p)
        if mode == "spmm-3d":  # each layer's partial sums of the other layers' rows, column slice by slice
            slices = [rb(len(s), p) for w in widths for s in torch.tensor_split(torch.arange(w), q)]
            assert comm["spmm/reduce"] == (depth - 1) * n * sum(slices), (mode, p)
        assert got[p]["spread"] == 0, (mode, p, got[p]["spread"])
        gap = (got[p]["losses"] - reference).abs().max().item()
        assert 0 < gap < 0.02 * reference.abs().max().item(), (mode, p, got[p]["losses"], reference)


def test_tensor_layout_switches_its_rows_at_the_precision_asked(shared_data, cora, tmp_path):
    """Tensor parallelism's switches travel encoded (whole and chunked): the ledger is the plan's volume
    and, stated again here, every value that leaves its process twice per product, each piece a row of
    its column slice at the precision's row size; every rank ends with the same weights; training stays
    within 2 % of one fp32 process."""
    from fullgraph.comm.precision import row_bytes as rb
    from fullgraph.data.load import load_graph

    one = dict(config("sage", "fp32"), dataset="cora", root=str(shared_data))
    cfg = TrainConfig.of(**one, progress="none")
    reference = torch.tensor(Trainer(cfg, load_graph(cfg)).build().train().losses, dtype=torch.float64)
    runs = [{"name": f"{p}-{k}", "config": dict(one, comm_precision=p, tensor_chunks=k)}
            for p, k in (("bf16", 0), ("int8", 0), ("int8", 2))]
    P = 4
    got = run_ranks("tensor_runs", P, {"runs": runs}, tmp_path)
    rows = [len(t) for t in torch.tensor_split(torch.arange(cora.num_nodes), P)]
    widths = [HIDDEN] * (LAYERS - 1) + [cora.num_classes]  # SAGE on sparse features: transform, then aggregate
    for run in runs:
        p, comm = run["config"]["comm_precision"], got[run["name"]]["comm"]
        assert ledger(comm) == planned_bytes(dict(run["config"], parallel="tensor", nprocs=P), cora), run["name"]
        want = 0
        for w in widths:
            cols = [len(t) for t in torch.tensor_split(torch.arange(w), P)]
            want += sum(rows[r] * rb(cols[j], p) + rows[j] * rb(cols[r], p) for r in range(P) for j in range(P) if j != r)
        assert comm["tp/fwd"] == comm["tp/bwd"] == want, (run["name"], comm)
        assert got[run["name"]]["spread"] == 0, run["name"]
        gap = (got[run["name"]]["losses"] - reference).abs().max().item()
        assert 0 < gap < 0.02 * reference.abs().max().item(), (run["name"], got[run["name"]]["losses"], reference)
    # the chunked switch back rounds each row with the same key as the whole one: the same numbers
    assert torch.equal(got["int8-0"]["losses"], got["int8-2"]["losses"])
