"""A synthetic GPU workload: training and fine-tuning work arriving at a data centre.

**Synthetic, not a trace.** No licensed GPU-cluster trace is bundled with jaxgrid. The
public ones (Microsoft Philly, Alibaba PAI 2020, SenseTime Helios) are job tables of
several GB to be fetched and reduced; until one is, this generator stands in. Its shape
follows what the characterisation studies of those traces report (Jeon et al., ATC 2019;
Hu et al., SC 2021, "Characterization and Prediction of Deep Learning Workloads in
Large-Scale GPU Datacenters"; Weng et al., NSDI 2022): submissions follow the working day
(more in office hours, fewer overnight and at weekends), and GPU time per job is
heavy-tailed (a few large jobs hold most GPU-hours). Its volumes are chosen, not fitted: the
mean utilisation each class asks of the cluster is a parameter.

**Model.** Jobs of class ``k`` arrive as a non-homogeneous Poisson process with rate
``mean_jobs[k] * m(h, weekday)`` per step, where the multiplier ``m`` is a working-day bump
(1.6 at 13:00 on weekdays, 0.5 at night, weekends at 0.6 of weekdays) normalised to a mean
of 1 over a week; each job's GPU-hours are lognormal with mean ``mean_job_gpu_h[k]`` and
log-standard-deviation ``sigma[k]``. A step's arrivals are the sum over its jobs. Drawn with
NumPy from a seed, so the same seed gives the same year.
"""

from __future__ import annotations

import numpy as np

WORK_CLASSES = ("train", "finetune")


def working_day_multiplier(n_days: int, steps_per_day: int) -> np.ndarray:
    """``(n_days * steps_per_day,)`` arrival-rate multiplier, mean 1 over whole weeks."""
    h = (np.arange(steps_per_day) + 0.5) * 24.0 / steps_per_day
    day = 0.5 + 1.1 * np.exp(-0.5 * ((h - 13.0) / 3.5) ** 2)
    weekday = (np.arange(n_days) % 7) < 5  # day 0 is a working day
    m = np.where(weekday[:, None], 1.0, 0.6) * day[None, :]
    week = np.where(np.arange(7) < 5, 1.0, 0.6)[:, None] * day[None, :]
    return (m / week.mean()).reshape(-1)


def synthetic_workload(
    n_days: int,
    steps_per_day: int,
    n_gpus: float,
    utilisation: tuple[float, float] = (0.35, 0.2),
    mean_job_gpu_h: tuple[float, float] = (64.0, 4.0),
    sigma: tuple[float, float] = (1.2, 0.8),
    seed: int = 0,
) -> np.ndarray:
    """``(n_days * steps_per_day, 2)`` GPU-hours arriving per step (training, fine-tuning).

    Args:
        n_days, steps_per_day: length and resolution of the series.
        n_gpus: cluster size; ``utilisation[k]`` of its GPU-hours is asked by class ``k``
            on average.
        mean_job_gpu_h: mean GPU-hours of one job of each class.
        sigma: log-standard-deviation of a job's GPU-hours.
        seed: the NumPy seed.
    """
    if n_days < 1 or steps_per_day < 1 or n_gpus <= 0:
        raise ValueError("need n_days >= 1, steps_per_day >= 1 and n_gpus > 0")
    rng = np.random.default_rng(seed)
    dt_h = 24.0 / steps_per_day
    m = working_day_multiplier(n_days, steps_per_day)
    out = np.zeros((len(m), len(WORK_CLASSES)))
    for k in range(len(WORK_CLASSES)):  # host-side data generation, two classes
        if utilisation[k] < 0 or mean_job_gpu_h[k] <= 0 or sigma[k] < 0:
            raise ValueError(f"{WORK_CLASSES[k]}: utilisation >= 0, job size > 0, sigma >= 0")
        jobs_per_step = utilisation[k] * n_gpus * dt_h / mean_job_gpu_h[k]
        counts = rng.poisson(jobs_per_step * m)
        mu = np.log(mean_job_gpu_h[k]) - 0.5 * sigma[k] ** 2  # lognormal with that mean
        sizes = rng.lognormal(mu, sigma[k], counts.sum())
        owner = np.repeat(np.arange(len(m)), counts)
        out[:, k] = np.bincount(owner, weights=sizes, minlength=len(m))
    return out
