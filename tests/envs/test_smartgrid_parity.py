"""Parity with the real EthicalSmartGrid 2.0.0: observations, enacted actions and rewards.

Both environments get the same profiles, productions, energy pools and actions; every
observation field and every reward must match to 1e-5 at every step (jaxgrid in
float64). Skipped when the package is not installed (it is in the ``test`` extra).
"""

import numpy as np
import pytest
from conftest import full_only, x64

smartgrid_peer = pytest.importorskip("smartgrid_peer")

NUMERIC = tuple(smartgrid_peer.NUMERIC)
WITH_ARGUMENTS = NUMERIC + (
    smartgrid_peer.ARGUMENTATION if smartgrid_peer.argumentation_classes() else ()
)
BASIC = {"Household": 20, "Office": 5, "School": 1}


def parity(mix, period, objectives, kind, steps, seed=0, peer_objectives=None, **options):
    rewards = smartgrid_peer.peer_rewards(peer_objectives or objectives)
    env = smartgrid_peer.build_peer(mix, period, rewards, seed=seed)
    limits = np.array([float(env.action_space(a).high[0]) for a in env.agents])
    actions = smartgrid_peer.action_sequence(kind, limits, steps, seed=seed)
    theirs = smartgrid_peer.record_peer(env, actions, seed=seed)
    with x64():
        ours = smartgrid_peer.run_jaxgrid(mix, period, objectives, theirs, actions, **options)
    return ours, theirs


def test_basic_scenario_random_actions():
    ours, theirs = parity(BASIC, "annually", WITH_ARGUMENTS, "random", 1000)
    smartgrid_peer.compare(ours, theirs, WITH_ARGUMENTS)


@full_only
@pytest.mark.parametrize("kind", ["zeros", "maximum", "adversarial"])
def test_daily_mix_extreme_actions(kind):
    mix = {"Household": 3, "Office": 2, "School": 1}
    ours, theirs = parity(mix, "daily", WITH_ARGUMENTS, kind, 1000, seed=1)
    smartgrid_peer.compare(ours, theirs, WITH_ARGUMENTS)
    if kind == "adversarial":  # the payoff floor was reached, which then limited purchases
        assert theirs["obs"][..., 2].min() == 0.0


def test_smartgrid_medium_society_random_actions():
    """``smartgrid-medium-v0``'s 100 agents: their median comfort (``well_being``, and
    ``exclusion`` below half of it) is found by bisection above 32 agents, not by the
    sorting network of the smaller societies."""
    mix = {"Household": 80, "Office": 19, "School": 1}
    ours, theirs = parity(mix, "annually", NUMERIC, "random", 100, seed=4)
    smartgrid_peer.compare(ours, theirs, NUMERIC)


@full_only
@pytest.mark.parametrize("mix", [{"Household": 5}, {"Office": 2, "School": 2}])
def test_other_mixes_random_actions(mix):
    ours, theirs = parity(mix, "annually", WITH_ARGUMENTS, "random", 1000, seed=2)
    smartgrid_peer.compare(ours, theirs, WITH_ARGUMENTS)


@full_only
def test_adaptability_phases_over_6000_steps():
    """The adaptability rewards switch at 2000, 3000 and 6000 steps."""
    mix = {"Household": 2, "Office": 1, "School": 1}
    objectives = tuple(o for o in NUMERIC if o.startswith("adaptability"))
    ours, theirs = parity(mix, "annually", objectives, "random", 6100, seed=3)
    smartgrid_peer.compare(ours, theirs, objectives)


@full_only
def test_time_and_agent_constrained_rewards():
    from smartgrid.rewards import AgentConstrainedReward, TimeConstrainedReward
    from smartgrid.rewards.numeric.differentiated import Equity, OverConsumption
    from smartgrid.rewards.numeric.per_agent import Comfort

    mix = {"Household": 3, "Office": 1, "School": 1}
    rewards = [
        TimeConstrainedReward(Equity(), start_step=50, end_step=150),
        Comfort(),
        # the package cannot take end_step=None (it compares None < int): "never" is 10**9
        TimeConstrainedReward(OverConsumption(), start_step=120, end_step=10**9),
    ]
    env = smartgrid_peer.build_peer(mix, "annually", rewards, seed=4)
    # AgentConstrainedReward holds Agent objects, so it is made once the world exists
    chosen = [env.world.agents_by_name[a] for a in ("Household2", "School1")]
    env.reward_calculator.rewards[1] = AgentConstrainedReward(Comfort(), chosen)
    limits = np.array([float(env.action_space(a).high[0]) for a in env.agents])
    actions = smartgrid_peer.action_sequence("random", limits, 200, seed=4)
    theirs = smartgrid_peer.record_peer(env, actions, seed=4)
    objectives = ("equity", "comfort", "over_consumption")
    schedule = {
        "equity": {"start": 50, "end": 150},
        "comfort": {"agents": ["Household2", "School1"]},
        "over_consumption": {"start": 120},
    }
    with x64():
        ours = smartgrid_peer.run_jaxgrid(
            mix, "annually", objectives, theirs, actions, schedule=schedule
        )
    smartgrid_peer.compare(ours, theirs, objectives)
    # inactive objectives are reported as inactive (NaN here), never as a silent 0
    assert np.isnan(ours["rewards"][10, 0, 0]) and not np.isnan(ours["rewards"][60, 0, 0])
    assert np.isnan(ours["rewards"][10, 0, 1]) and not np.isnan(ours["rewards"][10, 1, 1])


@pytest.mark.parametrize("judgment", ["diff", "grad", "offset", "ratio"])
def test_other_judgment_functions(judgment):
    if smartgrid_peer.argumentation_classes() is None:
        pytest.skip("AJAR is not installed (it is not on PyPI); see test_argumentation.py")
    from ajar import judgment as ajar_judgment

    ajar_judgment.j_ratio.best_acceptable_count = 0  # the package's process-wide maximum
    mix = {"Household": 3, "Office": 1, "School": 1}
    objectives = smartgrid_peer.ARGUMENTATION
    rewards = smartgrid_peer.peer_rewards(objectives, getattr(ajar_judgment, f"j_{judgment}"))
    env = smartgrid_peer.build_peer(mix, "annually", rewards, seed=5)
    limits = np.array([float(env.action_space(a).high[0]) for a in env.agents])
    actions = smartgrid_peer.action_sequence("random", limits, 300, seed=5)
    theirs = smartgrid_peer.record_peer(env, actions, seed=5)
    with x64():
        ours = smartgrid_peer.run_jaxgrid(
            mix, "annually", objectives, theirs, actions, judgments=judgment
        )
    smartgrid_peer.compare(ours, theirs, objectives)
