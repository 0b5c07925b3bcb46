"""XLA settings jaxgrid needs before JAX starts its backend.

XLA's CPU runtime can wait forever on a program whose independent operations it runs
concurrently (seen with jaxlib 0.10 on 2-core machines: a ``vmap`` of network
initialisations never returns from ``block_until_ready``, every thread idle). Its
concurrency-optimised scheduler is what orders them so; turning it off removes the hang.
The flag only concerns the CPU backend, and a value the user set in ``XLA_FLAGS`` wins.
"""

from __future__ import annotations

import os

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def avoid_cpu_scheduler_hang() -> None:
    """Add ``CPU_SCHEDULER_FLAG=false`` to ``XLA_FLAGS`` unless the user chose a value."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
