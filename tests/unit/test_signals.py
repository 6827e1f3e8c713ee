"""Ctrl-C held while the record is finished (specexp.signals.deferred): blocks inside blocks."""

import os
import signal

import pytest

from specexp import signals


@pytest.mark.usefixtures("sigint_handled")
def test_a_block_inside_another_leaves_a_held_ctrl_c_to_the_outer_one() -> None:
    """A server's stop holds Ctrl-C itself, and the sweep's end calls it inside its own hold: the
    inner block must not raise the Ctrl-C there, before the outer block has written the summary."""
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), signals.deferred():
        with signals.deferred():  # the servers' stop
            os.kill(os.getpid(), signal.SIGINT)
        done.append("summary written")
    assert done == ["summary written"]


@pytest.mark.usefixtures("sigint_handled")
def test_a_ctrl_c_held_while_an_interrupt_is_handled_already_is_not_raised_again() -> None:
    with signals.deferred(reraise=False):
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
