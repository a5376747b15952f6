"""``fullgraph plan``'s ranking: the layouts fastest first, whether the first two are told apart by more
than the timings' own spread, the one to pick, and the table.

Why a spread: the estimate's compute is the model's layers timed on this machine, and on a shared
machine one timing of a kernel can be 1.5 times another taken seconds later. Two identical
``plan --nprocs 4 --bandwidth-gbps 0.1`` calls gave 12.7 s and 13.1 s per epoch and switched their pick
from graph to hybrid (issue 50 §5): the gap between the two was smaller than the noise of the timings.
So every kernel is timed in rounds (``LayerTimer.settle``), and each layout's epoch is estimated once
per round, from that round's timings (``LayerTimer.using``): ``epoch_s_rounds``. Two layouts estimated
from the same round share its luck (a kernel both use was slow for both), so it is the gap between
them, round by round, that shows whether the timings can order them.

The tie rule (:func:`ties`): a layout B no faster than the fastest A (by their median estimates) ties
with it when the timings move the gap more than the gap is: when some round orders them the other way
(or evenly), or the gap between the medians is at most half the gap's range over the rounds (the
timings move it by more than its size, up or down). Then the plan
says so, in a line naming the fastest two, their estimates and the gap's range, rather than pretend to
know which is faster; and among those tied with the fastest it recommends the one with the fewest
processes, then the fewest bytes per epoch (the same time for less of the machine, and less exposed to
the network's own variation), so that two calls that meet the same tie pick the same layout.
"""

from __future__ import annotations

__all__ = ["gaps", "ties", "tied", "pick", "tie_line", "recommend", "render"]


def gaps(a: dict, b: dict) -> list[float]:
    """B's estimate less A's, round by round (``epoch_s_rounds``; their medians' where either has none)."""
    ra, rb = a.get("epoch_s_rounds") or [], b.get("epoch_s_rounds") or []
    return [y - x for x, y in zip(ra, rb)] or [b["epoch_s"] - a["epoch_s"]]


def ties(a: dict, b: dict) -> bool:
    """Whether B (no faster than A by the median estimates) ties with A: some round orders them the other
    way or evenly, or the gap between the medians is within half the gap's range over the rounds (the
    timings move it up or down by more than it is)."""
    g = gaps(a, b)
    return min(g) <= 0 or b["epoch_s"] - a["epoch_s"] <= (max(g) - min(g)) / 2


def tied(rows: list[dict]) -> list[dict]:
    """The fastest of ``rows`` (sorted fastest first) and every layout that ties with it (:func:`ties`)."""
    if not rows:
        return []
    return [rows[0]] + [r for r in rows[1:] if ties(rows[0], r)]


def pick(rows: list[dict]) -> dict | None:
    """The layout to recommend: the fastest, or among those tied with it (:func:`tied`), the one with the
    fewest processes, then the fewest bytes per epoch, then the fastest median."""
    group = tied(rows)
    if not group:
        return None
    return min(group, key=lambda r: (r["nprocs"], r["bytes_per_epoch"], r["epoch_s"]))


def name(row: dict) -> str:
    """A row's name in a sentence: its layout and process count."""
    return f"{row['layout']} (P={row['nprocs']})"


def tie_line(rows: list[dict]) -> str | None:
    """The line that says the first layouts are closer than the timings can tell apart; ``None`` when the
    fastest stands apart."""
    group = tied(rows)
    if len(group) < 2:
        return None
    a, b = group[0], group[1]
    g = gaps(a, b)
    more = f" (and {len(group) - 2} more layouts)" if len(group) > 2 else ""
    return (f"tie: {name(a)} at {a['epoch_s']:.3g} s ({_range(a)}) and {name(b)} at {b['epoch_s']:.3g} s "
            f"({_range(b)}){more}: {1e3 * (b['epoch_s'] - a['epoch_s']):.3g} ms apart, while the gap moved from "
            f"{1e3 * min(g):.3g} to {1e3 * max(g):.3g} ms over {len(g)} rounds of the layer timings; either may be "
            f"faster here, so time both with fullgraph train to choose")


def _range(r: dict) -> str:
    """A layout's estimates over the rounds, least to most."""
    rounds = r.get("epoch_s_rounds") or [r["epoch_s"]]
    return f"{min(rounds):.3g}-{max(rounds):.3g} s"


def recommend(rows: list[dict], network, machines=None) -> str:
    """The sentence that names the layout to run (:func:`pick`), its process count and flags, and why."""
    from fullgraph.plan.sizes import train_flags

    best = pick(rows)
    if best is None:
        return "no layout fits"
    fewest = min(rows, key=lambda r: r["bytes_per_epoch"])
    on = ("on one machine" if machines is not None and machines.count == 1
          else f"at {network.bandwidth_gbps:g} Gbit/s")
    fastest = rows[0]
    if best is not fastest:
        fewer = "fewer processes" if best["nprocs"] < fastest["nprocs"] else "fewer bytes per epoch"
        why = (f"it ties with the fastest estimate, {name(fastest)} at {fastest['epoch_s']:.3g} s, within the "
               f"spread of the layer timings, and takes {fewer}")
    elif best["nprocs"] == 1:
        why = f"one process is fastest {on}: splitting would add more communication and sharing than it saves"
    else:
        why = (f"communication is most of an epoch {on}" if best["comm_s"] > best["compute_s"]
               else f"computation dominates {on}, and it divides its work most evenly")
    text = (f"{best['layout']} with {best['nprocs']} process{'es' if best['nprocs'] > 1 else ''} "
            f"(fullgraph train {train_flags(best['nprocs'], best['options'])}): an estimated {best['epoch_s']:.3g} s "
            f"per epoch {on}, moving {_mb(best['bytes_per_epoch'])} per epoch")
    if best is fastest and fewest is not best:
        text += f" ({name(fewest)} moves least, {_mb(fewest['bytes_per_epoch'])}, but takes {fewest['epoch_s']:.3g} s)"
    return text + f"; {why}."


def _mb(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def render(result: dict) -> list[str]:
    """The plan as text: the setting, the table fastest first, bytes by category, what does not fit, the
    tie (where there is one) and the recommendation."""
    net, machines = result["network"], result["machines"]
    link = (f", {net['bandwidth_gbps']:g} Gbit/s, {net['latency_us']:g} us" if machines["count"] > 1 else "")
    sizes = ", ".join(map(str, result["sizes"]))
    out = [result["setting"],
           f"# plan: {result['graph']} ({result['nodes']} nodes, {result['edges']} edges), {result['model']} "
           f"{result['layers']} x {result['hidden']}, {result['nprocs']} processes on {machines['count']} "
           f"machine{'s' if machines['count'] > 1 else ''}{link}; each of P = {sizes} planned; memory model "
           f"{result['memory_model']}", "",
           "| rank | P | layout | threads/rank | MiB/epoch | peak MiB/rank | epoch s | epoch s by round "
           "| train: compute s | comm s | bubble s | eval s |",
           "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for i, r in enumerate(result["layouts"], 1):
        out.append(f"| {i} | {r['nprocs']} | {r['layout']} | {r['threads']} | {r['bytes_per_epoch'] / 2**20:.2f} "
                   f"| {r['peak_bytes_per_rank'] / 2**20:.0f} | {r['epoch_s']:.3g} | {_range(r)} "
                   f"| {r['compute_s']:.3g} | {r['comm_s']:.3g} | {r['bubble_s']:.3g} | {r['eval_s']:.3g} |")
    out += ["", "bytes per epoch by category:"]
    for r in result["layouts"]:
        out.append(f"  {name(r)}: " + (", ".join(f"{k} {v}" for k, v in r["by_category"].items()) or "none"))
    out += [f"does not fit: {line}" for line in result["refused"]]
    out += [""] + ([result["tie"]] if result.get("tie") else [])
    out.append("recommended: " + result["recommendation"])
    return out + (["against mini-batch: " + result["minibatch"] + "."] if result.get("minibatch") else [])
