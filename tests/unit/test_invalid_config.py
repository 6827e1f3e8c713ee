"""The line a refused configuration exits with says every character of the refusal: Rich would read
``[datasets]`` in ``pip install 'specexp[datasets]'`` as a markup tag and drop it."""

import pytest

from specexp.config import ConfigError
from specexp.console import invalid_config_exits


def test_a_refusal_keeps_its_brackets(capsys) -> None:
    with pytest.raises(SystemExit) as exited, invalid_config_exits():
        raise ConfigError("workload.kind", "hf needs [datasets]", "pip install 'specexp[datasets]'")
    assert exited.value.code == 2
    said = capsys.readouterr().err.strip()
    assert said == "invalid configuration: workload.kind: hf needs [datasets]. Fix: pip install 'specexp[datasets]'"
