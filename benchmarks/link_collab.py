"""Link prediction at ogbl-collab's size (issue 53 §3) on ``write_synthetic_ogb_link``'s folder: training, the pair
exchange's bytes, and the time to a Hits@50 target against PyG's ``LinkNeighborLoader``.

    nice -n 19 .venv/bin/python benchmarks/link_collab.py                    # full size, every part
    nice -n 19 .venv/bin/python benchmarks/link_collab.py --nodes 5000 --edges 30000 --budget-s 30 --out-dir /tmp/x

Every side: GCN 2 x 128 over the weighted graph ``load_link_graph`` reads, dot decoder, dropout 0, Adam (``--lr``,
no weight decay), one uniform negative per positive. ``train``: ``fullgraph train --task link --edge-batch B``, one
process, evaluated every epoch, stopped once its training + evaluation took ``--budget-s``. ``exchange``: under
``--parallel graph --nprocs P``, each epoch's ledger ``link/*`` bytes against ``plan.link.link_epoch_volume`` over
the run's partition, and ``fullgraph plan --task link --json``'s (epoch 1). ``tta``: the ``train`` run against
``GCNConv`` x 2 (``gcn_norm`` per sampled subgraph) on ``LinkNeighborLoader(num_neighbors=--fanouts, edge_label_index=
training pairs, batch_size=B, neg_sampling=binary 1:1, shuffle=True)``, evaluated after every epoch by a full-graph
forward on the same pairs (``tasks.link_metrics``); time = training + evaluation, set-up apart; target ``--target``,
else 95% of the lower best validation Hits@50.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import MappingProxyType

import torch
from torch.nn import functional as F

from fullgraph.config import TrainConfig
from fullgraph.data.formats.ogb_link import read_split_file
from fullgraph.data.load import load_link_graph
from fullgraph.data.synthetic.ogb_link import write_synthetic_ogb_link
from fullgraph.models import GCN
from fullgraph.ops.block import Block
from fullgraph.parallel.setup import node_parts, prepare_partition_dir
from fullgraph.plan.link import link_epoch_volume
from fullgraph.tasks import LinkTask
from fullgraph.tasks.link_metrics import link_metric

from _harness import REPO, environment, hwm_bytes, print_header, reset_hwm, write_json
from _harness import train as fg_train
from _tta_runs import curve_stats, run_fullgraph
from time_to_accuracy import _sampler_versions

PARTS, LINK = ("train", "exchange", "tta"), ("link/index", "link/fwd", "link/bwd")
SETTINGS = MappingProxyType({"model": "gcn", "layers": 2, "hidden": 128, "dropout": 0.0, "weight_decay": 0.0,
                             "decoder": "dot", "negatives": 1, "metric": "hits@50"})
LEVELS, TARGET_SHARE, MIB, TIMEOUT_S, MAX_EPOCHS = (0.1, 0.2, 0.3, 0.4, 0.5), 0.95, 1 << 20, 3600.0, 1000
SEED = 0  # fullgraph plan draws the pairs of seed 0


@contextlib.contextmanager
def watch():
    """A dict: other processes' CPU over the block in cores (``/proc/stat`` less this tree's), the 1-min loads."""
    def _cpu():
        ticks, t = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]], os.times()
        return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"), sum(t[:4])
    out, t, (busy, own), avg = {}, time.perf_counter(), _cpu(), os.getloadavg()[0]
    yield out
    wall, (busy2, own2) = max(time.perf_counter() - t, 1e-9), _cpu()
    out.update(foreign_cores=max(0.0, (busy2 - busy - own2 + own) / wall), load_1min=[avg, os.getloadavg()[0]])


def load_text(r: dict | None) -> str:
    return f"{r['foreign_cores']:.2f} ({r['load_1min'][0]:.1f}-{r['load_1min'][1]:.1f})" if r else "-"


def table(cols: str, rows: list) -> list[str]:
    names = [c.strip() for c in cols.split(",")]
    return ["| " + " | ".join(n.rstrip(">") for n in names) + " |",
            "| " + " | ".join("---:" if n.endswith(">") else "---" for n in names) + " |",
            *("| " + " | ".join(map(str, r)) + " |" for r in rows)]


def options(args, **more) -> dict:
    return {"dataset": str(args.folder), "task": "link", **SETTINGS, "lr": args.lr, "edge_batch": args.edge_batch,
            "seed": SEED, **more}


def flags(opts: dict) -> list[str]:
    return [x for k, v in opts.items() for x in (f"--{k.replace('_', '-')}", str(v))]


def part_train(args) -> dict:
    print(f"\n== train: fullgraph, one process, {args.threads} threads, capped at {args.budget_s:g} s", flush=True)
    argv = flags(options(args, threads=args.threads, epochs=MAX_EPOCHS, progress="none"))
    with watch() as load:
        r = run_fullgraph(argv, args.work / "run-train", time_limit=args.budget_s, setup_limit=TIMEOUT_S)
    children_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # the driver's first child: the run
    edges = read_split_file(args.folder / "split" / "time" / "train.pt")["edge"].shape[0]
    steps = math.ceil(edges / args.edge_batch) if args.edge_batch else 1
    med = lambda k: statistics.median([e[k] for e in r["epochs"][1:] or r["epochs"]] or [float("nan")])  # noqa: E731
    r |= {"method": "fullgraph", "batch": args.edge_batch, "load": load, "train_edges": edges, "steps_per_epoch": steps,
          **curve_stats(r["epochs"]), "epoch_time_s": med("epoch_time_s"), "eval_time_s": med("eval_time_s"),
          "s_per_step": med("epoch_time_s") / steps}
    r["peak_rss_bytes"] = r.get("peak_rss_bytes") or children_rss  # summary.json's, when the run got to write one
    print("\n".join(train_lines(r)), flush=True)
    return r


def train_lines(r: dict) -> list[str]:
    lines = table("epoch>, loss>, Hits@50 train>, val>, test>, epoch s>, eval s>",
                  [(e["epoch"], *(f"{e.get(k, float('nan')):.4f}" for k in ("loss", "train_metric", "val_metric",
                    "test_metric")), f"{e['epoch_time_s']:.1f}", f"{e['eval_time_s']:.1f}") for e in r["epochs"]])
    if r.get("error") or not r["epochs"]:
        return lines + [f"* error: {r.get('error')}"]
    return lines + ["", f"* best val Hits@50 {r['best_val']:.4f} at epoch {r['best_epoch']}, test {r['test']:.4f}; "
                    f"{r['n_epochs']} epochs ({'stopped by the budget' if r['stopped'] else 'all run'}); "
                    f"{r['train_edges']:,} training edges, {r['steps_per_epoch']} steps of {r['batch']:,} per epoch",
                    f"* epoch {r['epoch_time_s']:.1f} s (median after the first; {r['s_per_step']:.2f} s per step), "
                    f"evaluation {r['eval_time_s']:.1f} s; set-up {r['setup_s']:.1f} s; peak RSS "
                    f"{r['peak_rss_bytes'] / MIB:,.0f} MiB; foreign cores (load) {load_text(r['load'])}",
                    f"* command: `python {' '.join(r['cmd'][1:])}`"]


def part_exchange(args) -> dict:
    P, width = args.nprocs, SETTINGS["hidden"]
    print(f"\n== exchange: --parallel graph --nprocs {P}, {args.exchange_epochs} epochs", flush=True)
    opts = options(args, parallel="graph", nprocs=P)
    argv = [*flags(opts | {"threads": 1, "epochs": args.exchange_epochs, "progress": "none"}), "--overwrite"]
    with watch() as load:
        r = fg_train(argv, args.work / "run-exchange", timeout=TIMEOUT_S)
    out = {"cmd": ["python", "-m", "fullgraph", "train", *argv, "--out", str(args.work / "run-exchange")],
           "wall_s": r["wall_s"], "load": load}
    if "error" in r:
        print(f"   error: {r['error']}", flush=True)
        return out | {"error": r["error"]}
    cfg = TrainConfig.of(**opts)
    graph, split = load_link_graph(cfg)
    used, cached = r["summary"]["config"]["partition_dir"], str(prepare_partition_dir(cfg, P, graph=graph))
    node_part, task, s = node_parts(used, graph.num_nodes), LinkTask(cfg, split), r["summary"]
    out |= {"partition_dir": used, "partition_is_cached_one": used == cached, "epoch_time_s": s.get("epoch_time_s"),
            "peak_rss_bytes_per_rank": s.get("peak_rss_bytes_per_rank"), "epochs": []}
    for rec in r["metrics"]:
        ledger = {k: int(rec["comm_bytes"].get(k, 0)) for k in LINK}
        counted = link_epoch_volume(task, rec["epoch"], node_part, width, P)
        out["epochs"].append({"epoch": rec["epoch"], "steps": task.steps(rec["epoch"]), "ledger": ledger,
                              "counted": counted, "equal": ledger == counted,
                              "other_ledger": {k: v for k, v in rec["comm_bytes"].items() if k not in LINK}})
    keys = ("dataset", "task", "model", "layers", "hidden", "edge_batch", "negatives", "decoder")
    cmd = [sys.executable, "-m", "fullgraph", "plan", *flags({k: opts[k] for k in keys}), "--nprocs", str(P),
           "--layout", "graph", "--json"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S)
    ok = proc.returncode == 0 and "{" in proc.stdout  # the JSON follows any line printed before it
    out["plan_cli"] = {"cmd": cmd, **({"by_category": json.loads(proc.stdout[proc.stdout.index("{"):])["layouts"][0][
        "by_category"]} if ok else {"error": " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])})}
    cli = out["plan_cli"].get("by_category", {})
    first = out["epochs"][0]["ledger"] if out["epochs"] else None
    out["equal"] = {"every_epoch": all(e["equal"] for e in out["epochs"]), "plan_cli": {k: cli.get(k) for k in LINK}
                    == first}
    print("\n".join(exchange_lines(out)), flush=True)
    return out


def exchange_lines(x: dict) -> list[str]:
    if x.get("error") or not x["epochs"]:
        return [f"* error: {x.get('error')}", f"* command: `{' '.join(x['cmd'])}`"]
    lines = table("epoch>, steps>, category, ledger bytes>, link_epoch_volume>, equal, ledger / step>, counted / step>",
                  [(e["epoch"], e["steps"], k, f"{e['ledger'][k]:,}", f"{e['counted'][k]:,}",
                    "yes" if e["ledger"][k] == e["counted"][k] else "**no**", f"{e['ledger'][k] / e['steps']:,.1f}",
                    f"{e['counted'][k] / e['steps']:,.1f}") for e in x["epochs"] for k in LINK])
    first, cli = x["epochs"][0], x["plan_cli"].get("by_category", {})
    lines += ["", "Epoch 1, bytes (per step):", ""] + table(
        "source, " + ", ".join(f"{k}>" for k in LINK) + ", equal to the ledger",
        [(name, *(f"{v[k]:,} ({v[k] / first['steps']:,.1f})" if k in v else "-" for k in LINK),
          "yes" if all(v.get(k) == first["ledger"][k] for k in LINK) else "**no**") for name, v in
         (("ledger (metrics.jsonl)", first["ledger"]), ("link_epoch_volume", first["counted"]), ("plan --json", cli))])
    lines += ["", "Other categories, epoch 1, ledger / `fullgraph plan`: " + ", ".join(
        f"{k} {v:,} / {cli.get(k, 0):,}" for k, v in first["other_ledger"].items())]
    peaks = ", ".join(f"{b / MIB:,.0f}" for b in x.get("peak_rss_bytes_per_rank") or [])
    return lines + ["", f"* partition {x['partition_dir']} (prepare_partition_dir's cached one: "
                    f"{x['partition_is_cached_one']}); epoch {x['epoch_time_s'] or float('nan'):.1f} s; peak RSS per "
                    f"rank {peaks} MiB; wall {x['wall_s']:.0f} s; foreign cores (load) {load_text(x['load'])}",
                    f"* commands: `{' '.join(x['cmd'])}`; `python {' '.join(x['plan_cli']['cmd'][1:])}`"]


def pyg_convs(in_dim: int):
    """``GCNConv(F, H) → ReLU → GCNConv(H, H)`` (``--model gcn``), fed adjacencies ``gcn_norm`` normalized."""
    from torch_geometric.nn import GCNConv

    dims = [in_dim] + [SETTINGS["hidden"]] * SETTINGS["layers"]
    return torch.nn.ModuleList(GCNConv(dims[i], dims[i + 1], normalize=False) for i in range(len(dims) - 1))


def encode(convs, x, adj, weight=None):
    for conv in convs[:-1]:
        x = conv(x, adj, weight).relu()
    return convs[-1](x, adj, weight)


def pyg_inputs(args) -> dict:
    """What ``fullgraph train`` reads as a PyG ``Data`` (``edge_weight``); the normalized ``adj_t`` of evaluation."""
    from torch_geometric.data import Data
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import to_torch_csr_tensor

    t0 = time.perf_counter()
    graph, split = load_link_graph(TrainConfig.of(**options(args)))
    n, (src, dst) = graph.num_nodes, graph.edges()
    ei, w = torch.stack([src, dst]), torch.ones(src.numel()) if graph.edge_weight is None else graph.edge_weight
    data = Data(x=graph.dense_x().float(), edge_index=ei, edge_weight=w, num_nodes=n)
    nei, nw = gcn_norm(ei, w, n, add_self_loops=True)
    adj_t = to_torch_csr_tensor(nei.flip(0), nw, size=(n, n))
    return {"graph": graph, "data": data, "split": split, "adj_t": adj_t, "norm": (nei, nw),
            "load_s": time.perf_counter() - t0}


@torch.no_grad()
def parity(inp: dict) -> dict:
    """The largest difference of fullgraph's and PyG's embeddings (same weights), over ``adj_t`` and edge lists."""
    d, L, H = inp["data"], SETTINGS["layers"], SETTINGS["hidden"]
    ours, theirs = GCN(d.num_features, H, H, L, dropout=0.0).eval(), pyg_convs(d.num_features)
    want = ours(Block.from_graph(inp["graph"], "gcn"), d.x)
    for conv, layer in zip(theirs, ours.layers):
        conv.lin.weight.copy_(layer.weight.t())
        conv.bias.copy_(layer.bias)
    return {"max_abs_diff_adj_t": float((encode(theirs, d.x, inp["adj_t"]) - want).abs().max()),
            "max_abs_diff_edge_index": float((encode(theirs, d.x, *inp["norm"]) - want).abs().max()),
            "max_abs_embedding": float(want.abs().max())}


def pyg_run(inp: dict, batch: int, args) -> dict:
    """Epochs of ``LinkNeighborLoader`` steps, each followed by a full-graph evaluation, until ``--budget-s``."""
    from torch_geometric.loader import LinkNeighborLoader
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.sampler import NegativeSampling

    dot = lambda z, pairs: (z[pairs[:, 0]] * z[pairs[:, 1]]).sum(-1)  # noqa: E731 - the dot decoder
    torch.manual_seed(SEED)
    t0, budget, name = time.perf_counter(), args.budget_s, f"pyg-b{batch}"
    model = pyg_convs(inp["data"].num_features)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=SETTINGS["weight_decay"])
    loader = LinkNeighborLoader(inp["data"], num_neighbors=list(args.fanouts), batch_size=batch, shuffle=True,
                                edge_label_index=inp["split"].train.t().contiguous(), num_workers=0,
                                neg_sampling=NegativeSampling("binary", amount=SETTINGS["negatives"]))
    setup, epochs, spent, reset_ok = time.perf_counter() - t0, [], 0.0, reset_hwm()
    with watch() as load:
        for epoch in range(1, MAX_EPOCHS + 1):
            model.train()
            t1, losses = time.perf_counter(), []
            for b in loader:
                opt.zero_grad()
                z = encode(model, b.x, *gcn_norm(b.edge_index, b.edge_weight, b.num_nodes, add_self_loops=True))
                loss = F.binary_cross_entropy_with_logits(dot(z, b.edge_label_index.t()), b.edge_label.float())
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
                if spent + time.perf_counter() - t1 > budget:
                    break
            t2 = time.perf_counter()
            rec = {"epoch": epoch, "loss": statistics.fmean(losses), "steps": len(losses), "epoch_time_s": t2 - t1}
            model.eval()
            with torch.no_grad():
                z, s = encode(model, inp["data"].x, inp["adj_t"]), inp["split"]
            rec |= {f"{k}_metric": link_metric("hits@50", dot(z, getattr(s, k)), dot(z, getattr(s, k + "_neg")))
                    for k in ("val", "test")} | {"eval_time_s": time.perf_counter() - t2}
            epochs.append(rec)
            spent += rec["epoch_time_s"] + rec["eval_time_s"]
            print(f"   {name} epoch {epoch}: loss {rec['loss']:.4f}, Hits@50 val {rec['val_metric']:.4f} test "
                  f"{rec['test_metric']:.4f} ({len(losses)} steps, {t2 - t1:.1f} s + eval {rec['eval_time_s']:.1f} s)",
                  flush=True)
            if spent > budget:
                break
    return {"method": name, "batch": batch, "epochs": epochs, "setup_s": setup + inp["load_s"],
            "stopped": "budget" if spent > budget else None, "load": load,
            "peak_rss_bytes": hwm_bytes() if reset_ok else None, "steps_per_epoch": len(loader)}


def part_tta(args, result: dict) -> dict:
    print(f"\n== tta: fullgraph (the train part's run) against LinkNeighborLoader, batches {args.pyg_batches}, "
          f"fanouts {args.fanouts}, {args.budget_s:g} s per run", flush=True)
    fg = result.get("train") or part_train(args)
    try:  # LinkNeighborLoader raises ImportError without torch-sparse or pyg-lib
        torch.set_num_threads(args.threads)
        inp = pyg_inputs(args)
        check = parity(inp)
        runs = [pyg_run(inp, b, args) for b in args.pyg_batches]
    except Exception as e:  # noqa: BLE001 - recorded: the fullgraph side still reports
        print(f"   PyG side failed: {type(e).__name__}: {e}", flush=True)
        return tta_summary([fg], args, {"error": f"{type(e).__name__}: {e}"})
    return tta_summary([fg, *runs], args, {"parity": check})


def tta_summary(runs: list[dict], args, extra: dict) -> dict:
    best = {r["method"]: curve_stats(r["epochs"])["best_val"] for r in runs if r["epochs"]}
    pyg = [v for m, v in best.items() if m != "fullgraph"]
    target = args.target or (round(TARGET_SHARE * min(best.get("fullgraph", 0), max(pyg)), 4) if pyg else float("nan"))
    rows = []
    for r in runs:
        s, n = curve_stats(r["epochs"], target), max(1, len(r["epochs"]))
        rows.append({"method": r["method"], "lr": args.lr, "batch": r["batch"], **s, "setup_s": r["setup_s"],
                     "s_per_epoch": s["train_eval_s"] / n, "steps_per_epoch": r.get("steps_per_epoch"),
                     "capped": r.get("stopped"), "load": r.get("load"), "peak_rss_bytes": r.get("peak_rss_bytes"),
                     "levels": {str(v): curve_stats(r["epochs"], v)["time_to_target_s"] for v in LEVELS}})
    fg = next((r for r in rows if r["method"] == "fullgraph"), None)
    ratios = {r["method"]: fg["time_to_target_s"] / r["time_to_target_s"] if fg and 0 < r["time_to_target_s"] <
              float("inf") else None for r in rows if r["method"] != "fullgraph"}  # None: PyG missed the target
    out = extra | {"target": target, "rows": rows, "ratios": ratios, "curves": {r["method"]: r["epochs"] for r in runs}}
    print("\n".join(tta_lines(out)), flush=True)
    return out


def tta_lines(t: dict) -> list[str]:
    lines = [f"Target: validation Hits@50 ≥ {t['target']:.4f}", ""] + table(
        "method, lr>, batch>, best val>, test>, to best (s)>, to target (s)>, set-up (s)>, epochs>, steps/epoch>, "
        "s/epoch>, capped, peak RSS MiB>, foreign cores (load), to " + " / ".join(f"{v:g}" for v in LEVELS) + " (s)>",
        [(r["method"], f"{r['lr']:g}", f"{r['batch']:,}", f"{r['best_val']:.4f}", f"{r['test']:.4f}",
          f"{r['time_to_best_s']:.1f}", f"{r['time_to_target_s']:.1f}", f"{r['setup_s']:.1f}", r["n_epochs"],
          r["steps_per_epoch"] or "-", f"{r['s_per_epoch']:.1f}", "yes" if r["capped"] else "no",
          f"{r['peak_rss_bytes'] / MIB:,.0f}" if r.get("peak_rss_bytes") else "-", load_text(r["load"]),
          " / ".join(f"{r['levels'][str(v)]:.1f}" for v in LEVELS)) for r in t["rows"]])
    lines += [""] + [f"* time to target, fullgraph / {m}: " + (f"{q:.3f}x" if q else "- (PyG missed it)")
                     for m, q in t["ratios"].items()]
    p = t.get("parity") or {}
    lines += [f"* encoder parity (same weights): max |PyG - fullgraph| {p['max_abs_diff_adj_t']:.2e} over adj_t, "
              f"{p['max_abs_diff_edge_index']:.2e} over edge lists (max |h| {p['max_abs_embedding']:.2f})"] if p else []
    return lines + ([f"* error: {t['error']}"] if t.get("error") else [])


def write_md(result: dict, path: Path) -> Path:
    lines = [f"# Link prediction at ogbl-collab's layout and size, {result['date']}", "", *result["header"],
             result["config"], ""]
    for part, title, fn in (("train", "train: fullgraph, one process", train_lines), ("exchange", "exchange: the "
                            "pair exchange's bytes", exchange_lines), ("tta", "tta: time to Hits@50", tta_lines)):
        if part in result:
            when = f"{result.get(part + '_date', result['date'])}, {result[part + '_seconds']:.0f} s"
            lines += [f"## {title} ({when})", "", *fn(result[part]), ""]
    path.write_text("\n".join(lines) + "\n")
    return path


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--parts", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    p.add_argument("--nodes", type=int, default=235_868, help="nodes of the synthetic folder (ogbl-collab's)")
    p.add_argument("--edges", type=int, default=1_285_465, help="edge rows of the synthetic folder (ogbl-collab's)")
    p.add_argument("--edge-batch", type=int, default=65536, help="fullgraph's positives per step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=2, help="torch threads, fullgraph's one process and PyG's")
    p.add_argument("--budget-s", type=float, default=600.0, help="seconds of training + evaluation per run")
    p.add_argument("--nprocs", type=int, default=4, help="exchange: graph-parallel ranks")
    p.add_argument("--exchange-epochs", type=int, default=2)
    p.add_argument("--pyg-batches", default="65536,8192", help="LinkNeighborLoader positives per step")
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--target", type=float, default=0.0, help=f"Hits@50 target (0: {TARGET_SHARE:g} x the lower best)")
    p.add_argument("--work", default="/tmp/link_collab", help="the folder, runs and partition cache")
    p.add_argument("--out-dir", default="benchmarks/results/link", help="where collab.json and collab.md go")
    args = p.parse_args(argv)
    args.parts, args.work = args.parts.split(","), Path(args.work).resolve()
    args.pyg_batches, args.fanouts = ([int(b) for b in v.split(",") if b] for v in (args.pyg_batches, args.fanouts))
    if set(args.parts) - set(PARTS):
        p.error(f"expected parts among {', '.join(PARTS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    started, env, now = time.perf_counter(), environment(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    os.environ["FULLGRAPH_CACHE"] = str(args.work / "cache")  # the runs, plan and this process share partitions
    header = print_header(env, threads=args.threads, machine_extra=[f"1-min load {os.getloadavg()[0]:.2f} at start",
                          f"nice {os.nice(0)}"], versions_extra=_sampler_versions())
    args.folder = args.work / f"collab-{args.nodes}-{args.edges}"  # "collab" in the name: --metric auto is Hits@50
    if not (args.folder / "split" / "time" / "test.pt").is_file():
        write_synthetic_ogb_link(args.folder, nodes=args.nodes, edges=args.edges, seed=SEED)
    config = (f"config:   {args.folder.name} ({args.nodes:,} nodes, {args.edges:,} edge rows); {dict(SETTINGS)}; lr "
              f"{args.lr:g}; edge batch {args.edge_batch:,}; budget {args.budget_s:g} s per run; threads "
              f"{args.threads}; exchange P={args.nprocs}, {args.exchange_epochs} epochs, 1 thread per rank; PyG "
              f"batches {args.pyg_batches}, fanouts {args.fanouts}")
    print(config, flush=True)
    out = Path(args.out_dir) / "collab.json"  # the parts not run now are kept from an earlier collab.json there
    earlier, others = json.loads(out.read_text()) if out.is_file() else {}, set(PARTS) - set(args.parts)
    kept = {k: v for k, v in earlier.items() if k.split("_")[0] in others}
    kept |= {p + "_date": earlier["date"] for p in others if p in earlier and p + "_date" not in earlier}
    result = kept | {"date": now, "header": header, "config": config, "machine": env["machine"], "args": vars(args),
                     "versions": env["versions"], "settings": dict(SETTINGS), "load_avg_at_start": os.getloadavg()}
    for part in args.parts:
        t0 = time.perf_counter()
        result[part] = {"train": part_train, "exchange": part_exchange, "tta": lambda a: part_tta(a, result)}[part](
            args)
        result[part + "_seconds"], result[part + "_date"] = time.perf_counter() - t0, now
        write_json(out, result)  # kept as it goes
    result["load_avg_at_end"], result["total_s"] = os.getloadavg(), time.perf_counter() - started
    write_json(out, result)
    print(f"\ntotal {result['total_s'] / 60:.1f} min; wrote {out} and {write_md(result, out.with_suffix('.md'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
