"""Compile time of every trainer's update, as ``jaxgrid train`` compiles it.

    python benchmarks/train_compile_time.py [--cases ALGO:ENV ...] [--repeats N] [--warm]
        [--learner] [--out FILE]

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

With ``--learner`` the update is also compiled with the environment's physics taken
out (:func:`without_physics`: its transition and reset replaced by stand-ins that return
arrays of the same shapes and compute nothing): what the learner alone (the rollout's
policy, the advantages, the gradient steps, the optimiser, the wrappers' bookkeeping and
the auto-reset's selects) costs to compile, the other part of the update beside the step.
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

from compile_time import batched_step
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


def _update_ahead_of_time(algo: str, env_name: str, change_env=None):
    """``(trace s, compile s, compiled, settings, env, params)`` of ``algo``'s update on
    ``env_name`` with the tuned settings (the environment and its params passed through
    ``change_env`` first, if given)."""
    import jax

    import jaxgrid
    from jaxgrid.train.run import ALGOS, RunConfig

    config = RunConfig(env=env_name, algo=algo)
    settings = config.algo_config()
    env, params = jaxgrid.make(env_name, **config.env_kwargs)
    if change_env is not None:
        env = change_env(env, params)
    fns = ALGOS[algo].make_train(settings, env, params)
    runner = jax.eval_shape(fns.init, jax.random.PRNGKey(0), params)
    return (*ahead_of_time(fns.update_step, runner, params), settings, env, params)


def without_physics(env, params):
    """``env`` with its ``step_env`` and ``reset_env`` replaced by stand-ins that return
    arrays of their shapes and dtypes (found once here, with ``params``, so that the timed
    trace traces no physics) and compute nothing: every float the mean of the action
    (after a step) or a uniform draw (after a reset), so that the policy's inputs stay
    data and XLA folds none of the learner away; every flag True above 0.5, every integer
    0; the state unchanged by a step. (The class is swapped on this one object.)"""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    reset_shapes = jax.eval_shape(env.reset_env, key, params)
    action = jax.eval_shape(env.action_space(params).sample, key)
    step_shapes = jax.eval_shape(env.step_env, key, reset_shapes[1], action, params)

    def filled(shapes, value):
        def leaf(shape):
            if jnp.issubdtype(shape.dtype, jnp.floating):
                return jnp.full(shape.shape, value, shape.dtype)
            if shape.dtype == jnp.bool_:
                return jnp.full(shape.shape, value > 0.5)
            return jnp.zeros(shape.shape, shape.dtype)

        return jax.tree_util.tree_map(leaf, shapes)

    def step_env(self, key, state, action, params):
        value = jnp.mean(jnp.asarray(jax.tree_util.tree_leaves(action)[0], jnp.float32))
        obs, _, reward, terminated, truncated, info = filled(step_shapes, value)
        return obs, state, reward, terminated, truncated, info

    def reset_env(self, key, params):
        return filled(reset_shapes, jax.random.uniform(key))

    physics = type(env)
    env.__class__ = type(
        f"WithoutPhysics{physics.__name__}",
        (physics,),
        {"step_env": step_env, "reset_env": reset_env},
    )
    vars(env).pop("_jit_cache", None)  # methods jitted before the swap
    return env


def measure(algo: str, env_name: str, learner: bool = False) -> dict:
    """Seconds to trace and compile ``algo``'s update on ``env_name``, the env's step and,
    with ``learner``, the update :func:`without_physics`."""
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
    step_trace, step_compile, _ = ahead_of_time(*batched_step(env, params, keys))
    row["env_step"] = step_trace + step_compile
    if learner:
        jax.clear_caches()
        trace_s, compile_s, compiled, *_ = _update_ahead_of_time(algo, env_name, without_physics)
        row["learner"] = trace_s + compile_s
        row["learner_fusions"] = compiled.as_text().count(" fusion(")
    return row


def median_of(algo: str, env_name: str, repeats: int, learner: bool = False) -> dict:
    """:func:`measure` ``repeats`` times; each timing the median, the rest the first's."""
    runs = [measure(algo, env_name, learner) for _ in range(repeats)]
    row = dict(runs[0])
    for name in ("trace", "compile", "env_step") + (("learner",) if learner else ()):
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
    parser.add_argument(
        "--learner",
        action="store_true",
        help="also compile the update without the environment's physics (the learner alone)",
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
            "; the update with the environment's transition and reset replaced by "
            "stand-ins of the same shapes that compute nothing (the learner alone)"
            if args.learner
            else ""
        )
        + (
            "; a second fresh process's trace and compile from the compilation cache the "
            "first wrote (`jaxgrid train`'s)."
            if args.warm
            else "."
        ),
        "",
        "| algo | env | envs x steps | update: trace s | update: compile s | update fusions "
        f"| env step: trace + compile s | update < {GOAL_S:g} s |"
        + (" learner alone: trace + compile s | learner alone fusions |" if args.learner else "")
        + (" second process: trace + cached compile s |" if args.warm else ""),
        "|---|---|---|---|---|---|---|---|"
        + ("---|---|" if args.learner else "")
        + ("---|" if args.warm else ""),
    ]
    for algo, env_name in cases:
        r = median_of(algo, env_name, args.repeats, args.learner)
        total = r["trace"] + r["compile"]
        line = (
            f"| {algo} | {env_name} | {r['batch']} | {r['trace']:.1f} | {r['compile']:.1f} "
            f"| {r['fusions']} | {r['env_step']:.1f} "
            f"| {under_goal(total, GOAL_S)} |"
        )
        if args.learner:
            line += f" {r['learner']:.1f} | {r['learner_fusions']} |"
        if args.warm:
            line += f" {warm_start(algo, env_name):.1f} |"
        add_row(lines, line)
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
