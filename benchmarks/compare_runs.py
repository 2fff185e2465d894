"""An A/B's two runs of the same cases side by side: tiles' time in the second run over the first, case by
case, beside torch's time in each (its drift between the runs is the A/B's noise), and the geometric
mean of that ratio over the cases whose path or tile changed and over the rest.

    python benchmarks/compare_runs.py HEAD VARIANT

HEAD and VARIANT are both results files of benchmarks/run.py or bmm_grid.py (or folders holding one
.json file, as `bmm_grid.py --out DIR` writes), or both `bmm_paths.py --out` files (one JSON object a
case; every timed path of a case becomes a row, `case [path]`). tools/device_ab.sh runs one command under
the labels head and variant, whose outputs this compares. Times are microseconds, flushed (do_bench's L2
flush) and, where the run recorded them, back to back.
"""
import argparse
import glob
import json
import math
import os
import sys
from typing import Dict, NamedTuple, Optional, Tuple


class Row(NamedTuple):
    tiles: Tuple[float, Optional[float]]  # us: flushed, back to back (None: not recorded)
    torch: Tuple[float, Optional[float]]
    route: str  # path and tile; a change between the runs marks the row as moved


def _us(ms):
    return None if ms is None else ms * 1e3


def _results_rows(path) -> Dict[str, Row]:
    with open(path) as f:
        cases = json.load(f)["cases"]
    return {r["name"]: Row((_us(r["tiles_ms"]), _us(r.get("tiles_ms_b2b"))),
                           (_us(r["torch_ms"]), _us(r.get("torch_ms_b2b"))),
                           f"{r.get('path', '')} {r.get('tile', '')}".strip())
            for r in cases if r.get("tiles_ms") and r.get("torch_ms")}


def _paths_rows(path) -> Dict[str, Row]:
    rows = {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            case = json.loads(line)
            route = f"{case['route']} {case.get('tile', '')}".strip()
            for name, (flushed, b2b, _err) in case["paths"].items():
                # only bmm's own pick can move; a path by name is the same path in both runs
                rows[f"{case['case']} [{name}]"] = Row((flushed, b2b), tuple(case["torch"]),
                                                       route if name == "bmm" else name)
    return rows


def load(path) -> Dict[str, Row]:
    """The rows of one run: a results file, a folder holding one, or a bmm_paths.py --out file."""
    if os.path.isdir(path):
        found = glob.glob(os.path.join(path, "*.json"))
        if len(found) != 1:
            sys.exit(f"compare_runs.py: {path} holds {len(found)} .json files, not one")
        path = found[0]
    with open(path) as f:
        if f.read(1) != "{":
            sys.exit(f"compare_runs.py: {path} is neither a results file nor a bmm_paths.py --out file")
    try:
        return _results_rows(path)
    except (json.JSONDecodeError, KeyError):
        return _paths_rows(path)


def _cell(us):
    return f"{us:8.1f}" if us else f"{'-':>8}"


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def compare(head: Dict[str, Row], variant: Dict[str, Row], out=sys.stdout):
    """Prints a line a case in both runs and the summary; returns {(moved, timing): geomean ratio}."""
    ratios = {(moved, t): [] for moved in (True, False) for t in (0, 1)}
    for name, v in variant.items():
        h = head.get(name)
        if h is None:
            continue
        moved = h.route != v.route
        parts = []
        for t, label in ((0, "flushed"), (1, "b2b")):
            if h.tiles[t] and v.tiles[t]:
                ratio = v.tiles[t] / h.tiles[t]
                ratios[(moved, t)].append(ratio)
                parts.append(f"{label} {h.tiles[t]:8.1f} -> {v.tiles[t]:8.1f} ({ratio:.3f}) torch {_cell(h.torch[t])} / "
                             f"{_cell(v.torch[t])}")
        route = f"{h.route} -> {v.route}" if moved else v.route
        print(f"{name:<52} {route[:56]:<56} " + " | ".join(parts), file=out)
    only = len(set(head) ^ set(variant))
    summary = {key: geomean(values) for key, values in ratios.items() if values}
    for moved in (True, False):
        counts = len(ratios[(moved, 0)])
        if counts:
            text = ", ".join(f"{label} {summary[(moved, t)]:.3f}" for t, label in ((0, "flushed"), (1, "b2b"))
                             if (moved, t) in summary)
            print(f"{'moved' if moved else 'unmoved'}: {counts} cases, tiles variant / head geomean {text}", file=out)
    if only:
        print(f"{only} cases are in one run only (not compared)", file=out)
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("head", help="the first run: a results file or folder, or a bmm_paths.py --out file")
    parser.add_argument("variant", help="the second run, of the same kind")
    args = parser.parse_args(argv)
    compare(load(args.head), load(args.variant))


if __name__ == "__main__":
    main()
