"""Per-key token buckets for rate limits (sends, logins, registrations, key fetches).

In-process and O(1) per check. With several relays each enforces its own share; that is a
documented limitation of the scale-out mode.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shared.errors import RateLimited


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """A token bucket per key: ``rate`` tokens per second, at most ``burst`` stored.

    ``rate <= 0`` disables the limit. Idle buckets are dropped once more than ``max_keys`` exist.
    """

    def __init__(self, name: str, rate: float, burst: float, max_keys: int = 100_000) -> None:
        self.name = name
        self.rate = rate
        self.burst = max(1.0, burst)
        self.max_keys = max_keys
        self._buckets: dict[str, _Bucket] = {}

    def check(self, key: str, cost: float = 1.0) -> None:
        """Take ``cost`` tokens from ``key``'s bucket.

        Raises:
            RateLimited: not enough tokens; ``retry_after`` (seconds) says when there will be.
        """
        if self.rate <= 0:
            return
        now = time.monotonic()
        b = self._buckets.get(key)
        if b is None:
            if len(self._buckets) >= self.max_keys:
                self._evict(now)
            b = self._buckets[key] = _Bucket(self.burst, now)
        b.tokens = min(self.burst, b.tokens + (now - b.stamp) * self.rate)
        b.stamp = now
        if b.tokens < cost:
            retry = (cost - b.tokens) / self.rate
            err = RateLimited(f"too many {self.name}; retry after {retry:.1f} s", field=self.name)
            err.retry_after = retry
            err.detail = {"retry_after": round(retry, 3)}
            raise err
        b.tokens -= cost

    def _evict(self, now: float) -> None:
        full = [k for k, b in self._buckets.items() if b.tokens + (now - b.stamp) * self.rate >= self.burst]
        for k in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[k]
