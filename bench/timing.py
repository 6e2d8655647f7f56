"""Timing helpers: run a callable N times, report median / p95 / p99 in ms."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    """Timing of one operation in ms over ``n`` runs."""

    n: int
    median: float
    p95: float
    p99: float

    def as_dict(self) -> dict[str, float]:
        return {"n": self.n, "median_ms": self.median, "p95_ms": self.p95, "p99_ms": self.p99}


def summarize(samples_ms: list[float]) -> Stats:
    """Median and the 95th/99th percentiles (nearest rank) of ``samples_ms``."""
    s = sorted(samples_ms)
    n = len(s)

    def pct(p: float) -> float:
        return s[min(n - 1, max(0, int(round(p / 100 * n + 0.5)) - 1))]

    return Stats(n, statistics.median(s), pct(95), pct(99))


def measure(fn: Callable[[], object], n: int, warmup: int = 10) -> Stats:
    """Call ``fn`` ``warmup`` times untimed, then ``n`` times, each timed with perf_counter_ns."""
    for _ in range(warmup):
        fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        fn()
        samples.append((clock() - t0) / 1e6)
    return summarize(samples)
