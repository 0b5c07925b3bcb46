"""Bundled feeders by name or file, and bus numbers to indices."""

import numpy as np
import pytest


def test_bus_index_maps_bus_numbers_and_refuses_unknown_or_repeated_ones():
    from jaxgrid.grid import case33bw

    feeder = case33bw()  # buses numbered 1..33 in row order
    np.testing.assert_array_equal(feeder.bus_index([18, 1, 33]), [17, 0, 32])
    with pytest.raises(ValueError, match=r"buses \[34\] are not in the feeder"):
        feeder.bus_index([5, 34])
    with pytest.raises(ValueError, match="repeat a bus"):
        feeder.bus_index([5, 5])


def test_load_feeder_reads_names_and_files(tmp_path):
    from jaxgrid.grid import case33bw, load_feeder

    assert load_feeder("case33bw") is case33bw()
    with pytest.raises(ValueError, match="expected a bundled case"):
        load_feeder("feeder.xlsx")
    with pytest.raises(ValueError, match="does not exist"):
        load_feeder(str(tmp_path / "absent.m"))
