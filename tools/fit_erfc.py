"""Prints the coefficients of the CPU kernels' float erfc polynomial (csrc/cpu/simd_body.h, erfcx_to_4).

erfc(a) = exp(-a^2) g(a), where g(a) = erfc(a) exp(a^2) falls smoothly from 1 to 0.14 on [0, 4]. The
polynomial is g in powers of t = 1 / (1 + P a), P = 0.47, degree 7 (g(0) = 1, and t stays in (0, 1], so
no cancellation at a = 0 and a few terms suffice): the Chebyshev interpolant in t's range converted to
powers of t. The script reports its largest relative error against math.erfc when evaluated in float32
arithmetic (t included). erf's tail (erfcx_to_4, verfc) and gelu's Φ (normal_parts, with the
coefficients halved) use it.

    python tools/fit_erfc.py
"""
import math
import struct

def g(a):
    return math.erfc(a) * math.exp(a * a)


def chebyshev_coefficients(f, lo, hi, degree):
    n = degree + 1
    nodes = [math.cos(math.pi * (k + 0.5) / n) for k in range(n)]
    values = [f(lo + (hi - lo) * (x + 1) / 2) for x in nodes]
    c = [2 / n * sum(values[k] * math.cos(math.pi * j * (k + 0.5) / n) for k in range(n)) for j in range(n)]
    c[0] /= 2
    return c


def power_coefficients(cheb):
    """The same polynomial in powers of t: T_0 = 1, T_1 = t, T_k = 2 t T_(k-1) - T_(k-2)."""
    t_polys = [[1.0], [0.0, 1.0]]
    for _ in range(2, len(cheb)):
        doubled = [0.0] + [2 * x for x in t_polys[-1]]
        prev = t_polys[-2] + [0.0] * (len(doubled) - len(t_polys[-2]))
        t_polys.append([a - b for a, b in zip(doubled, prev)])
    power = [0.0] * len(cheb)
    for ck, poly in zip(cheb, t_polys):
        for i, x in enumerate(poly):
            power[i] += ck * x
    return power


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


GELU_DEGREE, GELU_P, GELU_HI = 7, 0.47, 4.0  # degree, t = 1 / (1 + P a), a in [0, HI]


def power_in(power_u, scale, offset):
    """sum power_u[i] u^i with u = scale t + offset, as coefficients of powers of t."""
    out = [0.0] * len(power_u)
    term = [1.0]  # coefficients of (scale t + offset)^i
    for c in power_u:
        for j, x in enumerate(term):
            out[j] += c * x
        nxt = [0.0] * (len(term) + 1)
        for j, x in enumerate(term):
            nxt[j] += offset * x
            nxt[j + 1] += scale * x
        term = nxt
    return out


def gelu_fit():
    """g on [0, GELU_HI] as a polynomial in t = 1 / (1 + P a): coefficients (lowest power first) and the
    largest relative error when evaluated in float32 (t included)."""
    t_lo = 1 / (1 + GELU_P * GELU_HI)
    a_of_t = lambda t: (1 / t - 1) / GELU_P
    cheb = chebyshev_coefficients(lambda t: g(a_of_t(t)), t_lo, 1.0, GELU_DEGREE)
    # chebyshev_coefficients maps [t_lo, 1] to u in [-1, 1]: u = (2 t - (t_lo + 1)) / (1 - t_lo)
    power = power_in(power_coefficients(cheb), 2 / (1 - t_lo), -(t_lo + 1) / (1 - t_lo))
    coeffs = [f32(x) for x in power]
    worst = 0.0
    for i in range(8001):
        a = f32(GELU_HI * i / 8000)
        t = f32(1 / f32(f32(GELU_P * a) + 1))
        v = coeffs[-1]
        for c in reversed(coeffs[:-1]):
            v = f32(f32(v * t) + c)
        worst = max(worst, abs(v / g(a) - 1))
    return power, worst


def main():
    power, worst = gelu_fit()
    print(f"g on [0, {GELU_HI}] in t = 1 / (1 + {GELU_P} a), highest power first:",
          ", ".join(f"{c:.9g}f" for c in reversed(power)))
    print(f"largest relative error of g in float32 arithmetic on [0, {GELU_HI}]: {worst:.2e}")


if __name__ == "__main__":
    main()
