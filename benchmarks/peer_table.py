"""A side-by-side run: a Python peer against jaxgrid under ``vmap``, as a markdown table."""

from __future__ import annotations

import argparse
import os
import warnings
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


def side_by_side(argv, doc: str, peer: tuple, ours: tuple, sizes, title: str, agents: int) -> int:
    """The command line of a side-by-side benchmark: ``peer = (name, rate(turns))``,
    ``ours = (name, rate(num_envs, steps, repeats) -> (env-steps/s, compile s))``,
    ``sizes`` the ``(num_envs, steps)`` measured (``--quick``: a fifth of the steps)."""
    from env_throughput import _setup_devices

    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    _setup_devices()
    warnings.simplefilter("ignore")
    peer_name, peer_rate = peer
    our_name, our_rate = ours
    rate = peer_rate(100 if args.quick else 500)
    rows = [(peer_name, 1, rate, None)]
    for num_envs, steps in sizes:
        steps = steps // 5 if args.quick else steps
        rows.append((our_name, num_envs, *our_rate(num_envs, steps, 3 if args.quick else 7)))
    peer_table(title, rows, agents, rate, args.out)
    return 0
