"""The ``jaxgrid`` command line: ``list``, ``demo``, ``train``, ``eval`` and ``render``.

Every error a user can fix (a bad flag, value, path or file, a run directory in use) is a
:class:`~jaxgrid.errors.UserError`: one line ``jaxgrid: error: ...`` on stderr and exit
status 2, no traceback; warnings are one line ``jaxgrid: warning: ...`` each.

``--import MODULE`` (before the command, repeatable) imports a module first, so that the
environments it registers can be listed, demonstrated, trained, rendered and evaluated:
``jaxgrid --import solar_home train --env solar-home-v0`` (the working directory is on
the import path).

Every command keeps its compiled programs in JAX's persistent compilation cache, so that a
second run of the same config loads its training program
instead of compiling it: in ``$JAX_COMPILATION_CACHE_DIR`` when that is set (empty: no
cache), else ``$XDG_CACHE_HOME/jaxgrid/jax`` or ``~/.cache/jaxgrid/jax``, at most
:data:`CACHE_MAX_BYTES` there (the least recently used entries go first).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

from jaxgrid.errors import UserError


def _demo(args) -> int:
    import jax
    import jax.numpy as jnp

    import jaxgrid
    from jaxgrid.train.evaluate import NOT_METRICS

    env, params = jaxgrid.make(args.env)
    steps = env.horizon * args.episodes
    keys = jax.random.split(jax.random.PRNGKey(args.seed), args.envs)
    print(
        f"{env.name}: {env.num_agents} agents, horizon {env.horizon} steps, "
        f"{args.envs} environments x {args.episodes} episode(s) in one vmapped lax.scan "
        f"on {jax.devices()[0].platform.upper()}\n"
    )
    # the evaluation's non-metrics, and what the table shows otherwise or not at all
    skip = NOT_METRICS | {"power_flow_failed", "reward_vector", "objective_mask", "costs"}
    baselines = env.baselines(params)
    unknown = [n for n in args.policy or () if n not in baselines]
    if unknown:
        raise UserError(f"--policy: no baseline {unknown[0]!r}; {env.name} has {list(baselines)}")
    # controllers (MPC) optimise at every step: minutes at --envs 256, so only when named
    skipped = [n for n, p in baselines.items() if getattr(p, "reads_state", False)]
    chosen = args.policy or [n for n in baselines if n not in skipped]
    header = None
    for name, policy in ((n, baselines[n]) for n in chosen):
        run = jax.jit(
            jax.vmap(lambda k, policy=policy: jaxgrid.rollout(env, params, policy, k, steps))
        )
        t0 = time.perf_counter()
        trajectory = jax.block_until_ready(run(keys))
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        trajectory = jax.block_until_ready(run(keys))
        rate = args.envs * steps / (time.perf_counter() - t0)
        info = trajectory.info
        row = {
            "policy": name,
            "return/episode": float(jnp.sum(trajectory.reward))
            / (args.envs * args.episodes * env.num_agents),
        }
        # a step whose power flow failed has no physical figures: averages skip it
        failed = info.get("power_flow_failed")
        solved = jnp.ones(trajectory.reward.shape[:2], bool) if failed is None else ~failed
        if failed is not None:
            row["power_flow_failed"] = float(jnp.mean(failed))
        for i, obj in enumerate(env.objective_names):
            row[obj] = _mean_over(info["reward_vector"][..., i], solved)
        for i, cost in enumerate(env.cost_names):
            row[f"cost:{cost}"] = float(jnp.mean(info["costs"][..., i]))
        for key, value in info.items():
            if key not in skip and value.ndim == 2:  # one scalar per step (time, env)
                row[key] = _mean_over(value, solved)
        row["env-steps/s"] = rate
        row["compile s"] = compile_s
        if header is None:
            header = list(row)
            print("| " + " | ".join(header) + " |")
            print("|" + "|".join("---" for _ in header) + "|")
        cells = [row[h] if isinstance(row[h], str) else f"{row[h]:.4g}" for h in header]
        print("| " + " | ".join(cells) + " |")
    if skipped and not args.policy:
        print(f"\nnot run (model-predictive controllers, slow): {skipped}; name them with --policy")
    if "controllable" in header:
        print("\ncontrollable = share of steps with every bus voltage in [0.95, 1.05] pu (CR)")
    if "power_flow_failed" in header:
        print(
            "power_flow_failed = share of steps whose power flow has no solution (voltage "
            "collapse; the episode ends there); objectives and info columns average the "
            "other steps"
        )
    return 0


def _mean_over(values, solved) -> float:
    """Mean of per-step ``values`` ``(steps, envs, ...)`` over the solved steps (nan if none)."""
    import jax.numpy as jnp

    weight = solved.reshape(solved.shape + (1,) * (values.ndim - 2)).astype(jnp.float32)
    weight = jnp.broadcast_to(weight, values.shape)
    total = jnp.sum(weight)
    return (
        float(jnp.sum(values.astype(jnp.float32) * weight) / total) if total > 0 else float("nan")
    )


def _list(args) -> int:
    import jaxgrid

    for name in jaxgrid.list_envs():
        print(name)
    return 0


def _read_config_file(path: str) -> dict:
    """A run config from JSON or TOML (:class:`jaxgrid.train.run.RunConfig` fields)."""
    text = Path(path).read_text()
    if path.endswith(".toml"):
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib

        return tomllib.loads(text)
    return json.loads(text)


def _value(text: str):
    """A ``--set`` value: JSON when it parses (numbers, lists, booleans), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _run_config(args):
    from jaxgrid.train.run import ALGOS, RunConfig

    fields = {}
    # the config's field of the algorithm's settings (an unknown algorithm: RunConfig says so)
    section = ALGOS[args.algo].section if args.algo in ALGOS else "ppo"
    if args.config:
        from jaxgrid.config import ConfigError, is_scenario_file, run_fields

        try:
            if is_scenario_file(args.config):  # a scenario: the environment to train on
                fields = run_fields(args.config, section)
            else:
                fields = _read_config_file(args.config)
                algo = args.algo or fields.get("algo", "ppo")
                section = ALGOS[algo].section if algo in ALGOS else "ppo"
        except ConfigError as e:  # names the file
            raise UserError(str(e)) from None
        except OSError as e:
            raise UserError(f"--config {args.config}: {e.strerror or e}") from None
        except ValueError as e:  # JSON and TOML syntax errors
            raise UserError(f"--config {args.config}: {e}") from None
    settings = fields.setdefault(section, {})
    for name in ("env", "algo", "seeds", "seed", "checkpoint_every", "eval_episodes"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    if args.no_mpc:
        fields["eval_mpc"] = False
    if args.no_oracle:
        fields["eval_oracle"] = False
    if args.residual is not None:
        fields["residual"] = args.residual
    if args.total_steps is not None:
        settings["total_steps"] = args.total_steps
    if args.weights:
        fields["weights"] = args.weights
    if args.env_kwargs:
        fields["env_kwargs"] = {**fields.get("env_kwargs", {}), **args.env_kwargs}
    for item in args.set or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--set needs NAME=VALUE, got {item!r}")
        settings[name] = _value(value)
    budgets = dict(settings.get("cost_budgets", []))
    for item in args.cost_budget or []:
        name, sep, value = item.partition("=")
        try:
            budgets[name] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise UserError(f"--cost-budget needs NAME=NUMBER, got {item!r}")
    if budgets:
        settings["cost_budgets"] = [[n, b] for n, b in budgets.items()]
    if "env" not in fields:
        raise UserError("give --env NAME (or a --config file naming one)")
    try:
        config = RunConfig(**fields)
    except (TypeError, ValueError) as e:
        raise UserError(str(e)) from None
    if config.residual is None and not config.settings["cost_budgets"]:
        return config
    try:
        costs = config.make_env()[0].cost_names
    except ValueError as e:  # an unknown baseline to add residuals to: names those there are
        if config.residual is None:
            raise
        raise UserError(f"--residual: {e}") from None
    if config.settings["cost_budgets"]:
        unknown = [n for n, _ in config.settings["cost_budgets"] if n not in costs]
        if unknown:
            raise UserError(
                f"--cost-budget: {config.env} has no cost {unknown}; its costs are {list(costs)}"
            )
    return config


def _train(args) -> int:
    from jaxgrid.train.run import format_table, train_run

    config = _run_config(args)
    out = Path(args.out or f"runs/{config.env}-{config.algo}")
    print(f"training {config.env} with {config.algo}, {config.seeds} seed(s), into {out}")
    report = train_run(config, out, progress=not args.no_progress, tensorboard=args.tensorboard)
    print(f"\nheld-out evaluation ({report['episodes']} episodes per policy)\n")
    print(format_table(report))
    written = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    print(f"\nwritten: {', '.join(written)}")
    return 0


def _render(args) -> int:
    import jax
    import numpy as np

    import jaxgrid
    from jaxgrid.viz import render_episode, save_frames

    env, params = jaxgrid.make(args.env)
    baselines = env.baselines(params)
    others = [n for n in baselines if n != "random"]
    name = args.policy or (others[0] if others else "random")
    if name not in baselines:
        raise UserError(f"--policy: no baseline {name!r}; {env.name} has {list(baselines)}")
    steps = args.steps or env.horizon
    policy = baselines[name]
    run = jax.jit(lambda k: jaxgrid.rollout(env, params, policy, k, steps, with_states=True))
    trajectory, states = run(jax.random.PRNGKey(args.seed))  # states before any auto-reset
    episode_step = _episode_steps(np.asarray(trajectory.terminated | trajectory.truncated))
    every = max(1, steps // args.frames) if args.out.endswith(".gif") else steps
    frames = [
        env.render(jax.tree_util.tree_map(lambda x, t=t: x[t], states), params, episode_step[t])
        for t in range(steps)
        if (t + 1) % every == 0 or t == steps - 1
    ]
    path = save_frames(frames if args.out.endswith(".gif") else frames[-1:], args.out)
    print(f"{env.name} after {steps} steps of the {name} policy: {path} ({len(frames)} frame(s))")
    if args.panels:
        save_frames([render_episode(env, trajectory, _band(params))], args.panels)
        print(f"episode panels: {args.panels}")
    return 0


def _episode_steps(done) -> list[int]:
    """For each step ``t`` of a rollout, the steps of its episode up to and including it
    (``done[t]``: the episode ended at step ``t``)."""
    counts, count = [], 0
    for ended in done:
        count += 1
        counts.append(count)
        if ended:
            count = 0
    return counts


def _band(params) -> tuple[float, float]:
    return float(getattr(params, "v_lower", 0.95)), float(getattr(params, "v_upper", 1.05))


def _eval(args) -> int:
    from jaxgrid.train.run import evaluate_run, format_table

    mpc = False if args.no_mpc else None
    with_oracle = False if args.no_oracle else (True if args.oracle else None)
    print(format_table(evaluate_run(args.run, args.episodes, args.stress, mpc, with_oracle)))
    return 0


# a Sphinx role, :class:`~jaxgrid.env.Environment` or :func:`title <target>`, and ``code``
_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(~?)([^`<]*?)\s*(?:<[^`>]*>)?(?:\(\))?`")
_CODE = re.compile(r"``(.+?)``", re.DOTALL)


def _terminal(text: str) -> str:
    """``text``, written as reStructuredText for the API reference, as plain terminal text: a
    role becomes its target (the last name with ``~``, the title where one is given), a
    code span its text, in single quotes where it has spaces (``jaxgrid: error: ...``)."""

    def role(match: re.Match) -> str:
        short, target = match.groups()
        return target.rsplit(".", 1)[-1] if short else target

    def code(match: re.Match) -> str:
        inner = match.group(1)
        return f"'{inner}'" if any(c.isspace() for c in inner) else inner

    return _CODE.sub(code, _ROLE.sub(role, text))


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with every description, epilog and help text in plain terminal
    text (see :func:`_terminal`): they may come from docstrings."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(_terminal(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return _terminal(super()._expand_help(action))


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises its complaints as :class:`~jaxgrid.errors.UserError`
    (one line, without the usage block) and prints its help as plain text
    (:class:`_HelpFormatter`); subcommand parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise UserError(message)


def _at_least(least: int):
    """An argparse type: an integer ``>= least``."""

    def integer(text: str) -> int:
        value = int(text)  # argparse reports a ValueError as "invalid integer value"
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
        return value

    return integer


def _env_name(text: str) -> str:
    """An argparse type: a registered environment name (else the closest ones)."""
    from jaxgrid.registry import check_registered

    try:
        check_registered(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _json_object(text: str) -> dict:
    """An argparse type: a JSON object, e.g. ``'{"q_weight": 0.05}'``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object like '{{\"name\": 1}}', got {text}"
        )
    return value


def _weightings(text: str) -> list[list[float]]:
    """An argparse type: reward weightings, rows split by ``;``, e.g. ``'1,0,0;0,1,0'``."""
    try:
        return [[float(w) for w in row.split(",")] for row in text.split(";")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected rows of numbers like '1,0,0;0,1,0', got {text!r}"
        ) from None


# the names of jaxgrid.train.run.ALGOS (not imported here: --help starts without JAX)
ALGO_NAMES = ["ppo", "ippo", "sac", "isac", "apg", "iapg"]


def build_parser() -> argparse.ArgumentParser:
    """The ``jaxgrid`` command line: list, demo, train, eval, render."""
    parser = _Parser(
        prog="jaxgrid",
        description=__doc__,
        epilog="'jaxgrid COMMAND --help' shows a command's options.",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (repeatable): it may register its own environments",
    )
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    def command(name: str, summary: str, func) -> argparse.ArgumentParser:
        """A subcommand: ``summary`` is its line in ``jaxgrid --help`` and its own help's
        description."""
        subparser = sub.add_parser(name, help=summary, description=summary)
        subparser.set_defaults(func=func)
        return subparser

    command("list", "list the registered environments", _list)
    demo = command("demo", "roll the baselines of an environment and print a table", _demo)
    demo.add_argument(
        "--env", type=_env_name, default="voltage33-v0", help="registered environment name"
    )
    demo.add_argument(
        "--envs", type=_at_least(1), default=256, help="environments run in parallel (vmap)"
    )
    demo.add_argument("--episodes", type=_at_least(1), default=1, help="episodes per environment")
    demo.add_argument("--seed", type=int, default=0, help="PRNG seed")
    demo.add_argument(
        "--policy",
        action="append",
        help="run only this baseline (repeatable); default: every baseline but the "
        "model-predictive controllers",
    )
    train = command(
        "train", "train PPO, IPPO, SAC, ISAC, APG or IAPG, checkpoint, evaluate, plot", _train
    )
    train.add_argument("--env", type=_env_name, help="registered environment name")
    train.add_argument(
        "--algo",
        choices=ALGO_NAMES,
        help="PPO, SAC or APG (analytic policy gradients; SAC and APG: continuous actions) "
        "on the centralised view, or IPPO, ISAC or IAPG per agent (networks shared by agent "
        "type); default ppo",
    )
    train.add_argument("--total-steps", type=_at_least(1), help="environment steps per seed")
    train.add_argument("--seeds", type=_at_least(1), help="independent trainings, vmapped")
    train.add_argument("--seed", type=int, help="PRNG seed")
    train.add_argument("--out", help="run directory (default runs/ENV-ALGO); reruns resume")
    train.add_argument(
        "--config",
        help="a scenario file (TOML/YAML: env, [episode], [params]; see configs/) or a JSON/TOML "
        "run config; flags override it",
    )
    train.add_argument(
        "--weights", type=_weightings, help="reward weightings to sweep, e.g. '1,0,0;0,1,0'"
    )
    train.add_argument(
        "--env-kwargs", type=_json_object, help="JSON arguments of the environment factory"
    )
    train.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a setting of the algorithm (a PPOConfig, SACConfig or APGConfig field)",
    )
    train.add_argument(
        "--cost-budget",
        action="append",
        metavar="NAME=VALUE",
        help="keep the episode sum of a cost below VALUE (PPO- or SAC-Lagrangian); repeatable",
    )
    train.add_argument(
        "--checkpoint-every", type=_at_least(0), help="updates between checkpoints (0: at the end)"
    )
    train.add_argument("--eval-episodes", type=_at_least(1), help="held-out episodes per policy")
    train.add_argument(
        "--residual",
        metavar="BASELINE",
        help="learn a correction added to this baseline's action (residual RL; Box actions)",
    )
    train.add_argument(
        "--no-mpc",
        action="store_true",
        help="leave the model-predictive baselines out of the evaluation (they plan at "
        "every step: slow on the larger feeders)",
    )
    train.add_argument(
        "--no-oracle",
        action="store_true",
        help="leave the perfect-foresight optimum out of the evaluation (a MILP a day on tso*)",
    )
    train.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar or lines (a bar on a terminal, else a line every 5 s)",
    )
    train.add_argument("--tensorboard", action="store_true", help="also log to TensorBoard")
    render = command("render", "draw an environment after a baseline's steps", _render)
    render.add_argument("--env", required=True, type=_env_name, help="registered environment name")
    render.add_argument("--out", required=True, help=".png (the last state) or .gif (an episode)")
    render.add_argument("--panels", help="also draw the episode's panels into this .png")
    render.add_argument("--policy", help="baseline to run (default: the first non-random)")
    render.add_argument("--steps", type=_at_least(1), help="steps to run (default: one episode)")
    render.add_argument("--frames", type=_at_least(1), default=24, help="frames of a .gif")
    render.add_argument("--seed", type=int, default=0, help="PRNG seed")
    evaluate = command("eval", "evaluate a run's newest checkpoint on held-out days", _eval)
    evaluate.add_argument("--run", required=True, help="run directory written by jaxgrid train")
    evaluate.add_argument("--episodes", type=_at_least(1), help="held-out episodes per policy")
    evaluate.add_argument(
        "--no-mpc", action="store_true", help="leave the model-predictive baselines out"
    )
    oracle = evaluate.add_mutually_exclusive_group()
    oracle.add_argument(
        "--no-oracle",
        action="store_true",
        help="leave the perfect-foresight optimum out of the evaluation (a MILP a day on tso*)",
    )
    oracle.add_argument(
        "--oracle",
        action="store_true",
        help="solve the perfect-foresight optimum even where the run was trained with --no-oracle",
    )
    evaluate.add_argument(
        "--stress",
        action="store_true",
        help="also evaluate on the out-of-distribution splits (load stress, high demand, "
        "low renewable, tight lines)",
    )
    return parser


CACHE_MAX_BYTES = 2 * 1024**3  # the persistent compilation cache's folder, when ours


def use_compilation_cache() -> None:
    """JAX's persistent compilation cache in ``$JAX_COMPILATION_CACHE_DIR`` when set (JAX
    reads it itself), else in the user's cache folder (see the module docstring)."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    import jax

    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "jaxgrid" / "jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        warnings.warn(f"no compilation cache: cannot create {folder} ({e.strerror})", stacklevel=2)
        return
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_compilation_cache_max_size", CACHE_MAX_BYTES)


def main(argv: list[str] | None = None) -> int:
    """Run the ``jaxgrid`` command given by ``argv`` (default: the process's arguments);
    returns the exit status (2 after a :class:`~jaxgrid.errors.UserError`)."""
    try:
        parser = build_parser()
        _import_modules(parser, argv)
        args = parser.parse_args(argv)
        with warnings.catch_warnings():
            warnings.showwarning = _one_line_warning
            use_compilation_cache()
            return args.func(args)
    except UserError as e:
        print(f"jaxgrid: error: {e}", file=sys.stderr)
        return 2


def _import_modules(parser: argparse.ArgumentParser, argv: list[str] | None) -> None:
    """Import the ``--import`` modules before the rest of ``argv`` is parsed (the
    ``--env`` names are checked against the registry as they are read)."""
    before_command = argparse.ArgumentParser(add_help=False)
    before_command.add_argument("--import", dest="imports", action="append", default=[])
    known, _ = before_command.parse_known_args(argv)
    if not known.imports:
        return
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    for name in known.imports:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise UserError(f"--import {name}: {e}") from None


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"jaxgrid: warning: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
