"""After tools/device_ab.sh: each variant's timings against the head's, printed, and every timing file packed
into one archive, so that the comparison survives the device call's limit on the files that come back.

The command device_ab.sh ran names its output files by AB_LABEL: `head.jsonl` or `head_<part>.jsonl`
for the head, `<label>.jsonl` / `<label>_<part>.jsonl` for each variant (labels may hold underscores:
the head's files say which parts there are). For each part and variant this prints the last lines of
`benchmarks/compare_runs.py head variant` (the cases and their geomean), then packs `*.jsonl` and
`build_*.log` of $OUT into `$OUT/ab.tgz` and removes them.

    tools/device_ab.sh --patch a.diff --patch b.diff bash benchmarks/experiments/time_thin.sh; python tools/ab_report.py
    python tools/ab_report.py --lines 40 --keep      # more of each comparison; leave the files in place
"""
import argparse
import glob
import os
import subprocess
import sys
import tarfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pairs(out):
    """[(part, label, head file, variant file)] for the timing files in `out`: a variant file's part is the
    longest of the head's parts its name ends with (after an underscore), else none."""
    names = sorted(os.path.basename(p)[:-len(".jsonl")] for p in glob.glob(os.path.join(out, "*.jsonl")))
    parts = {n[len("head_"):] if n != "head" else "" for n in names if n == "head" or n.startswith("head_")}
    found = []
    for name in names:
        if name == "head" or name.startswith("head_"):
            continue
        endings = [p for p in parts if p and name.endswith("_" + p)]
        part = max(endings, key=len) if endings else ""
        if part not in parts:
            continue
        label = name[:len(name) - len(part) - 1] if part else name
        head = "head_" + part if part else "head"
        found.append((part, label, os.path.join(out, head + ".jsonl"), os.path.join(out, name + ".jsonl")))
    return sorted(found)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/tiles_out"))
    parser.add_argument("--lines", type=int, default=25, help="lines of each comparison to print (its end)")
    parser.add_argument("--keep", action="store_true", help="leave the files in place (no archive)")
    args = parser.parse_args(argv)
    found = pairs(args.out)
    if not found:
        print(f"ab_report: no head / variant timing files in {args.out}")
    for part, label, head, variant in found:
        print(f"== {label} against head{' (' + part + ')' if part else ''}", flush=True)
        result = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "compare_runs.py"), head, variant],
                                capture_output=True, text=True)
        lines = (result.stdout + result.stderr).rstrip("\n").split("\n")
        print("\n".join(" ".join(line.split()) for line in lines[-args.lines:]), flush=True)
    if args.keep:
        return
    files = glob.glob(os.path.join(args.out, "*.jsonl")) + glob.glob(os.path.join(args.out, "build_*.log"))
    if files:
        with tarfile.open(os.path.join(args.out, "ab.tgz"), "w:gz") as archive:
            for path in files:
                archive.add(path, arcname=os.path.basename(path))
        for path in files:
            os.remove(path)
        print(f"ab_report: {len(files)} files packed into {os.path.join(args.out, 'ab.tgz')}")


if __name__ == "__main__":
    main()
