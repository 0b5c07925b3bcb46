"""Compile time of every trainer's update, as ``jaxgrid train`` compiles it.

    python benchmarks/train_compile_time.py [--cases ALGO:ENV ...] [--repeats N] [--warm]
        [--out FILE]

For each case (an algorithm on an environment, with its tuned settings from
:mod:`jaxgrid.train.defaults`), ``jax.jit(fns.update_step)`` (one update: the rollout
of ``num_envs x num_steps`` environment steps, the advantages or targets, and every
gradient step of the update) is traced, lowered and compiled ahead of time
(``.trace().lower().compile()``), so that no run is counted, in one process with JAX's
persistent compilation cache off and JAX's in-memory caches cleared before each compile;
each figure is the median of ``--repeats`` compiles (this shared machine's compile times
vary by a third from one minute to the next), after one warm-up compile of XLA itself.
Beside it, the same for the environment's own ``jax.jit(jax.vmap(env.step))`` at the
trainer's batch: the part of the update that is the environment's. The issue's goal
(#23) is an update that compiles in < 5 s on a 2-core CPU.

With ``--warm`` each case is also run in two fresh processes sharing an empty
compilation cache set up as the ``jaxgrid`` command sets it up
(:func:`jaxgrid.cli.use_compilation_cache`, ``XDG_CACHE_HOME`` pointed at a temporary
folder): the first compiles and writes the update, the second's trace and compile (a
read of the cache) is what every later ``jaxgrid train`` of the same case waits.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import warnings

from timing import add_row, ahead_of_time, emit_table, under_goal

GOAL_S = 5.0
# (algorithm, environment): the trainers and the environments of the training table
CASES = (
    ("ppo", "arbitrage-v0"),
    ("ppo", "dso33-v0"),
    ("ippo", "smartgrid-v0"),
    ("ippo", "voltage33-v0"),
    ("ippo", "ders141-v0"),
    ("sac", "arbitrage-v0"),
    ("isac", "voltage33-v0"),
    ("apg", "arbitrage-v0"),
    ("iapg", "voltage33-v0"),
)


def _update_ahead_of_time(algo: str, env_name: str):
    """``(trace s, compile s, compiled, settings, env, params)`` of ``algo``'s update on
    ``env_name`` with the tuned settings."""
    import jax

    import jaxgrid
    from jaxgrid.train.run import ALGOS, RunConfig

    config = RunConfig(env=env_name, algo=algo)
    settings = config.algo_config()
    env, params = jaxgrid.make(env_name, **config.env_kwargs)
    fns = ALGOS[algo].make_train(settings, env, params)
    runner = jax.eval_shape(fns.init, jax.random.PRNGKey(0), params)
    return (*ahead_of_time(fns.update_step, runner, params), settings, env, params)


def measure(algo: str, env_name: str) -> dict:
    """Seconds to trace and compile ``algo``'s update on ``env_name``, and the env's step."""
    import jax

    jax.clear_caches()
    trace_s, compile_s, compiled, settings, env, params = _update_ahead_of_time(algo, env_name)
    row = {
        "algo": algo,
        "env": env_name,
        "batch": f"{settings.num_envs} x {settings.num_steps}"
        if hasattr(settings, "num_steps")
        else f"{settings.num_envs}",
        "trace": trace_s,
        "compile": compile_s,
        "fusions": compiled.as_text().count(" fusion("),
    }
    jax.clear_caches()
    keys = jax.random.split(jax.random.PRNGKey(0), settings.num_envs)
    _, state = jax.eval_shape(jax.vmap(env.reset, in_axes=(0, None)), keys, params)
    action = jax.eval_shape(jax.vmap(env.action_space(params).sample), keys)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    step_trace, step_compile, _ = ahead_of_time(step, keys, state, action, params)
    row["env_step"] = step_trace + step_compile
    return row


def median_of(algo: str, env_name: str, repeats: int) -> dict:
    """:func:`measure` ``repeats`` times; each timing the median, the rest the first's."""
    runs = [measure(algo, env_name) for _ in range(repeats)]
    row = dict(runs[0])
    for name in ("trace", "compile", "env_step"):
        row[name] = statistics.median(r[name] for r in runs)
    return row


def _child(case: str) -> int:
    """One case in this fresh process, with the ``jaxgrid`` command's compilation cache:
    prints ``{"trace": s, "compile": s}``."""
    from jaxgrid.cli import use_compilation_cache

    use_compilation_cache()
    trace_s, compile_s, *_ = _update_ahead_of_time(*case.split(":", 1))
    print(json.dumps({"trace": trace_s, "compile": compile_s}))
    return 0


def warm_start(algo: str, env_name: str) -> float:
    """Seconds a second fresh process takes to trace the update and compile it from the
    cache the first one wrote (see the module docstring)."""
    with tempfile.TemporaryDirectory() as folder:
        environ = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
        environ["XDG_CACHE_HOME"] = folder
        runs = []
        for _ in range(2):
            out = subprocess.run(
                [sys.executable, __file__, "--child", f"{algo}:{env_name}"],
                env=environ,
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs[1]["trace"] + runs[1]["compile"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", nargs="*", help="only these, as ALGO:ENV (ippo:ders141-v0)")
    parser.add_argument("--repeats", type=int, default=3, help="compiles per case (median)")
    parser.add_argument(
        "--warm", action="store_true", help="also time a second process's start from the cache"
    )
    parser.add_argument("--out", help="also write the table to this markdown file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.child:
        return _child(args.child)
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    cases = [tuple(c.split(":", 1)) for c in args.cases] if args.cases else CASES
    jax.jit(lambda x: x + 1).lower(1.0).compile()  # XLA's own start-up, counted in no case
    lines = [
        "Seconds to trace and compile one update (`jax.jit(update_step)`, the tuned settings) "
        f"on {jax.devices()[0].device_kind} ({os.cpu_count()} cores), one XLA device, ahead "
        f"of time (no run counted), caches cleared before each, median of {args.repeats}; the "
        "environment's "
        "`jax.jit(jax.vmap(env.step))` at the trainer's batch beside it"
        + (
            "; a second fresh process's trace and compile from the compilation cache the "
            "first wrote (`jaxgrid train`'s)."
            if args.warm
            else "."
        ),
        "",
        "| algo | env | envs x steps | update: trace s | update: compile s | update fusions "
        f"| env step: trace + compile s | update < {GOAL_S:g} s |"
        + (" second process: trace + cached compile s |" if args.warm else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if args.warm else ""),
    ]
    for algo, env_name in cases:
        r = median_of(algo, env_name, args.repeats)
        total = r["trace"] + r["compile"]
        line = (
            f"| {algo} | {env_name} | {r['batch']} | {r['trace']:.1f} | {r['compile']:.1f} "
            f"| {r['fusions']} | {r['env_step']:.1f} "
            f"| {under_goal(total, GOAL_S)} |"
        )
        if args.warm:
            line += f" {warm_start(algo, env_name):.1f} |"
        add_row(lines, line)
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
