"""Power of the gate's paired tests: the minimum detectable drop and the examples needed (pure).

The minimum detectable drop (MDD) is the smallest true drop a one-sided test at level alpha
catches with the given power (80% by default) at this n and noise. Sources:

- paired pass/fail (exact McNemar): Connor (1987), "Sample size for testing differences in
  proportions for the paired-sample design", Biometrics 43:207-211, with the floor set by the
  exact test's discreteness (`min_significant_count`);
- scores (Wilcoxon signed-rank): the normal approximation of the paired test with the
  signed-rank test's asymptotic relative efficiency 3/pi under normal noise (Noether 1987,
  JASA 82:645-647).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

#: Default power of the minimum detectable drop (fraction 0-1).
DEFAULT_POWER = 0.8
_NORMAL = NormalDist()


def min_significant_count(alpha: float) -> int:
    """Return k, the fewest same-direction pairs that can reach p <= alpha in a sign-based test.

    All k discordant pairs broken gives p = 2**-k (exact McNemar and exact signed-rank), so k =
    ceil(log2(1 / alpha)): 5 at alpha 0.05. Raises ValueError unless 0 < alpha < 1.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return math.ceil(math.log2(1.0 / alpha) - 1e-12)


def _z(probability: float) -> float:
    """Standard normal quantile (Wichura's AS 241 in the standard library, ~1e-16 accurate)."""
    return _NORMAL.inv_cdf(probability)


def mdd_binary(n: int, flip_rate: float, alpha: float, power: float = DEFAULT_POWER) -> float:
    """Return the smallest drop in a pass rate the one-sided McNemar test detects with ``power``.

    Solves Connor's (1987) sample size n = (z_a sqrt(psi) + z_b sqrt(psi - d^2))^2 / d^2 for d,
    with psi = 2 r + d: examples flip both ways at the background rate r, and the drop adds d
    of broken pairs. The result is at least k / n with k = `min_significant_count` (discreteness
    of the exact test).

    Args:
        n: paired examples.
        flip_rate: background flips per direction, fraction 0-1 (e.g. (fixed + broken) / (2 n)).
        alpha: one-sided level; power: fraction 0-1.

    Returns:
        The drop as a fraction 0-1, or ``inf`` when no drop up to 1 is detectable.
    """
    k = min_significant_count(alpha)
    if n < k:
        return math.inf
    z_a, z_b = _z(1 - alpha), _z(power)

    def shortfall(d: float) -> float:
        psi = min(2 * flip_rate + d, 1.0)
        return d * math.sqrt(n) - z_a * math.sqrt(psi) - z_b * math.sqrt(max(psi - d * d, 0.0))

    return max(_bisect(shortfall), k / n)


def mdd_continuous(n: int, sd: float, alpha: float, power: float = DEFAULT_POWER) -> float:
    """Return the smallest mean drop the one-sided signed-rank test detects with ``power``.

    Normal approximation d = (z_a + z_b) sd / sqrt(n * 3 / pi): the paired z-test formula with
    the signed-rank test's asymptotic efficiency 3/pi under normal noise (Noether 1987).

    Args:
        n: paired examples; sd: standard deviation of head - base (score units).
        alpha: one-sided level; power: fraction 0-1.

    Returns:
        The drop in score units, or ``inf`` when n is too small for p <= alpha to be possible.
    """
    if n < max(min_significant_count(alpha), 2) or not math.isfinite(sd):
        return math.inf
    return (_z(1 - alpha) + _z(power)) * sd / math.sqrt(n * 3 / math.pi)


def n_needed_binary(drop: float, flip_rate: float, alpha: float,
                    power: float = DEFAULT_POWER) -> int:
    """Return the paired examples needed to detect ``drop`` (fraction 0-1); see `mdd_binary`.

    Raises ValueError unless 0 < drop <= 1.
    """
    if not 0 < drop <= 1:
        raise ValueError(f"drop must be in (0, 1], got {drop}")
    psi = min(2 * flip_rate + drop, 1.0)
    root = _z(1 - alpha) * math.sqrt(psi) + _z(power) * math.sqrt(max(psi - drop * drop, 0.0))
    floor = math.ceil(min_significant_count(alpha) / drop - 1e-9)
    return max(math.ceil((root / drop) ** 2 - 1e-9), floor)


def n_needed_continuous(drop: float, sd: float, alpha: float,
                        power: float = DEFAULT_POWER) -> int:
    """Return the paired examples needed to detect ``drop``; see `mdd_continuous`.

    Raises ValueError unless drop > 0 and sd >= 0.
    """
    if drop <= 0 or sd < 0:
        raise ValueError(f"need drop > 0 and sd >= 0, got drop={drop}, sd={sd}")
    size = ((_z(1 - alpha) + _z(power)) * sd / drop) ** 2 * math.pi / 3
    return max(math.ceil(size - 1e-9), min_significant_count(alpha), 2)


def _bisect(shortfall: Callable[[float], float], low: float = 0.0, high: float = 1.0) -> float:
    """Return the root of an increasing ``shortfall`` on (low, high], or inf when f(high) < 0."""
    if shortfall(high) < 0:
        return math.inf
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if shortfall(middle) < 0 else (low, middle)
    return high
