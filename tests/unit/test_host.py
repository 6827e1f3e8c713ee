"""The noise context of a window from two host samples with known numbers."""

from pathlib import Path

import pytest

from specexp.load.host import HostSample, _cpu_ticks, noise


def test_client_share_of_a_core_and_the_hosts_steal() -> None:
    start = HostSample(wall=10.0, client_cpu=1.0, ticks=(50, 10_000))
    end = HostSample(wall=12.0, client_cpu=1.5, ticks=(70, 10_400))
    out = noise(start, end)
    assert out["client_cpu"] == pytest.approx(0.25)  # 0.5 CPU seconds over 2 s
    assert out["host_cpu_steal"] == pytest.approx(20 / 400)
    assert out["host_load1"] >= 0


def test_unreadable_steal_is_left_out_not_guessed(tmp_path: Path) -> None:
    assert "host_cpu_steal" not in noise(HostSample(0.0, 0.0, None), HostSample(1.0, 0.1, None))
    assert _cpu_ticks(tmp_path / "missing") is None
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 10 1 2 30 0 0\ncpu0 50 2 25 400 5 0 1 15 0 0\n")
    assert _cpu_ticks(stat) == (30, 100 + 5 + 50 + 800 + 10 + 1 + 2 + 30)
