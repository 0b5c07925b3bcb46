"""Prepare jaxgrid/data/simbench/profiles_2016.npz from the SimBench database.

    pip install simbench==1.6.3
    python scripts/prepare_profiles.py            # or --simbench-dir PATH/TO/simbench

Reads the 2016 quarter-hourly profiles of the SimBench "complete data" network shipped
in the ``simbench`` PyPI package (database: ODbL 1.0, contents: DbCL 1.0) and keeps a
small subset, taken as 366 days x 96 consecutive quarter-hours (the timestamps are
German local time; the clock change days keep 96 rows): three load profiles (H0-A households, G0-A commerce, G1-A business hours,
scaled so each peaks at 1), four PV and two wind profiles (share of rated power, small
negative values clipped to 0). Written as float32 arrays with their names.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

NETWORK = "1-complete_data-mixed-all-0-sw"
LOADS = ("H0-A", "G0-A", "G1-A")
PV = ("PV1", "PV3", "PV5", "PV8")
WIND = ("WP4", "WP10")
OUT = Path(__file__).parents[1] / "jaxgrid" / "data" / "simbench" / "profiles_2016.npz"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--simbench-dir", help="the installed simbench package folder")
    args = parser.parse_args(argv)
    if args.simbench_dir:
        root = Path(args.simbench_dir)
    else:
        import simbench

        root = Path(simbench.__file__).parent
    folder = root / "networks" / NETWORK
    loads = pd.read_csv(
        folder / "LoadProfile.csv", sep=";", usecols=["time"] + [f"{n}_pload" for n in LOADS]
    )
    res = pd.read_csv(folder / "RESProfile.csv", sep=";", usecols=["time", *PV, *WIND])
    if not loads["time"].equals(res["time"]):
        raise ValueError("load and RES profiles are not on the same time axis")
    times = pd.to_datetime(loads["time"], format="%d.%m.%Y %H:%M")
    steps = np.diff(times.values).astype("timedelta64[m]").astype(int)
    # timestamps are German local time: 15-minute steps except at the two DST changes
    if len(times) != 366 * 96 or sorted(np.unique(steps).tolist()) != [-45, 15, 75]:
        raise ValueError("expected 366 days of quarter-hours with two DST changes")
    load = np.stack([loads[f"{n}_pload"].to_numpy(float) for n in LOADS], axis=1)
    load = load / load.max(axis=0, keepdims=True)
    pv = np.clip(np.stack([res[n].to_numpy(float) for n in PV], axis=1), 0.0, 1.0)
    wind = np.clip(np.stack([res[n].to_numpy(float) for n in WIND], axis=1), 0.0, 1.0)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        OUT,
        load=load.astype(np.float32),
        pv=pv.astype(np.float32),
        wind=wind.astype(np.float32),
        load_names=np.array(LOADS),
        pv_names=np.array(PV),
        wind_names=np.array(WIND),
        start=np.array(str(times.iloc[0])),
        step_minutes=np.int32(15),
    )
    print(
        f"wrote {OUT} ({OUT.stat().st_size / 1e6:.2f} MB): {len(load)} steps from {times.iloc[0]}"
    )


if __name__ == "__main__":
    main()
