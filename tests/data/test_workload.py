"""The synthetic GPU workload: its volumes, its working-day shape and its seed."""

import numpy as np
import pytest

from jaxgrid.data.workload import synthetic_workload, working_day_multiplier


def test_multiplier_averages_one_over_whole_weeks_and_follows_the_working_day():
    m = working_day_multiplier(14, 24).reshape(14, 24)
    assert m.mean() == pytest.approx(1.0)
    # step 13 (13:00-14:00, centre 13.5 h) against step 3 (centre 3.5 h), on a weekday:
    # (0.5 + 1.1 exp(-0.5 (0.5 / 3.5)^2)) / (0.5 + 1.1 exp(-0.5 (9.5 / 3.5)^2))
    peak = 0.5 + 1.1 * np.exp(-0.5 * (0.5 / 3.5) ** 2)
    night = 0.5 + 1.1 * np.exp(-0.5 * (9.5 / 3.5) ** 2)
    assert m[0, 13] / m[0, 3] == pytest.approx(peak / night)
    assert m[5, 13] / m[0, 13] == pytest.approx(0.6)  # days 5 and 6 are the weekend


def test_volumes_match_the_asked_utilisation():
    # 1000 GPUs, 5-minute steps: 83.3 GPU-h a step; 35 % and 20 % of it on average
    work = synthetic_workload(364, 288, 1000.0, (0.35, 0.2), seed=3)
    assert work.shape == (364 * 288, 2)
    assert np.all(work >= 0)
    np.testing.assert_allclose(work.mean(axis=0) / (1000 / 12), [0.35, 0.2], rtol=0.03)
    same = synthetic_workload(364, 288, 1000.0, (0.35, 0.2), seed=3)
    np.testing.assert_array_equal(work, same)
    assert not np.array_equal(work, synthetic_workload(364, 288, 1000.0, (0.35, 0.2), seed=4))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="n_gpus"):
        synthetic_workload(1, 288, 0.0)
    with pytest.raises(ValueError, match="finetune"):
        synthetic_workload(1, 288, 100.0, utilisation=(0.3, -0.1))
