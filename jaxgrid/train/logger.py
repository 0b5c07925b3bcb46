"""Training metrics to JSONL and CSV (and TensorBoard), with a progress bar.

A :class:`MetricsLogger` takes one sweep member's metrics of an update every
``log_every`` updates: from :func:`jaxgrid.train.run.train_run` between the chunks of
updates it runs, or as the ``log`` of :func:`jaxgrid.train.ppo.make_train`, which the
compiled program calls through a host callback. Each call becomes one JSON
line (objectives and costs by name; SAC's temperature ``alpha`` and mean ``q_value``;
APG's ``grad_norm`` and ``nonfinite_gradient``) in
``metrics.jsonl``, one row of ``metrics.csv`` and,
optionally, TensorBoard scalars tagged by member. Each row also carries ``wall_time_s``,
the run's training time so far in seconds (summed over the sessions of a resumed run), and
``env_steps_per_s``, the member's environment steps per second since its previous row of
the session (``None`` on a session's first row, whose time includes compilation).

Progress goes to stdout: a rich progress bar when stdout is interactive (a terminal or a
notebook), else a plain line at most every ``progress_every_s`` seconds (logs, CI, nohup).
"""

from __future__ import annotations

import csv
import json
import threading
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from jaxgrid.errors import UserError

FIELDS = (
    "member",
    "update",
    "env_steps",
    "episodes",
    "episode_return",
    "actor_loss",
    "value_loss",
    "entropy",
)
# SAC's temperature and mean Q-value; APG's gradient norm (before clipping, 0 where the
# update was skipped) and whether the gradient was not finite (the update skipped)
OPTIONAL = ("alpha", "q_value", "grad_norm", "nonfinite_gradient")


def flatten(metrics: dict, objective_names, cost_names) -> dict:
    """One member's metrics of one update as a flat ``{name: float}`` row."""
    row = {k: float(np.asarray(metrics[k])) for k in FIELDS}
    row["member"], row["update"] = int(row["member"]), int(row["update"])
    row["env_steps"], row["episodes"] = int(row["env_steps"]), int(row["episodes"])
    row.update({k: float(np.asarray(metrics[k])) for k in OPTIONAL if k in metrics})
    series = [
        ("objective", objective_names, metrics["episode_objectives"]),
        ("cost", cost_names, metrics["episode_costs"]),
    ]
    if "lagrange" in metrics:  # constrained training: multipliers and episode-cost estimates
        series += [
            ("lagrange", cost_names, metrics["lagrange"]),
            ("cost_estimate", cost_names, metrics["cost_estimate"]),
        ]
    for prefix, names, values in series:
        for name, value in zip(names, np.asarray(values).reshape(-1).tolist(), strict=True):
            row[f"{prefix}/{name}"] = float(value)
    return row


def read_metrics(path: Path) -> list[dict]:
    """The rows of a ``metrics.jsonl``."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def truncate_metrics(out: Path, last_update: int) -> list[dict]:
    """Drop rows after ``last_update`` (a run resumed from a checkpoint logs them again);
    returns the rows kept."""
    path = Path(out) / "metrics.jsonl"
    rows = [r for r in read_metrics(path) if r["update"] <= last_update]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv_path = Path(out) / "metrics.csv"
    if csv_path.exists():
        csv_path.unlink()
        for row in rows:
            _append_csv(csv_path, row)
    return rows


def _append_csv(path: Path, row: dict) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


class MetricsLogger:
    """Host-side sink for training metrics, and the run's progress (see the module docstring).

    Args:
        out: run directory; ``metrics.jsonl`` and ``metrics.csv`` are appended to.
        objective_names, cost_names: names of the environment's objectives and costs.
        total_updates: updates of the whole run, for the progress bar.
        members: sweep members; progress advances when all of them reported an update.
        progress: show progress (updates, env-steps/s, the latest mean return): a rich bar
            on an interactive stdout, else plain lines.
        tensorboard: also write TensorBoard scalars (needs ``tensorboardX``).
        progress_every_s: seconds of wall time between plain progress lines (the last
            update always gets one).
    """

    def __init__(
        self,
        out,
        objective_names,
        cost_names,
        total_updates: int,
        members: int = 1,
        progress: bool = True,
        tensorboard: bool = False,
        progress_every_s: float = 5.0,
    ):
        self.out = Path(out)
        self.objective_names, self.cost_names = tuple(objective_names), tuple(cost_names)
        self.total_updates, self.members = total_updates, members
        self.progress_every_s = progress_every_s
        self._lock = threading.Lock()
        self._pending: dict[int, list[dict]] = {}
        self._writer = _tensorboard_writer(self.out) if tensorboard else None
        self._console = Console()
        interactive = self._console.is_interactive or self._console.is_jupyter
        self._bar = _progress_bar(self._console) if progress and interactive else None
        self._plain_lines = progress and not interactive
        self._task = None
        self._wall_offset_s = 0.0
        self._session_start = self._last_line = time.monotonic()
        self._previous: dict[int, tuple[float, int]] = {}  # member: (time, env steps)
        self._start = self._start_steps = None

    def __enter__(self):
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task("train", total=self.total_updates, speed="", ret="")
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.stop()
        if self._writer is not None:
            self._writer.close()

    def say(self, message: str) -> None:
        """Print ``message`` as one line of stdout (above the bar, when there is one)."""
        self._console.print(message, markup=False, highlight=False, soft_wrap=True)

    def resume_at(self, update: int) -> None:
        """Continue after ``update`` (0, or a restored checkpoint's): drop the rows logged
        after it, count wall time on from its last row, and start the bar there."""
        kept = truncate_metrics(self.out, update)
        self._wall_offset_s = max((r.get("wall_time_s", 0.0) for r in kept), default=0.0)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=update)

    def __call__(self, metrics: dict) -> None:
        row = flatten(metrics, self.objective_names, self.cost_names)
        with self._lock:
            self._add_timing(row)
            with (self.out / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
            _append_csv(self.out / "metrics.csv", row)
            if self._writer is not None:
                for k, v in row.items():
                    if k not in ("member", "update", "env_steps") and v is not None:
                        self._writer.add_scalar(f"member{row['member']}/{k}", v, row["env_steps"])
            rows = self._pending.setdefault(row["update"], [])
            rows.append(row)
            if len(rows) == self.members:
                self._advance(self._pending.pop(row["update"]))

    def _add_timing(self, row: dict) -> None:
        """Add ``wall_time_s`` and ``env_steps_per_s`` (see the module docstring) to ``row``."""
        now = time.monotonic()
        row["wall_time_s"] = self._wall_offset_s + now - self._session_start
        previous = self._previous.get(row["member"])
        self._previous[row["member"]] = (now, row["env_steps"])
        row["env_steps_per_s"] = (
            None
            if previous is None
            else (row["env_steps"] - previous[1]) / max(now - previous[0], 1e-9)
        )

    def _advance(self, rows: list[dict]) -> None:
        now, steps = time.monotonic(), sum(r["env_steps"] for r in rows)
        if self._start is None:
            self._start, self._start_steps, speed = now, steps, ""
        else:
            rate = (steps - self._start_steps) / max(now - self._start, 1e-9)
            speed = f"{rate:,.0f} env-steps/s"
        update, mean_return = rows[0]["update"], np.mean([r["episode_return"] for r in rows])
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=update, speed=speed, ret=f"{mean_return:.3g}")
        last = update == self.total_updates
        if self._plain_lines and (last or now - self._last_line >= self.progress_every_s):
            self._last_line = now
            rate_part = f" · {speed}" if speed else ""
            self.say(
                f"update {update}/{self.total_updates} · {steps:,} env-steps{rate_part}"
                f" · return {mean_return:.3g}"
            )


def _tensorboard_writer(out: Path):
    """A TensorBoard writer into ``out/tensorboard``."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        raise UserError(
            "--tensorboard needs tensorboardX: pip install 'jaxgrid[tensorboard]'"
        ) from None
    return SummaryWriter(str(out / "tensorboard"))


def _progress_bar(console: Console):
    """A rich bar: updates done, env-steps/s, the latest mean return, time left."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]training"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} updates"),
        TextColumn("{task.fields[speed]}"),
        TextColumn("return {task.fields[ret]}"),
        TimeRemainingColumn(),
        console=console,
    )
