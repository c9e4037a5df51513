"""GPU health signals NVML gives: XID errors (events) and volatile uncorrectable ECC errors.

Why events: an XID (79 "fell off the bus", 48 double-bit ECC, 13/31/43 the application's own
faults...) is logged by the driver once; NVML hands it out only through an event set. The set
is created once, each GPU registered once for ``nvmlEventTypeXidCriticalError``, and drained
without waiting (timeout 0) every tick: a tick never blocks on it. The ECC count is the
volatile one (since the driver loaded): a count that grows means memory is failing now.
Failures end as data: a GPU without event or ECC support (most consumer boards) reports none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError (nvml.h)
MEMORY_ERROR_UNCORRECTED = 1  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED
VOLATILE_ECC = 0  # NVML_VOLATILE_ECC
_TIMEOUT = 10  # NVML_ERROR_TIMEOUT: no event pending
MAX_EVENTS_PER_TICK = 64  # a storm of XIDs must not stall the tick

Call = Callable[..., Any]


class XidEvents:
    """One NVML event set for XID errors over the visible GPUs."""

    def __init__(self) -> None:
        self._set: Any = None
        self._registered: set[str] = set()  # uuids, registered or refused
        self.broken = False  # the driver has no event sets: stop trying

    def register(self, nvml: Any, call: Call, handle: Any, uuid: str) -> None:
        """Register one GPU for XID events, once (NOT_SUPPORTED GPUs are remembered too)."""
        if self.broken or uuid in self._registered or handle is None:
            return
        self._registered.add(uuid)
        try:
            if self._set is None:
                self._set = call("nvmlEventSetCreate")
            call("nvmlDeviceRegisterEvents", handle, XID_CRITICAL_ERROR, self._set)
        except nvml.NVMLError as exc:
            log.debug("no XID events for %s: %s", uuid, exc)
            if self._set is None:
                self.broken = True
        except Exception:  # a library without the symbols: no events, ever
            log.debug("NVML event sets unavailable", exc_info=True)
            self.broken = True

    def drain(self, nvml: Any, call: Call) -> list[tuple[str, int]]:
        """(uuid, XID) of the events pending now; never waits."""
        if self._set is None or self.broken:
            return []
        out: list[tuple[str, int]] = []
        for _ in range(MAX_EVENTS_PER_TICK):
            try:
                data = call("nvmlEventSetWait_v2", self._set, 0)
                uuid = call("nvmlDeviceGetUUID", data.device)
            except nvml.NVMLError as exc:
                if getattr(exc, "value", None) != _TIMEOUT:
                    log.debug("NVML event wait failed: %s", exc)
                break
            except Exception:
                log.debug("NVML event wait failed", exc_info=True)
                self.broken = True
                break
            out.append((str(uuid), int(data.eventData)))
        return out

    def close(self, call: Call) -> None:
        event_set, self._set = self._set, None
        self._registered.clear()
        if event_set is not None:
            try:
                call("nvmlEventSetFree", event_set)
            except Exception:
                log.debug("nvmlEventSetFree failed", exc_info=True)
