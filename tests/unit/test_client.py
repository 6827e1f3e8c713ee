"""Spreading a usage total over chunks that carried no token ids."""

from specexp.load.client import fit_chunk_tokens
from specexp.records import Chunk


def test_counts_follow_text_share_and_sum_exactly() -> None:
    chunks = [Chunk(0.0, 1, "a"), Chunk(0.1, 1, "bbb"), Chunk(0.2, 1, "cc")]
    fit_chunk_tokens(chunks, 6)
    assert [c.tokens for c in chunks] == [1, 3, 2]


def test_matching_counts_are_left_alone() -> None:
    chunks = [Chunk(0.0, 1, "hello"), Chunk(0.1, 1, "x")]
    fit_chunk_tokens(chunks, 2)
    assert [c.tokens for c in chunks] == [1, 1]
