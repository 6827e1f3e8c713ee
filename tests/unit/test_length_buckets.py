"""Length buckets of a dataset workload (workload.length_bucket, crossover.input_lens): the prompts
picked by their token count under the served model's tokenizer, and the one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from specexp.config import ConfigError, CrossoverConf, WorkloadConfig
from specexp.load.datasets import BUILTIN, conversations


def _sizes(tokenizer: Path) -> list[int]:
    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    return [len(tok.encode(text, add_special_tokens=False).ids) for text in BUILTIN]


def test_a_bucket_keeps_the_prompts_of_its_token_lengths(shared_outputs: Path) -> None:
    tokenizer = shared_outputs / "models" / "tiny" / "target"
    sizes = sorted(_sizes(tokenizer))
    cut = sizes[len(sizes) // 2]
    short = conversations(WorkloadConfig(kind="builtin", length_bucket=f"0-{cut}", length_tokenizer=str(tokenizer)))
    long = conversations(WorkloadConfig(kind="builtin", length_bucket=f"{cut}-9999", length_tokenizer=str(tokenizer)))
    assert len(short) == sum(n < cut for n in sizes) and len(long) == sum(n >= cut for n in sizes)
    assert {c.turns[0] for c in short}.isdisjoint(c.turns[0] for c in long)
    with pytest.raises(ConfigError) as err:  # an empty bucket says which lengths there are
        conversations(WorkloadConfig(kind="builtin", length_bucket="5000-6000", length_tokenizer=str(tokenizer)))
    assert err.value.key == "workload.length_bucket" and f"they have {sizes[0]}-{sizes[-1]}" in str(err.value)
    with pytest.raises(ConfigError) as err:
        conversations(WorkloadConfig(kind="builtin", length_bucket="0-64", length_tokenizer="/nonexistent"))
    assert err.value.key == "workload.length_tokenizer"


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"kind": "builtin", "length_bucket": "64"}, "workload.length_bucket"),
        ({"kind": "builtin", "length_bucket": "128-64"}, "workload.length_bucket"),
        ({"kind": "random", "length_bucket": "0-64"}, "workload.length_bucket"),
    ],
)
def test_bad_buckets_name_their_key(settings: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        WorkloadConfig(**settings)
    assert err.value.key == key and "\n" not in str(err.value)


def test_the_search_takes_lengths_or_buckets_never_both() -> None:
    assert CrossoverConf(input_lens=["0-128", "128-512"]).buckets
    assert not CrossoverConf(input_lens=[16, 128]).buckets  # type: ignore[list-item]
    for bad in (["16", "0-128"], ["0-128", "0-128"], ["x"], ["512-128"]):
        with pytest.raises(ConfigError) as err:
            CrossoverConf(input_lens=bad)
        assert err.value.key == "hydra.sweeper.crossover.input_lens" and "\n" not in str(err.value), bad
