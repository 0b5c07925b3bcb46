function mpc = two_levels
%TWO_LEVELS  A small radial feeder for loader tests: two voltage levels, the slack
%   in the middle of the bus table, bus numbers that are not 1..n, an out-of-service
%   tie line, a negative load (generation), a shunt capacitor, line charging, and
%   loads given in kW / kVA with a power factor, converted by MATLAB statements.

mpc.version = '2';
mpc.baseMVA = 10;

%% bus data
%	bus_i	type	Pd	Qd	Gs	Bs	area	Vm	Va	baseKV	zone	Vmax	Vmin
mpc.bus = [
	20	1	300	0	0	0	1	1	0	20	1	1.1	0.9;
	10	3	0	0	0	0	1	1	0	20	1	1.05	0.95;
	30	1	250	0	0	0.2	1	1	0	20	1	1.1	0.9;
	40	1	-400	0	0	0	1	1	0	0.4	1	1.1	0.9;
	50	1	120	0	0.01	0	1	1	0	0.4	1	1.1	0.9;
	60	1	80	0	0	0	1	1	0	20	1	1.1	0.9;
];

%% generator data
%	bus	Pg	Qg	Qmax	Qmin	Vg	mBase	status	Pmax	Pmin
mpc.gen = [
	10	0	0	10	-10	1.02	100	1	10	0;
];

%% branch data  (r, x in ohms on the 20 kV side; the 20/0.4 kV branch in pu)
%	fbus	tbus	r	x	b	rateA	rateB	rateC	ratio	angle	status	angmin	angmax
mpc.branch = [
	10	20	1.2	2.1	0.0004	12	0	0	0	0	1	-360	360;
	20	30	2.5	1.9	0.0002	0	0	0	0	0	1	-360	360;
	30	40	0	0	0	0	0	0	1	0	1	-360	360;
	40	50	0	0	0	0	0	0	0	0	1	-360	360;
	20	60	1.1	0.8	0	0	0	0	0	0	1	-360	360;
	60	30	1.0	1.0	0	0	0	0	0	0	0	-360	360;
];

%% convert: loads are kVA at power factor pf (sign kept), impedances ohms -> pu
[PQ, PV, REF, NONE, BUS_I, BUS_TYPE, PD, QD, GS, BS, BUS_AREA, VM, ...
    VA, BASE_KV, ZONE, VMAX, VMIN] = idx_bus;
[F_BUS, T_BUS, BR_R, BR_X, BR_B, RATE_A, RATE_B, RATE_C, ...
    TAP, SHIFT, BR_STATUS] = idx_brch;
Vbase = mpc.bus(2, BASE_KV) * 1e3;
Sbase = mpc.baseMVA * 1e6;
hv = [1 2 5 6];
mpc.branch(hv, [BR_R BR_X]) = mpc.branch(hv, [BR_R BR_X]) / (Vbase^2 / Sbase);
mpc.branch(hv, BR_B) = mpc.branch(hv, BR_B) * (Vbase^2 / Sbase);
mpc.branch(3, [BR_R BR_X]) = [0.01 0.04];   %% the 20/0.4 kV transformer, pu
mpc.branch(4, [BR_R BR_X]) = [0.008 0.003] / (400^2 / Sbase);
pf = 0.9;
mpc.bus(:, [PD, QD]) = mpc.bus(:, [PD, QD]) / 1e3;
mpc.bus(:, QD) = mpc.bus(:, PD) * sin(acos(pf));
mpc.bus(:, PD) = mpc.bus(:, PD) * pf;
