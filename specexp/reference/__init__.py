"""The reference engine: an OpenAI-compatible PyTorch server with continuous batching, real speculative
decoding (draft model or n-gram lookup) and exact speculation counters. Ground truth for specexp's tests;
start it with ``python -m specexp.reference`` (see ``__main__``)."""
