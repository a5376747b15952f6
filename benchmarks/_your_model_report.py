"""your_model.py's report: each configuration against the better PyG form, and the single-process
targets it is held to."""

from __future__ import annotations

from types import MappingProxyType

TARGETS = MappingProxyType({"time": 1.1, "memory": 1.0})  # single process: fullgraph / better PyG form
FOREIGN_BUSY_CORES = 0.2
MIB = 1 << 20


def label(system: str) -> str:
    if system == "fullgraph":
        return "fullgraph (1 process)"
    if system.startswith("fullgraph-graph"):
        return f"fullgraph graph P={system.removeprefix('fullgraph-graph')}"
    return f"PyG {system.removeprefix('pyg-')}"


def best_pyg(runs: dict) -> dict:
    """metric -> the PyG form that did best on it."""
    ok = {s: r for s, r in runs.items() if s.startswith("pyg-") and "error" not in r and "skipped" not in r}
    if not ok:
        return {}
    return {"time": min(ok, key=lambda s: ok[s]["epoch_time_s"]),
            "memory": min(ok, key=lambda s: ok[s]["peak_rss_bytes"])}


def print_table(runs: dict, best: dict) -> list[str]:
    head = (f"{'configuration':<24}{'epoch s':>9}{'/ PyG':>8}{'peak MiB':>10}{'/ PyG':>8}{'load':>6}"
            f"{'last loss':>11}{'test acc':>9}  ranks MiB")
    lines = [head]
    t_ref = runs[best["time"]]["epoch_time_s"] if best else None
    m_ref = runs[best["memory"]]["peak_rss_bytes"] if best else None
    for system, r in runs.items():
        if "error" in r or "skipped" in r:
            why = f"failed: {r['error']}" if "error" in r else f"skipped: {r['skipped']}"
            lines.append(f"{label(system):<24} {why}")
            continue
        tr = f"{r['epoch_time_s'] / t_ref:.3f}" if t_ref else "-"
        mr = f"{r['peak_rss_bytes'] / m_ref:.3f}" if m_ref else "-"
        per_rank = r.get("peak_rss_bytes_per_rank", []) if r.get("nprocs", 1) > 1 else []
        ranks = " ".join(f"{b / MIB:,.0f}" for b in per_rank)
        busy = " C" if r["foreign_cores"] > FOREIGN_BUSY_CORES else ""
        lines.append(f"{label(system):<24}{r['epoch_time_s']:>9.3f}{tr:>8}{r['peak_rss_bytes'] / MIB:>10,.0f}{mr:>8}"
                     f"{r['foreign_cores']:>5.1f}{busy:<2}{r['losses'][-1]:>9.4f}{r['test_acc']:>9.4f}  {ranks}")
    for line in lines:
        print("   " + line)
    return lines


def checks(runs: dict, best: dict) -> list[dict]:
    fg = runs.get("fullgraph", {})
    if not best or "error" in fg or not fg:
        return []
    out = []
    for metric, key in (("time", "epoch_time_s"), ("memory", "peak_rss_bytes")):
        ratio = fg[key] / runs[best[metric]][key]
        out.append({"check": f"single-process {metric}: fullgraph / {label(best[metric])} <= {TARGETS[metric]}",
                    "value": ratio, "pass": ratio <= TARGETS[metric],
                    "contended": max(fg["foreign_cores"], runs[best[metric]]["foreign_cores"]) > FOREIGN_BUSY_CORES})
    return out


def report(args, runs: dict) -> tuple[dict, list[str], list[dict]]:
    """The graph, the table against the better PyG form, and the checks against the targets, printed."""
    info = next((r["graph"] for r in runs.values() if "graph" in r), None)
    if info:
        print(f"\n== {info['name']}: {info['nodes']:,} nodes, {info['edges']:,} directed edges, {info['features']:,} "
              f"features ({info['x_layout']} in fullgraph, dense in PyG), {info['classes']} classes, "
              f"{info['train_nodes']:,} train nodes")
    best = best_pyg(runs)
    print(f"-- GraphSAGE {args.layers} x {args.hidden}, dropout {args.dropout}; ratios against the better PyG form: "
          + (f"time {label(best['time'])}, memory {label(best['memory'])}" if best else "none ran"))
    table = print_table(runs, best)
    print(f"   (peak of a graph-parallel row: its largest rank; load = cores used by other processes during the run, "
          f"C = contended, > {FOREIGN_BUSY_CORES})")
    result_checks = checks(runs, best)
    print("\n=== checks ===")
    for c in result_checks:
        extra = " (timed under contention)" if c["contended"] else ""
        print(f"  {'PASS' if c['pass'] else 'FAIL'}  {c['check']}: {c['value']:.3f}{extra}")
    return best, table, result_checks
