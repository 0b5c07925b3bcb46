"""Spaces: sampling, membership, projection and their distrax distributions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid import spaces

KEY = jax.random.PRNGKey(0)


def test_box_samples_uniformly_inside_its_bounds():
    box = spaces.Box(low=np.array([0.0, -2.0]), high=np.array([1.0, 2.0]), shape=(1000, 2))
    x = jax.jit(box.sample)(KEY)
    assert x.shape == (1000, 2) and x.dtype == jnp.float32
    assert bool(box.contains(x))
    # mean and variance of U(a, b): (a+b)/2 and (b-a)^2/12
    np.testing.assert_allclose(x.mean(0), [0.5, 0.0], atol=0.1)
    np.testing.assert_allclose(x.var(0), [1 / 12, 16 / 12], rtol=0.15)
    dist = box.distribution()
    assert float(dist.entropy()) == pytest.approx(1000 * (np.log(1.0) + np.log(4.0)), rel=1e-5)
    assert float(dist.log_prob(x)) == pytest.approx(-1000 * np.log(4.0), rel=1e-5)


def test_box_contains_checks_shape_dtype_bounds_and_nan():
    box = spaces.Box(-1.0, 1.0, shape=(3,))
    assert bool(box.contains(jnp.zeros(3)))
    assert not bool(box.contains(jnp.zeros(4)))
    assert not bool(box.contains(jnp.zeros(3, jnp.int32)))
    assert not bool(box.contains(jnp.array([0.0, 2.0, 0.0])))
    assert not bool(box.contains(jnp.array([0.0, jnp.nan, 0.0])))
    assert not bool(box.contains(np.zeros(3, np.float64).tolist()))  # not an array


def test_box_project_clips_and_zeroes_nonfinite():
    box = spaces.Box(-1.0, 2.0, shape=(5,))
    x, clipped, nonfinite = box.project(jnp.array([0.5, 5.0, -3.0, jnp.nan, -jnp.inf]))
    np.testing.assert_array_equal(x, [0.5, 2.0, -1.0, 0.0, 0.0])
    np.testing.assert_array_equal(clipped, [False, True, True, False, False])
    np.testing.assert_array_equal(nonfinite, [False, False, False, True, True])
    # 0 outside the box: a NaN becomes 0 and then the nearest bound
    x, _, _ = spaces.Box(1.0, 2.0, shape=(1,)).project(jnp.array([jnp.nan]))
    assert float(x[0]) == 1.0


def test_box_rejects_bad_bounds():
    with pytest.raises(ValueError, match="low <= high"):
        spaces.Box(1.0, 0.0, shape=(2,))
    with pytest.raises(ValueError, match="does not broadcast"):
        spaces.Box(np.zeros(3), 1.0, shape=(2,))
    with pytest.raises(ValueError, match="infinite bounds"):
        spaces.Box(-np.inf, np.inf, shape=(2,)).sample(KEY)


def test_box_bounds_may_come_from_traced_params():
    @jax.jit
    def sample(high, key):
        return spaces.Box(0.0, high, shape=(4,)).sample(key)

    x = sample(jnp.float32(3.0), KEY)
    assert bool(jnp.all((x >= 0) & (x <= 3)))


def test_discrete_with_agents_and_masks():
    space = spaces.Discrete(4, shape=(3,))
    x = space.sample(KEY)
    assert x.shape == (3,) and x.dtype == jnp.int32 and bool(space.contains(x))
    assert not bool(space.contains(jnp.array([0, 4, 1])))
    mask = jnp.array([[True, False, False, False], [False, False, True, True], [True] * 4])
    draws = jax.vmap(lambda k: space.sample(k, mask))(jax.random.split(KEY, 2000))
    assert bool(jnp.all(draws[:, 0] == 0))
    assert set(np.unique(draws[:, 1])) == {2, 3}
    counts = np.bincount(np.asarray(draws[:, 2]), minlength=4) / 2000
    np.testing.assert_allclose(counts, 0.25, atol=0.04)
    entropy = space.distribution(mask).entropy()
    assert float(entropy) == pytest.approx(np.log(1) + np.log(2) + np.log(4), rel=1e-5)


def test_discrete_project_rounds_floats_and_flags():
    """A fraction is not a choice: it goes to the nearest one and counts as clipped."""
    space = spaces.Discrete(3, shape=(5,))
    x, clipped, nonfinite = space.project(jnp.array([1.4, 7.0, jnp.nan, -2.0, 2.0]))
    np.testing.assert_array_equal(x, [1, 2, 0, 0, 2])
    np.testing.assert_array_equal(clipped, [True, True, False, True, False])
    np.testing.assert_array_equal(nonfinite, [False, False, True, False, False])
    assert x.dtype == jnp.int32


def test_multidiscrete_respects_each_cardinality():
    space = spaces.MultiDiscrete([[2, 5], [3, 1]])
    draws = jax.vmap(space.sample)(jax.random.split(KEY, 500))
    assert draws.shape == (500, 2, 2)
    np.testing.assert_array_equal(draws.max(0), [[1, 4], [2, 0]])
    assert bool(jax.vmap(space.contains)(draws).all())
    assert not bool(space.contains(jnp.array([[1, 5], [0, 0]])))
    expected = np.log(2) + np.log(5) + np.log(3) + np.log(1)
    assert float(space.distribution().entropy()) == pytest.approx(expected, rel=1e-5)


def test_dict_space_samples_contains_and_joins_distributions():
    space = spaces.Dict(
        {"move": spaces.Discrete(5, shape=(2,)), "power": spaces.Box(0.0, 1.0, (2, 3))}
    )
    x = jax.jit(space.sample)(KEY)
    assert set(x) == {"move", "power"} and bool(space.contains(x))
    assert not bool(space.contains({"move": x["move"]}))
    dist = space.distribution(mask={"move": jnp.array([[True, True, False, False, False]] * 2)})
    assert float(dist.entropy()) == pytest.approx(2 * np.log(2), rel=1e-5)
    allowed = {"move": jnp.array([0, 1]), "power": jnp.full((2, 3), 0.5)}
    assert float(dist.log_prob(allowed)) == pytest.approx(-2 * np.log(2), rel=1e-5)


def test_spaces_validate_arguments():
    with pytest.raises(ValueError):
        spaces.Discrete(0)
    with pytest.raises(ValueError):
        spaces.MultiDiscrete([2, 0])
    with pytest.raises(ValueError):
        spaces.Dict({})
    with pytest.raises(ValueError, match="float dtype"):
        spaces.Box(0, 1, (2,), dtype=jnp.int32)


def test_agent_space_is_one_agent_s_share():
    box = spaces.Box(np.array([[0.0, -1.0], [0.0, -2.0]]), np.array([[1.0, 1.0], [3.0, 2.0]]))
    second = spaces.agent_space(box, 1)
    assert second.shape == (2,)
    np.testing.assert_array_equal(second._bounds()[1], [3.0, 2.0])
    choice = spaces.agent_space(spaces.MultiDiscrete([3, 5]), 1)
    assert isinstance(choice, spaces.Discrete) and choice.n == 5
    both = spaces.agent_space(spaces.Dict({"a": box, "b": spaces.MultiDiscrete([3, 5])}), 0)
    assert both["a"].shape == (2,) and both["b"].n == 3
