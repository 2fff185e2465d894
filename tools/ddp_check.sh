#!/usr/bin/env bash
# On a machine with 2 GPUs, after the CUDA extension is installed: train examples/train.py on 1 GPU (one plain
# process) and on 2 GPUs (torchrun, DDP over NCCL) with the same global batch and seed, and print one summary
# line per model size: how far apart the loss curves are, whether the ranks' parameters are identical, and the
# throughput of each run with the scaling efficiency sps2 / (2 sps1).
#   tools/ddp_check.sh                 # both model sizes below
#   CONFIGS=small tools/ddp_check.sh   # one of them; EXTRA="--compile" adds flags to every run
# Two sizes, because a global batch split over 2 GPUs only speeds up steps that are compute-bound:
#   small: the default MLP (256, 256); each step is mostly kernel-launch latency whatever the batch, so
#          2 GPUs are not expected to take much less time per step than 1.
#   wide:  hidden (4096, 4096), where the matmuls dominate and each GPU does half of them.
# DEVICE=cpu runs the same on 2 CPU processes over gloo: a dry run of this script, not a measurement.
# The JSONs and logs go to $OUT (the device tool's folder that comes back) or /tmp/tiles_out. The NCCL
# environment is inherited as it is.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tiles_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
CONFIGS=${CONFIGS:-"small wide"}
EXTRA=${EXTRA:-}
DEVICE=${DEVICE:-cuda}

declare -A ARGS=(
  [small]="--hidden 256 256 --batch-size 256 --epochs 20"   # 5 steps per epoch: 100 steps
  [wide]="--hidden 4096 4096 --batch-size 512 --epochs 30"  # 2 steps per epoch: 60 steps
)

if [ "$DEVICE" = cuda ]; then
  gpus=$(python -c "import torch; print(torch.cuda.device_count())")
  python -P -c "import torch_tiles; assert torch_tiles.built_with_cuda()" || { echo "SUMMARY: needs the CUDA build of torch_tiles installed"; exit 1; }
  [ "$gpus" -ge 2 ] || { echo "SUMMARY: needs 2 GPUs, $gpus visible"; exit 1; }
fi

status=0
for name in $CONFIGS; do
  common="--device $DEVICE --dtype float32 --quiet ${ARGS[$name]} $EXTRA"
  # shellcheck disable=SC2086  # word splitting of the flag lists is meant
  if ! python examples/train.py $common --json "$OUT/ddp_${name}_1gpu.json" >"$OUT/ddp_${name}_1gpu.log" 2>&1; then
    tail -20 "$OUT/ddp_${name}_1gpu.log"; echo "SUMMARY [$name]: the 1-GPU run FAILED"; status=1; continue
  fi
  # shellcheck disable=SC2086
  if ! python -m torch.distributed.run --standalone --nproc_per_node=2 examples/train.py $common \
      --json "$OUT/ddp_${name}_2gpu.json" >"$OUT/ddp_${name}_2gpu.log" 2>&1; then
    tail -40 "$OUT/ddp_${name}_2gpu.log"; echo "SUMMARY [$name]: the 2-GPU run FAILED"; status=1; continue
  fi
  python - "$name" "$OUT/ddp_${name}_1gpu.json" "$OUT/ddp_${name}_2gpu.json" <<'EOF' || status=1
import json, sys
name, one, two = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
diffs = [abs(a - b) for a, b in zip(one["losses"], two["losses"])]
rel = [d / abs(a) for d, a in zip(diffs, one["losses"])]
def on_own_device(r):  # rank r's tensors on cuda:LOCAL_RANK, and no memory held on any other GPU
    if two["device"] == "cpu":
        return r["tensor_devices"] == ["cpu"]
    held = r["cuda_allocated_bytes"]
    return r["tensor_devices"] == [f"cuda:{r['local_rank']}"] and not any(held[:r["local_rank"]] + held[r["local_rank"] + 1:])
on_own = all(on_own_device(r) for r in two["ranks"])
sps1, sps2 = one["samples_per_s"], two["samples_per_s"]
print(f"SUMMARY [{name}]: hidden={two['hidden']} global_batch={two['batch_size']} steps={len(diffs)} "
      f"loss_max_abs_diff_first50={max(diffs[:50]):.2e} (rel {max(rel[:50]):.2e}) "
      f"loss_max_abs_diff_all={max(diffs):.2e} param_max_diff_across_ranks={two['param_max_diff_across_ranks']:.1e} "
      f"each_rank_on_own_device={on_own} accuracy_1gpu={one['accuracy']:.4f} accuracy_2gpu={two['accuracy']:.4f} "
      f"step_ms_1gpu={one['step_ms']:.3f} step_ms_2gpu={two['step_ms']:.3f} "
      f"samples_per_s_1gpu={sps1:.0f} samples_per_s_2gpu={sps2:.0f} scaling_efficiency={sps2 / (2 * sps1):.2f}")
sys.exit(0 if len(one["losses"]) == len(two["losses"]) and two["param_max_diff_across_ranks"] == 0 and on_own else 1)
EOF
done
exit $status
