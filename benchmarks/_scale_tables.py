"""scale.py's printed tables and checks, from a finished run or from saved ``--json`` files
(merged). They are printed as Markdown tables for a person to paste where they are wanted."""

from __future__ import annotations

from _scale_configs import COMM_SHORT, CONFIGS, FOREIGN_BUSY_CORES, MB, MIB, RATIO_TARGETS, REFERENCE, singles_first

LEGEND = ("peak MiB / command peak = ru_maxrss of the command (largest process of its tree, launcher included); "
          "largest rank peak = summary.json; Σ RSS = sampled peak of the summed RSS of the tree (shared pages "
          "counted once per process); 'above import' subtracts the import baseline {baseline} MiB per process; "
          "CONTENDED x = other processes used x > {busy} cores on average during the run. 'largest / single': the "
          "largest rank's peak over the single-process peak of the same model (SAGE 3x128 for the graph runs; GCN "
          "8x128 for pipeline and hybrid, GCN 3x128 for spmm-1d, when --configs includes single-gcn8 / single-gcn3).")


def mib(b) -> str:
    return "-" if b is None else f"{b / MIB:,.0f}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def contended(r: dict) -> str:
    load = r.get("foreign_cores", 0)
    return f" CONTENDED {load:.1f}" if load > FOREIGN_BUSY_CORES else ""


def est_text(est: dict) -> str:
    """The summary's estimate(s): a number, a per-rank list (its largest) or a dict of parts."""
    vals = []
    for k, v in est.items():
        if isinstance(v, (int, float)):
            vals.append(v)
        elif isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
            vals.append(max(v))
        elif isinstance(v, dict) and "total" in v and isinstance(v["total"], (int, float)):
            vals.append(v["total"])
    return mib(max(vals)) if vals else "-"


def comm_text(comm: dict) -> str:
    items = [(k, v) for k, v in sorted(comm.items()) if v and v >= 0.05 * MB]  # drops meta/metrics, eval/reduce
    if not items:
        return "-"
    return ", ".join(f"{COMM_SHORT.get(k, k)} {v / MB:,.1f}" for k, v in items)


def prep_table(recs: list[dict], baseline: int) -> list[str]:
    lines = ["| graph | step | time s | peak MiB | B/edge | above import B/edge | bound MiB (60 B/edge + X) "
             "| peak ≤ bound | above import ≤ bound |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in recs:
        gen = r["gen"]
        q = r.get("metis_sample", 1.0)
        step = "generate" if r["step"] == "generate" else \
            f"partition P={r['parts']} ({r.get('partitioner', 'metis')}{f', q = {q:g}' if q < 1 else ''})"
        if "error" in r:
            lines.append(f"| {r['size']} | {step} | {r['wall_s']:.1f} | | | | | FAILED: {r['error']} | |")
            continue
        e, fx = gen["edges"], gen["feature_bytes"]
        per_edge = (r["peak_rss"] - fx) / e
        above = (r["peak_rss"] - baseline - fx) / e
        if r["step"] == "partition":
            bound = r["bound"]
            v1, v2 = verdict(r["peak_rss"] <= bound), verdict(r["peak_rss"] - baseline <= bound)
            note = f"α = {r['alpha']:.3f}" if r.get("alpha") is not None else ""
            step += f", {note}" if note else ""
            ph = r.get("phases_s")
            if ph:
                step += (f"; {r.get('partitioner', 'metis')} {ph['partitioner']:.0f} s "
                         f"({100 * ph['partitioner'] / r['wall_s']:.0f}% of the command), book {ph['book']:.0f} s, "
                         f"files {ph['files']:.0f} s")
        else:
            bound, v1, v2 = None, "", ""
            if r.get("self_time_s") is not None:
                step += f" (own line: {r['self_time_s']:.1f} s, {mib(r['self_peak'])} MiB)"
        lines.append(f"| {r['size']} | {step} | {r['wall_s']:.1f}{contended(r)} | {mib(r['peak_rss'])} | "
                     f"{per_edge:.0f} | {above:.0f} | {mib(bound)} | {v1} | {v2} |")
    return lines


def train_table(recs: list[dict], singles: dict, baseline: int) -> list[str]:
    lines = ["| graph | run | epoch s | largest rank peak MiB | estimate MiB | command peak MiB | Σ RSS MiB "
             "| ranks MiB | comm MB/epoch (Σ ranks) | largest / single (same model) | above import | target |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: | --- |"]
    for r in recs:
        if "error" in r:
            what = "skipped" if r.get("skipped") or r["error"].startswith("skipped") else "FAILED"
            lines.append(f"| {r['size']} | {r['label']} | {what} | | | | | | {r['error']} | | | |")
            continue
        single = singles.get((r["size"], REFERENCE.get(r["config"])))
        ratio = ratio2 = None
        if single:
            ratio = r["max_peak"] / single
            ratio2 = (r["max_peak"] - baseline) / (single - baseline) if single > baseline else None
        target = ""
        if ratio is not None and r["config"] in ("graph2", "graph4"):
            t = RATIO_TARGETS[r["nprocs"]]
            target = f"≤ {t}: {verdict(ratio <= t)}" + (f" / above import {verdict(ratio2 <= t)}" if ratio2 else "")
        ranks = " ".join(mib(p) for p in r["peaks"]) if len(r["peaks"]) > 1 else ""
        lines.append(
            f"| {r['size']} | {r['label']} | {r['epoch_time_s']:.2f}{contended(r)} | {mib(r['max_peak'])} | "
            f"{est_text(r['estimates'])} | {mib(r['peak_rss'])} | {mib(r['tree_rss_peak'])} | {ranks} | "
            f"{comm_text(r['comm'])} | "
            f"{'' if ratio is None else f'{ratio:.2f}'} | {'' if ratio2 is None else f'{ratio2:.2f}'} | {target} |")
    return lines


def checks(prep: list[dict], train: list[dict], singles: dict, baseline: int) -> list[str]:
    out = []
    for r in prep:
        if r["step"] == "partition" and "error" not in r:
            e = r["gen"]["edges"]
            out.append(f"{verdict(r['peak_rss'] <= r['bound'])}  partition {r['size']} P={r['parts']}: peak "
                       f"{mib(r['peak_rss'])} MiB <= 60 B x {e:,} edges + features = {mib(r['bound'])} MiB "
                       f"(above the import baseline: {mib(r['peak_rss'] - baseline)} MiB, "
                       f"{verdict(r['peak_rss'] - baseline <= r['bound'])})")
    for r in train:
        if r.get("config") in ("graph2", "graph4") and "error" not in r and singles.get((r["size"], "single")):
            s, t = singles[(r["size"], "single")], RATIO_TARGETS[r["nprocs"]]
            ratio, ratio2 = r["max_peak"] / s, (r["max_peak"] - baseline) / max(s - baseline, 1)
            out.append(f"{verdict(ratio <= t)}  {r['size']} graph P={r['nprocs']} largest rank / single = "
                       f"{mib(r['max_peak'])} / {mib(s)} MiB = {ratio:.3f} (target <= {t}); above the import "
                       f"baseline {ratio2:.3f} ({verdict(ratio2 <= t)})")
    return out



def merge(results: list[dict]) -> dict:
    """Several saved runs as one: a later file's row replaces an earlier one for the same size and
    step (generate; partition P) or configuration; the header and baseline are the first file's, and
    the commands of all are listed."""
    out = dict(results[0], prep=[], train=[])
    out["command"] = " + ".join(r.get("command", "benchmarks/scale.py") for r in results)
    out["config"] = " + ".join(dict.fromkeys(r["config"] for r in results))
    out["header"] = list(dict.fromkeys(line for r in results for line in r["header"]))
    prep, train = {}, {}
    for res in results:
        for r in res.get("prep", []):
            prep[(r["size"], r["step"], r.get("parts"))] = r
        for r in res.get("train", []):
            train[(r["size"], r["config"])] = r
    out["prep"] = list(prep.values())
    order = {c: i for i, c in enumerate(singles_first(CONFIGS))}
    out["train"] = sorted(train.values(), key=lambda r: (float(r["size"]), order.get(r["config"], 99)))
    return out


def render(result: dict) -> list[str]:
    """Print the tables and checks of ``result`` (a finished or a saved run). Returns the check lines."""
    baseline = result["baseline"]
    gens = {r["size"]: r for r in result["prep"] if r["step"] == "generate"}
    for r in result["prep"]:
        r["gen"] = gens.get(r["size"], r)
    singles = {(r["size"], r["config"]): r["max_peak"] for r in result["train"]
               if r.get("nprocs") == 1 and "error" not in r}
    prep, train = result["prep"], result["train"]
    print("\n=== preparation: time and peak RSS of each command (bytes/edge = (peak - features) / directed edges) ===")
    for line in prep_table(prep, baseline):
        print(line)
    if train:
        print("\n=== training: summary.json of each run (comm = median per epoch, summed over ranks, MB) ===")
        for line in train_table(train, singles, baseline):
            print(line)
    print("\n  " + LEGEND.format(baseline=mib(baseline), busy=FOREIGN_BUSY_CORES))
    lines = checks(prep, train, singles, baseline)
    if lines:
        print("\n=== checks ===")
        for line in lines:
            print("  " + line)
    return lines
