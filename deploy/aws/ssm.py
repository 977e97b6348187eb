"""SSM parameters (read only): the CDK bootstrap version the templates require."""

from __future__ import annotations

from typing import Any

from deploy.aws.session import AwsCallError, AwsSession, aws_call


def parameter(session: AwsSession, name: str) -> str | None:
    """The parameter's value, None when it does not exist."""
    client: Any = session.client("ssm")  # (no SSM type stubs installed here)
    try:
        with aws_call("ssm:GetParameter", where=f"parameter {name} in {session.region}"):
            response = client.get_parameter(Name=name)
    except AwsCallError as exc:
        if exc.code == "ParameterNotFound":
            return None
        raise
    return str(response["Parameter"]["Value"])
