"""Transmission and market environments side by side with PowerZooJax's: env-steps/s of
``tso118-v0`` against its TSO unit-commitment environment and of ``gencos5-v0`` against
its GenCos market, at 1, 64, 256 and 1024 environments.

    python benchmarks/transmission_envs.py --powerzoojax PATH [--quick] [--batches N ...]
        [--out FILE]
    python benchmarks/transmission_envs.py --powerzoojax PATH --paired ROUNDS [--days D]
        [--envs NAME ...] [--batches N ...] [--policy NAME]

``PATH`` is a checkout of PowerZooJax (not on PyPI: ``git clone
https://github.com/powerzoojax/PowerZooJax``); without it only jaxgrid's rows are run.
Every environment is stepped as users write it, ``jax.vmap(env.step)`` in a jitted
``lax.scan`` of one 48-step day, uniform random actions and step keys drawn before each
timed run, every observation and reward consumed (``env_throughput.measure_env``);
median of repeated runs, compile seconds apart. One XLA device: split over two host
devices, ``tso118-v0`` at 64 environments never returns (jaxlib 0.10's CPU runtime, every
thread idle in a futex wait, as in :mod:`jaxgrid._xla_flags`; 1 environment, case14 and
``gencos5-v0`` run), so neither side is split.

The peers run as PowerZooJax's tasks build them: the TSO environment
(``UnitCommitmentEnv`` with ``make_tso_case118_params``: case118 with its benchmark line
caps, commitment and reserve on, ADMM DC-OPF of 100 iterations) and the GenCos market
(``make_gencos_env`` on case5, 3 offer segments). Their GB demand files are Git LFS
objects absent from the checkout, so the TSO runs on its synthetic net load and the
GenCos market on case5's loads times a daily shape; the work of a step does not depend on
the numbers. The dispatch of jaxgrid's environments is exact (the copper plate where
no line binds, the binding lines' certified prices where a few do, the interior point to
HiGHS's optimum for the rest, ``tests/dispatch``); PowerZooJax's ADMM stops at its iteration count
(its accuracy against HiGHS: ``benchmarks/transmission_dispatch.py``).

With ``--paired ROUNDS`` each environment and its peer are compiled side by side and
their timed runs alternate (``ROUNDS`` of each, ``D`` days a run): the table gives both
medians and the median and range of the per-round ratios, so that a slower or faster
spell of a shared machine moves both sides of a ratio alike. At one environment a day
runs in milliseconds, where one run's timing moved the ratio by more than the 3x goal's
margin between sessions.

``--policy NAME`` (with ``--paired``) steps jaxgrid's environments by one of their
baselines instead of random actions (``merit_order``, say: the commitments of a
priority list, congested where a trained policy's would be), the policy applied to each
step's observation inside the rollout. The peer keeps random actions: its dispatch is a
fixed number of ADMM iterations, the same work whatever it is asked, where jaxgrid's
exact dispatch costs more on congested steps (the interior point where lines bind with
shed load or a reserve shortfall).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from env_throughput import measure, measure_env, prepare_env
from timing import add_row, emit_table

ENVS = ("tso118-v0", "gencos5-v0")
BATCHES = (1, 64, 256, 1024)
STEPS = 48  # one day of half-hour steps


class _GenCosPeer:
    """PowerZooJax's ``MarketMARLEnv`` (``reset(key)``, ``step(key, state, actions)`` with
    a dict of actions per agent) behind the ``reset(key, params)``/``step(key, state,
    action, params)`` calls ``measure_env`` makes."""

    def __init__(self, env):
        self.env = env

    def reset(self, key, params):
        return self.env.reset(key)

    def step(self, key, state, action, params):
        return self.env.step(key, state, action)

    def action_space(self, params):
        return _DictSpace({name: self.env.action_space(name) for name in self.env.agent_names})


class _DictSpace:
    def __init__(self, spaces):
        self.spaces = spaces

    def sample(self, key):
        import jax

        keys = jax.random.split(key, len(self.spaces))
        return {n: s.sample(k) for (n, s), k in zip(self.spaces.items(), keys, strict=True)}


def _peers(path):
    """``{jaxgrid id: (label, env, params)}`` of PowerZooJax's two environments."""
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(Path(path).resolve()))
    from powerzoojax.case import load_case
    from powerzoojax.envs.grid.unit_commitment import UnitCommitmentEnv
    from powerzoojax.tasks.gencos import make_gencos_env
    from powerzoojax.tasks.tso import make_tso_case118_params

    tso_params = make_tso_case118_params(max_steps=STEPS)
    case5 = load_case("5")
    hours = np.arange(STEPS) / 2.0
    shape = 0.75 + 0.25 * np.sin(2 * np.pi * (hours - 12.0) / 24.0)  # evening peak
    profiles = jnp.asarray(shape[:, None] * np.asarray(case5.load_d_max)[None, :], jnp.float32)
    gencos, gencos_params = make_gencos_env(case5, profiles, max_steps=STEPS)
    return {
        "tso118-v0": ("PowerZooJax TSO (case118, ADMM DC-OPF)", UnitCommitmentEnv(), tso_params),
        "gencos5-v0": ("PowerZooJax GenCos (case5)", _GenCosPeer(gencos), gencos_params),
    }


def _paired(peers, names, batches, rounds: int, days: int, policy: str) -> list[str]:
    """The table of ``--paired`` (module docstring), jaxgrid's environments acting by
    their baseline ``policy`` (random actions for ``"random"``)."""
    import jax
    import numpy as np

    import jaxgrid

    steps = STEPS * days
    lines = [
        f"env-steps/s on {jax.devices()[0].device_kind} ({len(jax.devices())} XLA devices), "
        f"`jax.vmap(env.step)`, runs of {steps} steps, {rounds} rounds of one run each, "
        f"alternating; jaxgrid's actions: {policy}, the peer's random; ratio: jaxgrid / "
        "peer, per round.",
        "",
        "| environment | envs | jaxgrid | peer | ratio, median | ratio, range |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        label, peer, peer_params = peers[name]
        env, params = jaxgrid.make(name)
        acting = None if policy == "random" else env.baselines(params)[policy]
        for b in batches:
            ours, _ = prepare_env(env, params, b, steps, policy=acting)
            theirs, _ = prepare_env(peer, peer_params, b, steps)
            times = np.array([(ours(2 + r), theirs(2 + r)) for r in range(rounds)])
            rate = b * steps / times  # (rounds, 2)
            ratio = rate[:, 0] / rate[:, 1]
            ours_rate, theirs_rate = np.median(rate, axis=0)
            add_row(
                lines,
                f"| `{name}` vs {label} | {b} | {ours_rate:.3g} | {theirs_rate:.3g} | "
                f"{np.median(ratio):.2f} | {ratio.min():.2f}-{ratio.max():.2f} |",
            )
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--powerzoojax", help="a PowerZooJax checkout: run its environments")
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument(
        "--batches", type=int, nargs="+", default=list(BATCHES), help="numbers of environments"
    )
    parser.add_argument("--out", help="also write the table to this markdown file")
    parser.add_argument(
        "--paired", type=int, metavar="ROUNDS", help="interleave each env's runs with its peer's"
    )
    parser.add_argument("--days", type=int, default=1, help="days a run (with --paired)")
    parser.add_argument(
        "--policy",
        default="random",
        help="with --paired: the baseline policy that acts in jaxgrid's environments "
        "(merit_order, all_on, ...; the peer's actions stay random)",
    )
    parser.add_argument(
        "--envs", nargs="+", default=list(ENVS), choices=ENVS, help="environments to run"
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import jax

    import jaxgrid

    peers = _peers(args.powerzoojax) if args.powerzoojax else {}
    if args.policy != "random" and not args.paired:
        parser.error("--policy needs --paired")
    for name in args.envs:  # before any run: one error naming what each env offers
        env, params = jaxgrid.make(name)
        offered = env.baselines(params)
        if args.policy not in offered:
            parser.error(f"--policy {args.policy}: {name}'s baselines are {sorted(offered)}")
    if args.paired:
        if not peers:
            parser.error("--paired needs --powerzoojax")
        table = _paired(peers, args.envs, args.batches, args.paired, args.days, args.policy)
        emit_table(table, args.out)
        return 0
    batches = args.batches
    repeats = 3 if args.quick else 7
    lines = [
        f"env-steps/s on {jax.devices()[0].device_kind} ({len(jax.devices())} XLA devices), "
        f"`jax.vmap(env.step)` over a {STEPS}-step day, median of {repeats} runs; compile "
        f"seconds at {batches[-1]} environments.",
        "",
        "| environment | " + " | ".join(f"{b} envs" for b in batches) + " | compile s |",
        "|---|" + "---|" * (len(batches) + 1),
    ]
    for name in args.envs:
        runs = [(f"jaxgrid `{name}`", lambda b, name=name: measure(name, {}, b, STEPS, repeats))]
        if name in peers:
            label, env, params = peers[name]
            runs.append(
                (
                    label,
                    lambda b, env=env, params=params: measure_env(env, params, b, STEPS, repeats),
                )
            )
        for label, run in runs:
            cells, compile_s = [], 0.0
            for b in batches:
                rate, compile_s = run(b)
                cells.append(f"{rate:.3g}")
            line = f"| {label} | " + " | ".join(cells) + f" | {compile_s:.1f} |"
            add_row(lines, line)
    emit_table(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
