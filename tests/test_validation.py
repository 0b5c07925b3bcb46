"""Params validation: every entry point refuses params that must not reach a compiled program,
with one error naming the leaf and its value; every registered environment's defaults pass."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import toy_envs

import jaxgrid
from jaxgrid.envs.smartgrid import SmartGridOnFeeder
from jaxgrid.testing import check_env
from jaxgrid.train import ppo
from jaxgrid.validation import ParamsError, params_problems, validate_params


@pytest.mark.parametrize("name", jaxgrid.list_envs())
def test_every_registered_environment_s_defaults_pass(name):
    env, params = jaxgrid.make(name)
    assert params_problems(env, params) == []


MADE = [
    # (environment, overrides, what the error must name): the cases of issue 15
    ("voltage33-v0", dict(load_scale=math.nan), r"params\.load_scale = nan: expected a finite number"),
    ("voltage33-v0", dict(pv_p_max_mw=-1.0), r"params\.pv_p_max_mw\[0\] = -1: expected >= 0 MW"),
    ("smartgrid-v0", dict(adaptability_steps=(3000, -1, 2000, 6000)), r"params\.adaptability_steps\[1\] = -1: expected >= 0 steps"),
    ("dso33-v0", dict(v_band=(1.06, 0.94)), r"params\.v_lower = 1\.06 and params\.v_upper = 0\.94 pu: expected v_lower < v_upper"),
    ("voltage33-v0", dict(distflow_iterations=100_000_000), r"distflow_iterations = 100000000: expected 1 to 100 sweeps"),
    ("ders33-v0", dict(distflow_iterations=101), r"distflow_iterations = 101: expected 1 to 100 sweeps"),
    ("dso33-v0", dict(distflow_iterations=0), r"distflow_iterations = 0: expected 1 to 100 sweeps"),
]  # fmt: skip


@pytest.mark.parametrize("name, overrides, message", MADE)
def test_make_refuses_params_out_of_range(name, overrides, message):
    with pytest.raises(ParamsError, match=message) as err:
        jaxgrid.make(name, **overrides)
    assert str(err.value).startswith(f"{name}: ")


def _set(array, index, value, dtype=None):
    """A copy of ``array`` (as ``dtype``) with ``array[index] = value``."""
    out = np.array(array, dtype=dtype)
    out[index] = value
    return out


EDITED = [
    # (environment, params -> edited params, what the error must name)
    ("dso33-v0", lambda p: p.replace(profiles=p.profiles.replace(load=_set(p.profiles.load, (100, 1), np.nan))), r"params\.profiles\.load\[100, 1\] = nan: expected a finite number"),
    ("voltage33-v0", lambda p: p.replace(v_upper=jnp.float32(np.nan)), r"params\.v_upper = nan: expected a finite number"),
    ("voltage33-v0", lambda p: p.replace(feeder=p.feeder.replace(vmin_pu=_set(p.feeder.vmin_pu, 5, 1.2), vmax_pu=_set(p.feeder.vmax_pu, 5, 0.9))), r"params\.feeder\.vmin_pu\[5\] = 1\.2 and params\.feeder\.vmax_pu\[5\] = 0\.9 pu: expected vmin_pu <= vmax_pu"),
    ("arbitrage-v0", lambda p: p.replace(profiles=p.profiles.replace(price=_set(p.profiles.price, (3, 1), 1e39, np.float64))), r"params\.profiles\.price\[3, 1\] = 1e\+39: beyond float32"),
    ("arbitrage-v0", lambda p: p.replace(profiles=p.profiles.replace(price=_set(p.profiles.price, (3, 1), np.inf))), r"params\.profiles\.price\[3, 1\] = inf: expected a finite number"),  # 1e39 in float32
    ("voltage33-v0", lambda p: p.replace(pv_bus=_set(p.pv_bus, 0, 33)), r"params\.pv_bus\[0\] = 33: expected a bus index of params\.feeder, 0 to 32"),
    ("voltage33-v0", lambda p: p.replace(feeder=p.feeder.replace(rate_mva=_set(p.feeder.rate_mva, 2, -np.inf))), r"params\.feeder\.rate_mva\[2\] = -inf: expected a finite number or inf \(no limit\)"),
    ("dso33-v0", lambda p: p.replace(abort=p.abort.replace(low=_set(p.abort.low, 0, np.inf))), r"params\.abort\.low\[0\] = inf: expected a finite number or -inf \(no limit\)"),
    ("ders33-v0", lambda p: p.replace(battery_soc0=_set(p.battery_soc0, 1, 0.95)), r"params\.battery_soc0\[1\] = 0\.95 and params\.battery\.soc_max\[1\] = 0\.9: expected battery_soc0 <= battery\.soc_max"),
    ("smartgrid33-v0", lambda p: p.replace(society=p.society.replace(capacity=_set(p.society.capacity, 4, 0.0))), r"params\.society\.capacity\[4\] = 0: expected > 0 Wh"),
    ("gardeners-v0", lambda p: p.replace(layout=p.layout.replace(position=_set(p.layout.position, (1, 1), 10))), r"params\.layout\.position\[1, 1\] = 10: expected a column of the grid, 0 to 9"),
    # the smooth surrogates' widths (docs/control.md): 0 is the exact model, below it none
    ("voltage33-v0", lambda p: p.replace(pv_q_smoothing_mvar=-0.01), r"params\.pv_q_smoothing_mvar = -0\.01: expected >= 0 Mvar"),
    ("ders33-v0", lambda p: p.replace(pv_q_smoothing_mvar=-0.01), r"params\.pv_q_smoothing_mvar = -0\.01: expected >= 0 Mvar"),
    ("voltage13-v0", lambda p: p.replace(pv_q_smoothing_kvar=-5.0), r"params\.pv_q_smoothing_kvar = -5: expected >= 0 kvar"),
    ("arbitrage-v0", lambda p: p.replace(battery=p.battery.replace(smoothing_mw=-0.1)), r"params\.battery\.smoothing_mw = -0\.1: expected >= 0 MW"),
    ("arbitrage-v0", lambda p: p.replace(battery=p.battery.replace(q_smoothing_mvar=-0.1)), r"params\.battery\.q_smoothing_mvar = -0\.1: expected >= 0 Mvar"),
    ("dcmg-v0", lambda p: p.replace(datacentre=p.datacentre.replace(cooling_smoothing_mw=-0.1)), r"params\.datacentre\.cooling_smoothing_mw = -0\.1: expected >= 0 MW"),
    ("dcmg-v0", lambda p: p.replace(diesel=p.diesel.replace(smoothing_mw=-0.1)), r"params\.diesel\.smoothing_mw = -0\.1: expected >= 0 MW"),
    ("dcmg-v0", lambda p: p.replace(diesel=p.diesel.replace(commit_smoothing_mw=-0.1)), r"params\.diesel\.commit_smoothing_mw = -0\.1: expected >= 0 MW"),
    ("voltage13-v0", lambda p: p.replace(tap_smoothing_steps=-0.5), r"params\.tap_smoothing_steps = -0\.5: expected >= 0 tap steps"),
]  # fmt: skip


@pytest.mark.parametrize("name, edit, message", EDITED)
def test_edited_params_are_refused_naming_the_leaf(name, edit, message):
    env, params = jaxgrid.make(name)
    with pytest.raises(ParamsError, match=message):
        validate_params(env, edit(params))


def test_no_limit_is_the_only_infinity_allowed():
    env, params = jaxgrid.make("dso33-v0", abort={"min_vm_pu": (0.85, math.inf)})
    assert np.isinf(params.abort.high[0]) and np.all(np.isinf(params.feeder.rate_mva))
    unrated = params.feeder.replace(rate_mva=_set(params.feeder.rate_mva, 0, np.nan))
    with pytest.raises(ParamsError, match=r"params\.feeder\.rate_mva\[0\] = nan"):
        validate_params(env, params.replace(feeder=unrated))


def test_every_problem_is_listed_in_one_error():
    env, params = jaxgrid.make("voltage33-v0")
    bad = params.replace(load_scale=jnp.float32(np.nan), v_ref=jnp.float32(-1.0))
    with pytest.raises(ParamsError, match=r"2 problems") as err:
        validate_params(env, bad)
    assert "params.load_scale = nan" in str(err.value)
    assert "params.v_ref = -1: expected > 0 and < 2 pu" in str(err.value)


@pytest.mark.parametrize("name", ["voltage33-v0", "smartgrid33-v0"])
def test_with_scalarisation_validates(name):
    env, params = jaxgrid.make(name)
    sc = env.scalarisation(params)
    bad = sc.replace(weights=sc.weights.at[0].set(jnp.nan))
    with pytest.raises(ParamsError, match=r"scalarisation\.weights\[0\] = nan"):
        env.with_scalarisation(params, bad)


def test_traced_leaves_are_skipped_concrete_ones_still_checked():
    env, params = jaxgrid.make("voltage33-v0")
    sc = env.scalarisation(params)
    weightings = jnp.array([[1.0, 0.1], [1.0, 0.5]])

    def reward_weights(w, p):
        return env.scalarisation(env.with_scalarisation(p, sc.replace(weights=w))).weights

    np.testing.assert_array_equal(
        jax.vmap(reward_weights, (0, None))(weightings, params), weightings
    )
    bad = params.replace(v_upper=jnp.float32(np.nan))
    with pytest.raises(ParamsError, match=r"params\.v_upper = nan"):
        jax.vmap(reward_weights, (0, None))(weightings, bad)


def test_a_society_on_a_feeder_bounds_its_distflow_iterations():
    env, params = jaxgrid.make("smartgrid33-v0")
    unrolled = SmartGridOnFeeder(env.society, params, distflow_iterations=100_000_000)
    with pytest.raises(ParamsError, match=r"distflow_iterations = 100000000"):
        validate_params(unrolled, params)


def test_trainer_and_check_env_refuse_bad_params_before_compiling():
    env = toy_envs.Tanks()
    bad = env.default_params().replace(target=jnp.float32(np.inf))
    with pytest.raises(ParamsError, match=r"params\.target = inf: expected a finite number"):
        ppo.make_train(ppo.PPOConfig(total_steps=64, num_envs=2, num_steps=8), env, bad)
    with pytest.raises(ParamsError, match=r"params\.target = inf"):
        check_env(env, bad)
