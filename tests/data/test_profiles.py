"""Profile data: the bundled SimBench year, resampling, prices, splits, synthetic fallback."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgrid.data import (
    merit_order_price,
    resample,
    sample_start,
    simbench_profiles,
    split_days,
    start_from_bits,
    synthetic_profiles,
    time_of_use,
)


def test_bundled_simbench_year():
    p = simbench_profiles(96)
    assert (
        p.load.shape == (366 * 96, 3)
        and p.pv.shape == (366 * 96, 4)
        and p.wind.shape == (366 * 96, 2)
    )
    np.testing.assert_allclose(p.load.max(axis=0), 1.0)  # each load column peaks at 1
    assert p.pv.min() == 0 and p.pv.max() < 0.7 and p.wind.min() >= 0 and p.wind.max() <= 1
    # PV is zero at midnight and has its daily maximum around noon (hours 10-14)
    daily = p.pv[:, 0].reshape(366, 96)
    assert np.all(daily[:, 0] == 0)
    assert 40 <= np.median(np.argmax(daily, axis=1)) <= 56
    # January: households are lowest at night; business-hours commerce peaks in the morning
    january = p.load[: 31 * 96].reshape(31, 24, 4, 3).mean(axis=(0, 2))  # (hour, profile)
    assert january[1:6, 0].max() < 0.3 * january[:, 0].max()
    assert 8 <= int(np.argmax(january[:, 2])) <= 12 and january[0, 2] < 0.1


def test_bundled_data_matches_the_simbench_package():
    simbench = pytest.importorskip("simbench")  # not in the test extra: 90 MB
    import importlib.util
    import tempfile
    from pathlib import Path

    script = Path(__file__).parents[2] / "scripts" / "prepare_profiles.py"
    spec = importlib.util.spec_from_file_location("prepare_profiles", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as tmp:
        module.OUT = Path(tmp) / "out.npz"
        module.main(["--simbench-dir", str(Path(simbench.__file__).parent)])
        fresh = np.load(module.OUT)
        bundled = np.load(
            Path(__file__).parents[2] / "jaxgrid" / "data" / "simbench" / "profiles_2016.npz"
        )
        for key in ("load", "pv", "wind"):
            np.testing.assert_array_equal(fresh[key], bundled[key])


def test_resampling_averages_consecutive_steps():
    quarter = simbench_profiles(96)
    hourly = simbench_profiles(24)
    np.testing.assert_allclose(hourly.load[5], quarter.load[20:24].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(resample(np.arange(8.0), 2), [0.5, 2.5, 4.5, 6.5])
    with pytest.raises(ValueError, match="factor"):
        resample(np.arange(7.0), 2)
    with pytest.raises(ValueError, match="divide 96"):
        simbench_profiles(50)


def test_time_of_use_bands_by_hand():
    price = time_of_use(48, 24)  # two days, hourly
    np.testing.assert_array_equal(
        price[[0, 6, 7, 16, 17, 20, 21, 23, 24 + 18]], [60, 60, 100, 100, 180, 180, 100, 100, 180]
    )
    with pytest.raises(ValueError, match="without gaps"):
        time_of_use(24, 24, bands=((0, 10, 1.0), (12, 24, 2.0)))


def test_merit_order_price_is_continuous_and_increasing():
    r = np.linspace(-0.5, 1.2, 200)
    price = merit_order_price(r, np.zeros_like(r), np.zeros_like(r))
    assert np.all(np.diff(price) > 0)
    assert merit_order_price(np.array([0.0]), np.zeros(1), np.zeros(1))[0] == 40.0
    assert merit_order_price(np.array([-0.3]), np.zeros(1), np.zeros(1))[0] < 0


def test_split_and_episode_sampling():
    train, test = split_days(366)
    assert len(train) + len(test) == 366 and not set(train) & set(test)
    assert np.all(test % 5 == 4)
    starts = jax.vmap(lambda k: sample_start(k, test, 24))(
        jax.random.split(jax.random.PRNGKey(0), 300)
    )
    assert set((np.asarray(starts) // 24).tolist()) <= set(test.tolist())
    # from bits drawn with a reset's other random numbers: day floor(bits * n / 2**32)
    bits = jax.random.bits(jax.random.PRNGKey(1), (300,), jnp.uint32)
    expected = [int(test[(int(b) * len(test)) >> 32]) * 24 for b in np.asarray(bits)]
    np.testing.assert_array_equal(jax.vmap(lambda b: start_from_bits(b, test, 24))(bits), expected)
    with pytest.raises(ValueError, match="an index is drawn from 1 to 65535 values, got 0"):
        start_from_bits(bits[0], test[:0], 24)
    p = simbench_profiles(24)
    np.testing.assert_array_equal(p.for_testing().days, p.held_out)


def test_synthetic_profiles_are_reproducible_and_plausible():
    a, b = synthetic_profiles(n_days=30, seed=3), synthetic_profiles(n_days=30, seed=3)
    np.testing.assert_array_equal(a.load, b.load)
    assert not np.array_equal(a.pv, synthetic_profiles(n_days=30, seed=4).pv)
    night = a.pv.reshape(30, 96, -1)[:, :16]
    assert np.all(night == 0)
    assert a.wind.min() >= 0 and a.wind.max() <= 1 and a.price.shape == (30 * 96, 2)
