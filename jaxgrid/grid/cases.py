"""Bundled radial test feeders, read from their MATPOWER case files.

The files in ``jaxgrid/grid/cases/`` come from MATPOWER (BSD-3-Clause, licence and
sources beside them). Each builder returns the same immutable :class:`Feeder` on every
call. Published AC results (losses, minimum voltage) for checking:

============  ======  ===========  ==========================
case          buses   AC losses    min voltage
============  ======  ===========  ==========================
case33bw      33      202.68 kW    0.91309 pu at bus 18
case69        69      224.99 kW    0.90919 pu at bus 65
case85        85      299.3 kW     0.87389 pu at bus 54
case118zh     118     1298.1 kW    0.86880 pu at bus 77
case136ma     136     320.4 kW     0.93065 pu at bus 117
case141       141     632.7 kW     0.92786 pu at bus 87
============  ======  ===========  ==========================

Only case136ma rates its lines (100 MVA each); elsewhere ``rate_mva`` is ``inf`` and any
thermal limit is an assumption of the environment that sets it.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from jaxgrid.grid.feeder import Feeder
from jaxgrid.grid.matpower import from_matpower

CASES = ("case33bw", "case69", "case85", "case118zh", "case136ma", "case141")


@functools.cache
def load_bundled(name: str) -> Feeder:
    """The bundled feeder ``name`` (one of :data:`CASES`)."""
    if name not in CASES:
        raise ValueError(f"unknown bundled case {name!r}; available: {list(CASES)}")
    with resources.as_file(resources.files("jaxgrid.grid") / "cases" / f"{name}.m") as path:
        return from_matpower(path)


def load_feeder(source: str) -> Feeder:
    """A radial feeder from a bundled case name (:data:`CASES`), a MATPOWER ``.m`` file or a
    pandapower ``.json`` file (needs pandapower)."""
    if source in CASES:
        return load_bundled(source)
    path = Path(source)
    if path.suffix not in (".m", ".json"):
        raise ValueError(
            f"feeder {source!r}: expected a bundled case {list(CASES)}, a MATPOWER .m file or "
            "a pandapower .json file"
        )
    if not path.is_file():
        raise ValueError(f"feeder file {path} does not exist")
    if path.suffix == ".m":
        return from_matpower(path)
    import pandapower

    from jaxgrid.grid.pandapower_io import from_pandapower

    return from_pandapower(pandapower.from_json(str(path)))


def case33bw() -> Feeder:
    """Baran & Wu (1989) 33-bus, 12.66 kV feeder; 3.715 MW + 2.3 Mvar; 5 open tie lines."""
    return load_bundled("case33bw")


def case69() -> Feeder:
    """Baran & Wu (1989) 69-bus, 12.66 kV feeder (part of PG&E); 3.802 MW + 2.695 Mvar."""
    return load_bundled("case69")


def case85() -> Feeder:
    """Das, Kothari & Kalam (1995) 85-bus, 11 kV feeder."""
    return load_bundled("case85")


def case118zh() -> Feeder:
    """Zhang, Fu & Zhang (2007) 118-bus, 11 kV feeder; 15 open tie lines."""
    return load_bundled("case118zh")


def case136ma() -> Feeder:
    """Mantovani, Casari & Romero (2000) 136-bus, 13.8 kV feeder; 21 open tie lines."""
    return load_bundled("case136ma")


def case141() -> Feeder:
    """Khodr et al. (2008) 141-bus, 12.47 kV feeder (Caracas); loads at 0.85 power factor."""
    return load_bundled("case141")
