# Model of the stream-K walk and fix-up (hopper_kernel.cuh): every (tile, k-block) is computed once, and
# each cut tile is finished by exactly one block from the parts of exactly the blocks that hold its other
# k-blocks, which wait only on lower-indexed blocks.
import itertools, random
def run_begin(units, block, blocks): return units * block // blocks
def segments(total, kb, first, stride):
    units = total * kb; at, end = run_begin(units, first, stride), run_begin(units, first + 1, stride)
    out = []
    while at < end:
        t = at // kb; k0 = at - t * kb; k1 = min(kb, k0 + end - at); out.append((t, k0, k1)); at += k1 - k0
    return out
def check(total, kb, G):
    units = total * kb
    cover = {}
    slot1 = {}; finish = {}
    for c in range(G):
        segs = segments(total, kb, c, G)
        for i, (t, k0, k1) in enumerate(segs):
            for k in range(k0, k1):
                assert (t, k) not in cover; cover[(t, k)] = c
            if k0 == 0 and k1 == kb: continue
            if k1 == kb:
                assert i == 0, "a tile's last part must begin its run"; finish[t] = c
            else:
                assert i == len(segs) - 1, "a first/middle part must end its run"; slot1[c] = t
    assert len(cover) == units
    for t, owner in finish.items():
        start = t * kb; frm = owner - 1
        while frm > 0 and run_begin(units, frm, G) > start: frm -= 1
        contrib = [b for b in range(frm, owner) if run_begin(units, b + 1, G) != run_begin(units, b, G)]
        expect = sorted({cover[(t, k)] for k in range(kb)} - {owner})
        assert contrib == expect, (total, kb, G, t, contrib, expect)
        for b in contrib: assert slot1[b] == t
    cut = {t for (t, k), c in cover.items() if c != cover[(t, 0)]}
    assert cut == set(finish), (cut, finish)
random.seed(1)
n = 0
for total in list(range(1, 40)) + [96, 108, 120, 131, 132, 133, 264, 500]:
    for kb in [1, 2, 3, 4, 7, 8, 36, 64, 128, 129]:
        for G in [1, 2, 3, 7, 132]:
            check(total, kb, G); n += 1
print("ok", n)
