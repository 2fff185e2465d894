"""The consumers' mainloop of one Hopper GEMM kernel, from `cuobjdump -sass` output, with the counts that
tell whether ptxas kept the ring's state in the uniform datapath (benchmarks/NOTES.md, N1a): R2UR moves
(vector registers handed to the uniform ones that wgmma's descriptors must live in), uniform-datapath
instructions, and WARPSYNC.ALL (ptxas could not prove the warp converged before the wgmma).

The SASS can come from a cubin compiled here, without a GPU, and disassembled here too with NVIDIA's
pip wheels (`pip install --target /tmp/nvtools nvidia-cuda-cuobjdump`, `--target /tmp/nvtools2
nvidia-cuda-nvdisasm`, both on PATH: /tmp/nvtools*/nvidia/cu13/bin), or on the device in seconds:
    EXTRA_NVCC_FLAGS="-keep -keep-dir /tmp/k" tools/check_cuda_compiles.sh csrc/cuda/instances/bmm_hopper_bf16_n128.cu
    cp /tmp/k/bmm_hopper_bf16_n128.cubin .probe/   # then, on the device: cuobjdump -sass .probe/*.cubin > $OUT/x.sass
    python tools/sass_mainloop.py x.sass Li128ELb1ELb0ELNS1_4PairE0E [--before 60] [--after 60] [--quiet]
The pattern is a piece of the mangled name: Li128E the width, then kTransA and kTransB as Lb1E / Lb0E, and
the Pair (0: single blocks).
"""
import argparse
import re


UNIFORM = re.compile(r"(@!?U?P\d+ )?U[A-Z]")  # an instruction of the uniform datapath (UIADD3, ULOP3, ...)


def kernels(text):
    """(mangled name, [(address, instruction)]) for each function in cuobjdump's listing."""
    for chunk in re.split(r"\n\s*Function : ", text)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        code = []
        for line in chunk.split("\n"):
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;?\s*/\*", line)
            if m:
                code.append((int(m.group(1), 16), m.group(2)))
        yield name, code


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sass", help="cuobjdump -sass output")
    parser.add_argument("pattern", help="a piece of the kernel's mangled name; the first match is shown")
    parser.add_argument("--before", type=int, default=60, help="instructions shown before the first HGMMA")
    parser.add_argument("--after", type=int, default=60, help="instructions shown after the last HGMMA")
    parser.add_argument("--quiet", action="store_true", help="only the counts")
    args = parser.parse_args()
    for name, code in kernels(open(args.sass).read()):
        if args.pattern not in name:
            continue
        hgmma = [i for i, (_, ins) in enumerate(code) if "HGMMA" in ins]
        if not hgmma:
            raise SystemExit(f"{name}: no HGMMA")
        # The mainloop holds the kernel's only HGMMAs (one k-block's, unrolled).
        window = code[max(hgmma[0] - args.before, 0):hgmma[-1] + args.after]
        r2ur = sum(1 for _, ins in window if ins.startswith("R2UR"))
        uniform = sum(1 for _, ins in window if UNIFORM.match(ins))
        warpsync = sum(1 for _, ins in window if "WARPSYNC" in ins)
        print(f"{name}\n  {len(code)} instructions; around the {len(hgmma)} HGMMAs: "
              f"R2UR {r2ur}, uniform {uniform}, WARPSYNC {warpsync}")
        if not args.quiet:
            for address, ins in window:
                print(f"  {address:6x}  {ins}")
        return
    raise SystemExit(f"no kernel matches {args.pattern}")


if __name__ == "__main__":
    main()
