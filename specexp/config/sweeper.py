"""hydra.sweeper's schema for specexp's sweeper: a server-ordered grid, an Optuna study or the
adaptive crossover search."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from specexp.config.errors import ConfigError
from specexp.config.workload import length_bucket


@dataclass
class TuneConf:
    """hydra.sweeper keys for ``mode: optuna``, named as hydra-optuna-sweeper names them."""

    n_trials: int = 12  # the study's total, across reruns and parallel workers on one storage
    timeout: float | None = None  # seconds for this invocation
    storage: str | None = None  # None: sqlite:///<outputs>/optuna.db; or any SQLAlchemy URL, or journal:///path
    # The Optuna study's name in its storage (a second run with the same name resumes it).
    study_name: str = "specexp"
    direction: Any = "maximize"  # or a list, one per objective
    objective: Any = "output_throughput"  # a metric key (docs/METRICS.md lists them), or a list of them
    constraints: list[str] = field(default_factory=list)  # e.g. ["ttft_ms_p99 <= 500"]
    # Optuna's sampler: tpe, random, grid, bruteforce, nsga2, cmaes, qmc or gp. A discrete space of at
    # most n_trials configurations is measured whole, each once (bruteforce), whichever is named.
    sampler: str = "tpe"
    # The sampler's seed; null: a fresh one each run.
    seed: int | None = 0
    conditions: dict[str, str] = field(default_factory=dict)  # key -> "other.key > 1"
    batches: list[int] | None = None  # measure each trial at these batch sizes (one objective per batch)


@dataclass
class CrossoverConf:
    """hydra.sweeper.crossover for ``mode: crossover``: where the adaptive search looks for the
    break-even batch (specexp.sweep.crossover), how closely, and how many batches it may measure."""

    batch_min: int = 1
    batch_max: int = 64
    # located when the break-even's 95% interval lies between two measured batches this far apart
    resolution: int = 1
    max_points: int = 6  # batches measured per search (each on both arms), the two ends included
    # One search per context length: prompt tokens of random prompts (workload.input_len), or length
    # buckets "lo-hi" of a dataset workload (workload.length_bucket); empty: the workload's own.
    input_lens: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        key = "hydra.sweeper.crossover"
        if self.batch_min < 1:
            raise ConfigError(f"{key}.batch_min", f"{self.batch_min} < 1", "use a batch of 1 or more")
        if self.batch_max <= self.batch_min:
            raise ConfigError(
                f"{key}.batch_max", f"{self.batch_max} <= batch_min {self.batch_min}", "give a range, e.g. 1 and 64"
            )
        if not 1 <= self.resolution < self.batch_max - self.batch_min + 1:
            raise ConfigError(
                f"{key}.resolution", f"{self.resolution} is not 1..the range", "use e.g. 1 (adjacent batches)"
            )
        if self.max_points < 2:
            raise ConfigError(f"{key}.max_points", f"{self.max_points} < 2", "allow at least the two ends")
        lens = [str(n).strip() for n in self.input_lens]
        for n in lens:
            if "-" in n:
                length_bucket(n, f"{key}.input_lens")
            elif not n.isdigit() or int(n) < 1:
                raise ConfigError(
                    f"{key}.input_lens",
                    f"{n!r} is neither a prompt length >= 1 nor a length bucket lo-hi",
                    "e.g. [16,128,512] for random prompts or [0-128,128-512] for a dataset",
                )
        if len({"-" in n for n in lens}) > 1 or len(set(lens)) != len(lens):
            raise ConfigError(
                f"{key}.input_lens",
                f"{lens} mixes lengths and buckets, or repeats one",
                "give distinct prompt lengths (random prompts) or distinct length buckets (a dataset)",
            )
        self.input_lens = lens

    @property
    def buckets(self) -> bool:
        """Whether input_lens names a dataset's length buckets rather than random prompts' lengths."""
        return any("-" in n for n in self.input_lens)


@dataclass
class SweeperConf(TuneConf):
    """specexp's sweeper (``hydra/sweeper=specexp``): a server-ordered grid (``mode: grid``) or an
    Optuna study (``mode: optuna``). One sweeper for both, because a preset cannot replace the sweeper
    the primary config selects."""

    _target_: str = "hydra_plugins.specexp_sweepers.SpecexpSweeper"
    mode: str = "grid"
    # Server groups running at once under a launcher that runs jobs side by side (submitit); None: all.
    max_batch_size: int | None = None
    params: dict[str, str] = field(default_factory=dict)
    crossover: CrossoverConf = field(default_factory=CrossoverConf)  # mode: crossover
