"""PyG's heterogeneous modules as fullgraph layers, unchanged: ``HeteroConv``, ``HGTConv``, ``to_hetero``.

PyG runs a heterogeneous graph per type and relation: a module takes ``x_dict`` (each node type's rows)
and ``edge_index_dict`` (each relation's edges, in its two types' own numbering) and returns each
destination type's rows. fullgraph holds the same graph as one typed graph (``ops.node_types``): one
matrix of rows, a node's type following from its global id, each block entry carrying its relation.
:class:`PyGHeteroLayer` feeds the one to the other on any block a layout hands it:

* the block's src rows are grouped by type (one stable sort; a type's dst rows come first in its group,
  the dst rows being the block's first ``num_dst`` rows) and cut to the type's input columns:
  ``x_dict``;
* each relation's entries, with both ends renumbered within their type's group: ``edge_index_dict``
  (entries whose ends are not of the relation's types are not passed: a checked typed graph has none,
  the contract's probe block has some), and their features, where the block has them and the module
  reads them: ``edge_attr_dict`` (``HeteroConv``; a ``to_hetero`` graph's ``edge_attr``);
* the module's output for each type's dst rows, put back in the block's order; a type the module
  writes no rows for (no relation of the layer ends there; PyG drops it from the dict) gets zeros.

The module also computes its output for a type's halo rows, which are dropped: each output row reads
only its own in-edges (every module of PyG's heterogeneous forms aggregates per destination), so the
dst rows are those of the whole graph. A conv that normalizes by its *source* nodes' degrees
(``GCNConv(normalize=True)``) would read degrees a part's or a chunk's block does not hold: refused
(:meth:`PyGHeteroModel.check_layout`; one process too, whose chunks and pruned blocks are no whole graph).
A whole ``to_hetero`` model is cut into its layers where its graph is a chain (``models.pyg_hetero_split``);
one that is not, and a module of the user's own taking ``x_dict``, is one layer of several hops, right only
on the whole graph's block (``PyGHeteroModel.whole_graph``).

The first layer reads :class:`~fullgraph.models.typed.TypedColumns`'s output: each featured type's own
columns, and a featureless type's learned table rows (``--hidden`` wide: the builder's ``in_dims`` say
so), held by the nodes' owners under graph parallelism as R-GCN's are. Later layers read the previous
one's output, one width for every type. Between layers: ``act`` and keyed dropout as ``from_pyg`` puts
them; node-wise modules after the last layer (``[..., nn.ReLU(), nn.Linear(hidden, classes)]``) are
``post``, on every row (PyG's examples apply theirs to the labelled type's rows: the same rows).

Widths come from one dry run of each module on two zero rows per type, in ``__init__`` (seeded builds
thus draw the same lazy parameters, ``SAGEConv((-1, -1), 64)``'s, in every process). The dry run also
finds the parameters no output reads (``HGTConv``'s skip of a type whose input width is not its output's)
and freezes them: one process leaves them without a gradient, so Adam never moves them, and every layout
must do the same (a layout that sums gradients over ranks counts a missing one as zeros, which weight
decay would then move).
"""

from __future__ import annotations

import torch
from torch import nn

from fullgraph.errors import InputError
from fullgraph.models.base import GraphLayer
from fullgraph.models.pyg_layer import activation
from fullgraph.models.typed import TypedColumns, TypedGNN, row_types
from fullgraph.ops import Block, SparseOp, dropout
from fullgraph.ops.edge_data import EdgeFacts
from fullgraph.ops.node_types import NodeTypes

__all__ = ["PyGHeteroLayer", "PyGHeteroModel", "from_pyg_hetero", "module_relations", "hops"]


def _is_relation(key) -> bool:
    return isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) for k in key)


def module_relations(module: nn.Module) -> list[tuple[str, str, str]]:
    """The relations a heterogeneous module reads: ``HeteroConv``'s convs, ``HGTConv``'s metadata, the
    keys a ``to_hetero`` graph looks up in ``edge_index_dict``, those of the modules a user's model holds."""
    import torch.fx

    own = _own_relations(module)
    if own:
        return own
    if isinstance(module, torch.fx.GraphModule):
        keys = [n.args[1] for n in module.graph.nodes if n.op == "call_method" and n.target == "get"
                and len(n.args) > 1 and _is_relation(n.args[1])]
        return list(dict.fromkeys(keys))
    found = [r for m in module.modules() if m is not module for r in _own_relations(m)]
    return list(dict.fromkeys(found))  # a module of the user's own on dicts: the relations of the modules it holds


def _own_relations(module) -> list:
    """``HeteroConv``'s relations (its convs' keys), ``HGTConv``'s (its metadata's), else none."""
    convs = getattr(module, "convs", None)
    if hasattr(convs, "keys") and all(_is_relation(k) for k in convs.keys()):
        return [tuple(k) for k in convs.keys()]
    edge_types = getattr(module, "edge_types", None)
    return [tuple(k) for k in edge_types] if isinstance(edge_types, (list, tuple)) else []


def hops(module: nn.Module) -> int:
    """How many stages of message passing the module runs (its convs grouped by the name before the
    relation key): one for ``HeteroConv`` and ``HGTConv``, a ``to_hetero`` model's layers."""
    from torch_geometric.nn.conv import MessagePassing

    convs = getattr(module, "convs", None)
    if isinstance(module, MessagePassing) or (hasattr(convs, "keys") and _is_relation(next(iter(convs.keys()), None))):
        return 1
    names = [n for n, m in module.named_modules() if isinstance(m, MessagePassing)]
    return max(1, len({n.rpartition(".")[0] for n in names}))


def _edge_features(module) -> tuple[str | None, int | None | bool]:
    """How the module takes edge features, and what it needs: ``(argument, need)``, the argument
    ``edge_attr_dict`` (``HeteroConv``, a forward that names it), ``edge_attr`` (a ``to_hetero`` graph's
    input of that name) or ``None``; ``need`` ``False`` (it runs without), else the width it needs (``None``: any),
    as ``models.pyg_layer.edge_needs`` says of each conv (``GINEConv``'s, a conv built with ``edge_dim``)."""
    import inspect

    from fullgraph.models.pyg_layer import edge_args, edge_needs

    convs = getattr(module, "convs", None)
    if hasattr(convs, "values") and _own_relations(module):  # HeteroConv: its convs say
        takes = [c for c in convs.values() if "attr" in edge_args(c)]
        needs = [edge_needs(c)["attr"] for c in takes if "attr" in edge_needs(c)]
        return ("edge_attr_dict" if takes else None), (False if not needs else next((w for w in needs if w), None))
    import torch.fx

    if isinstance(module, torch.fx.GraphModule):
        names = [n.name for n in module.graph.nodes if n.op == "placeholder"]
        return ("edge_attr", False) if "edge_attr" in names else (None, False)
    params = inspect.signature(type(module).forward).parameters
    return ("edge_attr_dict", False) if "edge_attr_dict" in params else (None, False)


class PyGHeteroLayer(GraphLayer):
    """One of PyG's heterogeneous modules over a typed block (module docstring). ``columns``: each node
    type's input columns ``(start, stop)`` in the layer's input rows of width ``width``."""

    def __init__(self, module: nn.Module, types: NodeTypes, columns: list[tuple[int, int]], width: int, *,
                 act=None, p: float = 0.0, last: bool = False):
        super().__init__()
        self.module, self.types, self.columns, self.in_width = module, types, columns, width
        self.act, self.p, self.last = (None if last else activation(act)), (0.0 if last else float(p)), last
        known = {tuple(r): i for i, r in enumerate(types.relations)}
        rels = module_relations(module)
        missing = [r for r in rels if r not in known]
        if missing:
            raise InputError(f"expected {type(module).__name__}'s relations among the graph's (got "
                             f"{', '.join('__'.join(r) for r in missing[:3])}, which it lacks; the graph has "
                             f"{', '.join('__'.join(r) for r in types.relations)}): build the module with the graph's "
                             f"metadata (the builder's metadata argument)")
        self.relations = [(known[r], r, types.index(r[0]), types.index(r[2])) for r in rels]
        self.attr_arg, self.attr_need = _edge_features(module)
        self.register_buffer("offsets", torch.tensor(types.offsets), persistent=False)
        self.out_width = self._dry_run()

    def _dry_run(self) -> int:
        """Run the module once on two zero rows per type (lazy parameters drawn; see the module docstring)
        and return its output width, the same for every type it writes or refused."""
        x = {name: torch.zeros(2, b - a) for name, (a, b) in zip(self.types.names, self.columns)}
        edges = {r: torch.tensor([[0], [1]]) for _, r, _, _ in self.relations}
        attrs = None if self.attr_need is False else {r: torch.zeros(1, self.attr_need or 1) for r in edges}
        was = self.module.training
        self.module.eval()
        try:
            with torch.enable_grad():
                out = self._call(x, edges, attrs)
                self._freeze_unread(out)
        except Exception as e:  # noqa: BLE001 - the user's module: whatever it raises is reported
            raise InputError(f"expected {type(self.module).__name__} to run on x_dict of the input widths "
                             f"{dict(zip(self.types.names, (b - a for a, b in self.columns)))} (it raised "
                             f"{type(e).__name__}: {' '.join(str(e).split())[:200]}): build it for the builder's "
                             f"in_dims") from None
        finally:
            self.module.train(was)
        out = self._as_dict(out)
        widths = {k: v.shape[-1] for k, v in out.items() if v is not None}
        if len(set(widths.values())) != 1:
            raise InputError(f"expected {type(self.module).__name__} to give every node type rows of one width (got "
                             f"{widths or 'no rows'}): fullgraph holds a layer's output as one matrix")
        return next(iter(widths.values()))

    def _call(self, x: dict, edges: dict, attrs: dict | None):
        """The module on its dicts, with each relation's edge features where it reads them (``attr_arg``)."""
        if attrs is None or self.attr_arg is None:
            return self.module(x, edges)
        if self.attr_arg == "edge_attr":  # a to_hetero graph: its input edge_attr, a dict too
            return self.module(x, edges, edge_attr=attrs)
        return self.module(x, edges, edge_attr_dict=attrs)

    def _as_dict(self, out) -> dict:
        """The module's output per type: a whole model that returns one tensor gives the labelled type's rows."""
        if isinstance(out, torch.Tensor):
            return {self.types.labelled[0]: out}
        if not isinstance(out, dict):
            raise InputError(f"expected {type(self.module).__name__} to return a dict of rows per node type, or the "
                             f"labelled type's rows (got {type(out).__name__})")
        return out

    def _freeze_unread(self, out) -> None:
        """Stop the gradient of every parameter the dry run's outputs do not depend on (module docstring)."""
        params = [p for p in self.module.parameters() if p.requires_grad]
        rows = [v.sum() for v in self._as_dict(out).values() if v is not None and v.requires_grad]
        if not params or not rows:
            return
        reached = torch.autograd.grad(torch.stack(rows).sum(), params, allow_unused=True)
        for p, g in zip(params, reached):
            if g is None:
                p.requires_grad_(False)

    def compute(self, block: Block, h, h0=None) -> torch.Tensor:
        h = h.to_dense() if isinstance(h, SparseOp) else h
        n, T = block.num_dst, self.types.num_types
        t = row_types(self.types, block, self.offsets)
        order = torch.argsort(t, stable=True)
        counts = torch.bincount(t, minlength=T)
        start = torch.cumsum(counts, 0) - counts
        pos = torch.empty_like(order)
        pos[order] = torch.arange(order.numel(), device=order.device) - start[t[order]]  # within its type's group
        groups = order.split(counts.tolist())
        x = {name: h.index_select(0, g)[:, a:b] for name, g, (a, b) in zip(self.types.names, groups, self.columns)}
        src, dst = block.edges()
        etype = block.edge_type
        edges, attrs = {}, ({} if self.attr_arg is not None and block.edge_attr is not None else None)
        for r, rel, s, d in self.relations:
            sel = (etype == r) & (t[src] == s) & (t[dst] == d)
            edges[rel] = torch.stack([pos[src[sel]], pos[dst[sel]]])
            if attrs is not None:
                attrs[rel] = block.edge_attr[sel]
        out = self._as_dict(self._call(x, edges, attrs))
        mine = torch.bincount(t[:n], minlength=T).tolist()  # each type's dst rows: the first of its group
        pieces = [out[name][:k] if out.get(name) is not None else h.new_zeros(k, self.out_width)
                  for name, k in zip(self.types.names, mine)]
        inverse = torch.empty(n, dtype=torch.int64, device=h.device)
        inverse[order[order < n]] = torch.arange(n, device=h.device)
        out = torch.cat(pieces).index_select(0, inverse)
        if self.last:
            return out
        if self.act is not None:
            out = self.act(out)
        return dropout(out, self.p, self.training, rows=block.dst_ids, site=self.dropout_site)


class PyGHeteroModel(TypedGNN):
    """:class:`~fullgraph.models.typed.TypedColumns`, then :class:`PyGHeteroLayer` per module, then the
    node-wise ``head`` (if any)."""

    norm = "relation-mean"  # the structure and relations only: the modules weigh the entries themselves
    label = "the PyG heterogeneous model"

    def __init__(self, types: NodeTypes, layers: list[PyGHeteroLayer], input: TypedColumns, head=None):
        super().__init__()
        self.types, self.input, self.layers = types, input, nn.ModuleList(layers)
        # a layer of several hops (a whole model on dicts): right only where its block is the whole graph, one
        # process without --prune (parallel.registry.check_model_layout refuses the rest)
        self.whole_graph = max(hops(layer.module) for layer in layers) > 1
        if head is not None:
            self.head = head
            self.post_modules = ("head",)

    def post(self, h, rows=None):
        return self.head(h) if hasattr(self, "head") else h

    @property
    def edge_needs(self) -> EdgeFacts:
        """Every entry's relation, and the edge features a module cannot run without (``GINEConv``'s)."""
        needs = [layer.attr_need for layer in self.layers if layer.attr_need is not False]
        if not needs:
            return super().edge_needs
        return EdgeFacts(("attr", "type"), next((w for w in needs if w), None), self.types.num_relations)

    def check_edge_data(self, kinds=(), edge_width=None, num_relations=None) -> None:
        """The relations (``TypedGNN``'s check), and the edge features a module needs, in its width."""
        super().check_edge_data(kinds, edge_width, num_relations)
        facts = kinds if isinstance(kinds, EdgeFacts) else EdgeFacts(tuple(kinds), edge_width, num_relations)
        need = self.edge_needs
        if "attr" in need.kinds and "attr" not in facts.kinds:
            raise InputError("expected edge features (edge_attr) for a module that cannot run without them (GINEConv, "
                             "a conv built with edge_dim) (got edges that carry none): give the graph its edge_attr, "
                             "or build the convs without edge features")
        if need.width is not None and facts.width is not None and facts.width != need.width:
            raise InputError(f"expected edge features of width {need.width} for the heterogeneous layers (got "
                             f"{facts.width} per edge): build the convs for {facts.width} (edge_dim={facts.width})")

    def check_layout(self, distributed: bool) -> None:
        """Refuse, in one line, what would differ from one process: a conv that normalizes by its sources'
        degrees (module docstring), dropout inside a module (its draws cannot be keyed by node). A whole model
        on dicts is the layouts' to refuse (``whole_graph``)."""
        for i, layer in enumerate(self.layers):
            name = type(layer.module).__name__
            for sub_name, sub in layer.module.named_modules():
                if type(sub).__name__ == "GCNConv" and getattr(sub, "normalize", False):
                    raise InputError(f"expected no normalizing GCNConv inside {name} (layer {i}, {sub_name}) (got "
                                     f"one): it weighs each edge by its source's degree, which a part's or a chunk's "
                                     f"block does not hold; build it with normalize=False, or use SAGEConv or "
                                     f"GraphConv")
                p = getattr(sub, "dropout", 0.0)
                p = max(p if isinstance(p, float) else 0.0, sub.p if isinstance(sub, nn.Dropout) else 0.0,
                        _graph_dropout(sub))
                if distributed and p > 0:
                    raise InputError(f"expected no dropout inside {name} (layer {i}, {sub_name or 'itself'}) in a "
                                     f"multi-process layout (got p={p}): its draws cannot be keyed by node or edge; "
                                     f"give the dropout between layers (from_pyg(..., dropout=p)), where it is keyed")


def _graph_dropout(module) -> float:
    """The largest rate of a dropout function a ``torch.fx`` graph calls (``to_hetero`` of a model that calls
    ``F.dropout``), 0 for anything else."""
    import torch.fx
    from torch.nn import functional as F

    if not isinstance(module, torch.fx.GraphModule):
        return 0.0
    drops = (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout, torch.dropout)
    rates = [n.kwargs.get("p", n.args[1] if len(n.args) > 1 else 0.5) for n in module.graph.nodes
             if n.op == "call_function" and n.target in drops]
    return max((float(r) for r in rates if isinstance(r, (int, float))), default=0.0)


def from_pyg_hetero(modules: list, types: NodeTypes, *, width: int = 64, featureless: str = "embedding",
                    act="relu", dropout: float = 0.0) -> PyGHeteroModel:
    """A fullgraph model from a list of PyG's heterogeneous modules (module docstring), then node-wise
    modules (a ``Linear`` to the classes) as ``post``; ``width``: a featureless type's table width."""
    from fullgraph.models.pyg_hetero import hetero_part

    modules = list(modules)
    convs = [m for m in modules if hetero_part(m)]
    if not convs or modules[: len(convs)] != convs:
        raise InputError(f"expected PyG's heterogeneous modules first, then node-wise modules (got "
                         f"{', '.join(type(m).__name__ for m in modules) or 'an empty list'})")
    rest = modules[len(convs):]
    head = None if not rest else rest[0] if len(rest) == 1 else nn.Sequential(*rest)
    first = TypedColumns(types, width, featureless)
    columns, in_width, layers = first.columns(), first.out_width, []
    stages = [cut for module in convs for cut in _cut(module, types)]  # (module, whether act and dropout follow)
    for i, (module, between) in enumerate(stages):
        last = i == len(stages) - 1
        layer = PyGHeteroLayer(module, types, columns, in_width, act=act if between else None,
                               p=dropout if between else 0.0, last=last)
        layers.append(layer)
        in_width = layer.out_width
        columns = [(0, in_width)] * types.num_types
    return PyGHeteroModel(types, layers, first, head)


def _cut(module: nn.Module, types: NodeTypes) -> list[tuple[nn.Module, bool]]:
    """A whole ``to_hetero`` model's stages, where it cuts into a chain (``models.pyg_hetero_split``), each
    but the last followed by nothing of fullgraph's own (the model's own steps are inside); else itself."""
    from fullgraph.models.pyg_hetero_split import split_to_hetero

    stages = split_to_hetero(module, types.names) if hops(module) > 1 else None
    if not stages:
        return [(module, True)]
    return [(m, i == len(stages) - 1) for i, m in enumerate(stages)]
