"""server.lease with a hand-moved clock: a client holds the sampler until it leaves, then
the grace period; a REST call holds it for the grace; a scrape until the next is overdue
(the configured lease, or three scrape intervals when they are longer, at most an hour)."""

from __future__ import annotations

from trainwatch_lab.server.lease import Lease


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_clients_hold_it_until_they_leave_then_the_grace() -> None:
    clock = Clock()
    lease = Lease(grace_s=10, scrape_s=180, clock=clock)
    assert not lease.held and lease.remaining() == 0
    lease.acquire()
    lease.acquire()
    clock.now += 3600
    assert lease.held and lease.remaining() is None
    lease.release()
    assert lease.remaining() is None  # one is still there
    lease.release()
    assert lease.remaining() == 10
    clock.now += 10
    assert not lease.held
    lease.release()  # a stray release never goes below zero
    assert lease.clients == 0


def test_a_rest_call_holds_it_for_the_grace() -> None:
    clock = Clock()
    lease = Lease(grace_s=10, scrape_s=180, clock=clock)
    lease.hold(10)
    clock.now += 9
    assert lease.held
    lease.hold(1)  # a shorter hold never shortens a longer one
    assert lease.remaining() == 1
    clock.now += 1.5
    assert not lease.held


def test_a_scrape_holds_it_until_the_next_is_overdue() -> None:
    clock = Clock()
    lease = Lease(grace_s=10, scrape_s=180, clock=clock)
    assert lease.scraped() == 180  # Prometheus's default interval is 1 min: three of them
    clock.now += 15
    assert lease.scraped() == 180 and lease.scrape_interval_s == 15
    clock.now += 300  # a scraper every 5 min: held for three of its intervals
    assert lease.scraped() == 900
    clock.now += 899
    assert lease.held
    clock.now += 2
    assert not lease.held
    clock.now += 86400  # one a day holds it an hour, not three days
    assert lease.scraped() == 3600
