"""Radial topology: orientation, path matrix, and clear errors for non-radial networks."""

import numpy as np
import pytest

from jaxgrid.grid import from_branch_table
from jaxgrid.grid.topology import radial_tree


def test_path_matrix_of_a_hand_drawn_tree():
    #     0 - 1 - 2
    #         |
    #         3 - 4      (branch 3 is given upside down: 4 -> 3)
    tree = radial_tree(5, from_bus=[0, 1, 1, 4], to_bus=[1, 2, 3, 3], slack=0)
    np.testing.assert_array_equal(tree.parent, [-1, 0, 1, 1, 3])
    np.testing.assert_array_equal(tree.branch_from, [0, 1, 1, 3])
    np.testing.assert_array_equal(tree.branch_to, [1, 2, 3, 4])
    expected = np.array(
        [  # buses 0 1 2 3 4
            [0, 1, 1, 1, 1],  # branch 0-1 feeds everything below bus 0
            [0, 0, 1, 0, 0],  # 1-2
            [0, 0, 0, 1, 1],  # 1-3
            [0, 0, 0, 0, 1],  # 3-4
        ]
    )
    np.testing.assert_array_equal(tree.path, expected)


def test_slack_need_not_be_the_first_bus():
    tree = radial_tree(3, from_bus=[0, 1], to_bus=[1, 2], slack=2)
    np.testing.assert_array_equal(tree.parent, [1, 2, -1])
    np.testing.assert_array_equal(tree.branch_from, [1, 2])
    np.testing.assert_array_equal(tree.branch_to, [0, 1])


def test_meshed_network_names_the_loop_closing_branch():
    with pytest.raises(
        ValueError, match=r"meshed: branch 6 \(2-3\) closes the loop through buses 1, 2, 3"
    ):
        from_branch_table(
            from_bus=[1, 2, 3],
            to_bus=[2, 3, 1],
            branch_ids=[5, 6, 7],
            r_pu=0.01,
            x_pu=0.01,
            bus_ids=[1, 2, 3],
            base_mva=1.0,
            base_kv=10.0,
        )


def test_parallel_branches_are_a_mesh():
    with pytest.raises(ValueError, match="meshed"):
        radial_tree(2, from_bus=[0, 0], to_bus=[1, 1], slack=0)


def test_disconnected_network_names_the_islanded_buses():
    with pytest.raises(ValueError, match=r"disconnected: buses 40, 41 cannot be reached"):
        from_branch_table(
            from_bus=[10, 40],
            to_bus=[20, 41],
            r_pu=0.01,
            x_pu=0.01,
            bus_ids=[10, 20, 40, 41],
            base_mva=1.0,
            base_kv=10.0,
        )


def test_out_of_service_branch_can_disconnect():
    with pytest.raises(ValueError, match="buses 2 cannot be reached"):
        from_branch_table(
            from_bus=[0, 1],
            to_bus=[1, 2],
            in_service=[True, False],
            r_pu=0.01,
            x_pu=0.01,
            n_bus=3,
            base_mva=1.0,
            base_kv=10.0,
        )


def test_meshed_and_disconnected_are_reported_together():
    with pytest.raises(ValueError, match="disconnected.*meshed"):
        radial_tree(4, from_bus=[0, 1, 0], to_bus=[1, 0, 1], slack=0)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(n_bus=0, from_bus=[], to_bus=[]), "no buses"),
        (dict(n_bus=2, from_bus=[], to_bus=[]), "no in-service branches"),
        (dict(n_bus=2, from_bus=[0, 1], to_bus=[1, 1]), "connect a bus to itself"),
        (dict(n_bus=2, from_bus=[0], to_bus=[5]), "do not exist"),
    ],
)
def test_empty_or_malformed_networks(kwargs, message):
    n = len(kwargs["from_bus"])
    with pytest.raises(ValueError, match=message):
        from_branch_table(r_pu=[0.01] * n, x_pu=[0.01] * n, base_mva=1.0, base_kv=10.0, **kwargs)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("r_pu", [np.nan], "r_pu is not finite"),
        ("r_pu", [-0.1], "r_pu is negative"),
        ("p_load_mw", [0.0, np.inf], "p_load_mw is not finite at buses"),
        ("base_kv", 0.0, "base_kv must be > 0"),
        ("base_mva", -1.0, "base_mva must be a positive number"),
    ],
)
def test_bad_numbers_are_named(field, value, message):
    kwargs = dict(
        from_bus=[0], to_bus=[1], r_pu=[0.01], x_pu=[0.01], n_bus=2, base_mva=1.0, base_kv=10.0
    )
    kwargs[field] = value
    with pytest.raises(ValueError, match=message):
        from_branch_table(**kwargs)
