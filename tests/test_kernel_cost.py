"""``benchmarks/kernel_cost.py`` times programs of independent kernels and counts the
kernels XLA generates code for."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import kernel_cost  # noqa: E402


def test_independent_kernels_are_one_fusion_each():
    _, fusions = kernel_cost.compile_seconds(5)
    assert fusions == 5


def test_the_kernels_xla_generates_are_counted_from_its_dump():
    # five distinct kernels: five LLVM modules, none of them shared
    assert kernel_cost.count_kernels("5") == 5


def test_the_line_through_the_medians():
    slope, intercept = kernel_cost.fit_line([100, 200, 400], [1.0, 2.0, 4.0])
    assert slope == pytest.approx(0.01)
    assert intercept == pytest.approx(0.0, abs=1e-12)
    slope, intercept = kernel_cost.fit_line([1, 2, 3], [2.5, 4.5, 6.5])
    assert (slope, intercept) == (pytest.approx(2.0), pytest.approx(0.5))


def test_one_size_cannot_give_a_slope():
    with pytest.raises(SystemExit):
        kernel_cost.main(["--kernels", "100", "100"])
