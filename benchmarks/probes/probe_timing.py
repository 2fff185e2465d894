"""What the probes share: compiling a probe's .cu against the extension's headers, and back-to-back timing."""
import os
import time

import torch
from torch.utils.cpp_extension import load

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))


def load_probe(name, source):
    """Compiles benchmarks/probes/<source> for sm_90a (~1-2 min). With WAIT_FOR=<file> set, returns only
    once that file exists, so that a probe compiled beside another build times nothing while it runs."""
    t0 = time.time()
    mod = load(name, [os.path.join(HERE, source)],
               extra_include_paths=[os.path.join(ROOT, "csrc"), os.path.join(ROOT, "csrc/include")],
               extra_cuda_cflags=["-O3", "--expt-relaxed-constexpr", "-gencode=arch=compute_90a,code=sm_90a",
                                  "-DTILES_WITH_CUDA"])
    print(f"built {source} in {time.time() - t0:.0f}s", flush=True)
    if os.environ.get("WAIT_FOR"):
        while not os.path.exists(os.environ["WAIT_FOR"]):
            time.sleep(1)
    return mod


def back_to_back_ms(run, sets, reps=10, windows=5):
    """Median over windows of one call's time, calls issued back to back over the rotating `sets`."""
    for s in sets:
        run(s)
    torch.cuda.synchronize()
    times = []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            for s in sets:
                run(s)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / (reps * len(sets)))
    return sorted(times)[windows // 2]


def input_sets(make, set_bytes, total=2e9):
    """Enough sets from make() (4 to 16) that together they hold ~total bytes: well past L2."""
    return [make() for _ in range(max(4, min(16, int(total // max(set_bytes, 1)))))]


def summarize(ratios):
    """Prints each shape's worst and geomean ratio to torch and returns the shape whose worst is best."""
    import math
    print("ratio to torch over every case and timing:")
    score = {}
    for key, values in ratios.items():
        geomean = math.exp(sum(math.log(v) for v in values) / len(values))
        score[key] = (min(values), geomean)
        print(f"  {key}: worst {min(values):.3f} geomean {geomean:.3f}")
    best = max(score, key=lambda k: (round(score[k][0], 2), score[k][1]))
    print(f"best: {best}")
    return best
