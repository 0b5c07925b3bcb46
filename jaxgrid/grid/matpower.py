"""Read MATPOWER case files (``.m``) of radial networks into a :class:`Feeder`.

Distribution case files often give impedances in ohms and loads in kW or kVA and end
with MATLAB statements that convert them, for example::

    [PQ, PV, REF, NONE, BUS_I, ...] = idx_bus;
    Vbase = mpc.bus(1, BASE_KV) * 1e3;
    mpc.branch(:, [BR_R BR_X]) = mpc.branch(:, [BR_R BR_X]) / (Vbase^2 / Sbase);
    mpc.bus(:, QD) = mpc.bus(:, PD) * sin(acos(pf));

:func:`load_case` runs such statements with a small interpreter of that MATLAB subset
(assignments, 1-based indexing with ``:`` and vectors, arithmetic, elementary functions
and MATPOWER's ``idx_*`` column names), so the numbers are the ones MATPOWER would use.
A statement outside the subset is an error naming the file and line.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from jaxgrid.grid.feeder import Feeder, from_branch_table

# MATPOWER's column indices (1-based), by name, as returned by idx_bus/idx_brch/idx_gen/idx_cost.
_IDX = {
    "idx_bus": dict(
        PQ=1,
        PV=2,
        REF=3,
        NONE=4,
        BUS_I=1,
        BUS_TYPE=2,
        PD=3,
        QD=4,
        GS=5,
        BS=6,
        BUS_AREA=7,
        VM=8,
        VA=9,
        BASE_KV=10,
        ZONE=11,
        VMAX=12,
        VMIN=13,
        LAM_P=14,
        LAM_Q=15,
        MU_VMAX=16,
        MU_VMIN=17,
    ),
    "idx_brch": dict(
        F_BUS=1,
        T_BUS=2,
        BR_R=3,
        BR_X=4,
        BR_B=5,
        RATE_A=6,
        RATE_B=7,
        RATE_C=8,
        TAP=9,
        SHIFT=10,
        BR_STATUS=11,
        ANGMIN=12,
        ANGMAX=13,
        PF=14,
        QF=15,
        PT=16,
        QT=17,
        MU_SF=18,
        MU_ST=19,
        MU_ANGMIN=20,
        MU_ANGMAX=21,
    ),
    "idx_gen": dict(
        GEN_BUS=1,
        PG=2,
        QG=3,
        QMAX=4,
        QMIN=5,
        VG=6,
        MBASE=7,
        GEN_STATUS=8,
        PMAX=9,
        PMIN=10,
        PC1=11,
        PC2=12,
        QC1MIN=13,
        QC1MAX=14,
        QC2MIN=15,
        QC2MAX=16,
        RAMP_AGC=17,
        RAMP_10=18,
        RAMP_30=19,
        RAMP_Q=20,
        APF=21,
        MU_PMAX=22,
        MU_PMIN=23,
        MU_QMAX=24,
        MU_QMIN=25,
    ),
    "idx_cost": dict(PW_LINEAR=1, POLYNOMIAL=2, MODEL=1, STARTUP=2, SHUTDOWN=3, NCOST=4, COST=5),
}
_FUNCTIONS = {
    name: getattr(np, name)
    for name in (
        "sin",
        "cos",
        "tan",
        "sqrt",
        "exp",
        "log",
        "log10",
        "abs",
        "floor",
        "ceil",
        "round",
    )
}
_FUNCTIONS.update(asin=np.arcsin, acos=np.arccos, atan=np.arctan)
_CONSTANTS = {"pi": math.pi, "Inf": math.inf, "inf": math.inf, "NaN": math.nan, "nan": math.nan}

_TOKEN = re.compile(
    r"(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<str>'[^']*')"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>\.\*|\./|\.\^|[-+*/^()\[\],;:=.{}])"
    r"|(?P<space>[ \t]+)"
)


class MatlabError(ValueError):
    """A statement of the case file outside the supported MATLAB subset."""


class _Parser:
    """Recursive-descent evaluator of one MATLAB statement (a token list)."""

    def __init__(self, tokens, env):
        self.tokens = tokens  # (kind, text, preceded_by_space, line)
        self.i = 0
        self.env = env
        self.in_brackets = 0

    def peek(self, ahead=0):
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else ("end", "", False, 0)

    def take(self, text=None):
        tok = self.peek()
        if text is not None and tok[1] != text:
            raise MatlabError(f"expected {text!r}, found {tok[1] or 'end of statement'!r}")
        self.i += 1
        return tok

    def at_element_break(self) -> bool:
        """Inside ``[...]``, ``a -b`` is two elements while ``a - b`` and ``a-b`` are one."""
        _, text, spaced, _ = self.peek()
        if not self.in_brackets or text not in ("+", "-") or not spaced:
            return False
        return not self.peek(1)[2]

    def expr(self):
        value = self.term()
        while self.peek()[1] in ("+", "-") and not self.at_element_break():
            op = self.take()[1]
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    def term(self):
        value = self.unary()
        while self.peek()[1] in ("*", "/", ".*", "./"):
            op = self.take()[1]
            rhs = self.unary()
            if op in ("*", ".*"):
                value = _matmul(value, rhs) if op == "*" else value * rhs
            else:
                value = value / rhs
        return value

    def unary(self):
        if self.peek()[1] in ("-", "+"):
            op = self.take()[1]
            value = self.unary()
            return -value if op == "-" else value
        return self.power()

    def power(self):
        value = self.postfix()
        while self.peek()[1] in ("^", ".^"):
            self.take()
            value = np.power(np.asarray(value, float), self.unary())
        return value

    def postfix(self):
        kind, text = self.peek()[:2]
        if kind == "num":
            self.take()
            return np.float64(text)
        if kind == "str":
            self.take()
            return text[1:-1]
        if text == "(":
            self.take()
            saved, self.in_brackets = self.in_brackets, 0
            value = self.expr()
            self.in_brackets = saved
            self.take(")")
            return value
        if text == "[":
            return self.matrix()
        if kind == "name":
            return self.reference()
        raise MatlabError(f"unexpected {text or 'end of statement'!r}")

    def reference(self):
        name = self.take()[1]
        if name in _IDX and self.peek()[1] != "(":
            return _IDX[name]
        if name in _FUNCTIONS:
            self.take("(")
            arg = self.expr()
            self.take(")")
            return _FUNCTIONS[name](np.asarray(arg, float))
        if name in _CONSTANTS:
            return np.float64(_CONSTANTS[name])
        if name not in self.env:
            raise MatlabError(f"unknown name {name!r}")
        value = self.env[name]
        while self.peek()[1] == "." and self.peek(1)[0] == "name":
            self.take()
            field = self.take()[1]
            if not isinstance(value, dict) or field not in value:
                raise MatlabError(f"unknown field {name}.{field}")
            value = value[field]
        if self.peek()[1] == "(":
            value = np.asarray(value)[self.index(np.asarray(value).shape)]
        return value

    def index(self, shape):
        """Parse ``(i)`` or ``(i, j)``: 1-based, ``:`` for all; returns a NumPy index."""
        self.take("(")
        saved, self.in_brackets = self.in_brackets, 0
        parts = []
        while True:
            if self.peek()[1] == ":" and self.peek(1)[1] in (",", ")"):
                self.take()
                parts.append(slice(None))
            else:
                idx = np.asarray(self.expr())
                if idx.dtype == bool:
                    parts.append(np.flatnonzero(idx))
                else:
                    if np.any(idx < 1) or np.any(idx != np.round(idx)):
                        raise MatlabError(f"index {idx.tolist()} is not a positive integer")
                    parts.append(idx.astype(np.int64).ravel() - 1)
            if self.peek()[1] == ",":
                self.take()
                continue
            break
        self.take(")")
        self.in_brackets = saved
        if len(parts) == 1 and len(shape) == 2:
            if shape[0] == 1:  # a row vector indexed by position
                parts = [np.array([0]), parts[0]]
            elif shape[1] == 1:
                parts = [parts[0], np.array([0])]
            else:
                raise MatlabError("linear indexing of a matrix is not supported; use A(i, j)")
        if len(parts) == 2:
            rows, cols = parts
            if isinstance(rows, np.ndarray) and isinstance(cols, np.ndarray):
                return np.ix_(rows, cols)
            return rows, cols
        return parts[0]

    def matrix(self):
        self.take("[")
        self.in_brackets += 1
        rows, row = [], []
        while self.peek()[1] != "]":
            if self.peek()[0] == "end":
                raise MatlabError("unterminated '['")
            if self.peek()[1] in (";", "\n"):
                self.take()
                if row:
                    rows.append(row)
                row = []
                continue
            if self.peek()[1] == ",":
                self.take()
                continue
            row.append(np.atleast_2d(np.asarray(self.expr(), float)))
        self.take("]")
        self.in_brackets -= 1
        if row:
            rows.append(row)
        if not rows:
            return np.zeros((0, 0))
        return np.vstack([np.hstack(r) for r in rows])


def _matmul(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return a * b if a.ndim == 0 or b.ndim == 0 else a @ b


def _tokenize(text: str, line: int):
    """Tokens ``(kind, text, preceded_by_space, line)`` of one source line."""
    tokens, pos, spaced = [], 0, False
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise MatlabError(f"line {line}: unexpected character {text[pos]!r}")
        pos = m.end()
        if m.lastgroup == "space":
            spaced = True
            continue
        tokens.append((m.lastgroup, m.group(), spaced, line))
        spaced = False
    return tokens


def _strip_comment(line: str) -> str:
    """Drop a ``%`` comment, keeping ``%`` inside ``'strings'``."""
    in_str = False
    for i, ch in enumerate(line):
        if ch == "'":
            in_str = not in_str
        elif ch == "%" and not in_str:
            return line[:i]
    return line


def _statements(source: str):
    """Split the source into statements: lists of tokens, ending at ``;`` or a newline
    outside brackets (inside ``[...]`` those separate matrix rows)."""
    tokens, in_block = [], False
    for n, raw in enumerate(source.splitlines(), start=1):
        stripped = raw.strip()
        if in_block or stripped == "%{":
            in_block = stripped != "%}"
            continue
        line = _strip_comment(raw).rstrip()
        continued = line.endswith("...")
        tokens += _tokenize(line[:-3] if continued else line, n)
        if not continued:
            tokens.append(("op", "\n", False, n))
    statements, current, depth = [], [], 0
    for tok in tokens:
        text = tok[1]
        depth += text in ("(", "[", "{")
        depth -= text in (")", "]", "}")
        if depth == 0 and text in (";", "\n"):
            if current:
                statements.append(current)
            current = []
        else:
            current.append(tok)
    if current:
        statements.append(current)
    return statements


def _assign(env, target, value) -> None:
    """Run ``target = value`` where target is ``name``, ``a.b`` or ``a.b(i, j)``."""
    parser = _Parser(target, env)
    kind, name = parser.take()[:2]
    if kind != "name":
        raise MatlabError("the left-hand side must be a name")
    container, key = env, name
    while parser.peek()[1] == ".":
        parser.take()
        container = container.setdefault(key, {})
        if not isinstance(container, dict):
            raise MatlabError(f"{key} is not a struct")
        key = parser.take()[1]
    if parser.peek()[1] == "(":
        if key not in container:
            raise MatlabError(f"cannot index {key!r} before it is defined")
        array = np.array(container[key], dtype=float)
        array[parser.index(array.shape)] = np.asarray(value, float)
        value = array
    if parser.peek()[0] != "end":
        raise MatlabError("unexpected tokens on the left-hand side")
    container[key] = value


def _run(tokens, env) -> None:
    """Run one statement: an assignment, or ``[A, B, ...] = idx_*``."""
    if tokens[0][1] == "function":
        return
    depth, eq = 0, None
    for i, tok in enumerate(tokens):
        depth += tok[1] in ("(", "[", "{")
        depth -= tok[1] in (")", "]", "}")
        if tok[1] == "=" and depth == 0:
            eq = i
            break
    if eq is None:
        raise MatlabError("not an assignment")
    lhs, rhs = tokens[:eq], tokens[eq + 1 :]
    if lhs[0][1] == "[":
        names = [t[1] for t in lhs if t[0] == "name"]
        if len(rhs) != 1 or rhs[0][1] not in _IDX:
            raise MatlabError("multiple assignment is only supported from idx_* functions")
        table = _IDX[rhs[0][1]]
        unknown = [n for n in names if n not in table]
        if unknown:
            raise MatlabError(f"{rhs[0][1]} has no column named {unknown}")
        env.update({n: np.float64(table[n]) for n in names})
        return
    if rhs and rhs[0][1] == "{":  # cell arrays (bus names, ...) carry no numbers we use
        return
    parser = _Parser(rhs, env)
    value = parser.expr()
    if parser.peek()[0] != "end":
        raise MatlabError(f"unexpected {parser.peek()[1]!r}")
    _assign(env, lhs, value)


def load_case(path) -> dict:
    """Run a MATPOWER case file and return its ``mpc`` struct as a dict of NumPy arrays."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ValueError(f"cannot read MATPOWER case {path}: {err}") from None
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: not a MATPOWER case (byte {err.start} is not UTF-8 text)"
        ) from None
    env: dict = {}
    try:
        statements = _statements(source)
    except MatlabError as err:
        raise ValueError(f"{path}: {err}") from None
    for tokens in statements:
        try:
            _run(tokens, env)
        except (MatlabError, IndexError, ValueError) as err:
            text = " ".join(t[1] for t in tokens if t[1] != "\n")
            raise ValueError(f"{path}:{tokens[0][3]}: cannot run {text[:120]!r}: {err}") from None
    mpc = env.get("mpc")
    if not isinstance(mpc, dict):
        raise ValueError(f"{path}: no 'mpc' struct defined")
    for field in ("baseMVA", "bus", "branch"):
        if field not in mpc:
            raise ValueError(f"{path}: mpc.{field} is missing")
    return mpc


def _bus_numbers(path, table: str, column: str, values: np.ndarray) -> np.ndarray:
    """``values`` (a column of bus numbers) as integers; a fraction or NaN names its row."""
    whole = np.isfinite(values) & (values == np.round(values))
    if not np.all(whole):
        row = int(np.flatnonzero(~whole)[0])
        raise ValueError(
            f"{path}: {table} row {row + 1}: {column} = {values[row]:g} is not a bus number "
            "(a whole number)"
        )
    return values.astype(np.int64)


def from_matpower(path, vmin_pu=None, vmax_pu=None) -> Feeder:
    """A :class:`Feeder` from a MATPOWER case file of a radial network.

    Bus order is the rows of ``mpc.bus`` (``bus_ids`` keeps the numbers); branches are
    the in-service rows of ``mpc.branch`` (``branch_ids`` keeps their 0-based row).
    Out-of-service tie lines are dropped, negative loads are generation, branches between
    voltage levels at nominal tap are series impedances in pu. Voltage limits come from
    the file unless ``vmin_pu``/``vmax_pu`` are given.

    Raises:
        ValueError: the file cannot be run, or the network is not a supported radial
            feeder (meshed, disconnected, several slack buses, an off-nominal tap or phase
            shift, a generator away from the slack), naming the rows at fault.
    """
    mpc = load_case(path)
    bus = np.atleast_2d(np.asarray(mpc["bus"], float))
    branch = np.atleast_2d(np.asarray(mpc["branch"], float))
    gen = np.atleast_2d(np.asarray(mpc.get("gen", np.zeros((0, 8))), float))
    if bus.shape[1] < 13 or branch.shape[1] < 11:
        raise ValueError(f"{path}: mpc.bus needs 13 columns and mpc.branch 11")
    bus_ids = _bus_numbers(path, "mpc.bus", "BUS_I", bus[:, 0])
    from_bus = _bus_numbers(path, "mpc.branch", "F_BUS", branch[:, 0])
    to_bus = _bus_numbers(path, "mpc.branch", "T_BUS", branch[:, 1])
    if len(gen):
        _bus_numbers(path, "mpc.gen", "GEN_BUS", gen[:, 0])
    slack_rows = np.flatnonzero(bus[:, 1] == 3)
    if len(slack_rows) != 1:
        raise ValueError(
            f"{path}: a radial feeder needs exactly one slack (type 3) bus, found buses "
            f"{bus_ids[slack_rows].tolist()}"
        )
    slack = int(slack_rows[0])
    live_gen = gen[gen[:, 7] > 0] if len(gen) else gen
    away = live_gen[live_gen[:, 0] != bus_ids[slack]] if len(live_gen) else live_gen
    if len(away):
        raise ValueError(
            f"{path}: generators at buses {away[:, 0].astype(int).tolist()} are away from the "
            "slack; DistFlow supports the slack and PQ loads only (model them as negative loads)"
        )
    at_slack = live_gen[live_gen[:, 0] == bus_ids[slack]] if len(live_gen) else live_gen
    vm_slack = float(at_slack[0, 5]) if len(at_slack) else float(bus[slack, 7])

    in_service = branch[:, 10] > 0
    ratio, shift = branch[:, 8], branch[:, 9]
    tapped = np.flatnonzero(in_service & (ratio != 0) & (ratio != 1))
    if tapped.size:
        raise ValueError(
            f"{path}: branch rows {(tapped + 1).tolist()} have an off-nominal tap ratio, "
            "which radial DistFlow does not model"
        )
    shifted = np.flatnonzero(in_service & (shift != 0))
    if shifted.size:
        raise ValueError(f"{path}: branch rows {(shifted + 1).tolist()} have a phase shift")
    base_mva = float(np.asarray(mpc["baseMVA"]))
    return from_branch_table(
        from_bus=from_bus,
        to_bus=to_bus,
        r_pu=branch[:, 2],
        x_pu=branch[:, 3],
        b_pu=branch[:, 4],
        rate_mva=branch[:, 5],
        in_service=in_service,
        base_mva=base_mva,
        base_kv=bus[:, 9],
        bus_ids=bus_ids,
        slack=slack,
        p_load_mw=bus[:, 2],
        q_load_mvar=bus[:, 3],
        gs_mw=bus[:, 4],
        bs_mvar=bus[:, 5],
        vm_slack_pu=vm_slack,
        vmin_pu=bus[:, 12] if vmin_pu is None else vmin_pu,
        vmax_pu=bus[:, 11] if vmax_pu is None else vmax_pu,
    )
