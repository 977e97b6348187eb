"""Retry policy, error mapping and classification parsing (pure functions)."""

from __future__ import annotations

import numpy as np
import pytest

from deploy.client import (
    Classification,
    EndpointError,
    InferenceTimeoutError,
    InferResult,
    ModelError,
    ModelNotFoundError,
    ResponseFormatError,
    RetriesExhaustedError,
    RetryPolicy,
)
from deploy.client._failures import ErrorAnswer, to_exception
from deploy.client._retry import Attempts, TransientError


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_backoff_is_full_jitter_capped() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=1.0)
    assert policy.backoff(0, lambda: 1.0) == pytest.approx(0.1)
    assert policy.backoff(3, lambda: 1.0) == pytest.approx(0.8)
    assert policy.backoff(10, lambda: 1.0) == pytest.approx(1.0)
    assert policy.backoff(10, lambda: 0.25) == pytest.approx(0.25)


def transient(status: int = 503) -> TransientError:
    return TransientError(EndpointError("busy", code="ServiceUnavailable", status=status))


def test_attempts_give_up_after_max_attempts() -> None:
    attempts = Attempts(RetryPolicy(max_attempts=3), "endpoint 'e'", draw=lambda: 0.5)
    for _ in range(2):
        attempts.start()
        assert attempts.delay_after(transient()) >= 0
    attempts.start()
    with pytest.raises(RetriesExhaustedError, match="gave up after 3 attempts") as caught:
        attempts.delay_after(transient())
    assert caught.value.status == 503


def test_attempts_respect_total_timeout() -> None:
    clock = FakeClock()
    policy = RetryPolicy(max_attempts=100, base_delay=1.0, max_delay=1.0, total_timeout=2.5)
    attempts = Attempts(policy, "endpoint 'e'", clock=clock, draw=lambda: 1.0)
    attempts.start()
    clock.now += attempts.delay_after(transient())
    attempts.start()
    clock.now += attempts.delay_after(transient())
    attempts.start()
    with pytest.raises(InferenceTimeoutError, match=r"total_timeout=2\.5s"):
        attempts.delay_after(transient())


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)


@pytest.mark.parametrize(
    "answer",
    [
        ErrorAnswer(429, "ModelNotReadyException", "loading"),
        ErrorAnswer(429, "ThrottlingException", "slow down"),
        ErrorAnswer(503, "ServiceUnavailable", "busy"),
        ErrorAnswer(507, None, "insufficient storage"),
        ErrorAnswer(424, "ModelError", "x", original_status=507, original_message="oom"),
    ],
)
def test_transient_answers_are_retried(answer: ErrorAnswer) -> None:
    assert isinstance(to_exception(answer, endpoint="e", model="m"), TransientError)


@pytest.mark.parametrize(
    ("answer", "kind", "text"),
    [
        (
            ErrorAnswer(424, "ModelError", "x", original_status=400, original_message="bad shape"),
            ModelError,
            "bad shape",
        ),
        (ErrorAnswer(400, "ValidationError", "no archive 'a.tar.gz'"), ModelNotFoundError, "a.tar"),
        (
            ErrorAnswer(400, "ValidationError", "Endpoint ep of account 1 not found."),
            EndpointError,
            "check the endpoint name",
        ),
        (ErrorAnswer(500, "InternalFailure", "boom"), EndpointError, "boom"),
        (
            ErrorAnswer(
                424,
                "ModelError",
                "x",
                original_status=400,
                original_message="Request for unknown model",
            ),
            ModelNotFoundError,
            "unknown model",
        ),
    ],
)
def test_other_answers_are_not_retried(answer: ErrorAnswer, kind: type, text: str) -> None:
    error = to_exception(answer, endpoint="e", model="m")
    assert type(error) is kind
    assert text in str(error)
    assert "endpoint 'e', model 'm'" in str(error)


TRITON_LOAD_FAILURE = (
    "load failed for model '/opt/ml/models/0a1b/model::m.tar.gz': version 1 is at "
    "UNAVAILABLE state: Internal: {cause};"
)


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (
            ErrorAnswer(
                424,
                "ModelError",
                "x",
                original_status=400,
                original_message=TRITON_LOAD_FAILURE.format(
                    cause="ModuleNotFoundError: No module named 'transformers.models'"
                ),
            ),
            "imports 'transformers', which the serving image lacks: ship it in an execution "
            "environment",
        ),
        (
            ErrorAnswer(
                424,
                "ModelError",
                "x",
                original_status=400,
                original_message=TRITON_LOAD_FAILURE.format(cause="ValueError: bad weights"),
            ),
            "the model failed to load: Internal: ValueError: bad weights",
        ),
        (
            ErrorAnswer(400, "ValidationError", "Failed to load model m on endpoint ep"),
            "the model failed to load: Failed to load model m on endpoint ep",
        ),
    ],
)
def test_a_model_that_failed_to_load_is_named_as_such(answer: ErrorAnswer, hint: str) -> None:
    error = to_exception(answer, endpoint="e", model="m")
    assert type(error) is ModelError
    assert error.fix is not None and hint in error.fix
    assert "check the inputs" not in str(error)
    assert "check the endpoint name" not in str(error)


def test_model_error_keeps_triton_status() -> None:
    error = to_exception(
        ErrorAnswer(424, "ModelError", "x", original_status=400, original_message="bad"),
        endpoint="e",
        model="m",
    )
    assert isinstance(error, ModelError)
    assert error.status == 400


def classification_result(rows: list[list[bytes]]) -> InferResult:
    array = np.array(rows, dtype=object)
    return InferResult({"P": array}, datatypes={"P": "BYTES"}, model="m", target_model=None)


def test_classes_parse_score_index_label() -> None:
    result = classification_result([[b"0.75:3:cat", b"0.25:1"], [b"1.5:0:a:b", b"0:2:dog"]])
    rows = result.classes("P")
    assert rows[0] == [Classification(0.75, 3, "cat"), Classification(0.25, 1, None)]
    assert rows[1][0] == Classification(1.5, 0, "a:b")
    score, index, label = rows[1][1]
    assert (score, index, label) == (0.0, 2, "dog")


def test_classes_of_a_non_classification_output_is_an_error() -> None:
    result = classification_result([[b"cat"]])
    with pytest.raises(ResponseFormatError, match=r"'P'.*not score:index"):
        result.classes("P")
    numeric = InferResult({"Y": np.zeros(2)}, datatypes={"Y": "FP64"}, model="m", target_model=None)
    with pytest.raises(ResponseFormatError, match="class_count"):
        numeric.classes("Y")
    with pytest.raises(KeyError, match="outputs: Y"):
        numeric["Z"]
