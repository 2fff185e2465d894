"""One results file per machine, written by several benchmark scripts.

Each script (run.py, train_step.py, bmm_grid.py, ...) times its own cases and merges them into
`benchmarks/results/<machine>.json` by case name: a case measured again replaces its old row, cases
the script did not run keep theirs. Every row carries the device, torch version, commit and date of
the run that measured it, since rows of one file can come from different runs.
"""
import datetime
import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(HERE, "results")


def git_commit(root=os.path.join(HERE, "..")):
    """The checked-out commit: $TILES_COMMIT, else git's (with "+dirty" when tracked files differ from it:
    an A/B's patch applied, or a copy of the tree whose .git is older than its files, as the device
    machine's copy has been), else read from .git directly. $TILES_COMMIT naming the very commit git's
    dirty tree sits on gets "+dirty" too: a script that set it from that copy's git (the thirty-seventh
    session's did, and its rows named the session's first commit)."""
    git = ["git", "-c", "safe.directory=*"]
    given = os.environ.get("TILES_COMMIT")
    try:
        out = subprocess.run(git + ["rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        if out.returncode == 0:
            status = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True)
            dirty = status.returncode == 0 and status.stdout.strip() != ""
            head = out.stdout.strip()
            if given:
                return given + ("+dirty" if dirty and given == head else "")
            return head + ("+dirty" if dirty else "")
    except OSError:
        pass
    if given:
        return given
    git_dir = os.path.join(root, ".git")
    try:
        head = open(os.path.join(git_dir, "HEAD")).read().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            path = os.path.join(git_dir, ref)
            if os.path.exists(path):
                return open(path).read().strip()[:7]
            for line in open(os.path.join(git_dir, "packed-refs")):
                if line.rstrip().endswith(ref):
                    return line[:7]
        return head[:7]
    except OSError:
        return "unknown"


def cpu_host():
    """The CPU a "cpu" row ran on (model, cores, AVX-512 / AMX), since CPU development hosts change."""
    model, flags = "unknown CPU", set()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    extras = [name for flag, name in (("avx512f", "AVX-512"), ("amx_tile", "AMX")) if flag in flags]
    return ", ".join([model, f"{os.cpu_count()} cores"] + extras)


def run_info(device):
    """What every row records about the run that measured it."""
    import torch
    info = {"device": device, "torch": torch.__version__, "commit": git_commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    if device == "cpu":
        info["host"] = cpu_host()
    return info


def path_for(device, out_dir=RESULTS_DIR):
    """The results file of a device name ("NVIDIA H100 80GB HBM3" -> nvidia-h100-80gb-hbm3.json; "cpu")."""
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    return os.path.join(out_dir, f"{slug}.json")


def merge(device, rows, header=None, out_dir=RESULTS_DIR):
    """Merges `rows` (dicts with a unique "name") into the device's results file and returns its path.

    Each row gets the run's device / torch / commit / date unless it has them. `header` updates the
    file's top-level fields (e.g. the ceilings run.py measured); the file's own device / torch / commit /
    date are those of its latest write."""
    os.makedirs(out_dir, exist_ok=True)
    path = path_for(device, out_dir)
    data = {"cases": []}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    info = run_info(device)
    data.update(info)
    data.update(header or {})
    by_name = {row["name"]: i for i, row in enumerate(data.get("cases", []))}
    cases = list(data.get("cases", []))
    for row in rows:
        row = {**info, **row}
        if row["name"] in by_name:
            cases[by_name[row["name"]]] = row
        else:
            by_name[row["name"]] = len(cases)
            cases.append(row)
    data["cases"] = cases
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return path
