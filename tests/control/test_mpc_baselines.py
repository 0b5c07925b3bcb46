"""The ``mpc`` baseline of each continuous environment against that environment's other
baselines on held-out days, the claims of its card: MPC earns the highest return in
``ders33-v0``, ``evfleet33-v0`` and ``voltage13-v0``, 95 % of the MILP oracle in ``dcmg-v0``, within 3 % of
the AC-OPF's return in ``opf14-v0`` on fewer violating steps than the network-blind
economic dispatch, and in ``dso33-v0`` (whose reward charges curtailment one for one)
loses less in the network and leaves the band on fewer steps than no control.

Each evaluation plans at every step of every episode (minutes on CI's two cores), so the
default suite checks only that the baselines are listed and the controllers built;
``JAXGRID_VALIDATE=full`` runs the comparisons.
"""

import jax
import pytest
from conftest import full_only

import jaxgrid
from jaxgrid.rollout import is_controller
from jaxgrid.train.evaluate import evaluate, oracle

EPISODES = 4

MPC_ENVS = (
    "arbitrage-v0",
    "voltage33-v0",
    "dso33-v0",
    "ders33-v0",
    "evfleet33-v0",
    "dcmg-v0",
    "opf14-v0",
    "voltage13-v0",
)


@pytest.mark.parametrize("name", MPC_ENVS)
def test_continuous_environments_list_an_mpc_controller(name):
    env, params = jaxgrid.make(name)
    mpc = env.baselines(params)["mpc"]
    assert is_controller(mpc) and mpc.config.horizon >= 1


def _results(name):
    env, params = jaxgrid.make(name)
    key = jax.random.PRNGKey(0)
    return {n: evaluate(p, env, params, key, EPISODES) for n, p in env.baselines(params).items()}


@full_only
@pytest.mark.parametrize("name", ["ders33-v0", "evfleet33-v0", "voltage13-v0"])
def test_mpc_earns_more_than_every_other_baseline(name):
    results = _results(name)
    others = {n: r["return"] for n, r in results.items() if n != "mpc"}
    assert results["mpc"]["return"] > max(others.values()), (results["mpc"]["return"], others)


@full_only
def test_dso_mpc_cuts_losses_and_band_violations():
    results = _results("dso33-v0")
    mpc, none = results["mpc"], results["no_control"]
    assert mpc["metrics"]["loss_mw"] < 0.95 * none["metrics"]["loss_mw"]
    assert mpc["violation_rate"] < 0.8 * none["violation_rate"]


@full_only
def test_dcmg_mpc_reaches_95_percent_of_the_milp_oracle():
    env, params = jaxgrid.make("dcmg-v0")
    key = jax.random.PRNGKey(0)
    earned = evaluate(env.baselines(params)["mpc"], env, params, key, EPISODES)["return"]
    best = oracle(env, params, key, EPISODES)  # HiGHS on the same held-out days
    assert 0.95 * best <= earned <= best + 1e-3 * abs(best), (earned, best)


@full_only
def test_opf_mpc_nears_the_acopf_within_the_limits():
    results = _results("opf14-v0")
    mpc, acopf, blind = results["mpc"], results["acopf"], results["economic_dispatch"]
    assert mpc["return"] >= acopf["return"] - 0.03 * abs(acopf["return"])
    assert mpc["violation_rate"] < blind["violation_rate"]
