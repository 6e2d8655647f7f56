"""Timing helpers: run a callable N times, report median / p95 / p99 in ms."""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Stats:
    """Timing of one operation in ms over ``n`` runs (median, 95th and 99th percentile)."""

    n: int
    median: float
    p95: float
    p99: float

    def as_dict(self) -> dict[str, float]:
        """``{"n", "median_ms", "p95_ms", "p99_ms"}``."""
        return {"n": self.n, "median_ms": self.median, "p95_ms": self.p95, "p99_ms": self.p99}

    @classmethod
    def from_dict(cls, d: dict) -> Stats:
        """Inverse of :meth:`as_dict`."""
        return cls(int(d["n"]), float(d["median_ms"]), float(d["p95_ms"]), float(d["p99_ms"]))


def pct(sorted_ms: list[float], p: float) -> float:
    """Nearest-rank ``p``-th percentile of an already sorted list (ms in, ms out)."""
    n = len(sorted_ms)
    if n == 0:
        return float("nan")
    return sorted_ms[min(n - 1, max(0, math.ceil(p / 100 * n) - 1))]


def summarize(samples_ms: list[float]) -> Stats:
    """Median and the 95th/99th percentiles (nearest rank) of ``samples_ms`` (ms)."""
    s = sorted(samples_ms)
    if not s:
        return Stats(0, float("nan"), float("nan"), float("nan"))
    return Stats(len(s), statistics.median(s), pct(s, 95), pct(s, 99))


def sample(fn: Callable[[], object], n: int, warmup: int = 10) -> list[float]:
    """Call ``fn`` ``warmup`` times untimed, then ``n`` times; return each call's time in ms.

    The garbage collector is paused during the timed calls (collected once before), so a cycle
    collection triggered by earlier work does not land inside one sample.
    """
    for _ in range(warmup):
        fn()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    samples = []
    clock = time.perf_counter_ns
    try:
        for _ in range(n):
            t0 = clock()
            fn()
            samples.append((clock() - t0) / 1e6)
    finally:
        if was_enabled:
            gc.enable()
    return samples


def measure(fn: Callable[[], object], n: int, warmup: int = 10) -> Stats:
    """Median / p95 / p99 in ms of ``n`` timed calls of ``fn`` (after ``warmup`` untimed ones)."""
    return summarize(sample(fn, n, warmup))


def measure_paired(fns: dict[str, Callable[[], object]], n: int, warmup: int = 5) -> dict[str, Stats]:
    """Stats (ms) for each of ``fns``, timed in turns: every round calls each function once
    (in reverse order every other round), so drift in the machine's load lands on all of them
    alike and the ratio of two medians holds on a noisy machine. GC paused as in :func:`sample`."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    samples: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter_ns
    try:
        for i in range(n):
            for name in names if i % 2 == 0 else reversed(names):
                t0 = clock()
                fns[name]()
                samples[name].append((clock() - t0) / 1e6)
    finally:
        if was_enabled:
            gc.enable()
    return {name: summarize(samples[name]) for name in names}


async def measure_async(fn: Callable[[], Awaitable[object]], n: int, warmup: int = 5) -> Stats:
    """Like :func:`measure` for a coroutine function (each await timed, ms)."""
    for _ in range(warmup):
        await fn()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        await fn()
        samples.append((clock() - t0) / 1e6)
    return summarize(samples)


def result_at(d, *keys):
    """The value at ``d[k1][k2]...`` in a suite's results (None if any key is missing); a
    :class:`Stats` dict gives its ``median_ms``."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    if isinstance(d, dict) and "median_ms" in d:
        return d["median_ms"]
    return d
