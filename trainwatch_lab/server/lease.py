"""Who keeps the server's sampler alive, apart from what it watches.

An idle JupyterLab should cost nothing, so the sampler runs only while somebody wants its
numbers: a WebSocket client for as long as it is connected (and a grace period after it
left, so a page reload does not restart it), a REST call for that grace period, and a
Prometheus scrape of ``/trainwatch-lab/metrics`` until the next scrape is due. A sampler
restarted between two scrapes would find no rates and no fill trend, so a scrape holds the
sampler for ``scrape_lease_s`` or three of the intervals seen between scrapes, whichever is
longer. Plain bookkeeping on the event loop: no thread, no clock but the one given.
"""

from __future__ import annotations

import time
from collections.abc import Callable

SCRAPES_HELD = 3  # a scrape holds the sampler for this many scrape intervals at least
MAX_SCRAPE_HOLD_S = 3600.0  # ... but a scraper seen once an hour does not keep it all day


class Lease:
    """Clients hold the lease until they leave; a REST call or a scrape holds it for a
    while. ``remaining()`` says how long until nobody holds it (None: a client is there)."""

    def __init__(
        self, grace_s: float, scrape_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.grace_s = grace_s
        self.scrape_s = scrape_s
        self.clock = clock
        self.clients = 0
        self._until = -float("inf")
        self._last_scrape: float | None = None
        self.scrape_interval_s: float | None = None  # between the last two scrapes

    def acquire(self) -> None:
        """A streaming client arrived."""
        self.clients += 1

    def release(self) -> None:
        """A streaming client left: the grace period starts when it was the last."""
        self.clients = max(0, self.clients - 1)
        if self.clients == 0:
            self.hold(self.grace_s)

    def hold(self, seconds: float) -> None:
        """Held for at least ``seconds`` from now (a REST call: the grace period)."""
        self._until = max(self._until, self.clock() + seconds)

    def scraped(self) -> float:
        """A scrape arrived: held until the next one is overdue. Returns for how long."""
        now = self.clock()
        if self._last_scrape is not None:
            self.scrape_interval_s = now - self._last_scrape
        self._last_scrape = now
        seconds = max(
            self.scrape_s, min(SCRAPES_HELD * (self.scrape_interval_s or 0.0), MAX_SCRAPE_HOLD_S)
        )
        self.hold(seconds)
        return seconds

    def remaining(self) -> float | None:
        """Seconds until nobody holds the lease (0: nobody does now); None while a client
        is connected."""
        if self.clients > 0:
            return None
        return max(0.0, self._until - self.clock())

    @property
    def held(self) -> bool:
        left = self.remaining()
        return left is None or left > 0
