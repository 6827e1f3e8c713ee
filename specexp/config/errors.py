"""The one error of a bad setting: its dotted key, what is wrong, and the fix."""

from __future__ import annotations


class ConfigError(ValueError):
    """An invalid setting, named by its dotted key, with how to fix it."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{key}: {problem}. Fix: {fix}")
        self.key = key
