"""Bounded per-key state for an endpoint any pod of the cluster can reach: token buckets, and remembered answers.

Both keep at most ``max_keys`` keys, the least recently used going first: a
client that invents a new key per request (a new token, a new address) costs
memory bounded by that, never more.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
MAX_KEYS = 10_000


class Buckets(Generic[K]):
    """A token bucket per key: ``burst`` requests at once, then ``rate`` per second."""

    def __init__(self, rate: float, burst: float, max_keys: int = MAX_KEYS) -> None:
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: collections.OrderedDict[K, tuple[float, float]] = collections.OrderedDict()  # tokens, when

    def take(self, key: K) -> float:
        """Take a token of ``key``'s bucket: 0 when there was one, else the seconds until there is (Retry-After)."""
        now = time.monotonic()
        tokens, then = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1 if not wait else tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait


class Answers(Generic[K, V]):
    """Each key's answer, kept ``ttl(answer)`` seconds; while a key's answer is being fetched, the others asking for
    it wait for that one fetch (a burst of one token costs one TokenReview). A fetch that raises is not kept."""

    def __init__(self, ttl: Callable[[V], float], max_keys: int = MAX_KEYS) -> None:
        self.ttl, self.max_keys = ttl, max_keys
        self._kept: collections.OrderedDict[K, tuple[float, V]] = collections.OrderedDict()  # expiry, answer
        self._fetching: dict[K, asyncio.Future[V]] = {}

    async def get(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        kept = self._kept.get(key)
        if kept is not None and kept[0] > time.monotonic():
            self._kept.move_to_end(key)
            return kept[1]
        pending = self._fetching.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._fetching[key] = future
        try:
            answer = await fetch()
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        except BaseException:  # cancelled: so are those waiting for it
            future.cancel()
            raise
        finally:
            del self._fetching[key]
        future.set_result(answer)
        self.put(key, answer)
        return answer

    def put(self, key: K, answer: V) -> None:
        """Keep ``answer`` for ``key`` (replacing any) for ``ttl(answer)`` seconds."""
        self._kept.pop(key, None)
        self._kept[key] = (time.monotonic() + self.ttl(answer), answer)
        while len(self._kept) > self.max_keys:
            self._kept.popitem(last=False)

    def recent(self, key: K) -> V | None:
        """``key``'s answer if it is still kept, else None."""
        kept = self._kept.get(key)
        return kept[1] if kept is not None and kept[0] > time.monotonic() else None
