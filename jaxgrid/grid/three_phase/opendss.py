"""Build a :class:`Feeder3` from OpenDSS files, and the bundled IEEE test feeders.

Design: the OpenDSS language is large (line codes, geometries, wire data, CN cables,
``~`` continuations, RPN expressions such as ``XHL=(8 1000 /)``, ``Redirect``, voltage
bases). Rather than re-implement a subset of it, :func:`from_opendss` compiles the master
file with the real engine (``dss-python``, the ``opendss`` extra) and reads back what the
engine computed: each power-delivery element's primitive admittance ``Yprim`` and the
nodes of its conductors, each load's kW, kvar, kV, model, connection and voltage limits,
the source's Thevenin admittance and EMF, the regulators' transformers and taps, the node
voltage bases. All JAX arrays are then built here, so the solver never depends on the
engine and the element data are exactly the engine's. The four IEEE feeders are shipped
pre-extracted (``feeders/*.npz``), so :func:`load_feeder3` needs no ``dss-python``.

Supported elements: one ``Vsource``; ``Line`` (switches included), ``Transformer``,
``Capacitor``, ``Reactor`` (any power-delivery element whose ``Yprim`` is fixed, or depends
on a regulator tap); ``Load`` models 1 (constant PQ), 2 (constant Z), 4 (CVR), 5 (constant
I) and 8 (ZIPV without cut-off), wye with the neutral grounded or delta; ``RegControl``
(its transformer's tap becomes :attr:`Feeder3.tap_pu`; the feeder's taps are fixed).
Anything else is refused with one error naming every offending element.

The regulator *controls* are read by a sibling, :func:`regcontrols_from_opendss`: their
settings (target voltage, band, PT and CT ratios, line-drop compensator, tap range, the
monitored nodes and CT conductor) as plain arrays, which
:class:`jaxgrid.devices.regulator.RegControlSettings` wraps. They ship in the same
``.npz`` extracts (keys ``regcontrol_*``), so :func:`load_regcontrol_arrays` needs no
``dss-python`` either.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import numpy as np

from jaxgrid.grid.three_phase.feeder3 import Feeder3, check_feeder3

SUPPORTED = ("vsource", "line", "transformer", "capacitor", "reactor", "load", "regcontrol")
PD_CLASSES = ("line", "transformer", "capacitor", "reactor")
LOAD_MODELS = {1: (0.0, 0.0, 1.0), 2: (1.0, 0.0, 0.0), 5: (0.0, 1.0, 0.0)}
PROBE_TAP = 1.1  # second tap at which a regulator's Yprim is read to split A and B

# name -> master file in feeders/
BUNDLED = {
    "ieee13": "ieee13/IEEE13Nodeckt.dss",
    "ieee34": "ieee34/ieee34Mod1.dss",
    "ieee37": "ieee37/ieee37.dss",
    "ieee123": "ieee123/IEEE123Master.dss",
}

# The published IEEE regulator taps (as in the upstream Run_*.dss files), in steps of
# 0.625 %; IEEE 37 has none in its files.
PUBLISHED_TAP_STEPS = {
    "ieee13": {"reg1": 10, "reg2": 8, "reg3": 11},
    "ieee34": {"reg1a": 12, "reg1b": 5, "reg1c": 5, "reg2a": 13, "reg2b": 11, "reg2c": 12},
    "ieee123": {
        "reg1a": 7,
        "reg2a": -1,
        "reg3a": 0,
        "reg3c": -1,
        "reg4a": 8,
        "reg4b": 1,
        "reg4c": 5,
    },
}


def dss_engine():
    """The ``dss-python`` engine (``DSS``), or an ImportError saying how to get it.

    Set not to change the process's working directory: OpenDSS's ``compile`` otherwise
    moves it into the compiled file's folder, and every relative path the caller opens
    afterwards breaks (the test suite's MATPOWER files did)."""
    try:
        from dss import DSS
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(
            "from_opendss needs dss-python: pip install 'jaxgrid[opendss]' "
            "(the bundled feeders load without it: load_feeder3('ieee13'))"
        ) from err
    DSS.AllowChangeDir = False
    return DSS


def _command(dss, text: str) -> None:
    dss.Text.Command = text


def _compiled(master_file, commands):
    """The OpenDSS engine with ``master_file`` compiled and ``commands`` run, and the
    file's resolved path."""
    dss = dss_engine()
    path = Path(master_file).resolve()
    if not path.is_file():
        raise ValueError(f"OpenDSS master file {path} does not exist")
    _command(dss, "clear")
    _command(dss, f'compile "{path}"')
    for text in commands:
        _command(dss, text)
    return dss, path


def _yprim(element) -> np.ndarray:
    flat = np.asarray(element.Yprim, dtype=np.float64)
    n = int(round(np.sqrt(flat.size // 2)))
    return (flat[0::2] + 1j * flat[1::2]).reshape(n, n)


def _conductors(element, node_index: dict) -> list:
    """The node index of each conductor of the active element (-1 for ground)."""
    order = list(element.NodeOrder)
    per_terminal = element.NumConductors
    out = []
    for k, bus in enumerate(element.BusNames):
        name = bus.split(".")[0].lower()
        for node in order[k * per_terminal : (k + 1) * per_terminal]:
            out.append(-1 if node == 0 else node_index[(name, int(node))])
    return out


def from_opendss(master_file, commands=(), name: str | None = None) -> Feeder3:
    """Compile ``master_file`` with OpenDSS and build its :class:`Feeder3`.

    ``commands`` run after the compile (e.g. ``"transformer.reg1.taps=[1 1.0625]"``); the
    feeder takes the taps, loads and voltage bases as they then stand. A master that
    solves (most do) fixes the regulators' taps by their controls: the published taps of
    the IEEE feeders are in :data:`PUBLISHED_TAP_STEPS`.

    Raises:
        ImportError: without ``dss-python``.
        ValueError: naming every unsupported element or load model, an OpenDSS error,
            or a node without a voltage base.
    """
    dss, path = _compiled(master_file, commands)
    circuit = dss.ActiveCircuit
    element = circuit.ActiveCktElement
    all_elements = [e for e in circuit.AllElementNames]
    classes = {e: e.split(".")[0].lower() for e in all_elements}
    unsupported = [e for e in all_elements if classes[e] not in SUPPORTED]
    sources = [e for e in all_elements if classes[e] == "vsource"]
    if len(sources) != 1:
        unsupported += sources
    if unsupported:
        raise ValueError(
            f"{path.name}: unsupported OpenDSS elements {unsupported} (supported: one "
            f"Vsource and {', '.join(s for s in SUPPORTED if s != 'vsource')})"
        )

    node_names = [n.lower() for n in circuit.AllNodeNames]
    node_index = {}
    node_bus, node_phase = [], []
    bus_names = [b.lower() for b in circuit.AllBusNames]
    bus_of = {b: i for i, b in enumerate(bus_names)}
    for i, node in enumerate(node_names):
        bus, number = node.rsplit(".", 1)
        node_index[(bus, int(number))] = i
        node_bus.append(bus_of[bus])
        node_phase.append(int(number))
    n_node = len(node_names)
    vbase = np.zeros(n_node)
    bus_nodes = -np.ones((len(bus_names), 3), np.int32)
    for b, bus in enumerate(bus_names):
        circuit.SetActiveBus(bus)
        vbase[np.asarray(node_bus) == b] = circuit.ActiveBus.kVBase * 1e3
        for number in circuit.ActiveBus.Nodes:
            if 1 <= number <= 3:
                bus_nodes[b, number - 1] = node_index[(bus, int(number))]
    if np.any(vbase <= 0):
        missing = sorted({bus_names[node_bus[i]] for i in np.flatnonzero(vbase <= 0)})
        raise ValueError(f"{path.name}: buses {missing} have no voltage base (Set VoltageBases)")

    # regulators: the transformer and winding of each RegControl, its tap; Yprim at tap 1
    # and at PROBE_TAP split the tap-scaled part from the tap-independent one.
    reg_names, reg_xf, reg_wdg, reg_tap = [], [], [], []
    for reg in circuit.RegControls:
        reg_names.append(reg.Transformer.lower())
        reg_xf.append(reg.Transformer.lower())
        reg_wdg.append(reg.Winding)
        circuit.Transformers.Name = reg.Transformer
        circuit.Transformers.Wdg = reg.Winding
        reg_tap.append(circuit.Transformers.Tap)

    def set_taps(taps):
        for xf, wdg, tap in zip(reg_xf, reg_wdg, taps):
            _command(dss, f"transformer.{xf}.wdg={wdg}")
            _command(dss, f"transformer.{xf}.tap={tap!r}")
        circuit.Solution.BuildYMatrix(0, False)

    pd_names = [e for e in all_elements if classes[e] in PD_CLASSES]
    yprims, conductors = {}, {}
    for tap in (1.0, PROBE_TAP):
        set_taps([tap] * len(reg_names))
        for e in pd_names:
            circuit.SetActiveElement(e)
            if e not in conductors:
                conductors[e] = _conductors(element, node_index)
            yprims.setdefault(e, []).append(_yprim(element))
    set_taps(reg_tap)

    width = max(sum(c >= 0 for c in conductors[e]) for e in pd_names)
    n_elem = len(pd_names)
    elem_nodes = np.full((n_elem, width), n_node, np.int32)
    elem_y = np.zeros((n_elem, width, width), complex)
    kept_of = {}
    for k, e in enumerate(pd_names):
        kept = [i for i, c in enumerate(conductors[e]) if c >= 0]
        kept_of[e] = kept
        elem_nodes[k, : len(kept)] = [conductors[e][i] for i in kept]
        elem_y[k, : len(kept), : len(kept)] = yprims[e][0][np.ix_(kept, kept)]

    element_names = [e.lower() for e in pd_names]
    reg_elem = np.zeros(len(reg_names), np.int32)
    reg_tapped = np.zeros((len(reg_names), width), bool)
    reg_y0 = np.zeros((len(reg_names), width, width), complex)
    for r, (xf, wdg) in enumerate(zip(reg_xf, reg_wdg)):
        e = next(n for n in pd_names if n.lower() == f"transformer.{xf}")
        k = pd_names.index(e)
        circuit.SetActiveElement(e)
        per_terminal = element.NumConductors
        kept = kept_of[e]
        tapped = np.array([(wdg - 1) * per_terminal <= i < wdg * per_terminal for i in kept])
        scale = np.where(tapped, 1 / PROBE_TAP, 1.0)
        dd = np.outer(scale, scale)
        y1 = yprims[e][0][np.ix_(kept, kept)]
        y2 = yprims[e][1][np.ix_(kept, kept)]
        varies = dd != 1.0
        a = np.where(varies, (y1 - y2) / np.where(varies, 1 - dd, 1.0), y1)
        reg_elem[r] = k
        reg_tapped[r, : len(kept)] = tapped
        elem_y[k, : len(kept), : len(kept)] = a
        reg_y0[r, : len(kept), : len(kept)] = y1 - a

    elem_switch = np.zeros(n_elem, bool)
    parent = list(range(n_node))  # union-find of the nodes joined by closed switches

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    lines = [e for e in pd_names if classes[e] == "line"]
    line_elem = np.array([pd_names.index(e) for e in lines], np.int32)
    line_cond = -np.ones((len(lines), 3), np.int32)
    normamps = np.zeros(len(lines))
    for k, e in enumerate(lines):
        circuit.Lines.Name = e.split(".", 1)[1]
        normamps[k] = circuit.Lines.NormAmps
        if circuit.Lines.IsSwitch:
            elem_switch[line_elem[k]] = True
            phases = circuit.Lines.Phases
            for a, b in zip(elem_nodes[line_elem[k], :phases], elem_nodes[line_elem[k], phases:]):
                parent[root(int(a))] = root(int(b))
        for pos in range(circuit.Lines.Phases):
            node = elem_nodes[line_elem[k], pos]
            line_cond[k, node_phase[node] - 1] = pos

    load_rows, load_names, bad_loads = [], [], []
    load_mult = circuit.Solution.LoadMult
    for load in circuit.Loads:
        lname = load.Name.lower()
        circuit.SetActiveElement(f"Load.{lname}")
        nodes = _conductors(element, node_index)
        model = load.Model
        zipv = np.asarray(load.ZIPV, float)
        exponents = (0.0, 0.0)
        if model in LOAD_MODELS:
            zip_p = zip_q = np.array(LOAD_MODELS[model])
        elif model == 4:
            zip_p = zip_q = np.array(LOAD_MODELS[1])
            exponents = (load.CVRwatts, load.CVRvars)
        elif model == 8 and zipv.size == 7 and zipv[6] <= 0:
            zip_p, zip_q = zipv[0:3], zipv[3:6]
        else:
            bad_loads.append(f"{lname} (model {model})")
            continue
        phases, delta = load.Phases, bool(load.IsDelta)
        if not delta and nodes[-1] != -1:
            bad_loads.append(f"{lname} (wye neutral not grounded)")
            continue
        _command(dss, f"? load.{lname}.vlowpu")
        vlow = float(dss.Text.Result)
        vbase_load = load.kV * 1e3 / (np.sqrt(3) if (not delta and phases > 1) else 1.0)
        n_cond = len(nodes)
        load_names.append(lname)
        for i in range(phases):
            to = (i + 1) % n_cond if delta else n_cond - 1
            load_rows.append(
                (
                    len(load_names) - 1,
                    nodes[i],
                    nodes[to],
                    delta,
                    load.kW * 1e3 * load_mult / phases,
                    load.kvar * 1e3 * load_mult / phases,
                    vbase_load,
                    load.Vminpu,
                    load.Vmaxpu,
                    vlow,
                    zip_p,
                    zip_q,
                    *exponents,
                )
            )
    if bad_loads:
        raise ValueError(
            f"{path.name}: unsupported loads {bad_loads} (supported: models 1, 2, 4, 5, 8 "
            "without cut-off; wye with a grounded neutral, or delta)"
        )
    cols = list(zip(*load_rows))
    roots = [root(i) for i in range(n_node)]
    first = {r: g for g, r in enumerate(dict.fromkeys(roots))}
    node_group = np.array([first[r] for r in roots], np.int32)

    def ground_to_end(values):
        return np.array([n_node if v < 0 else v for v in values], np.int32)

    circuit.SetActiveElement(sources[0])
    source_conductors = _conductors(element, node_index)
    if element.NumPhases != 3 or any(c >= 0 for c in source_conductors[3:]):
        raise ValueError(f"{path.name}: the Vsource must be three-phase and grounded")
    y_source = _yprim(element)[:3, :3]
    vsource = circuit.Vsources
    vsource.Name = sources[0].split(".", 1)[1]

    feeder = Feeder3(
        name=name or circuit.Name.lower(),
        bus_names=tuple(bus_names),
        node_names=tuple(node_names),
        element_names=tuple(element_names),
        load_names=tuple(load_names),
        regulator_names=tuple(reg_names),
        n_group=len(first),
        node_bus=np.asarray(node_bus, np.int32),
        node_phase=np.asarray(node_phase, np.int32),
        vbase_v=vbase,
        bus_nodes=bus_nodes,
        node_group=node_group,
        elem_nodes=elem_nodes,
        elem_g_s=elem_y.real,
        elem_b_s=elem_y.imag,
        elem_switch=elem_switch,
        reg_elem=reg_elem,
        reg_tapped=reg_tapped,
        reg_g0_s=reg_y0.real,
        reg_b0_s=reg_y0.imag,
        tap_pu=np.asarray(reg_tap, float),
        line_elem=line_elem,
        line_cond=line_cond,
        line_normamps_a=normamps,
        load_id=np.asarray(cols[0], np.int32),
        load_node_from=ground_to_end(cols[1]),
        load_node_to=ground_to_end(cols[2]),
        load_delta=np.asarray(cols[3], bool),
        load_p_w=np.asarray(cols[4], float),
        load_q_var=np.asarray(cols[5], float),
        load_vbase_v=np.asarray(cols[6], float),
        load_vminpu=np.asarray(cols[7], float),
        load_vmaxpu=np.asarray(cols[8], float),
        load_vlowpu=np.asarray(cols[9], float),
        load_zip_p=np.asarray(cols[10], float),
        load_zip_q=np.asarray(cols[11], float),
        load_p_exp=np.asarray(cols[12], float),
        load_q_exp=np.asarray(cols[13], float),
        source_nodes=np.asarray(source_conductors[:3], np.int32),
        source_g_s=y_source.real,
        source_b_s=y_source.imag,
        source_kv=np.asarray(vsource.BasekV, float),
        source_vm_pu=np.asarray(vsource.pu, float),
        source_angle_deg=np.asarray(vsource.AngleDeg, float),
    )
    check_feeder3(feeder)
    return feeder


# the RegControl arrays regcontrols_from_opendss returns, and their dtypes
REGCONTROL_FIELDS = {
    "vreg_v": float,
    "band_v": float,
    "pt_ratio": float,
    "ct_primary_a": float,
    "r_ldc_v": float,
    "x_ldc_v": float,
    "winding_vbase_v": float,
    "tap_step_pu": float,
    "min_tap_pu": float,
    "max_tap_pu": float,
    "max_tap_change": np.int32,
    "pt_node_from": np.int32,
    "pt_node_to": np.int32,
    "ct_conductor": np.int32,
}
REGCONTROL_PREFIX = "regcontrol_"


def regcontrols_from_opendss(master_file, commands=()) -> dict:
    """The settings of every ``RegControl`` of ``master_file`` as arrays (``dss-python``).

    Compiles the master (then runs ``commands``) as :func:`from_opendss` does; controller
    ``r`` is the control of :attr:`Feeder3.regulator_names` ``[r]`` of the feeder built
    from the same file. What OpenDSS's ``RegControl`` reads, per controller:

    - ``vreg_v``, ``band_v``: target and bandwidth, V on the 120 V (PT secondary) base;
    - ``pt_ratio``: PT ratio; ``ct_primary_a``: CT primary rating, A;
    - ``r_ldc_v``, ``x_ldc_v``: line-drop compensator R and X, V at rated CT current;
    - ``winding_vbase_v``: base voltage of the monitored winding, V (OpenDSS's
      ``BaseVoltage``: kV/sqrt(3) of a wye winding of several phases, kV otherwise), which
      turns a voltage error into a tap change;
    - ``tap_step_pu``, ``min_tap_pu``, ``max_tap_pu``: the winding's tap increment
      ``(max - min) / numtaps`` and range, pu; ``max_tap_change``: OpenDSS's
      ``maxtapchange``, the most steps one action moves;
    - ``pt_node_from``, ``pt_node_to``: nodes (indices of ``Feeder3.node_names``; ``n_node``
      = ground) across which the PT measures the monitored phase (``ptphase``) of the
      winding: phase to the winding's neutral (wye) or to the next phase (delta; for a
      single-phase winding its second conductor);
    - ``ct_conductor``: conductor (position in ``Feeder3.elem_nodes`` of the regulator's
      element) whose current, into the element, the CT measures.

    Returns:
        ``{"names": tuple of RegControl names, **arrays}``, each array ``(n_reg,)``.

    Raises:
        ImportError: without ``dss-python``.
        ValueError: naming each control that uses what is not modelled: a tap winding
            other than the monitored one, a remote bus, reverse or cogeneration modes,
            ``vlimit``, ``LDC_Z``, ``ptphase`` MAX/MIN, inverse time, a disabled control,
            a lead-connected delta winding, or delays that differ between controls (in
            OpenDSS's static mode only the controls with the shortest delay act at once).
    """
    dss, path = _compiled(master_file, commands)
    circuit = dss.ActiveCircuit
    element = circuit.ActiveCktElement
    node_index = {}
    for i, node in enumerate(n.lower() for n in circuit.AllNodeNames):
        bus, number = node.rsplit(".", 1)
        node_index[(bus, int(number))] = i
    n_node = len(node_index)

    def prop(reg, name):
        _command(dss, f"? regcontrol.{reg}.{name}")
        return dss.Text.Result.strip().lower()

    rows, names, bad, delays = [], [], [], set()
    for reg in circuit.RegControls:
        rname, xf, wdg = reg.Name.lower(), reg.Transformer.lower(), reg.Winding
        names.append(rname)
        delays.add(reg.Delay)
        why = []
        if reg.TapWinding != wdg:
            why.append("tapwinding differs from winding")
        if reg.MonitoredBus:
            why.append("bus=")
        if reg.IsReversible or prop(rname, "cogen") in ("yes", "true"):
            why.append("reversible/cogen")
        if reg.VoltageLimit > 0:
            why.append("vlimit")
        if float(prop(rname, "LDC_Z")) != 0:
            why.append("LDC_Z")
        if reg.IsInverseTime:
            why.append("inversetime")
        if prop(rname, "enabled") not in ("yes", "true"):
            why.append("disabled")
        circuit.Transformers.Name = xf
        circuit.Transformers.Wdg = wdg
        xfs = circuit.Transformers
        delta = bool(xfs.IsDelta)
        if delta and "lead" in _transformer_prop(dss, xf, "leadlag"):
            why.append("lead-connected delta winding")
        ptphase = prop(rname, "ptphase")
        circuit.SetActiveElement(f"transformer.{xf}")  # "?" made the control active
        phases, per_terminal = element.NumPhases, element.NumConductors
        cond = _conductors(element, node_index)
        if not ptphase.isdigit() or not 1 <= int(ptphase) <= phases:
            why.append(f"ptphase={ptphase}")
        if why:
            bad.append(f"{rname} ({', '.join(why)})")
            continue
        phase = int(ptphase) - 1
        offset = (wdg - 1) * per_terminal
        if delta:
            other = (phase + 1) % phases if phases > 2 else phase + 1
        else:
            other = phases  # the winding's neutral conductor
        kept = [i for i, c in enumerate(cond) if c >= 0]
        step = (xfs.MaxTap - xfs.MinTap) / xfs.NumTaps
        rows.append(
            (
                reg.ForwardVreg,
                reg.ForwardBand,
                reg.PTratio,
                reg.CTPrimary,
                reg.ForwardR,
                reg.ForwardX,
                xfs.kV * 1e3 / (np.sqrt(3.0) if (phases > 1 and not delta) else 1.0),
                step,
                xfs.MinTap,
                xfs.MaxTap,
                reg.MaxTapChange,
                cond[offset + phase],
                cond[offset + other],
                kept.index(offset + phase),
            )
        )
    if len(delays) > 1:
        bad.append(f"delays {sorted(delays)} differ")
    if bad:
        raise ValueError(f"{path.name}: unsupported RegControls {bad}")
    cols = list(zip(*rows)) if rows else [()] * len(REGCONTROL_FIELDS)
    out = {"names": tuple(names)}
    for (field, dtype), values in zip(REGCONTROL_FIELDS.items(), cols):
        values = np.asarray(values, dtype)
        if field.startswith("pt_node"):
            values = np.where(values < 0, n_node, values).astype(np.int32)
        out[field] = values
    return out


def _transformer_prop(dss, xf: str, name: str) -> str:
    _command(dss, f"? transformer.{xf}.{name}")
    return dss.Text.Result.strip().lower()


_STATIC = ("name", "bus_names", "node_names", "element_names", "load_names", "regulator_names")
_STATIC_INT = ("n_group",)


def save_feeder3(feeder: Feeder3, path, regcontrols: dict | None = None) -> None:
    """Write ``feeder`` to an ``.npz`` file that :func:`load_feeder3` reads, with the
    regulator controls ``regcontrols`` (:func:`regcontrols_from_opendss`) if given, which
    :func:`load_regcontrol_arrays` reads."""
    arrays = {
        f: np.asarray(getattr(feeder, f)) for f in feeder.__dataclass_fields__ if f not in _STATIC
    }  # n_group (a static int) is stored as a 0-d array
    names = {f: np.asarray(getattr(feeder, f), dtype=str) for f in _STATIC}
    controls = {}
    if regcontrols is not None:
        controls = {REGCONTROL_PREFIX + f: np.asarray(v) for f, v in regcontrols.items()}
        controls[REGCONTROL_PREFIX + "names"] = np.asarray(regcontrols["names"], dtype=str)
    np.savez_compressed(path, **arrays, **names, **controls)


@functools.cache
def _load_npz(path: str) -> Feeder3:
    with np.load(path) as data:
        static = {
            f: (str(data[f]) if f == "name" else tuple(str(s) for s in data[f])) for f in _STATIC
        }
        fields = set(Feeder3.__dataclass_fields__)
        arrays = {f: data[f] for f in data.files if f in fields and f not in _STATIC + _STATIC_INT}
        static.update({f: int(data[f]) for f in _STATIC_INT})
    feeder = Feeder3(**static, **arrays)
    check_feeder3(feeder)
    return feeder


def load_feeder3(source: str) -> Feeder3:
    """A bundled IEEE feeder (``"ieee13"``, ``"ieee34"``, ``"ieee37"``, ``"ieee123"``;
    taps as OpenDSS's regulator controls set them when the master solves), a saved
    ``.npz`` (:func:`save_feeder3`) or an OpenDSS master file (needs ``dss-python``)."""
    if source in BUNDLED:
        with resources.as_file(feeders_dir() / f"{source}.npz") as path:
            return _load_npz(str(path))
    path = Path(source)
    if path.suffix == ".npz" and path.is_file():
        return _load_npz(str(path.resolve()))
    if path.suffix.lower() == ".dss" and path.is_file():
        return from_opendss(path)
    raise ValueError(
        f"feeder {source!r}: expected a bundled feeder {list(BUNDLED)}, an .npz file from "
        "save_feeder3 or an OpenDSS .dss master file"
    )


@functools.cache
def _load_regcontrol_npz(path: str) -> dict:
    with np.load(path) as data:
        key = REGCONTROL_PREFIX + "names"
        if key not in data.files:
            raise ValueError(
                f"{path} holds no regulator controls (save_feeder3 was given none; "
                "rebuild it with regcontrols=regcontrols_from_opendss(master))"
            )
        out = {"names": tuple(str(s) for s in data[key])}
        for field, dtype in REGCONTROL_FIELDS.items():
            out[field] = np.asarray(data[REGCONTROL_PREFIX + field], dtype)
    return out


def load_regcontrol_arrays(source: str) -> dict:
    """The regulator controls of a bundled feeder (``"ieee13"``, ...), a saved ``.npz``
    (:func:`save_feeder3` with ``regcontrols``) or an OpenDSS master file (needs
    ``dss-python``), as :func:`regcontrols_from_opendss` returns them."""
    if source in BUNDLED:
        with resources.as_file(feeders_dir() / f"{source}.npz") as path:
            return dict(_load_regcontrol_npz(str(path)))
    path = Path(source)
    if path.suffix == ".npz" and path.is_file():
        return dict(_load_regcontrol_npz(str(path.resolve())))
    if path.suffix.lower() == ".dss" and path.is_file():
        return regcontrols_from_opendss(path)
    raise ValueError(
        f"regulator controls {source!r}: expected a bundled feeder {list(BUNDLED)}, an .npz "
        "file from save_feeder3 or an OpenDSS .dss master file"
    )


def feeders_dir():
    """The folder of the bundled OpenDSS files and their ``.npz`` extracts."""
    return resources.files("jaxgrid.grid.three_phase") / "feeders"


def bundled_master(name: str) -> Path:
    """The OpenDSS master file of a bundled feeder (for :func:`from_opendss`)."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled feeder {name!r}; available: {list(BUNDLED)}")
    return Path(str(feeders_dir() / BUNDLED[name]))


def tap_commands(taps: dict) -> list:
    """OpenDSS commands that set winding 2 of each transformer in ``taps`` (name -> tap,
    pu) and switch the regulator controls off."""
    out = []
    for xf, tap in taps.items():
        out += [f"transformer.{xf}.wdg=2", f"transformer.{xf}.tap={tap!r}"]
    return [*out, "set controlmode=off"]


def published_taps(name: str) -> dict:
    """The published IEEE taps of bundled feeder ``name`` (transformer -> tap, pu); empty
    for IEEE 37, whose files publish none (its master's own control solve sets them)."""
    return {xf: 1 + 0.00625 * step for xf, step in PUBLISHED_TAP_STEPS.get(name, {}).items()}


def write_bundled(directory) -> None:
    """Extract the bundled feeders to ``directory/<name>.npz`` (needs ``dss-python``):
    IEEE 13, 34 and 123 at their published taps, IEEE 37 at the taps its master's
    control solve sets, each with its regulator controls' settings. Run ``python -m jaxgrid.grid.three_phase.opendss`` after
    changing the extraction."""
    directory = Path(directory).resolve()  # compiling changes the working directory
    for name in BUNDLED:
        feeder = from_opendss(
            bundled_master(name), commands=tap_commands(published_taps(name)), name=name
        )
        regcontrols = regcontrols_from_opendss(bundled_master(name))
        save_feeder3(feeder, directory / f"{name}.npz", regcontrols=regcontrols)


if __name__ == "__main__":
    write_bundled(Path(__file__).parent / "feeders")
