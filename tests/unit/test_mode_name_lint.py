"""tools/mode_names.py: the lint that keeps mode-name comparisons inside deploy/hosting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.mode_names import check, check_source

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "source",
    [
        'if hosting == "async":\n    pass\n',
        'ok = mode.name != "multi-model"\n',
        'ok = hosting in ("single-model", "async")\n',
        'SERVED = ("multi-model", "async")\nok = hosting not in SERVED\n',
        'ASYNC_HOSTING = "async"\nok = ASYNC_HOSTING == hosting\n',
        "from deploy.client.manifest import ASYNC\nok = mode.name != ASYNC\n",
        "from deploy.client.manifest import SERVERLESS as S\nok = h == S\n",
        "from deploy.client import manifest\nok = h == manifest.SINGLE_MODEL\n",
        'match hosting:\n    case "serverless":\n        pass\n',
    ],
)
def test_a_mode_name_compared_as_a_string_is_flagged(source: str) -> None:
    findings = check_source(source, "deploy/cli/example.py")
    assert len(findings) == 1
    assert findings[0].path == "deploy/cli/example.py" and findings[0].line >= 1
    assert "deploy/hosting/mode.py" in str(findings[0])


@pytest.mark.parametrize(
    "source",
    [
        'settings = load(hosting="async")\n',  # naming a mode is not testing for one
        'ok = mode.scales_to_zero and value == "asynchronous"\n',
        'TABLE = {"multi-model": 1}\n',
        "ok = mode.name in provider.hostings\n",
        'ok = kind == "router"\n',
    ],
)
def test_what_is_not_a_mode_comparison_passes(source: str) -> None:
    assert check_source(source, "deploy/cli/example.py") == []


def test_the_hosting_layer_and_the_sdk_may_compare_mode_names() -> None:
    source = 'ok = hosting == "async"\n'
    assert check_source(source, "deploy/hosting/example.py") == []
    assert check_source(source, "deploy/client/_core.py") == []
    assert check_source(source, "deploy_infra/synth.py") != []


def test_the_code_base_compares_no_mode_name_outside_the_hosting_layer() -> None:
    findings = check([ROOT / "deploy", ROOT / "deploy_infra"], ROOT)
    assert [str(finding) for finding in findings] == []


def test_the_script_exits_non_zero_on_a_finding(tmp_path: Path) -> None:
    bad = tmp_path / "deploy" / "bad.py"
    bad.parent.mkdir()
    bad.write_text('if hosting != "serverless":\n    pass\n')
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mode_names.py"), "deploy"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 1
    assert "deploy/bad.py:1:4: hosting mode 'serverless'" in run.stdout
    clean = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mode_names.py"), str(ROOT / "deploy")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert clean.returncode == 0, clean.stdout
