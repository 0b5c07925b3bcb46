"""The physical range of :class:`Voltage3Params` (checked by :mod:`jaxgrid.validation`)."""

from jaxgrid.envs.voltage3.types import Voltage3Params
from jaxgrid.rewards.voltage_barrier import BARRIERS
from jaxgrid.validation import Index, Range, code_of, column_of, declare, voltage_band

declare(
    Voltage3Params,
    column_of("load_profile", "profiles.load"),
    Range("load_scale", gt=0, unit="(multiplier of every load)"),
    Index("pv_nodes", lambda p: p.feeder.n_node, "a node index of params.feeder"),
    column_of("pv_profile", "profiles.pv"),
    Range("pv_p_max_kw", ge=0, unit="kW"),
    Range("pv_s_max_kva", ge=0, unit="kVA"),
    Range("pv_q_smoothing_kvar", ge=0, unit="kvar"),
    Range("tap_smoothing_steps", ge=0, unit="tap steps"),
    Range("v_ref", gt=0, lt=2, unit="pu"),
    *voltage_band(),
    Range("vuf_limit", ge=0, lt=1, unit="(negative over positive sequence)"),
    code_of("barrier", BARRIERS),
    Range("power_flow_penalty", ge=0, unit="(reward lost on a failed power flow)"),
)
