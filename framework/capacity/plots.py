"""Pictures of a tuning (`tributary tune`): why n and t are what they are.

One PNG per distribution, two panels each, as the paper's figures 11 and 12 show them:
- the data's histogram with the fitted density over it (is the fit the data's shape?);
- the data's CDF and the fitted CDF, with the level (α for the degree, 1 − β for the duration)
  and the chosen n or t marked.

matplotlib renders off-screen (the Agg backend): no display is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from framework.capacity.tuning import Tuning
    from framework.integration.fitting import Fit


def plot_tuning(tuning: Tuning, folder: Path, prefix: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    degree = _plot(
        tuning.instances.degree,
        tuning.degree,
        discrete=True,
        level=tuning.alpha,
        level_label=f"α = {tuning.alpha:g}",
        chosen=tuning.size,
        chosen_label=f"n = {tuning.size}",
        what="instance degree (tuples per instance)",
        title=f"{tuning.step}: degree",
        path=folder / f"{prefix}-degree.png",
    )
    duration = _plot(
        tuning.instances.duration,
        tuning.duration,
        discrete=False,
        level=1 - tuning.beta,
        level_label=f"1 − β = {1 - tuning.beta:g}",
        chosen=tuning.timeout,
        chosen_label=f"t = {tuning.timeout} s",
        what="instance duration (s, first to last tuple)",
        title=f"{tuning.step}: duration",
        path=folder / f"{prefix}-duration.png",
    )
    return [degree, duration]


def _plot(
    data: np.ndarray,
    fit: Fit,
    *,
    discrete: bool,
    level: float,
    level_label: str,
    chosen: float,
    chosen_label: str,
    what: str,
    title: str,
    path: Path,
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from framework.capacity.tuning import describe

    data = data[np.isfinite(data)]
    top = float(max(np.quantile(data, 0.995), chosen) * 1.15)
    grid = np.linspace(0, top, 400)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    bins = np.arange(0.5, top + 1.5) if discrete else np.linspace(0, top, 60)
    left.hist(data[data <= top], bins=bins, density=True, color="#9ecae1", edgecolor="white", label="data")
    left.plot(grid, fit.distribution.pdf(grid), color="#d6604d", lw=2, label=describe(fit.distribution))
    left.set_xlabel(what)
    left.set_ylabel("density")
    left.legend(fontsize=8, loc="upper right")
    left.set_title(f"{title}: histogram and fitted density", fontsize=10)

    ordered = np.sort(data)
    right.step(ordered, np.arange(1, len(ordered) + 1) / len(ordered), where="post", color="#3182bd", label="data")
    right.plot(grid, fit.distribution.cdf(grid), color="#d6604d", lw=2, label=f"fit (KS distance {fit.ks_distance:.3f})")
    right.axhline(level, color="grey", ls="--", lw=1, label=level_label)
    right.axvline(chosen, color="black", ls=":", lw=1.5, label=chosen_label)
    right.set_xlim(0, top)
    right.set_ylim(0, 1.02)
    right.set_xlabel(what)
    right.set_ylabel("F")
    right.legend(fontsize=8, loc="lower right")
    right.set_title(f"{title}: CDF, level and choice", fontsize=10)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
