"""Python's cycle collector paused while an environment's method runs: its tracing, mostly.

Tracing ``jax.jit(jax.vmap(env.step))`` builds hundreds of thousands of short-lived
Python objects (tracers, equations, avals), and CPython's cycle collector counts every
allocation: about every 70,000 it runs a young collection, and every tenth of those an
older one, which walks every tracked object of the process (about 230,000 after
``import jaxgrid``, more with the user's own). Tracing ``tso14-v0``'s step ran one or
two full collections, 0.12-0.36 s of its 1.3-1.6 s of tracing and lowering (counted
with ``gc.callbacks``). The objects tracing makes are freed by reference counting; whatever
cycles they leave, the collector finds after the trace just as well.

:func:`gc_paused` therefore switches the collector off for the duration of a call and
back on after it, where it was on: nested calls (``step`` calls ``reset_env`` and
``step_env``) leave it to the outermost, a collector the caller had switched off stays
off, and an exception restores it. Called outside tracing (an eager step of a compiled
program) it costs a few function calls. :class:`~jaxgrid.env.Environment`'s ``reset``,
``step_env`` and ``step`` run under it. Tracing and lowering ``jax.vmap(env.step)``
at 1024 environments in fresh processes (four environments one after another, the
code before and after alternated four times, a 2-core CPU): ``voltage33-v0``
0.71-0.91 -> 0.58-0.77 s, ``ders33-v0`` 0.87-1.05 -> 0.76-0.86 s, ``tso118-v0``
3.30-3.74 -> 2.70-3.48 s, and ``tso14-v0``, the first one traced, 1.40-1.80 ->
1.24-1.83 s: the larger the process's heap, the more each full collection costs
(a notebook's heap is larger still).
"""

from __future__ import annotations

import functools
import gc


def gc_paused(fn):
    """``fn`` with Python's cycle collector off while it runs (see the module docstring)."""

    @functools.wraps(fn)
    def without_collection(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return without_collection
