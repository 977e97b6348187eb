"""PyTriton's exception classes (same names and hierarchy as `pytriton.exceptions`)."""


class PyTritonError(Exception):
    """Generic PyTriton exception."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    @property
    def message(self) -> str:
        return self._message


class PyTritonValidationError(PyTritonError):
    """A value failed PyTriton's validation."""


class PyTritonInvalidOperationError(PyTritonError):
    """An operation that is not allowed in the current state."""


class PyTritonBadParameterError(PyTritonError):
    """A bad parameter was passed."""


class PyTritonModelConfigError(PyTritonError):
    """A model configuration that cannot be used."""


class PyTritonUnrecoverableError(PyTritonError):
    """The inference callable cannot go on (PyTriton stops its server on it)."""


class PyTritonRuntimeError(PyTritonError):
    """An error while running the inference callable."""
