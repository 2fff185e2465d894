"""A Python model of store_tile_direct_realigned (bmm/hopper_kernel.cuh; N0t in benchmarks/NOTES.md),
written to check its indexing on the CPU before the kernel reached a GPU: one tile row of one quad of
lanes, every skew s, widths of 32-column multiples, several tile origins and N. Checks that every column
of the tile below N is written exactly once with its own value, nothing past N or outside the tile, and
every 16-byte store starts on a block boundary; then the word-level realign (two selects and a half-word
funnel shift) against a plain slice.

    python tools/realigned_store_model.py
"""
import random
def realign(left, v, s):
    W = left + v                      # 16 elements: words as element pairs, flattened
    e0 = 8 - s
    return W[e0:e0 + 8]

def simulate(BN, s, col0, N):
    groups = BN // 32
    writes = {}                       # column -> value (tile-relative columns + col0)
    def put(col, val):
        assert col not in writes, ("twice", col)
        assert col < N, ("past N", col)
        assert col0 <= col < col0 + BN, ("outside tile", col)
        writes[col] = val
    carry = [None] * 4
    vs = [None] * 4
    for g in range(groups):
        # after transpose_quad: lane q holds columns 32g + 8q .. +7 (values = tile column ids)
        for q in range(4):
            vs[q] = [32 * g + 8 * q + e for e in range(8)]
        recv = [vs[(q + 3) % 4] for q in range(4)]   # shfl from lane (q + 3) % 4
        for q in range(4):
            if q == 0:
                left = carry[0]
                carry[0] = recv[0]
            else:
                left = recv[q]
            v = vs[q]
            if s == 0:
                c_first = col0 + 32 * g + 8 * q
                for e in range(8):
                    if c_first + e < N: put(c_first + e, v[e])
            elif g == 0 and q == 0:
                for e in range(8 - s):
                    if col0 + e < N: put(col0 + e, v[e])
            else:
                chunk = realign(left, v, s)
                c_first = col0 + 32 * g + 8 * q - s
                # the chunk's first address must be 16-byte aligned: (skew + c_first - col0) % 8 == 0
                assert (s + c_first - col0) % 8 == 0
                for e in range(8):
                    if c_first + e < N: put(c_first + e, chunk[e])
    if s != 0:
        v = vs[3]
        for e in range(8 - s, 8):
            col = col0 + 32 * (groups - 1) + 24 + e
            if col < N: put(col, v[e])
    for col, val in writes.items():
        assert val == col - col0, ("wrong value", col, val)
    expect = set(range(col0, min(col0 + BN, N)))
    assert set(writes) == expect, ("missing", sorted(expect - set(writes))[:5])
    return len(writes)

n = 0
for BN in (64, 96, 128, 160, 192, 256):
    for s in range(8):
        for col0 in (0, BN, 5 * BN):
            for N in (col0 + 1, col0 + 7, col0 + 8 - s if 8 - s > 0 else col0 + 1, col0 + BN - s, col0 + BN - 1, col0 + BN, col0 + BN + 3, 50257):
                if N <= col0: continue
                simulate(BN, s, col0, N); n += 1
print("columns ok:", n, "cases")
def funnelshift_r(lo, hi, sh):
    return ((hi << 32 | lo) >> sh) & 0xffffffff
def realign_words(L, V, s):
    W = L + V
    e0 = 8 - s
    u = [W[i + 2] if e0 & 4 else W[i] for i in range(6)]
    x = [u[i + 1] if e0 & 2 else u[i] for i in range(5)]
    return [funnelshift_r(x[t], x[t + 1], 16 * (e0 & 1)) for t in range(4)]
random.seed(0)
for trial in range(2000):
    el = [random.randrange(65536) for _ in range(16)]
    words = [el[2 * i] | el[2 * i + 1] << 16 for i in range(8)]
    s = random.randrange(1, 8)
    out = realign_words(words[:4], words[4:], s)
    got = [w >> (16 * h) & 0xffff for w in out for h in (0, 1)]
    assert got == el[8 - s: 16 - s], (s, got, el)
print("words ok")
