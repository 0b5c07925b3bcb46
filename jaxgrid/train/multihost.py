"""Training on several hosts: one process per host, one program over all their devices.

Call :func:`initialize` first thing in every process (before any JAX computation); then
``jax.devices()`` lists every process's devices, and the trainer's sharding
(``PPOConfig.shard_envs``) splits the environment batch over all of them, so the same
training code runs on one host or many. Results equal a one-process run over the same
number of devices (``tests/train/test_multihost.py`` checks two processes on one machine
against one process with two devices).

Without arguments the cluster is detected from its environment (SLURM, Open MPI,
Kubernetes indexed jobs, Cloud TPU; see ``jax.distributed.initialize``); on CPUs the
collectives across processes go through Gloo, which :func:`initialize` selects.
"""

from __future__ import annotations

import jax


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Join this process to the others of a run (``host:port`` of process 0's coordinator,
    how many processes, this one's index; ``None``: from the cluster's environment)."""
    # the CPU backend's collectives across processes (GPUs and TPUs have their own)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
    )
