"""Tasks: what a model's output means and what it is trained and judged by, registered like models and
layouts (docs/design.md, "tasks").

A task says how wide the model's output is, how many weight updates an epoch makes and what each
one's loss is (an engine asks the task, whatever the layout), the metric that selects the best epoch,
and what ``evaluate`` and ``predict`` report. ``node``: node labels (``tasks.node``); ``link``: edges
between nodes (``tasks.link``), trained on a ``LinkSplit`` (``fullgraph.data.link_split``);
``node-regression``: a number per node (``tasks.regression``).
"""

from __future__ import annotations

from fullgraph.errors import InputError
from fullgraph.tasks.edge import EdgeRegressionTask, EdgeTask
from fullgraph.tasks.link import LinkTask
from fullgraph.tasks.node import NodeTask
from fullgraph.tasks.regression import RegressionTask
from fullgraph.options import METRICS, PAIR_TASKS
from fullgraph.tasks.options import DECODERS, LINK_ONLY, TASK_NAMES, TASK_OPTIONS, TaskOptions

__all__ = ["TASKS", "NodeTask", "LinkTask", "RegressionTask", "EdgeTask", "EdgeRegressionTask", "TaskOptions",
           "TASK_NAMES", "DECODERS", "task_for", "check_task", "output_width", "with_task_head"]

TASKS = {"node": NodeTask, "link": LinkTask, "node-regression": RegressionTask, "edge": EdgeTask,
         "edge-regression": EdgeRegressionTask}
"""Every task by its ``--task`` name."""
assert tuple(TASKS) == TASK_NAMES, "every --task value needs exactly one task"
assert set(METRICS) == {"auto", *(m for task in TASKS.values() for m in task.metrics)}, \
    "every --metric value belongs to a task"

_WHOSE = {"node": "a node labels' metric", "link": "a links' metric", "node-regression": "a regression's metric"}
_NODE_ONLY = {"prune": "computes only the rows the node labels' loss reads"}


def task_for(cfg, split=None):
    """The task ``cfg`` trains; a pair task's split is ``split``, else the one the launcher wrote for the
    ranks (``--link-file``), else drawn from the graph (``data.load.load_link_graph``, ``load_edge_split``)."""
    name = cfg.task.name
    if name not in PAIR_TASKS:
        return TASKS[name](cfg)
    if split is None and name == "link":
        from fullgraph.data.link_split import LinkSplit
        from fullgraph.data.load import load_link_graph

        split = LinkSplit.load(cfg.task.link_file) if cfg.task.link_file else load_link_graph(cfg)[1]
    elif split is None:
        from fullgraph.data.edge_labels import EdgeSplit
        from fullgraph.data.load import load_edge_split

        split = EdgeSplit.load(cfg.task.link_file) if cfg.task.link_file else load_edge_split(cfg)
    return TASKS[name](cfg, split)


def output_width(cfg, num_classes: int) -> int:
    """The width of the model's output under ``cfg``'s task: classes, or a pair encoder's embedding."""
    return TASKS[cfg.task.name].out_width(num_classes, cfg.model.hidden)


def with_task_head(model, cfg, width: int, num_relations: int | None = None, task=None):
    """``model`` with what its task adds to it: a pair task's decoder (``tasks.decoders``; ``num_relations``:
    the graph's relation count where links are typed, ``None`` where they are not; an edge task's
    outputs from ``task``, the run's), else nothing."""
    if cfg.task.name not in PAIR_TASKS:
        return model
    from fullgraph.tasks.decoders import attach_decoder

    if cfg.task.name == "link":
        return attach_decoder(model, cfg.task.decoder, width, num_relations)
    task = task or task_for(cfg)
    return attach_decoder(model, cfg.task.decoder, width, num_relations, task.outputs, task.split.edge_dim)


def check_task(cfg) -> None:
    """The task's rules against the other sections, one line each."""
    t, defaults = cfg.task, TaskOptions()
    own = TASKS[t.name].metrics
    if cfg.optimization.metric not in ("auto",) + own:
        theirs = next(name for name, task in TASKS.items() if cfg.optimization.metric in task.metrics)
        raise InputError(f"expected --metric auto or one of {', '.join(own)} with --task {t.name} (got "
                         f"--metric {cfg.optimization.metric}, {_WHOSE[theirs]}): pick one of those, or add "
                         f"--task {theirs}")
    takes = TASK_OPTIONS.get(t.name.removesuffix("-regression"), ())
    changed = [o for o in LINK_ONLY if o not in takes and getattr(t, o) != getattr(defaults, o)]
    if changed:
        flags = " and ".join("--" + o.replace("_", "-") for o in changed)
        users = [name for name, opts in TASK_OPTIONS.items() if all(o in opts for o in changed)] or ["link"]
        raise InputError(f"expected {flags} only with --task {' or '.join(users)} (got --task {t.name}): leave them "
                         f"out, or add --task {users[0]}")
    if t.name in PAIR_TASKS:
        for option, why in _NODE_ONLY.items():
            if getattr(cfg.parallel, option):
                raise InputError(f"expected --{option} only with --task node or node-regression (got it with --task "
                                 f"{t.name}): it {why}")
