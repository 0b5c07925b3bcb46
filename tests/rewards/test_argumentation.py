"""Argumentation rewards: the specification's worked examples, every aliveness pattern of
the four graphs against an independent labelling, and the judgment functions by hand."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import x64

from jaxgrid.envs.smartgrid.judges import JUDGES, Situation
from jaxgrid.rewards.argumentation import (
    COUNTER,
    J_DIFF,
    J_GRAD,
    J_OFFSET,
    J_RATIO,
    J_SIMPLE,
    SUPPORT,
    argument_graph,
    grounded_extension,
    judgment,
)


def labelling(attacks: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """The reference procedure (spec 2.4): label alive arguments undecided and dead ones
    out; repeatedly label *in* an undecided argument whose attackers are all out, and out
    everything it attacks."""
    k = len(alive)
    live = attacks & alive[:, None] & alive[None, :]
    label = np.where(alive, 0, -1)  # 0 undecided, 1 in, -1 out
    changed = True
    while changed:
        changed = False
        for y in range(k):
            if label[y] == 0 and all(label[x] == -1 for x in range(k) if live[x, y]):
                label[y] = 1
                label[live[y]] = -1
                changed = True
    return label == 1


@pytest.mark.parametrize("name", list(JUDGES))
def test_grounded_extension_on_every_aliveness_pattern(name):
    graph = JUDGES[name][0].graph
    k = len(graph.names)
    patterns = np.array(list(itertools.product([False, True], repeat=k)))
    ours = np.asarray(grounded_extension(graph, jnp.asarray(patterns)))
    for pattern, accepted in zip(patterns, ours, strict=True):
        np.testing.assert_array_equal(accepted, labelling(graph.attacks, pattern))


def test_graph_sizes_match_the_specification():
    expected = {  # k, attacks, supports, counters
        "affordability": (13, 15, 3, 7),
        "environmental_sustainability": (16, 15, 6, 7),
        "inclusiveness": (9, 8, 3, 4),
        "supply_security": (14, 13, 4, 7),
    }
    for name, (k, n_att, p, c) in expected.items():
        graph = JUDGES[name][0].graph
        assert (len(graph.names), int(graph.attacks.sum()), graph.n_support, graph.n_counter) == (
            k,
            n_att,
            p,
            c,
        )


def test_cyclic_graph_falls_back_to_k_iterations():
    graph = argument_graph(
        [("a", SUPPORT), ("b", COUNTER), ("c", SUPPORT)], [("a", "b"), ("b", "a"), ("b", "c")]
    )
    assert graph.iterations == 3
    accepted = np.asarray(grounded_extension(graph, jnp.ones(3, bool)))
    np.testing.assert_array_equal(accepted, labelling(graph.attacks, np.ones(3, bool)))  # nothing


def world(**judged):
    """The spec's common world (Household1, Household2, Office1, School1) as a Situation;
    the judged agent is given by ``agent`` (index) and its fields by keyword."""
    agent = judged.pop("agent")
    comfort = np.array(judged.pop("comforts", [0.85, 0.80, 0.90, 0.95]), np.float64)
    fields = dict(
        give_energy=np.zeros(4),
        storage=np.zeros(4),
        buy=np.zeros(4),
        payoff=np.zeros(4),
        self_need=np.array([1000.0, 1000.0, 1000.0, 50000.0]),
        storage_consumption=np.zeros(4),
        consumption=np.zeros(4),
        storage_capacity=np.array([500.0, 500.0, 2500.0, 10000.0]),
        delta_store=np.zeros(4),
    )
    for key, value in judged.items():
        if key == "global_energy":
            continue
        fields[key][agent] = value
    return Situation(
        average_comfort=np.full(4, comfort.sum() / 4),
        self_comfort=comfort,
        global_energy=np.full(4, float(judged.get("global_energy", 150000))),
        is_school=np.array([False, False, False, True]),
        **fields,
    )


def simple_value(name, situation, agent):
    judge = JUDGES[name][0]
    p, c = judge.counts(situation)
    value = judgment(J_SIMPLE, p, c, judge.graph.n_support, judge.graph.n_counter, 0.0, jnp.float64)
    return float(value[agent])


def test_worked_examples_of_the_specification():
    with x64():
        # 4.1 Affordability, Household1: p = 1, c = 3
        s = world(agent=0, comforts=[0.85, 0.80, 0.90, 0.95], payoff=50, consumption=1000, buy=600)
        assert simple_value("affordability", s, 0) == 0.25
        # 4.2 EnvironmentalSustainability, Household1: p = 1, c = 4
        s = world(
            agent=0,
            comforts=[0.90, 0.80, 0.90, 0.95],
            storage_consumption=300,
            consumption=1000,
            buy=200,
            storage=450,
            delta_store=200 + 200 + 40 - 0 - 300 - 0,
            global_energy=200000,
        )
        assert simple_value("environmental_sustainability", s, 0) == 0.2
        # 4.3 Inclusiveness, School1 gives 6000 of a 50000 need: p = 1, c = 2
        s = world(agent=3, comforts=[0.80, 0.85, 0.90, 0.99], give_energy=6000)
        assert simple_value("inclusiveness", s, 3) == 1 / 3
        # 4.4 SupplySecurity, Household1 consumes 1150 of a 1000 need: p = 1, c = 2
        s = world(
            agent=0, comforts=[0.97, 0.80, 0.90, 0.95], consumption=1150, global_energy=200000
        )
        assert simple_value("supply_security", s, 0) == 1 / 3
        # 4.5 Inclusiveness, everybody at 0.90 and nothing given: no accepted argument
        s = world(agent=0, comforts=[0.90, 0.90, 0.90, 0.90])
        assert simple_value("inclusiveness", s, 0) == 0.5


def test_float64_threshold_of_the_specification():
    """0.95 - 0.85 is 0.09999999999999998 in float64: not >= 0.10 (spec 1.3)."""
    with x64():
        s = world(agent=0, comforts=[0.95, 0.85, 0.85, 0.85])  # average 0.875: d = 0.075
        assert np.asarray(s.self_comfort - s.average_comfort)[0] < 0.10
        judge = JUDGES["inclusiveness"][0]
        alive = np.stack([np.asarray(f(s)) for f in judge.predicates], -1)
        assert not alive[0, 0] and alive[0, 2]  # c>>moy_1 dead, c>moy alive


def test_judgment_functions_by_hand():
    p, c = jnp.array([0, 1, 3, 2]), jnp.array([0, 3, 1, 2])
    args = dict(n_support=4, n_counter=8, dtype=jnp.float32)
    np.testing.assert_allclose(
        judgment(J_SIMPLE, p, c, ratio_max=0.0, **args), [0.5, 0.25, 0.75, 0.5]
    )
    np.testing.assert_allclose(
        judgment(J_DIFF, p, c, ratio_max=0.0, **args),
        [0, 1 / 4 - 3 / 8, 3 / 4 - 1 / 8, 2 / 4 - 2 / 8],
    )
    np.testing.assert_allclose(
        judgment(J_GRAD, p, c, ratio_max=0.0, **args),
        [0.5, 0.5 + 0.125 - 3 / 16, 0.5 + 0.375 - 1 / 16, 0.5 + 0.25 - 2 / 16],
    )
    np.testing.assert_allclose(judgment(J_OFFSET, p, c, ratio_max=0.0, **args), [1, 0.5, 1, 1])
    # ratio: (p^2 - c^2) / running maximum of p + c, 0.5 while the maximum is 0
    running = jnp.array([0.0, 4.0, 4.0, 4.0])
    np.testing.assert_allclose(judgment(J_RATIO, p, c, ratio_max=running, **args), [0.5, -2, 2, 0])
