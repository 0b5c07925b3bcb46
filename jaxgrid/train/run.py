"""A training run in a directory: train, checkpoint, resume, log, evaluate, plot.

``train_run(RunConfig(...), out)`` writes into ``out``:

- ``config.json``: the resolved run config (environment and its ``env_kwargs``, algorithm,
  seeds, every field of the algorithm's config, :class:`~jaxgrid.train.ppo.PPOConfig`,
  :class:`~jaxgrid.train.sac.SACConfig` or :class:`~jaxgrid.train.apg.APGConfig`) and the
  ``versions`` of
  jaxgrid, jax, jaxlib and Python: enough to reproduce the run from its folder alone;
- ``checkpoints/``: orbax checkpoints of every sweep member every ``checkpoint_every``
  updates, the newest three kept;
- ``metrics.jsonl`` and ``metrics.csv``: per member, every ``log_every`` updates, with wall
  time and env-steps/s (:mod:`jaxgrid.train.logger`);
- ``eval.json``: :func:`evaluate_run`'s report on held-out days;
- ``learning_curve.png``: episode return against environment steps, beside the baselines.

Run it again on the same directory and it resumes from the newest intact checkpoint (a
damaged newer one is skipped with a warning); the result equals an uninterrupted run's. A
directory holding a run with another config, or in use by another training
(:mod:`jaxgrid.train.lock`), is refused with a :class:`~jaxgrid.errors.UserError`.
:func:`evaluate_run` re-evaluates a finished (or interrupted) run from its newest checkpoint.

Multi-host: start the same program on every host after
``jax.distributed.initialize()``; ``jax.devices()`` then lists every host's devices and
the environment batch is split across all of them (:attr:`PPOConfig.shard_envs`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import json
import platform
import sys
import types
import typing
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import jaxgrid
from jaxgrid import spaces
from jaxgrid.config import cost_penalty_weights, declared
from jaxgrid.errors import UserError
from jaxgrid.registry import check_registered
from jaxgrid.train import apg, iapg, ippo, isac, ppo, sac
from jaxgrid.train.checkpoint import Checkpoints
from jaxgrid.train.defaults import defaults
from jaxgrid.train.evaluate import (
    batch_totals,
    evaluate_baselines,
    held_out,
    oracle,
    score,
    summarise,
)
from jaxgrid.train.lock import RunLock
from jaxgrid.train.logger import MetricsLogger, read_metrics
from jaxgrid.train.stress import bootstrap_ci, stress_splits
from jaxgrid.train.sweep import Sweep, with_weights
from jaxgrid.wrappers import ResidualAction


class Algorithm(NamedTuple):
    """A training algorithm of runs: its ``make_train``, the class of its config, the
    :class:`RunConfig` field (``"ppo"``, ``"sac"`` or ``"apg"``) that holds that config's
    fields, and, for an algorithm that needs continuous (Box) actions, why."""

    make_train: Callable
    config: type
    section: str
    needs_box: str | None = None


_SQUASHED = "its policy is a squashed Gaussian over a box"
_DIFFERENTIATES = "it follows the gradient of the return with respect to the actions"
ALGOS = {
    "ppo": Algorithm(ppo.make_train, ppo.PPOConfig, "ppo"),
    "ippo": Algorithm(ippo.make_train, ppo.PPOConfig, "ppo"),
    "sac": Algorithm(sac.make_train, sac.SACConfig, "sac", _SQUASHED),
    "isac": Algorithm(isac.make_train, sac.SACConfig, "sac", _SQUASHED),
    "apg": Algorithm(apg.make_train, apg.APGConfig, "apg", _DIFFERENTIATES),
    "iapg": Algorithm(iapg.make_train, apg.APGConfig, "apg", _DIFFERENTIATES),
}
SECTIONS = sorted({a.section for a in ALGOS.values()})


@dataclasses.dataclass
class RunConfig:
    """What a run trains, and how.

    Attributes:
        env: registered environment name.
        algo: ``"ppo"`` (centralised controller), ``"ippo"`` (per agent), ``"sac"``
            (centralised), ``"isac"`` (per agent), ``"apg"`` (analytic policy
            gradients, centralised) or ``"iapg"`` (per agent): :data:`ALGOS`.
        seeds: independent trainings per scenario, in one program.
        seed: the PRNG seed everything is drawn from.
        env_kwargs: arguments of the environment's factory (tuned defaults, then these).
        weights: reward weightings to sweep (one scenario each); ``None``: the default.
        ppo: :class:`~jaxgrid.train.ppo.PPOConfig` fields of ``ppo`` and ``ippo`` (tuned
            defaults, then these); after construction every field, resolved, as JSON-ready
            values. Empty for the other algorithms.
        sac: :class:`~jaxgrid.train.sac.SACConfig` fields of ``sac`` and ``isac``, likewise.
        apg: :class:`~jaxgrid.train.apg.APGConfig` fields of ``apg`` and ``iapg``, likewise.
        checkpoint_every: updates between checkpoints (0: only at the end).
        eval_episodes: held-out episodes per member and per baseline.
        eval_oracle: evaluate the perfect-foresight optimum too, where the environment has
            one; it is solved on the host for each episode (``tso118-v0``: a MILP a day,
            seconds to minutes each).
        eval_mpc: evaluate the baselines that plan on the state (``mpc``) too; they plan
            at every step of every episode, so on ``ders141-v0`` they take longer than
            the training.
        observations, actions, agents: declared observations, actions and agents
            (scenario files' ``[[observations]]`` / ``[[actions]]`` / ``[[agents]]``
            entries); empty: the environment's own.
        cost_penalty: ``{cost name: weight}`` subtracted from the reward (scenario files'
            ``[reward] cost_penalty``); empty: costs stay out of the reward.
        residual: the name of a baseline of the environment: the policy learns a
            correction added to that baseline's action
            (:class:`~jaxgrid.wrappers.ResidualAction`; Box actions); ``None``: the
            whole action. The evaluation's baselines play as they do unwrapped.
    """

    env: str
    algo: str = "ppo"
    seeds: int = 1
    seed: int = 0
    env_kwargs: dict = dataclasses.field(default_factory=dict)
    weights: list | None = None
    ppo: dict = dataclasses.field(default_factory=dict)
    sac: dict = dataclasses.field(default_factory=dict)
    apg: dict = dataclasses.field(default_factory=dict)
    checkpoint_every: int = 0
    eval_episodes: int = 32
    eval_mpc: bool = True
    eval_oracle: bool = True
    observations: list = dataclasses.field(default_factory=list)
    actions: list = dataclasses.field(default_factory=list)
    agents: list = dataclasses.field(default_factory=list)
    cost_penalty: dict = dataclasses.field(default_factory=dict)
    residual: str | None = None

    def __post_init__(self):
        if self.algo not in ALGOS:
            raise ValueError(f"unknown algorithm {self.algo!r}; expected one of {list(ALGOS)}")
        check_registered(self.env)
        for name, least in (("seeds", 1), ("eval_episodes", 1), ("checkpoint_every", 0)):
            if getattr(self, name) < least:
                raise ValueError(f"{name} must be >= {least}, got {getattr(self, name)}")
        algorithm = ALGOS[self.algo]
        for section in SECTIONS:
            if section != algorithm.section and getattr(self, section):
                raise ValueError(
                    f"{section} settings {sorted(getattr(self, section))} given to a run of "
                    f"{self.algo}, whose settings are {algorithm.section}"
                )
        unknown = set(self.settings) - {f.name for f in dataclasses.fields(algorithm.config)}
        if unknown:
            raise ValueError(f"unknown {algorithm.section.upper()} settings {sorted(unknown)}")
        tuned = defaults(self.env, self.algo)
        settings = {**tuned[algorithm.section], **self.settings}
        if "log_every" not in settings:  # about 200 points per learning curve
            updates = _algo_config(algorithm.config, settings).num_updates
            settings["log_every"] = max(1, updates // 200)
        resolved = dataclasses.asdict(_algo_config(algorithm.config, settings))  # validated
        setattr(self, algorithm.section, _json_ready(resolved))
        self.env_kwargs = {**tuned["env_kwargs"], **self.env_kwargs}
        self.cost_penalty = {**tuned["cost_penalty"], **self.cost_penalty}

    def make_env(self):
        """``(env, params)`` of the run: the registered environment with ``env_kwargs``,
        wrapped in its residual actions and its declared observations, actions and agents."""
        env, params = jaxgrid.make(self.env, **self.env_kwargs)
        if self.residual is not None:
            env = ResidualAction(env, params, self.residual)
        env = declared(env, params, self.observations, self.actions, self.agents)
        if self.cost_penalty:
            sc = env.scalarisation(params)
            weights = cost_penalty_weights(env, self.cost_penalty)
            penalty = jnp.asarray(weights, jnp.asarray(sc.weights).dtype)
            params = env.with_scalarisation(params, sc.replace(cost_weights=penalty))
        return env, params

    @property
    def settings(self) -> dict:
        """The algorithm's settings: the ``ppo``, ``sac`` or ``apg`` field."""
        return getattr(self, ALGOS[self.algo].section)

    def algo_config(self) -> ppo.PPOConfig | sac.SACConfig | apg.APGConfig:
        """The resolved config of the algorithm (tuned defaults, then ours)."""
        return _algo_config(ALGOS[self.algo].config, self.settings)

    def to_json(self) -> dict:
        """The config as JSON-ready data (``config.json`` holds it and the ``versions``);
        the other algorithms' (empty) settings are left out."""
        data = dataclasses.asdict(self)
        for section in SECTIONS:
            if section != ALGOS[self.algo].section:
                del data[section]
        return data

    @classmethod
    def from_json(cls, data: dict) -> RunConfig:
        """The config of :meth:`to_json`'s data (``versions``, when there, are left out)."""
        return cls(**{k: v for k, v in data.items() if k != "versions"})


def _algo_config(cls: type, settings: dict):
    """The config ``cls`` (:class:`~jaxgrid.train.ppo.PPOConfig`,
    :class:`~jaxgrid.train.sac.SACConfig`, :class:`~jaxgrid.train.apg.APGConfig`) of
    JSON-style ``settings`` (lists for tuples)."""
    hints = typing.get_type_hints(cls)
    for name, value in settings.items():
        hint = hints[name]
        if not _fits(value, hint):
            expected = hint.__name__ if isinstance(hint, type) else str(hint)
            label = cls.__name__.removesuffix("Config")
            raise ValueError(f"{label} setting {name} must be {expected}, got {value!r}")
    fields = dict(settings)
    for name in ("hidden", "pid_gains"):
        if fields.get(name) is not None:
            fields[name] = tuple(fields[name])
    if "cost_budgets" in fields:
        fields["cost_budgets"] = tuple((str(n), float(b)) for n, b in fields["cost_budgets"])
    return cls(**fields)


def _fits(value, hint) -> bool:
    """Whether the JSON-style ``value`` is of the type ``hint`` (an int is a float too)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, list | tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(value) == len(args) and all(_fits(v, h) for v, h in zip(value, args))
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _json_ready(settings: dict) -> dict:
    """``settings`` with tuples as lists, as JSON gives them back."""

    def ready(v):
        return [ready(x) for x in v] if isinstance(v, tuple | list) else v

    return {k: ready(v) for k, v in settings.items()}


def versions() -> dict:
    """The versions of what computes a run: jaxgrid, jax, jaxlib and Python."""
    return {
        "jaxgrid": jaxgrid.__version__,
        "jax": importlib.metadata.version("jax"),
        "jaxlib": importlib.metadata.version("jaxlib"),
        "python": platform.python_version(),
    }


class Run:
    """The environment, training functions and sweep of a :class:`RunConfig`.

    Runs of one config in one process share them (``_built``), so the training
    program compiles once per process: a resumed run, a second run in a notebook, or the
    tests that train one small config many times. The program calls no host callback
    (:meth:`~jaxgrid.train.sweep.Sweep.run_chunk`; :func:`train_run` logs between
    chunks), so with JAX's persistent compilation cache on, another process loads it.
    """

    def __init__(self, config: RunConfig):
        self.config = config
        self.env, self.algo_config, self.fns, self.sweep = _built(
            json.dumps(config.to_json(), sort_keys=True)
        )
        self.key = jax.random.PRNGKey(config.seed)

    def fresh_runners(self):
        """Every sweep member's initial learner state, placed on the devices."""
        return self.sweep.place(self.sweep.init(self.key))


@functools.lru_cache(maxsize=4)
def _built(config_json: str):
    """``(env, algo config, training functions, sweep)`` of the config whose sorted JSON
    is ``config_json``, built once per process (the last few configs kept)."""
    config = RunConfig.from_json(json.loads(config_json))
    env, params = config.make_env()
    scenarios = with_weights(env, params, config.weights) if config.weights else [params]
    algo_config = config.algo_config()
    fns = ALGOS[config.algo].make_train(algo_config, env, params)
    return env, algo_config, fns, Sweep(fns, config.seeds, scenarios)


class RunWarning(UserWarning):
    """A run resumes in circumstances that may change its numbers."""


def _write_config(config: RunConfig, out: Path) -> None:
    """Write ``config.json``, or check that the run in ``out`` has the same config.

    Raises:
        UserError: ``out`` holds a run with another config (the message names the
            differing keys).
    """
    path = out / "config.json"
    ours = config.to_json()
    if not path.exists():
        path.write_text(json.dumps({**ours, "versions": versions()}, indent=2) + "\n")
        return
    theirs = _read_json(path)
    differing = _differing_keys(
        json.loads(json.dumps(ours)), {k: v for k, v in theirs.items() if k != "versions"}
    )
    if differing:
        raise UserError(
            f"{out} holds a run with another config ({'; '.join(differing)}); "
            "rerun with its config to resume it, or choose another --out"
        )
    started = theirs.get("versions", {})
    changed = [
        f"{k} {v} (started with {started.get(k)})"
        for k, v in versions().items()
        if started.get(k) != v
    ]
    if changed:
        warnings.warn(f"resuming {out} with {', '.join(changed)}", RunWarning, stacklevel=3)


def _differing_keys(ours: dict, theirs: dict, prefix: str = "") -> list[str]:
    """``"key: theirs there, ours here"`` for every dotted key whose values differ."""
    out = []
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key), theirs.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differing_keys(a, b, f"{prefix}{key}.")
        elif key not in ours or key not in theirs or a != b:
            out.append(f"{prefix}{key}: {json.dumps(b)} there, {json.dumps(a)} here")
    return out


def _read_json(path: Path) -> dict:
    """The JSON object in ``path``, or a :class:`~jaxgrid.errors.UserError` naming it."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON ({e})") from None


def read_config(out) -> RunConfig:
    """The :class:`RunConfig` of the run directory ``out`` (from its ``config.json``)."""
    path = Path(out) / "config.json"
    if not path.is_file():
        raise UserError(f"{out} is not a run directory (no config.json)")
    try:
        return RunConfig.from_json(_read_json(path))
    except (TypeError, ValueError) as e:
        raise UserError(f"{path}: {e}") from None


@contextlib.contextmanager
def _run_directory(out: Path):
    """``out``, created if need be and locked for this process while the block runs."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        lock = RunLock(out).acquire()
    except OSError as e:
        raise UserError(f"cannot write the run directory {out}: {e.strerror or e}") from None
    try:
        yield
    finally:
        lock.release()


def _make_env(config: RunConfig):
    """``config.make_env()``; the factory's refusal of ``env_kwargs``, or an environment
    whose actions the algorithm cannot take, as a user error."""
    try:
        env, params = config.make_env()
    except ValueError as e:  # how a factory or a declaration refuses its arguments
        raise UserError(f"{config.env} with env_kwargs {config.env_kwargs}: {e}") from None
    needs_box = ALGOS[config.algo].needs_box
    space = env.action_space(params)
    if needs_box and not isinstance(space, spaces.Box):
        raise UserError(
            f"--algo {config.algo} cannot train {config.env}: {config.algo} needs continuous "
            f"(Box) actions, as {needs_box}; {config.env} has {space} (train it with --algo "
            "ppo or ippo)"
        )
    return env, params


def _resume(run: Run, checkpoints: Checkpoints, logger: MetricsLogger, n_updates: int):
    """``(runners, updates done)``: from the newest intact checkpoint, else fresh."""
    runners = run.fresh_runners()
    if not checkpoints.updates():
        return runners, 0
    done, runners = checkpoints.restore_newest(runners)
    checkpoints.drop_after(done)
    logger.say(f"resuming from checkpoint {done} of {n_updates} updates")
    return runners, done


def train_run(
    config: RunConfig,
    out,
    progress: bool = True,
    tensorboard: bool = False,
    stop_after: int | None = None,
    progress_every_s: float = 5.0,
) -> dict | None:
    """Train (or resume) the run in ``out``, then evaluate and plot it; returns the report.

    ``stop_after`` ends the session after that many updates in all (to continue later);
    the run is then not evaluated and ``None`` is returned. ``progress_every_s``: seconds
    between progress lines when stdout is not interactive.

    Raises:
        UserError: the environment refuses ``env_kwargs``; ``out`` cannot be written, is in
            use by another training or holds a run with another config; or no checkpoint
            in it restores.
    """
    out = Path(out)
    env, _ = _make_env(config)  # before anything is written
    with _run_directory(out):
        _write_config(config, out)
        n_updates = config.algo_config().num_updates
        logger = MetricsLogger(
            out,
            env.objective_names,
            env.cost_names,
            n_updates,
            config.seeds * len(config.weights or [None]),
            progress=progress,
            tensorboard=tensorboard,
            progress_every_s=progress_every_s,
        )
        run = Run(config)
        checkpoints = Checkpoints(out / "checkpoints")
        runners, done = _resume(run, checkpoints, logger, n_updates)
        every = config.checkpoint_every or n_updates
        log_every = run.algo_config.log_every or n_updates + 1  # 0: never
        end = n_updates if stop_after is None else min(stop_after, n_updates)
        with logger:
            logger.resume_at(done)
            if done < end:
                logger.say("compiling the training program (the first update waits for it)...")
            while done < end:
                stop = min(_next_multiple(done, log_every), _next_multiple(done, every), end)
                logs = stop % log_every == 0
                runners, logged = run.sweep.run_chunk(runners, stop - done, logs)
                done = stop
                if logs:
                    _log_members(logger, logged)
                if done % every == 0 or done == end:
                    checkpoints.save(done, runners)
        checkpoints.close()
        if done < n_updates:
            return None
        return _write_report(out, evaluate_runners(run, runners))


def _next_multiple(done: int, every: int) -> int:
    """The first multiple of ``every`` after ``done``."""
    return (done // every + 1) * every


def _log_members(logger: MetricsLogger, logged) -> None:
    """One row per sweep member of a chunk's ``logged`` metrics (axes (scenarios, seeds)),
    once the chunk has run (fetching them after each chunk cost nothing measurable: 30
    updates of PPO on ``arbitrage-v0`` as 10 chunks, 4.62 s; as one scan, 4.65 s)."""
    logged = jax.device_get(logged)
    scenarios, seeds = np.shape(logged["member"])
    for member in np.ndindex(scenarios, seeds):
        logger(jax.tree_util.tree_map(lambda x, at=member: x[at], logged))


def evaluate_run(
    out,
    episodes: int | None = None,
    stress: bool = False,
    mpc: bool | None = None,
    with_oracle: bool | None = None,
) -> dict:
    """Evaluate the newest intact checkpoint of the run in ``out``; writes ``eval.json``
    (with ``stress``, also on every out-of-distribution split of
    :mod:`jaxgrid.train.stress`). ``episodes``, ``mpc`` and ``with_oracle`` override the
    run's ``eval_episodes``, ``eval_mpc`` and ``eval_oracle``."""
    out = Path(out)
    config = read_config(out)
    if episodes is not None:
        config.eval_episodes = episodes
    if mpc is not None:
        config.eval_mpc = mpc
    if with_oracle is not None:
        config.eval_oracle = with_oracle
    run = Run(config)
    checkpoints = Checkpoints(out / "checkpoints")
    _, runners = checkpoints.restore_newest(run.fresh_runners())
    checkpoints.close()
    return _write_report(out, evaluate_runners(run, runners, stress))


def _write_report(out: Path, report: dict) -> dict:
    """Write ``eval.json`` and ``learning_curve.png`` for ``report``; return it."""
    (out / "eval.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    plot_learning_curve(out, report)
    return report


def evaluate_runners(run: Run, runners: Any, stress: bool = False) -> dict:
    """Every member's policy, the baselines and the oracle on held-out days, per scenario;
    the seeds' scores with a bootstrap confidence interval; with ``stress``, the policies
    and baselines on every split of :mod:`jaxgrid.train.stress` too. The report records
    the command line and the run's config."""
    config, env, fns = run.config, run.env, run.fns
    key = jax.random.fold_in(run.key, 1)
    episodes = config.eval_episodes

    def member(runner, params):
        return batch_totals(fns.policy(runner), env, held_out(params), key, episodes)

    per_member = jax.jit(jax.vmap(lambda r, p: jax.vmap(lambda r1: member(r1, p))(r)))(
        runners, run.sweep.params
    )
    per_member = jax.device_get(per_member)
    scenarios = []
    for s, params in enumerate(run.sweep.scenarios):
        policies = {
            f"seed{k}": summarise(jax.tree_util.tree_map(lambda x, i=(s, k): x[i], per_member), env)
            for k in range(config.seeds)
        }
        report = score(
            policies,
            evaluate_baselines(env, params, key, episodes, controllers=config.eval_mpc),
            oracle(env, params, key, episodes, progress=_oracle_progress)
            if config.eval_oracle
            else None,
        )
        seed_scores = list(report["scores"].values())
        report["policy"] = _mean_results(list(policies.values()))
        extra = {
            f"seed{k}": env.policy_metrics(
                fns.policy(jax.tree_util.tree_map(lambda x, i=(s, k): x[i], runners)),
                params,
                key,
                episodes,
            )
            for k in range(config.seeds)
        }
        if all(m is not None for m in extra.values()):
            report["policy_metrics"] = extra
        scored = None not in seed_scores
        report["score_mean"] = float(np.mean(seed_scores)) if scored else None
        report["score_std"] = float(np.std(seed_scores)) if scored else None
        report["score_ci95"] = (
            list(bootstrap_ci(seed_scores)) if scored and len(seed_scores) > 1 else None
        )
        if stress:
            members = jax.tree_util.tree_map(lambda x, s=s: x[s], runners)
            report["stress"] = _stress_results(run, members, params, key, episodes)
        if config.weights:
            report["weights"] = list(config.weights[s])
        if run.algo_config.cost_budgets:  # the held-out mean episode cost of the policy, per budget
            report["budgets"] = {
                name: {
                    "budget": budget,
                    "policy": report["policy"]["costs"][name],
                    "met": report["policy"]["costs"][name] <= budget,
                }
                for name, budget in run.algo_config.cost_budgets
            }
        scenarios.append(report)
    return {
        "command": " ".join(sys.argv),
        "config": config.to_json(),
        "versions": versions(),
        "env": config.env,
        "algo": config.algo,
        "episodes": episodes,
        "env_steps_per_member": run.algo_config.env_steps,
        "scenarios": scenarios,
    }


def _oracle_progress(solved: int, distinct: int) -> None:
    """On a terminal, the oracle's solves counted on stderr: some take minutes
    (``tso118-v0``'s MILPs, 44 minutes for 25 days)."""
    if sys.stderr.isatty():
        end = "\n" if solved == distinct else "\r"
        print(f"oracle: {solved} of {distinct} initial states solved", end=end, file=sys.stderr)


def _stress_results(run: Run, members: Any, params: Any, key, episodes: int) -> dict:
    """``{split: {"policy", "seeds", "baselines"}}`` on every stress split of ``params``:
    each seed's policy (the ``seeds`` results and their mean) and every baseline."""
    env, fns = run.env, run.fns
    totals = jax.jit(lambda r, p: batch_totals(fns.policy(r), env, p, key, episodes))
    out = {}
    for name, split in stress_splits(held_out(params)).items():
        seeds = [
            summarise(totals(jax.tree_util.tree_map(lambda x, k=k: x[k], members), split), env)
            for k in range(run.config.seeds)
        ]
        baselines = evaluate_baselines(
            env, split, key, episodes, test_days=False, controllers=run.config.eval_mpc
        )
        out[name] = {"policy": _mean_results(seeds), "seeds": seeds, "baselines": baselines}
    return out


def _mean_results(results: list[dict]) -> dict:
    """The mean over seeds of :func:`~jaxgrid.train.evaluate.summarise` results."""

    def mean(values):
        if isinstance(values[0], dict):
            return {k: mean([v[k] for v in values]) for k in values[0]}
        return float(np.mean(values))

    return mean(results)


def format_table(report: dict) -> str:
    """The evaluation report as markdown tables, one per scenario."""
    blocks = []
    for s, scenario in enumerate(report["scenarios"]):
        seeds = sum(name.startswith("seed") for name in scenario["results"])
        rows = {"policy (mean over seeds)" if seeds > 1 else "policy": scenario["policy"]}
        rows.update({n: r for n, r in scenario["results"].items() if not n.startswith("seed")})
        first = next(iter(rows.values()))
        objectives, costs = list(first["objectives"]), list(first["costs"])
        metrics = list(first["metrics"])
        head = ["policy", "return", *objectives, *[f"cost {c}" for c in costs], *metrics]
        lines = [
            f"{report['env']} · {report['algo']} · scenario {s}"
            + (f" · weights {scenario['weights']}" if "weights" in scenario else ""),
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for name, r in rows.items():
            cells = [r["return"], *r["objectives"].values(), *r["costs"].values()]
            cells += list(r["metrics"].values())
            lines.append("| " + " | ".join([name, *(f"{c:.4g}" for c in cells)]) + " |")
        if scenario["oracle_return"] is not None:
            lines.append(f"| oracle | {scenario['oracle_return']:.4g} |" + " |" * (len(head) - 2))
        if scenario["score_best"] == scenario["score_reference"]:
            score = f"no score: nothing beats {scenario['score_reference']} but the policy"
        else:
            spread = f" ± {scenario['score_std']:.3f}" if seeds > 1 else ""
            ci = scenario.get("score_ci95")
            interval = f", 95 % CI {ci[0]:.3f} to {ci[1]:.3f}" if ci else ""
            score = (
                f"score {scenario['score_mean']:.3f}{spread} "
                f"(0 = {scenario['score_reference']}, 1 = {scenario['score_best']}{interval})"
            )
        lines += ["", score]
        if scenario.get("stress"):
            lines += ["", *_stress_table(scenario["stress"])]
        for name, b in scenario.get("budgets", {}).items():
            verdict = "met" if b["met"] else "NOT met"
            lines.append(f"budget {name} <= {b['budget']:.4g}: {verdict} ({b['policy']:.4g})")
        for seed, metrics in scenario.get("policy_metrics", {}).items():
            shown = ", ".join(f"{k} {_short(v)}" for k, v in metrics.items())
            lines.append(f"{seed}: {shown}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _stress_table(stress: dict) -> list[str]:
    """The stress splits as a table: the policy's return, its violation rate (share of
    steps with a cost above 0) and summed costs, beside the best baseline's return."""
    lines = [
        "| split | policy return | violation rate | costs | best baseline (return) |",
        "|---|---|---|---|---|",
    ]
    for name, split in stress.items():
        policy = split["policy"]
        costs = ", ".join(f"{c} {v:.4g}" for c, v in policy["costs"].items())
        best = max(split["baselines"].items(), key=lambda item: item[1]["return"])
        lines.append(
            f"| {name} | {policy['return']:.4g} | {policy['violation_rate']:.2%} | {costs} "
            f"| {best[0]} ({best[1]['return']:.4g}) |"
        )
    return lines


def _short(value) -> str:
    """A metric for a table line: numbers to four significant digits, lists of them."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def plot_learning_curve(out, report: dict | None = None) -> Path:
    """``learning_curve.png``: mean episode return over seeds against environment steps,
    per scenario, with the range over seeds and the baselines' returns."""
    from matplotlib.figure import Figure

    out = Path(out)
    config = read_config(out)
    rows = [r for r in read_metrics(out / "metrics.jsonl") if r["episodes"] > 0]
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    for s in range(len(config.weights or [None])):
        members = range(s * config.seeds, (s + 1) * config.seeds)
        steps = sorted({r["env_steps"] for r in rows if r["member"] in members})
        table = {(r["member"], r["env_steps"]): r["episode_return"] for r in rows}
        curves = np.array(
            [[table.get((m, x), np.nan) for x in steps] for m in members], dtype=float
        )
        if not steps:
            continue
        label = f"weights {config.weights[s]}" if config.weights else config.algo
        ax.plot(steps, np.nanmean(curves, axis=0), label=label)
        ax.fill_between(steps, np.nanmin(curves, axis=0), np.nanmax(curves, axis=0), alpha=0.2)
    if report is not None and len(report["scenarios"]) == 1:
        scenario = report["scenarios"][0]
        refs = {n: r["return"] for n, r in scenario["results"].items() if not n.startswith("seed")}
        if scenario["oracle_return"] is not None:
            refs["oracle"] = scenario["oracle_return"]
        for i, (name, value) in enumerate(refs.items()):
            ax.axhline(value, ls="--", lw=1, color=f"C{i + 1}", label=f"{name} (held out)")
    ax.set_xlabel("environment steps per member")
    ax.set_ylabel("episode return (training)")
    ax.set_title(f"{config.env} · {config.algo} · {config.seeds} seed(s)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "learning_curve.png"
    fig.savefig(path, dpi=120)
    return path
