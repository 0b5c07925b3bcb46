"""Compile time of every registered environment's step and reset, as users jit them.

    python benchmarks/compile_time.py [--envs NAME ...] [--batch N] [--repeats N] [--out FILE]

For each environment, ``jax.jit(jax.vmap(env.step))`` and ``jax.jit(jax.vmap(env.reset))``
at ``--batch`` environments (default 1024; the program's size does not depend on it) are
traced, lowered and compiled ahead of time (``.trace().lower().compile()``), so that no
run is counted, in one process with JAX's persistent compilation cache off and JAX's
in-memory caches cleared before each environment. "trace" is Python tracing and lowering
to StableHLO; "compile" is XLA's optimisation and code generation; "fusions" counts the
fused kernels of the compiled step, identical ones included (XLA generates code once
for those: ``kernel_cost.py`` counts the kernels it compiles, about 10 ms each here). The
issue's goal (#23) is a step that compiles in < 5 s on a 2-core CPU.

With ``--repeats N`` (N > 1) each environment is measured in N fresh processes, one after
the other, and the table gives the medians, with every run's step total beside them: what
a user who starts a process and jits the step waits, one-off work included (whatever a
process traces or compiles once), and a verdict that one run does not decide: in one
process the same program's time depended on what the process had compiled before it
(``tso14-v0``'s step 4.7-5.8 s), in fresh processes its runs agree to 0.1-0.3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import warnings

from timing import add_row, ahead_of_time, emit_table, under_goal

GOAL_S = 5.0


def measure(name: str, batch: int) -> dict:
    """Seconds to trace and to compile ``vmap(step)`` and ``vmap(reset)`` of ``name``."""
    import jax

    import jaxgrid

    jax.clear_caches()
    env, params = jaxgrid.make(name)
    keys = jax.random.split(jax.random.PRNGKey(0), batch)
    row = {"name": name, "agents": env.num_agents}

    def timed(label, fn, *args):
        row[f"{label}_trace"], row[f"{label}_compile"], compiled = ahead_of_time(fn, *args)
        return compiled

    timed("reset", jax.vmap(env.reset, in_axes=(0, None)), keys, params)  # first: not cached yet
    step = timed("step", *batched_step(env, params, keys))
    row["fusions"] = step.as_text().count(" fusion(")
    return row


def batched_step(env, params, keys):
    """``(fn, *args)``: ``jax.vmap(env.step)`` and the arguments it is compiled at (shapes
    only), one environment a key of ``keys``."""
    import jax

    _, state = jax.eval_shape(jax.vmap(env.reset, in_axes=(0, None)), keys, params)
    action = jax.eval_shape(jax.vmap(env.action_space(params).sample), keys)
    return jax.vmap(env.step, in_axes=(0, 0, 0, None)), keys, state, action, params


def in_fresh_processes(name: str, batch: int, repeats: int) -> dict:
    """:func:`measure` of ``name`` in ``repeats`` fresh processes: each figure the median,
    ``runs`` every run's step trace + compile."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, __file__, "--child", name, "--batch", str(batch)],
            capture_output=True,
            text=True,
            check=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    row = dict(runs[0])
    for key in ("step_trace", "step_compile", "reset_trace", "reset_compile"):
        row[key] = statistics.median(r[key] for r in runs)
    totals = [r["step_trace"] + r["step_compile"] for r in runs]
    row["step_total"] = statistics.median(totals)
    row["runs"] = totals
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", nargs="*", help="only these environments")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument(
        "--repeats", type=int, default=1, help="fresh processes per environment (median) if > 1"
    )
    parser.add_argument("--out", help="also write the table to this markdown file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    if args.child:
        print(json.dumps(measure(args.child, args.batch)))
        return 0
    import jaxgrid

    fresh = args.repeats > 1

    lines = [
        f"Seconds to trace and compile `jax.jit(jax.vmap(...))` at {args.batch} environments "
        f"on {jax.devices()[0].device_kind} ({os.cpu_count()} cores), one XLA device, "
        "ahead of time (no run counted), "
        + (
            f"each environment in {args.repeats} fresh processes, medians."
            if fresh
            else "caches cleared before each environment."
        ),
        "",
        "| environment | agents | step: trace s | step: compile s | step fusions "
        f"| reset: trace s | reset: compile s | step < {GOAL_S:g} s |"
        + (" step runs: trace + compile s |" if fresh else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if fresh else ""),
    ]
    for name in args.envs or jaxgrid.list_envs():
        if fresh:
            r = in_fresh_processes(name, args.batch, args.repeats)
        else:
            r = measure(name, args.batch)
        total = r.get("step_total", r["step_trace"] + r["step_compile"])
        line = (
            f"| {name} | {r['agents']} | {r['step_trace']:.1f} | {r['step_compile']:.1f} "
            f"| {r['fusions']} | {r['reset_trace']:.1f} | {r['reset_compile']:.1f} "
            f"| {under_goal(total, GOAL_S)} |"
        )
        if fresh:
            line += " " + ", ".join(f"{t:.1f}" for t in r["runs"]) + " |"
        add_row(lines, line)
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
