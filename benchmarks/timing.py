"""Timing shared by the benchmarks: the first call (compilation included) timed apart,
then the median of repeated calls."""

from __future__ import annotations

import time


def median_time(fn, args, repeats: int, min_time: float = 1.0):
    """``(median_s, first_s, out)``: ``fn(*args)`` called once (``first_s``: compilation
    and one run for a jitted function), then at least ``repeats`` times and for at least
    ``min_time`` seconds; ``median_s`` is the median of those calls, each waited for with
    ``jax.block_until_ready`` (a no-op on NumPy results)."""
    import jax
    import numpy as np

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first_s = time.perf_counter() - t0
    times, start = [], time.perf_counter()
    while len(times) < repeats or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), first_s, out


def ahead_of_time(fn, *args):
    """``(trace s, compile s, compiled)``: ``jax.jit(fn)`` traced and lowered, then
    compiled, ahead of time at ``args`` (arrays or ``jax.ShapeDtypeStruct``s; nothing runs)."""
    import jax

    t0 = time.perf_counter()
    lowered = jax.jit(fn).trace(*args).lower()
    t1 = time.perf_counter()
    compiled = lowered.compile()
    return t1 - t0, time.perf_counter() - t1, compiled


def under_goal(seconds: float, goal_s: float) -> str:
    """A table cell: whether ``seconds`` is under ``goal_s``, with the seconds."""
    return f"{'yes' if seconds < goal_s else 'no'} ({seconds:.1f})"


def add_row(lines: list[str], line: str) -> None:
    """Print a table row as soon as it is measured and keep it for :func:`emit_table`."""
    print(line, flush=True)
    lines.append(line)


def emit_table(lines: list[str], out: str | None) -> None:
    """Print a benchmark's markdown table (``lines``) whole, and write it to ``out`` if
    given (the scripts' ``--out FILE``)."""
    from pathlib import Path

    text = "\n".join(lines)
    print("\n" + text)
    if out:
        Path(out).write_text(text + "\n")
