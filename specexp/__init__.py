"""specexp: declarative experiments for LLM inference with speculative decoding."""

__version__ = "0.1.0"
