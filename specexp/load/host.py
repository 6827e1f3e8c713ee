"""What else the machine was doing during a window: the noise context recorded with every point.

The load average and CPU steal say how busy the host was (neighbours, a hypervisor); the client's
own CPU share says whether specexp's single event loop, rather than the server, may have set the
pace. Linux /proc where readable; a value that cannot be read is left out, never guessed.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

CLIENT_CPU_WARNING = 0.5  # of one core: past this the event loop's own delays start to show


def _cpu_ticks(stat: Path = Path("/proc/stat")) -> tuple[int, int] | None:
    """(steal, total) jiffies of all CPUs since boot; None where /proc/stat is unreadable."""
    try:
        fields = stat.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu" or len(fields) < 9:
        return None
    ticks = [int(v) for v in fields[1:]]
    return ticks[7], sum(ticks[:8])  # user nice system idle iowait irq softirq steal (guest is in user)


@dataclass(frozen=True)
class HostSample:
    wall: float  # monotonic seconds
    client_cpu: float  # this process's CPU seconds
    ticks: tuple[int, int] | None

    @classmethod
    def now(cls) -> HostSample:
        return cls(time.monotonic(), time.process_time(), _cpu_ticks())


def noise(start: HostSample, end: HostSample) -> dict[str, float]:
    """``client_cpu`` (share of one core), ``host_cpu_steal`` (share of all CPU time) between two
    samples, and the 1-minute ``host_load1`` now."""
    out: dict[str, float] = {}
    wall = end.wall - start.wall
    if wall > 0:
        out["client_cpu"] = (end.client_cpu - start.client_cpu) / wall
    if start.ticks and end.ticks and end.ticks[1] > start.ticks[1]:
        out["host_cpu_steal"] = (end.ticks[0] - start.ticks[0]) / (end.ticks[1] - start.ticks[1])
    with contextlib.suppress(OSError):
        out["host_load1"] = os.getloadavg()[0]
    return out
