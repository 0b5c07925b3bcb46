"""The markdown table of a side-by-side run: a Python peer against jaxgrid under ``vmap``."""

from __future__ import annotations

import os
from pathlib import Path


def peer_table(title: str, rows, agents: int, peer_rate: float, out=None) -> str:
    """Print (and write to ``out``) the table of ``rows`` ``(implementation, envs,
    env-steps/s, compile s or None)``, each against ``peer_rate``; returns its text."""
    import jax

    lines = [
        f"{title} on {jax.devices()[0].device_kind}, {os.cpu_count()} cores, "
        f"{len(jax.devices())} XLA devices; median of repeated runs.",
        "",
        "| implementation | envs | env-steps/s | agent-steps/s | x peer | compile s |",
        "|---|---|---|---|---|---|",
    ]
    for name, n, rate, compile_s in rows:
        c = f"{compile_s:.1f}" if compile_s is not None else "-"
        lines.append(
            f"| {name} | {n} | {rate:.3g} | {agents * rate:.3g} | {rate / peer_rate:.0f} | {c} |"
        )
    text = "\n".join(lines)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
    return text
