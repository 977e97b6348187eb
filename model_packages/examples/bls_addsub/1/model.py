"""BLS: calls `addsub` on (2A, 2B) and returns SUM = 2A + 2B, DIFF = 2A - 2B.

On a SageMaker multi-model endpoint Triton loads only the archive's own model,
so `deploy package` bundles the models named in the `deploy.dependencies`
parameter under `<this model>/deps/<name>/` together with `<name>.json`, the
dependency's config in Triton's JSON form. `initialize` loads each bundled
dependency under its own name; in a plain model repository (no `deps/`)
Triton already serves it.

Triton writes the `files` of `load_model` to a folder of its own, which is the
dependency's `$$TRITON_MODEL_DIRECTORY`; the config names the dependency's
execution environment (built from its requirements.txt) in the bundle instead,
where it stays. Only the model's own files are passed: python_backend keeps
just one of several `files` intact (`ModelLoader::LoadModel` points every
file at one reused buffer), and the environment can be large.
"""

import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


NOT_PASSED = ("config.pbtxt", "requirements.txt", "python-env.tar.gz")


def load_bundled_dependencies(args):
    model_dir = Path(args["model_repository"])
    config = json.loads(args["model_config"])
    names = config.get("parameters", {}).get("deploy.dependencies", {}).get("string_value", "")
    for name in filter(None, (part.strip() for part in names.split(","))):
        bundle = model_dir / "deps" / name
        if not bundle.is_dir():
            continue
        files = {
            f"file:{path.relative_to(bundle).as_posix()}": path.read_bytes()
            for path in sorted(bundle.rglob("*"))
            if path.is_file() and path.relative_to(bundle).parts[0] not in NOT_PASSED
        }
        dependency_config = (model_dir / "deps" / f"{name}.json").read_text(encoding="utf-8")
        dependency_config = dependency_config.replace("$$TRITON_MODEL_DIRECTORY", str(bundle))
        pb_utils.load_model(model_name=name, config=dependency_config, files=files)


class TritonPythonModel:
    def initialize(self, args):
        load_bundled_dependencies(args)

    def execute(self, requests):
        responses = []
        for request in requests:
            a = pb_utils.get_input_tensor_by_name(request, "A").as_numpy()
            b = pb_utils.get_input_tensor_by_name(request, "B").as_numpy()
            doubled_a = (a * 2).astype(np.float32)
            doubled_b = (b * 2).astype(np.float32)
            call = pb_utils.InferenceRequest(
                model_name="addsub",
                requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[
                    pb_utils.Tensor("INPUT0", doubled_a),
                    pb_utils.Tensor("INPUT1", doubled_b),
                ],
            )
            result = call.exec()
            if result.has_error():
                raise pb_utils.TritonModelException(result.error().message())
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor(
                            "SUM",
                            pb_utils.get_output_tensor_by_name(result, "OUTPUT0").as_numpy(),
                        ),
                        pb_utils.Tensor(
                            "DIFF",
                            pb_utils.get_output_tensor_by_name(result, "OUTPUT1").as_numpy(),
                        ),
                    ]
                )
            )
        return responses
