"""Reading a Prometheus exposition back in tests: series by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Series:
    """Every sample of an exposition: {(name, frozenset(labels)): value}."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(series: Series, name: str, **labels: str) -> float:
    """One sample's value; 0 when the series is absent (a counter never incremented)."""
    return series.get((name, frozenset(labels.items())), 0.0)


def ours(series: Series) -> Series:
    """Only this package's series."""
    return {key: v for key, v in series.items() if key[0].startswith("ultimate_jobs_")}
