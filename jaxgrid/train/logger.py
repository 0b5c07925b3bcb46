"""Training metrics to JSONL and CSV (and TensorBoard), with a progress bar.

A :class:`MetricsLogger` is the ``log`` function of :func:`jaxgrid.train.ppo.make_train`:
the compiled program calls it through a host callback every ``log_every`` updates, once
per sweep member, with that member's metrics of the update. Each call becomes one JSON
line (objectives and costs by name) in ``metrics.jsonl``, one row of ``metrics.csv`` and,
optionally, TensorBoard scalars tagged by member.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from pathlib import Path

import numpy as np

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


def flatten(metrics: dict, objective_names, cost_names) -> dict:
    """One member's metrics of one update as a flat ``{name: float}`` row."""
    row = {k: float(np.asarray(metrics[k])) for k in FIELDS}
    row["member"], row["update"] = int(row["member"]), int(row["update"])
    row["env_steps"], row["episodes"] = int(row["env_steps"]), int(row["episodes"])
    for prefix, names, values in (
        ("objective", objective_names, metrics["episode_objectives"]),
        ("cost", cost_names, metrics["episode_costs"]),
    ):
        for name, value in zip(names, np.asarray(values).reshape(-1).tolist(), strict=True):
            row[f"{prefix}/{name}"] = float(value)
    return row


def read_metrics(path: Path) -> list[dict]:
    """The rows of a ``metrics.jsonl``."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def truncate_metrics(out: Path, last_update: int) -> None:
    """Drop rows after ``last_update`` (a run resumed from a checkpoint logs them again)."""
    path = Path(out) / "metrics.jsonl"
    rows = [r for r in read_metrics(path) if r["update"] <= last_update]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    csv_path = Path(out) / "metrics.csv"
    if csv_path.exists():
        csv_path.unlink()
        for row in rows:
            _append_csv(csv_path, row)


def _append_csv(path: Path, row: dict) -> None:
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


class MetricsLogger:
    """Host-side sink for training metrics (see the module docstring).

    Args:
        out: run directory; ``metrics.jsonl`` and ``metrics.csv`` are appended to.
        objective_names, cost_names: names of the environment's objectives and costs.
        total_updates: updates of the whole run, for the progress bar.
        members: sweep members; the bar advances when all of them reported an update.
        progress: show a rich progress bar with env-steps/s and the latest mean return.
        tensorboard: also write TensorBoard scalars (needs ``tensorboardX``).
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
    ):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.objective_names, self.cost_names = tuple(objective_names), tuple(cost_names)
        self.total_updates, self.members = total_updates, members
        self._lock = threading.Lock()
        self._pending: dict[int, list[dict]] = {}
        self._writer = None
        if tensorboard:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:
                raise UserError(
                    "--tensorboard needs tensorboardX: pip install 'jaxgrid[tensorboard]'"
                ) from None
            self._writer = SummaryWriter(str(self.out / "tensorboard"))
        self._progress = self._task = None
        if progress:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("[bold]training"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} updates"),
                TextColumn("{task.fields[speed]}"),
                TextColumn("return {task.fields[ret]}"),
                TimeRemainingColumn(),
            )
        self._start = self._start_steps = None

    def __enter__(self):
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task(
                "train", total=self.total_updates, speed="", ret=""
            )
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.stop()
        if self._writer is not None:
            self._writer.close()

    def resume_at(self, update: int) -> None:
        """Start the bar at ``update`` (after a restore)."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=update)

    def __call__(self, metrics: dict) -> None:
        row = flatten(metrics, self.objective_names, self.cost_names)
        with self._lock:
            with (self.out / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(row) + "\n")
            _append_csv(self.out / "metrics.csv", row)
            if self._writer is not None:
                for k, v in row.items():
                    if k not in ("member", "update", "env_steps"):
                        self._writer.add_scalar(f"member{row['member']}/{k}", v, row["env_steps"])
            rows = self._pending.setdefault(row["update"], [])
            rows.append(row)
            if len(rows) == self.members:
                self._advance(self._pending.pop(row["update"]))

    def _advance(self, rows: list[dict]) -> None:
        now, steps = time.perf_counter(), sum(r["env_steps"] for r in rows)
        if self._start is None:
            self._start, self._start_steps, speed = now, steps, ""
        else:
            rate = (steps - self._start_steps) / max(now - self._start, 1e-9)
            speed = f"{rate:,.0f} env-steps/s"
        mean_return = np.mean([r["episode_return"] for r in rows])
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, completed=rows[0]["update"], speed=speed, ret=f"{mean_return:.3g}"
            )
