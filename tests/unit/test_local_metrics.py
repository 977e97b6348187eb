"""The local endpoint's metrics text: Prometheus exposition format 0.0.4, read back.

The format is written by hand (deploy/local/http/metrics.py), so these tests hold it
to the format's rules: HELP/TYPE before each family's samples, label values
escaped, cumulative buckets ending in +Inf equal to _count, and `parse` refusing
what is not the format.
"""

from __future__ import annotations

import math
import re

import pytest

from deploy.local.http import metrics

# A sample line of the text format: name, optional {label="value",...}, a float.
_LINE = re.compile(
    r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
    r'(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? '
    r"(-?[0-9.e+-]+|\+Inf|-Inf|NaN)$"
)


def recorded() -> metrics.ModelMetrics:
    m = metrics.ModelMetrics()
    for seconds in (0.0004, 0.003, 0.003, 0.2, 70.0):
        m.observe(b"addsub-1a2b.tar.gz", 200, 100, 40, seconds)
    m.observe(b"addsub-1a2b.tar.gz", 424, 100, 300, 0.02)  # ModelError
    m.observe(b"addsub-1a2b.tar.gz", 400, 7, 90, 0.0001)  # ValidationError
    m.observe(b"addsub-1a2b.tar.gz", 429, 7, 90, 0.0001)  # ModelNotReady
    m.observe(b"addsub-1a2b.tar.gz", 503, 7, 90, 0.0001)  # ServiceUnavailable
    m.observe(b"addsub-1a2b.tar.gz", 500, 7, 90, 0.0001)  # InternalFailure
    m.observe(b'odd"name\\', 200, 1, 2, 0.001)  # a TargetModel the manifest does not name
    return m


def test_exposition_follows_the_text_format() -> None:
    text = recorded().exposition({"addsub-1a2b.tar.gz": "addsub"}).decode()
    assert text.endswith("\n")
    families: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name not in families  # one TYPE per family, before its samples
            families[name] = kind
            continue
        assert _LINE.match(line), line
        name = line.split("{", 1)[0].split(" ", 1)[0]
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert family in families or name in families, line  # declared before use
    assert families == {
        "deploy_invocations_total": "counter",
        "deploy_invocation_errors_total": "counter",
        "deploy_request_bytes_total": "counter",
        "deploy_response_bytes_total": "counter",
        "deploy_invocation_seconds": "histogram",
    }
    # The odd TargetModel is escaped, and read back as it was.
    assert 'target_model="odd\\"name\\\\"' in text
    targets = {labels["target_model"] for _, labels, _ in metrics.parse(text)}
    assert targets == {"addsub-1a2b.tar.gz", 'odd"name\\'}


def test_counts_classes_bytes_and_buckets() -> None:
    samples = metrics.parse(recorded().exposition({"addsub-1a2b.tar.gz": "addsub"}).decode())
    [odd, row] = metrics.per_model(samples)  # sorted by model: "" first
    assert row["model"] == "addsub" and odd["model"] is None
    assert row["calls"] == 10
    assert row["errors"] == {"client": 1, "model": 1, "server": 1, "throttled": 2}
    assert row["request_bytes"] == 5 * 100 + 100 + 4 * 7
    assert row["response_bytes"] == 5 * 40 + 300 + 4 * 90
    label = {"model": "addsub", "target_model": "addsub-1a2b.tar.gz"}
    buckets = [
        (labels["le"], value)
        for name, labels, value in samples
        if name == "deploy_invocation_seconds_bucket" and labels.items() >= label.items()
    ]
    assert [le for le, _ in buckets] == [repr(b) for b in metrics.BUCKETS] + ["+Inf"]
    counts = dict(buckets)
    assert counts["0.001"] == 5  # 0.0004 and four at 0.0001
    assert counts["0.0025"] == 5
    assert counts["0.005"] == 7  # two at 0.003
    assert counts["0.025"] == 8  # 0.02
    assert counts["0.25"] == 9  # 0.2
    assert counts["60.0"] == 9 and counts["+Inf"] == 10  # 70 s: only +Inf
    [total] = [v for n, lab, v in samples if n == "deploy_invocation_seconds_sum" and lab == label]
    assert total == pytest.approx(0.0004 + 0.006 + 0.2 + 70.0 + 0.02 + 4 * 0.0001)


def test_a_bound_itself_falls_in_its_bucket() -> None:
    m = metrics.ModelMetrics()
    m.observe(b"t", 200, 0, 0, 0.005)  # le="0.005" means <= 0.005
    [row] = metrics.per_model(metrics.parse(m.exposition({}).decode()))
    assert row["p50_seconds"] is not None and row["p50_seconds"] <= 0.005


def test_quantiles_interpolate_in_their_bucket() -> None:
    histogram = [(0.01, 0.0), (0.1, 50.0), (1.0, 100.0), (math.inf, 100.0)]
    assert metrics.quantile(0.5, histogram) == pytest.approx(0.1)
    assert metrics.quantile(0.25, histogram) == pytest.approx(0.055)
    assert metrics.quantile(0.99, histogram) == pytest.approx(0.1 + 0.9 * 49 / 50)
    assert metrics.quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    # In the +Inf bucket: the largest finite bound (as Prometheus answers).
    assert metrics.quantile(0.99, [(0.1, 1.0), (math.inf, 2.0)]) == 0.1


def test_target_names_beyond_the_limit_are_counted_together() -> None:
    m = metrics.ModelMetrics()
    for n in range(metrics.MAX_TARGETS + 5):
        m.observe(f"t{n}".encode(), 200, 1, 1, 0.001)
    rows = metrics.per_model(metrics.parse(m.exposition({}).decode()))
    assert len(rows) == metrics.MAX_TARGETS + 1
    [other] = [r for r in rows if r["target_model"] == metrics.OTHER]
    assert other["calls"] == 5
    assert sum(int(str(r["calls"])) for r in rows) == metrics.MAX_TARGETS + 5


@pytest.mark.parametrize(
    "line",
    [
        "deploy_invocations_total{model=addsub} 1",
        'deploy_invocations_total{model="a"x} 1',
        "deploy_invocations_total 1 2 3",
        "not a sample",
    ],
)
def test_parse_refuses_what_is_not_the_format(line: str) -> None:
    with pytest.raises(metrics.ExpositionError):
        metrics.parse(line + "\n")
