"""A checker for CloudWatch embedded metric format (EMF) records, written from the spec.

https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html:
the root is a JSON object whose `_aws` member holds `Timestamp` (epoch
milliseconds) and `CloudWatchMetrics`, an array of directives; each directive
names a `Namespace`, `Dimensions` (an array of dimension sets, each an array of
at most 30 member names) and `Metrics` (at most 100 objects with a `Name` and
an optional `Unit` from CloudWatch's list). Every name a directive uses must be
a member of the root: a dimension's value a string, a metric's a number (or an
array of at most 100 numbers). CloudWatch Logs drops a record that breaks these
rules without a word, so the tests check each one.
"""

from __future__ import annotations

import json
import math
from typing import Any

UNITS = frozenset(
    {
        "Seconds",
        "Microseconds",
        "Milliseconds",
        "Bytes",
        "Kilobytes",
        "Megabytes",
        "Gigabytes",
        "Terabytes",
        "Bits",
        "Kilobits",
        "Megabits",
        "Gigabits",
        "Terabits",
        "Percent",
        "Count",
        "Bytes/Second",
        "Kilobytes/Second",
        "Megabytes/Second",
        "Gigabytes/Second",
        "Terabytes/Second",
        "Bits/Second",
        "Kilobits/Second",
        "Megabits/Second",
        "Gigabits/Second",
        "Terabits/Second",
        "Count/Second",
        "None",
    }
)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_emf(line: str) -> dict[str, Any]:
    """The record on `line`, after every rule above is checked (AssertionError if not)."""
    root = json.loads(line)
    assert isinstance(root, dict), "an EMF record is a JSON object"
    meta = root.get("_aws")
    assert isinstance(meta, dict), "_aws must be an object"
    timestamp = meta.get("Timestamp")
    assert isinstance(timestamp, int) and not isinstance(timestamp, bool), "Timestamp: int ms"
    assert timestamp > 1_000_000_000_000, "Timestamp is epoch milliseconds, not seconds"
    directives = meta.get("CloudWatchMetrics")
    assert isinstance(directives, list) and directives, "CloudWatchMetrics: a non-empty array"
    for directive in directives:
        assert isinstance(directive, dict)
        namespace = directive.get("Namespace")
        assert isinstance(namespace, str) and 1 <= len(namespace) <= 1024
        dimension_sets = directive.get("Dimensions")
        assert isinstance(dimension_sets, list)
        for names in dimension_sets:
            assert isinstance(names, list) and len(names) <= 30
            for name in names:
                assert isinstance(name, str) and name in root, f"dimension {name!r} not a member"
                value = root[name]
                assert isinstance(value, str) and 1 <= len(value) <= 1024, f"{name}: {value!r}"
        metrics = directive.get("Metrics")
        assert isinstance(metrics, list) and 1 <= len(metrics) <= 100
        for metric in metrics:
            assert isinstance(metric, dict)
            name = metric.get("Name")
            assert isinstance(name, str) and 1 <= len(name) <= 1024
            assert name in root, f"metric {name!r} is not a member of the record"
            value = root[name]
            values = value if isinstance(value, list) else [value]
            assert 1 <= len(values) <= 100 and all(_number(v) for v in values), f"{name}: {value!r}"
            if "Unit" in metric:
                assert metric["Unit"] in UNITS, f"{name}: unit {metric['Unit']!r}"
    return root
