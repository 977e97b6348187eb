"""Stand-in for the python backend's `triton_python_backend_utils` during auto-completion.

Only what `auto_complete_config` uses is real: `ModelConfig`, with the API and
checks of triton-inference-server/python_backend
`src/resources/triton_python_backend_utils.py` (`as_dict`,
`set_max_batch_size`, `set_dynamic_batching`, `add_input`, `add_output`,
`set_model_transaction_policy`), and `get_model_dir`. Any other name resolves
to an inert class so that a model's module-level references import cleanly.
"""

from __future__ import annotations

import json
from typing import Any

# Set by the stub before the model is imported (the stub binds it in Triton too).
_model_dir = ""

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2


def get_model_dir() -> str:
    return _model_dir


def __getattr__(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (), {"__module__": __name__})


class ModelConfig:
    """The model configuration `auto_complete_config` receives and returns.

    Holds Triton's JSON form of the config; only `max_batch_size`, `input`,
    `output`, the scheduler and `model_transaction_policy` are taken back.
    """

    def __init__(self, model_config: str) -> None:
        self._model_config: dict[str, Any] = json.loads(model_config)

    def as_dict(self) -> dict[str, Any]:
        return self._model_config

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size: int) -> None:
        configured = int(self._model_config.get("max_batch_size", 0))
        if configured > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {configured}, but in "
                f"auto-complete-config function for model '{self._name()}' specified "
                f"max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but "
                    f"auto-complete-config function for model '{self._name()}' tries to set "
                    "scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict[str, Any]) -> None:
        self._add("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output: dict[str, Any]) -> None:
        self._add("output", output, ("name", "data_type", "dims"))

    def _add(self, group: str, tensor: dict[str, Any], allowed: tuple[str, ...]) -> None:
        name = tensor.get("name", "")
        for key in tensor:
            if key not in allowed:
                raise ValueError(
                    f"{group} '{name}' in auto-complete-config function for model "
                    f"'{self._name()}' contains property other than "
                    + ", ".join(f"'{a}'" for a in allowed)
                    + "."
                )
        for required in ("name", "data_type", "dims"):
            if required not in tensor:
                raise ValueError(
                    f"{group} '{name}' in auto-complete-config function for model "
                    f"'{self._name()}' is missing '{required}' property."
                )
        entries: list[dict[str, Any]] = self._model_config.setdefault(group, [])
        for current in entries:
            if current.get("name") != tensor["name"]:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            if current_type != "TYPE_INVALID" and current_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{self._name()}', configuration expects datatype "
                    f"{current_type} for {group} '{name}', model provides {tensor['data_type']}"
                )
            if current.get("dims") and current["dims"] != tensor["dims"]:
                raise ValueError(
                    f"model '{self._name()}', tensor '{name}': the model expects dims "
                    f"{tensor['dims']} but the model configuration specifies dims "
                    f"{current['dims']}"
                )
            if (
                "optional" in current
                and "optional" in tensor
                and current["optional"] != tensor["optional"]
            ):
                raise ValueError(
                    f"model '{self._name()}', tensor '{name}': the model expects optional "
                    f"{tensor['optional']} but the model configuration specifies optional "
                    f"{current['optional']}"
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        entries.append(tensor)

    def set_model_transaction_policy(self, transaction_policy_dict: dict[str, Any]) -> None:
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model "
                    f"'{self._name()}' contains property other than 'decoupled'."
                )
        policy: dict[str, Any] = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model "
                    f"'{self._name()}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = wanted
