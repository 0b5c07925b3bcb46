"""The metrics logger: rows with wall time and env-steps/s; plain progress lines off a TTY."""

import numpy as np
import pytest

import jaxgrid.train.logger as logger_module
from jaxgrid.train.logger import MetricsLogger, read_metrics

STEPS_PER_UPDATE = 192  # env steps of one member's update


def _metrics(member: int, update: int) -> dict:
    """One member's metrics of one update, as the host callback passes them."""
    return {
        "member": np.int32(member),
        "update": np.int32(update),
        "env_steps": np.int32(update * STEPS_PER_UPDATE),
        "episodes": np.int32(8),
        "episode_return": np.float32(-10.0 + update),
        "actor_loss": np.float32(0.0),
        "value_loss": np.float32(1.0),
        "entropy": np.float32(0.5),
        "episode_objectives": np.zeros(1, np.float32),
        "episode_costs": np.zeros(0, np.float32),
    }


class Clock:
    """A stand-in for ``time.monotonic``: the test moves it."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(1000.0)
    monkeypatch.setattr(logger_module.time, "monotonic", clock)
    return clock


def _logger(out, progress=False, **kwargs) -> MetricsLogger:
    return MetricsLogger(out, ["profit"], [], 3, members=2, progress=progress, **kwargs)


def test_rows_carry_the_run_s_wall_time_and_env_steps_per_s(tmp_path, clock):
    with _logger(tmp_path) as logger:  # created at t = 1000 s
        logger.resume_at(0)
        for update, now in ((1, 1008.0), (2, 1012.0)):
            clock.now = now
            logger(_metrics(0, update))
            logger(_metrics(1, update))
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["wall_time_s"] for r in rows] == [8.0, 8.0, 12.0, 12.0]
    # the first row of a session includes compiling: no rate; then 192 steps in 4 s
    assert [r["env_steps_per_s"] for r in rows] == [None, None, 48.0, 48.0]

    # a session resumed after update 1 counts wall time on from that update's rows
    clock.now = 2000.0
    with _logger(tmp_path) as logger:
        logger.resume_at(1)
        clock.now = 2005.0
        logger(_metrics(0, 2))
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [(r["update"], r["wall_time_s"]) for r in rows] == [(1, 8.0), (1, 8.0), (2, 13.0)]


def test_off_a_terminal_progress_is_a_plain_line_every_few_seconds(
    tmp_path, clock, capsys, monkeypatch
):
    monkeypatch.setenv("TTY_INTERACTIVE", "0")  # rich's switch: not a live terminal
    with _logger(tmp_path, progress=True, progress_every_s=5.0) as logger:
        for update, now in ((1, 1008.0), (2, 1011.0), (3, 1014.0)):
            clock.now = now
            logger(_metrics(0, update))
            logger(_metrics(1, update))
    lines = capsys.readouterr().out.splitlines()
    # update 2 came 3 s after the line of update 1; the last update always gets a line
    assert lines == [
        "update 1/3 · 384 env-steps · return -9",
        "update 3/3 · 1,152 env-steps · 128 env-steps/s · return -7",
    ]
