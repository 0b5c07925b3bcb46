"""XLA settings jaxgrid needs before JAX starts its backend.

jaxlib 0.10's CPU LAPACK kernels (LU, Cholesky, QR, triangular solves: every
``jnp.linalg`` factorisation) split a large enough batch into chunks, hand the chunks to
XLA's intra-op thread pool and block their own thread until the chunks are done
(``ParallelBatchMap`` in ``jaxlib/cpu/lapack_kernels.cc``). The kernel itself runs on a
thread of that pool, so when as many such kernels run at once as the pool has threads,
every thread waits for chunks that no thread is left to run, for ever. Seen here on a
2-core machine (a pool of 2 threads), with ``gdb`` showing every pool thread in
``BlockingCounter::Wait`` under ``lapack_*getrf_ffi``:

- a batch split over two XLA host devices (``--xla_force_host_platform_device_count=2``)
  whose step factorises a matrix per environment: ``voltage123-v0`` (the regulators'
  tap system) and ``tso118-v0`` (the DC-OPF's Newton system) at 64 environments;
- a ``vmap`` of network initialisations (the orthogonal initialiser's QR), whose
  independent factorisations XLA's concurrency-optimised scheduler ran side by side.

Two settings, each applied only where the user has not chosen a value:

- Where the process splits its CPU into ``d > 1`` XLA host devices
  (``--xla_force_host_platform_device_count`` in ``XLA_FLAGS``, or
  ``JAX_NUM_CPU_DEVICES``), ``PJRT_NPROC`` (read by XLA's CPU client to size that pool)
  is set to ``max(cores, d + 1)``: with one kernel waiting per device, a thread stays
  free to run the chunks. It costs speed: threads beyond the cores made split programs
  with no factorisation 20-45 % slower at 4096 environments here (docs, Benchmarks,
  "Test-suite time and XLA flags"), so a single device keeps XLA's default pool, and a
  user who splits a CPU for environments that factorise nothing may set ``PJRT_NPROC``
  to the cores.
- ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` in ``XLA_FLAGS`` keeps one
  program from starting its independent factorisations at once.
"""

from __future__ import annotations

import os
import re

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
POOL_VARIABLES = ("PJRT_NPROC", "NPROC")  # XLA's CPU client reads them in this order


def avoid_cpu_scheduler_hang() -> None:
    """Add ``CPU_SCHEDULER_FLAG=false`` to ``XLA_FLAGS`` unless the user chose a value."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()


def usable_cores() -> int:
    """The number of cores this process may run on (its CPU affinity where the OS has
    one, as XLA counts them)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def forced_cpu_devices() -> int:
    """The number of XLA host devices the environment asks for (1 if it does not)."""
    found = re.search(
        r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", "")
    )
    if found:
        return int(found.group(1))
    return int(os.environ.get("JAX_NUM_CPU_DEVICES", "1") or 1)


def widen_cpu_thread_pool() -> None:
    """Set ``PJRT_NPROC`` to ``max(cores, d + 1)`` where ``d`` =
    :func:`forced_cpu_devices` exceeds 1, unless ``PJRT_NPROC`` or ``NPROC`` is set."""
    devices = forced_cpu_devices()
    if devices > 1 and not any(name in os.environ for name in POOL_VARIABLES):
        os.environ["PJRT_NPROC"] = str(max(usable_cores(), devices + 1))
