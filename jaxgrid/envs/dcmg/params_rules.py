"""The physical range of :class:`DcmgParams` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.dcmg.env import DcmgParams
from jaxgrid.validation import Ordered, Range, column_of, declare

declare(
    DcmgParams,
    column_of("pv_column", "profiles.pv"),
    column_of("price_column", "profiles.price"),
    Range("workload_gpu_h", ge=0, unit="GPU-h"),
    Range("pv_mw", ge=0, unit="MW"),
    Ordered("battery.soc_min", "initial_soc"),
    Ordered("initial_soc", "battery.soc_max"),
    Ordered("datacentre.t_set_min", "t_initial", unit="°C"),
    Ordered("t_initial", "datacentre.t_set_max", unit="°C"),
    Range("t_out_amplitude", ge=0, unit="K"),
    Range("import_cap_mw", ge=0, unit="MW"),
    Range("grid_t_per_mwh", ge=0, unit="t/MWh"),
    Range("dt_h", gt=0, unit="h"),
)
