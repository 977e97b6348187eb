"""`bench/client.py` keeps a whole record: every round of every path, the ratios
round by round with their median and worst round, the machine and the commit,
and the 1.5x target met or missed for each body size."""

from __future__ import annotations

import pytest

from tests.functional.test_bench_quick import run_quick


@pytest.mark.slow
def test_client_bench_records_every_round_the_machine_and_each_target() -> None:
    report = run_quick("client.py", "--rounds", "2")

    machine = report["machine"]
    assert machine["cpus"] >= 1 and machine["cpu_model"] and machine["python"]
    assert len(report["git"]["commit"]) == 40 and isinstance(report["git"]["dirty"], bool)
    assert report["quick"] is True and report["rounds"] == 2
    for label, body in report["bodies"].items():
        for path, rounds in body["rounds_ms"].items():
            assert len(rounds) == 2 and all(value > 0 for value in rounds), (label, path)
            assert body["worst_round_ms"][path] == max(rounds)
            assert body["cpu_ms_per_call"][path] == min(rounds)
        each = body["round_ratios"]["sdk_vs_raw_http"]
        assert len(each["rounds"]) == 2 and each["worst"] == max(each["rounds"])
        target = body["targets"]["sdk_vs_raw_http<=1.5"]
        assert target["met"] == (target["ratio"] <= 1.5)
        assert target["met_in_every_round"] == (each["worst"] <= 1.5)
        assert report["targets"][f"{label}_sdk_vs_raw_http<=1.5"] is target["met"]
