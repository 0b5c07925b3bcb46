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

What jaxgrid does about it:

- ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` in ``XLA_FLAGS`` (unless the
  user chose a value) keeps one program from starting its independent factorisations at
  once.
- The three-phase port solver inverts its tap system with
  :func:`jaxgrid.numerics.small_inverse`, which uses no LAPACK on a CPU.
- The DC-OPF's interior point (``tso*``, ``gencos5-v0``) keeps LAPACK's Cholesky: on a
  CPU split into ``d`` host devices, set ``PJRT_NPROC`` (the size of XLA's CPU pool) to
  at least ``d + 1`` before JAX starts. jaxgrid does not set it for you: threads beyond
  the cores made split programs 20-45 % slower at 4096 environments and up to 5x slower
  at one (docs, Benchmarks, "Test-suite time and XLA flags").
"""

from __future__ import annotations

import os

CPU_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def avoid_cpu_scheduler_hang() -> None:
    """Add ``CPU_SCHEDULER_FLAG=false`` to ``XLA_FLAGS`` unless the user chose a value."""
    flags = os.environ.get("XLA_FLAGS", "")
    if CPU_SCHEDULER_FLAG not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {CPU_SCHEDULER_FLAG}=false".strip()
