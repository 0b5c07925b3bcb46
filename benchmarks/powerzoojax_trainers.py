"""jaxgrid's trainers against PowerZooJax's on the same task, side by side in one run.

    python benchmarks/powerzoojax_trainers.py --powerzoojax PATH --task {ders141,dso}
        [--rounds 7] [--out FILE]

``PATH`` is a checkout of github.com/powerzoojax/PowerZooJax (its ``powerzoojax`` package
is imported from there). Each task runs the peer's trainer with the settings of its own
benchmark config beside jaxgrid's at the same batch, epochs, minibatches and widths
(``train_throughput.POWERZOOJAX``: 128 environments x 48 steps, 4 epochs, 128-128
networks, Gaussian actions):

- ``ders141``: PowerZooJax's typed IPPO (``rl.ippo.make_ippo_typed_train``: one
  ``SharedActorCritic`` per device type, full-batch updates) on its DERs task as its IPPO
  trains on it (``tasks.ders.make_ders_marl_env``: 12 devices on case141, local
  observations, its DistFlow sweep; ``voltage_penalty`` 4), settings of its
  ``benchmarks/ders/configs/train_ippo.yaml``; jaxgrid's IPPO on ``ders141-v0`` (the same
  12 devices on case141) with one minibatch, once with a shared torso (the peer's
  architecture) and once with separate actor and critic networks (jaxgrid's default).
- ``dso``: PowerZooJax's PPO (Rejax's ``PPO``, through its ``rl.trainer.make_rejax_train``:
  separate actor and critic, 4 minibatches, observations normalised) on ``DistGridEnv``
  with its DSO task's parameters (``tasks.dso.make_dso_params``) in its ``LogWrapper``,
  settings of its ``benchmarks/dso/configs/train_ppo.yaml``; jaxgrid's PPO on ``dso33-v0``
  with 4 minibatches. Needs ``rejax`` importable (``pip install rejax``), as the peer's
  PPO does.

For each trainer: one update (the rollout of ``envs x steps`` environment steps, the
advantages, every gradient step) traced, lowered and compiled ahead of time with JAX's
caches cleared before (the persistent cache off), so that no run is counted; then
``--rounds`` rounds, each timing one update of every trainer in turn, so that a slow
spell of this shared machine moves all of them alike: the median seconds an update,
env-steps/s (``envs x steps`` over it) and each row's median ratio to the peer over the
rounds. Every trainer runs an update as one call of its compiled program, as the peer's
training loops do. One XLA device.

The peer's update and start state are its own: for ``ders141`` its jitted ``train_step``
and the state its ``train_fn`` builds (``train_fn`` is called with evaluation off and its
first call of ``train_step``, a closure cell, is intercepted before it runs); for ``dso``
the Rejax algorithm its ``train_fn`` closes over, its ``train_iteration`` and
``init_state``. None of the peer's code is copied or changed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

from timing import ahead_of_time, emit_table
from train_throughput import POWERZOOJAX

# jaxgrid's trainers at PowerZooJax's batch, epochs and widths (the training table's)
NUM_ENVS, NUM_STEPS = POWERZOOJAX["num_envs"], POWERZOOJAX["num_steps"]
EPOCHS, HIDDEN = POWERZOOJAX["update_epochs"], POWERZOOJAX["hidden"]
# PowerZooJax's settings (its benchmarks/{ders,dso}/configs/train_*.yaml), evaluation off
_PEER_SHARED = dict(
    num_envs=NUM_ENVS, n_steps=NUM_STEPS, hidden_dims=HIDDEN, gamma=0.995, gae_lambda=0.95
)
PEER_CONFIGS = {
    "ders141": dict(
        _PEER_SHARED,
        algo="ippo_typed",
        total_timesteps=10_000_000,
        n_epochs=EPOCHS,
        learning_rate=1e-4,
        clip_eps=0.2,
        ent_coef=0.02,
        vf_coef=0.5,
        max_grad_norm=0.5,
        eval_freq=0,
    ),
    "dso": dict(
        _PEER_SHARED,
        algo="ppo",
        total_timesteps=3_000_000,
        learning_rate=3e-4,
        eval_episodes=8,
        record_eval_wall_time=False,
        normalize_observations=True,
    ),
}


class _Intercepted(Exception):
    """Raised in place of the peer's first update, carrying the state it was given."""

    def __init__(self, state):
        super().__init__("intercepted")
        self.state = state


def _cell(fn, name: str):
    """The cell of ``fn``'s free variable ``name`` (where the peer's ``train_fn`` keeps its
    update or algorithm)."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    if name not in cells:
        raise RuntimeError(
            f"PowerZooJax's {fn.__qualname__} no longer closes over {name!r} (it closes over "
            f"{sorted(cells)}): this script takes the peer's update from there"
        )
    return cells[name]


def peer_ippo_ders():
    """``(update, (state,))``: PowerZooJax's jitted typed-IPPO update on its DERs task and
    the start state its ``train_fn`` gives it (module docstring)."""
    import jax
    from powerzoojax.rl.config import TrainConfig
    from powerzoojax.rl.ippo import make_ippo_typed_train
    from powerzoojax.tasks.ders import make_ders_marl_env

    env, _ = make_ders_marl_env(voltage_penalty=4.0)
    train_fn = make_ippo_typed_train(env, TrainConfig(**PEER_CONFIGS["ders141"]))
    cell = _cell(train_fn, "train_step")
    update = cell.cell_contents

    def intercept(state):
        raise _Intercepted(state)

    cell.cell_contents = intercept
    try:
        train_fn(jax.random.PRNGKey(0))
    except _Intercepted as stop:
        state = stop.state
    finally:
        cell.cell_contents = update
    return update, (state,)


def peer_ppo_dso():
    """``(update, (state,))``: PowerZooJax's PPO (Rejax's ``train_iteration``) on its DSO
    task and Rejax's start state."""
    import jax
    from powerzoojax.envs.grid.dist import DistGridEnv
    from powerzoojax.rl.config import TrainConfig
    from powerzoojax.rl.trainer import make_rejax_train
    from powerzoojax.rl.wrappers import LogWrapper
    from powerzoojax.tasks.dso import make_dso_params

    env = LogWrapper(DistGridEnv(), make_dso_params())
    train_fn = make_rejax_train(env, TrainConfig(**PEER_CONFIGS["dso"]))
    algo = _cell(train_fn, "algo").cell_contents
    return algo.train_iteration, (algo.init_state(jax.random.PRNGKey(0)),)


def jaxgrid_update(algo: str, env_name: str, **fields):
    """``(update_step, (runner, params))`` of jaxgrid's ``algo`` on ``env_name`` at
    ``POWERZOOJAX`` and ``fields``."""
    import jax

    import jaxgrid
    from jaxgrid.train.run import ALGOS, RunConfig

    config = RunConfig(env=env_name, algo=algo, ppo=dict(POWERZOOJAX, **fields))
    env, params = jaxgrid.make(env_name, **config.env_kwargs)
    fns = ALGOS[algo].make_train(config.algo_config(), env, params)
    runner = jax.jit(fns.init)(jax.random.PRNGKey(0), params)
    return fns.update_step, (runner, params)


# task: {row name: builder of (update, args)}, the peer last (its package on sys.path)
TASKS = {
    "ders141": {
        "jaxgrid IPPO, `ders141-v0`, shared torso": lambda: jaxgrid_update(
            "ippo", "ders141-v0", num_minibatches=1, shared_torso=True
        ),
        "jaxgrid IPPO, `ders141-v0`, actor and critic": lambda: jaxgrid_update(
            "ippo", "ders141-v0", num_minibatches=1
        ),
        "PowerZooJax typed IPPO, its DERs task": peer_ippo_ders,
    },
    "dso": {
        "jaxgrid PPO, `dso33-v0`": lambda: jaxgrid_update("ppo", "dso33-v0", num_minibatches=4),
        "PowerZooJax PPO (Rejax), its DSO task": peer_ppo_dso,
    },
}


def measure(path: str, task: str, rounds: int) -> list[dict]:
    """One row per trainer (the peer last): compile, fusions, seconds an update (median
    over ``rounds`` alternated rounds) and each round's seconds."""
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    jax.jit(lambda x: x + 1).lower(1.0).compile()  # XLA's own start-up, counted in none
    if path not in sys.path:
        sys.path.insert(0, path)
    rows = []
    for name, build in TASKS[task].items():
        update, args = build()
        jax.clear_caches()
        trace_s, compile_s, compiled = ahead_of_time(update, *args)
        jax.block_until_ready(compiled(*args))  # one run before timing
        rows.append(
            {
                "name": name,
                "trace": trace_s,
                "compile": compile_s,
                "fusions": compiled.as_text().count(" fusion("),
                "run": (compiled, args),
                "times": [],
            }
        )
        print(f"{name}: compiled in {trace_s + compile_s:.1f} s", file=sys.stderr)
    for _ in range(rounds):
        for row in rows:
            compiled, args = row["run"]
            t0 = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            row["times"].append(time.perf_counter() - t0)
    for row in rows:
        row["update_s"] = statistics.median(row["times"])
    return rows


def table(rows: list[dict], rounds: int) -> list[str]:
    """The markdown table of :func:`measure`'s rows, as lines."""
    import jax

    peer = rows[-1]
    lines = [
        f"One update of {NUM_ENVS} environments x {NUM_STEPS} steps, {EPOCHS} epochs, "
        f"{HIDDEN[0]}-{HIDDEN[1]} networks, on "
        f"{jax.devices()[0].platform} (one XLA device); trace and compile ahead of time, "
        f"caches cleared before each; seconds an update the median of {rounds} alternated "
        "rounds, and the median of the rounds' ratios to the peer.",
        "",
        "| trainer | update: trace s | update: compile s | update fusions | s an update "
        "| env-steps/s | / peer (env-steps/s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio = statistics.median(p / t for t, p in zip(row["times"], peer["times"]))
        lines.append(
            f"| {row['name']} | {row['trace']:.1f} | {row['compile']:.1f} | {row['fusions']} "
            f"| {row['update_s']:.3f} | {NUM_ENVS * NUM_STEPS / row['update_s']:.3g} "
            f"| {ratio:.2f} |"
        )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--powerzoojax", required=True, help="PowerZooJax checkout")
    parser.add_argument("--task", required=True, choices=sorted(TASKS))
    parser.add_argument("--rounds", type=int, default=7, help="alternated timed rounds")
    parser.add_argument("--out", help="also write the table to this markdown file")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = measure(str(Path(args.powerzoojax).resolve()), args.task, args.rounds)
    emit_table(table(rows, args.rounds), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
