"""Step 5: the PNG chart of page views per 5 minutes (matplotlib, the ``demo`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kafkalog.demo.settings import CHART_BUCKET, HOUR_MS, START_MS, TOPIC

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def views_per_bucket(views: DataFrame) -> list[tuple[int, int]]:
    """(bucket start ms, views) per 5 minutes, for the chart."""
    from pyspark.sql import functions as F

    rows = (views.groupBy(F.window("ts", CHART_BUCKET).alias("w")).count()
            .select(F.unix_millis("w.start").alias("start"), "count").orderBy("start").collect())
    return [(r["start"], r["count"]) for r in rows]


def save_chart(path: Path, batch: list[tuple[int, int]], appended: list[tuple[int, int]]) -> None:
    # The object API with an explicit Agg canvas: no display needed, and pyplot's global backend
    # (which another part of the process may use) is left alone.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 5 / 60 * 0.9  # hours

    def hours(ms: int) -> float:
        return (ms - START_MS) / HOUR_MS + 6  # hour of the day, UTC

    ax.bar([hours(t) for t, _ in batch], [n for _, n in batch], width=width, align="edge",
           color="#4c72b0", label="initial load (batch job)")
    ax.bar([hours(t) for t, _ in appended], [n for _, n in appended], width=width, align="edge",
           color="#dd8452", label="appended later (picked up by the stream)")
    ax.set_xlabel("time of day, 2024-03-04 (UTC)")
    ax.set_ylabel("page views per 5 min")
    ax.set_title(f"{TOPIC}: page views per 5 minutes")
    ax.set_xticks(range(6, 13))
    ax.set_xticklabels([f"{h:02d}:00" for h in range(6, 13)])
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, format="png")
