"""What the transmission steps' compile time is made of, and what 5 s would cost.

    python benchmarks/transmission_compile.py [--envs NAME ...] [--out FILE]

For each transmission environment (``tso*``: the ones whose step does not compile in
the 5 s of issue #23 on a 2-core CPU), three programs, each traced, lowered and compiled
ahead of time at 1024 environments in one process (JAX's persistent cache off, its
caches cleared before each) as :mod:`compile_time` does:

- the step as registered, ``jax.jit(jax.vmap(env.step))``;
- its DC-OPF alone: ``env.dispatch`` of the step's request
  (:func:`~jaxgrid.dispatch.dcopf_with_fallback`: copper plate, binding lines, interior
  point), ``jax.jit(jax.vmap(...))``: what the step cannot compile faster than;
- the step with the DC-OPF's binding-lines stage left out
  (``dcopf_with_fallback(..., binding_lines=False)``: every problem the copper plate
  leaves open goes to the interior point).

For the two steps the table also gives the run: ``jax.vmap(env.step)`` at 64
environments in a jitted ``lax.scan`` of 24 steps (random actions drawn beforehand),
milliseconds a step, median of 5 runs after compilation, and the rewards summed over
the run (the two DC-OPFs solve the same problems: their sums agree to the interior
point's tolerance).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

from compile_time import batched_step
from timing import add_row, ahead_of_time, emit_table

BATCH = 1024
RUN_ENVS, RUN_STEPS, RUN_REPEATS = 64, 24, 5


def without_binding_lines(env):
    """``env`` with its DC-OPF's binding-lines stage left out (a subclass, same data)."""
    from jaxgrid.dispatch import dcopf_with_fallback

    class InteriorPointOnly(type(env)):
        def dispatch(self, state, request, adjust, params):
            c, net, network, pd_mw, options = self.dispatch_problem(state, request, adjust, params)
            result = dcopf_with_fallback(
                network, pd_mw, iterations=self.iterations, binding_lines=False, **options
            )
            return c, net, result

    variant = object.__new__(InteriorPointOnly)
    variant.__dict__.update({k: v for k, v in vars(env).items() if k != "_jit_cache"})
    return variant


def compiled(fn, *args) -> dict:
    """Trace and compile seconds and fusions of ``jax.jit(fn)`` at ``args``."""
    trace_s, compile_s, program = ahead_of_time(fn, *args)
    return {"trace": trace_s, "compile": compile_s, "fusions": program.as_text().count(" fusion(")}


def run_ms(env, params) -> tuple[float, float]:
    """``(ms a step, rewards summed)`` of ``jax.vmap(env.step)`` in a scan (module docstring)."""
    import jax
    import jax.numpy as jnp

    n, steps = RUN_ENVS, RUN_STEPS
    keys = jax.random.split(jax.random.PRNGKey(0), n)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    space = env.action_space(params)
    draws = jax.random.split(jax.random.PRNGKey(1), steps * n).reshape(steps, n, -1)
    actions = jax.vmap(jax.vmap(space.sample))(draws)
    step_keys = jax.random.split(jax.random.PRNGKey(2), steps * n).reshape(steps, n, -1)

    def rollout(state, actions, step_keys):
        def body(state, xs):
            action, key = xs
            _, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                key, state, action, params
            )
            return state, jnp.sum(reward)

        return jax.lax.scan(body, state, (actions, step_keys))[1]

    program = jax.jit(rollout).lower(state, actions, step_keys).compile()
    rewards = jax.block_until_ready(program(state, actions, step_keys))
    times = []
    for _ in range(RUN_REPEATS):
        t0 = time.perf_counter()
        jax.block_until_ready(program(state, actions, step_keys))
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times) / steps, float(jnp.sum(rewards))


def measure(name: str) -> list[dict]:
    """The three rows of ``name`` (module docstring)."""
    import jax

    import jaxgrid

    rows = []
    for what in ("step", "DC-OPF alone", "step, no binding lines"):
        jax.clear_caches()
        env, params = jaxgrid.make(name)
        if what == "step, no binding lines":
            env = without_binding_lines(env)
        keys = jax.random.split(jax.random.PRNGKey(0), BATCH)
        step, *args = batched_step(env, params, keys)
        _, state, action, _ = args
        if what == "DC-OPF alone":

            def dispatch(state, action, env=env, params=params):
                request, adjust = env.request(action)
                return env.dispatch(state, request, adjust, params)[2]

            row = compiled(jax.vmap(dispatch), state, action)
        else:
            row = compiled(step, *args)
            row["run_ms"], row["rewards"] = run_ms(env, params)
        rows.append({"name": name, "what": what, **row})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="*", default=["tso14-v0", "tso118-v0", "tso300-v0"])
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    lines = [
        f"Seconds to trace and compile at {BATCH} environments on "
        f"{jax.devices()[0].device_kind} ({os.cpu_count()} cores), one XLA device, ahead of "
        f"time, caches cleared before each; the steps run at {RUN_ENVS} environments "
        f"(`jax.vmap(env.step)` in a scan of {RUN_STEPS} steps, median of {RUN_REPEATS}).",
        "",
        "| environment | program | trace s | compile s | trace + compile s | fusions "
        "| run, ms a step | rewards summed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in args.envs:
        for r in measure(name):
            run = f"{r['run_ms']:.2f}" if "run_ms" in r else "-"
            rewards = f"{r['rewards']:.6g}" if "rewards" in r else "-"
            add_row(
                lines,
                f"| {r['name']} | {r['what']} | {r['trace']:.1f} | {r['compile']:.1f} "
                f"| {r['trace'] + r['compile']:.1f} | {r['fusions']} | {run} | {rewards} |",
            )
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
