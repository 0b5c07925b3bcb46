"""Scenario files: every registered environment from its file, and malformed files refused
with one clear error naming the file, the key path and what was expected."""

import jax
import numpy as np
import pytest

import jaxgrid
from jaxgrid.config import ConfigError, make_from_config
from jaxgrid.registry import list_envs

CONFIGS = __import__("pathlib").Path(__file__).parents[1] / "configs"


def _same_params(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b) and all(
        np.array_equal(x, y) and np.asarray(x).dtype == np.asarray(y).dtype for x, y in zip(la, lb)
    )


@pytest.mark.parametrize("name", list_envs())
def test_every_registered_environment_has_a_file_that_builds_it(name):
    env, params = make_from_config(CONFIGS / f"{name}.toml")
    ref_env, ref_params = jaxgrid.make(name)
    assert _same_params(params, ref_params)
    assert (env.name, env.agents, env.objective_names, env.horizon) == (
        ref_env.name,
        ref_env.agents,
        ref_env.objective_names,
        ref_env.horizon,
    )


def test_no_file_for_an_unregistered_environment():
    assert sorted(p.stem for p in CONFIGS.glob("*.toml")) == list_envs()


def test_yaml_and_overrides(tmp_path):
    path = tmp_path / "bowl.yaml"
    path.write_text(
        "env: voltage33-v0\nepisode: {duration_h: 24, sampling_time_min: 15}\n"
        "params:\n  barrier: bowl\n  q_weight: 0.02\n  abort: {min_vm_pu: [0.8, 1.2]}\n"
    )
    _, params = make_from_config(path)
    _, ref = jaxgrid.make(
        "voltage33-v0", barrier="bowl", q_weight=0.02, abort={"min_vm_pu": (0.8, 1.2)}
    )
    assert _same_params(params, ref)


def test_episode_sets_the_steps_per_day(tmp_path):
    path = tmp_path / "hourly.toml"
    path.write_text('env = "ders33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 60\n')
    env, _ = make_from_config(path)
    assert env.horizon == 24


MALFORMED = [
    # (file name, content, the key path and the expectation the error must name)
    ("top.toml", 'env = "voltage33-v0"\n[feeder]\ncase = "x"\n', r"feeder: unknown key"),
    ("typo.toml", 'env = "voltage33-v0"\n[params]\nq_wieght = 0.1\n', r"params\.q_wieght: unknown argument of voltage33-v0"),
    ("type.toml", 'env = "voltage33-v0"\n[params]\nq_weight = "0.1"\n', r"params\.q_weight: Input should be a valid number"),
    ("capacity.toml", 'env = "arbitrage-v0"\n[params]\ncapacity_mwh = -2.0\n', r"params\.capacity_mwh: Input should be greater than 0"),
    ("nan.toml", 'env = "voltage33-v0"\n[params]\nq_weight = nan\n', r"params\.q_weight: Input should be a finite number"),
    ("inf.toml", 'env = "dso33-v0"\n[params]\nload_scale = inf\n', r"params\.load_scale: Input should be a finite number"),
    ("efficiency.toml", 'env = "arbitrage-v0"\n[params]\nefficiency = 1.5\n', r"params\.efficiency: Input should be less than or equal to 1"),
    ("env.toml", 'env = "voltage34-v0"\n', r"env: expected one of \[.*'voltage33-v0'"),
    ("noenv.toml", "[params]\nq_weight = 0.1\n", r"env: missing; expected the name of a registered environment"),
    ("divide.toml", 'env = "ders33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 7\n', r"episode: sampling_time_min = 7 does not divide duration_h = 24"),
    ("zero.toml", 'env = "ders33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 0\n', r"episode\.sampling_time_min: Input should be greater than 0"),
    ("episodekey.toml", 'env = "ders33-v0"\n[episode]\nlength = 24\nduration_h = 24\nsampling_time_min = 30\n', r"episode\.length: Extra inputs are not permitted"),
    ("steps.toml", 'env = "voltage33-v0"\n[episode]\nduration_h = 24\nsampling_time_min = 30\n', r"episode: voltage33-v0 runs 96 steps per episode; \[episode\] gives 48"),
    ("twoday.toml", 'env = "arbitrage-v0"\n[episode]\nduration_h = 48\nsampling_time_min = 60\n', r"episode\.duration_h: arbitrage-v0 episodes last one day"),
    ("syntax.toml", 'env = "voltage33-v0"\n[params\nq_weight = 0.1\n', r"syntax\.toml: not valid TOML"),
    ("syntax.yaml", "env: voltage33-v0\nparams: [q_weight: 0.1\n", r"syntax\.yaml: not valid YAML"),
    ("list.yaml", "- env: voltage33-v0\n", r"expected a table at the top level, got list"),
    ("scenario.json", "{}", r"scenario\.json: expected a \.toml, \.yaml or \.yml scenario file"),
    ("abort.toml", 'env = "voltage33-v0"\n[params]\nabort = { min_vm_pu = [1.2, 0.8] }\n', r"params\.abort\.min_vm_pu: expected low <= high, got \[1\.2, 0\.8\]"),
    ("abortvar.toml", 'env = "voltage33-v0"\n[params]\nabort = { max_soc = [0.0, 1.0] }\n', r"params: .*max_soc"),
    ("generator.toml", 'env = "smartgrid-v0"\n[params]\ngenerator = "plentiful"\n', r"params: .*plentiful"),
    ("soc.toml", 'env = "arbitrage-v0"\n[params]\nsoc_bounds = [0.9, 0.1]\n', r"params\.soc_bounds: expected \(low, high\) with low <= high"),
    ("households.toml", 'env = "smartgrid-v0"\n[params]\nhouseholds = -3\n', r"params\.households: Input should be greater than or equal to 0"),
    ("bool.toml", 'env = "smartgrid-v0"\n[params]\nhouseholds = true\n', r"params\.households: Input should be a valid integer"),
    ("band.toml", 'env = "dso33-v0"\n[params]\nv_band = [0.94]\n', r"params\.v_band: too few entries: entry 1 is missing"),
    ("weights.toml", 'env = "ders33-v0"\n[params]\nweights = [-1.0, 20.0, 50.0, 5.0, 1.0]\n', r"params\.weights: expected non-negative weights"),
    ("objective.toml", 'env = "smartgrid-v0"\n[params]\nobjectives = ["happiness"]\n', r"params: .*happiness"),
    ("params.toml", 'env = "voltage33-v0"\nparams = 3\n', r"params: expected a table of voltage33-v0's arguments"),
    ("scenario.toml", 'env = "voltage33-v0"\n[params]\nsolver = "newton"\n', r"params: .*newton"),
]  # fmt: skip


@pytest.mark.parametrize("file_name, content, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_file_gives_one_clear_error(tmp_path, file_name, content, message):
    path = tmp_path / file_name
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as err:
        make_from_config(path)
    assert str(err.value).startswith(f"{path}: ")  # the file, first
    assert err.value.__cause__ is None  # one error, not a chain from inside


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="no such scenario file"):
        make_from_config(tmp_path / "absent.toml")
