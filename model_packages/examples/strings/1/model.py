"""TEXT (BYTES) -> UPPER (upper-cased, BYTES) and LENGTHS (characters, INT32)."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            decoded = [item.decode("utf-8") if isinstance(item, bytes) else str(item) for item in text.reshape(-1)]
            upper = np.array([s.upper().encode("utf-8") for s in decoded], dtype=np.object_)
            lengths = np.array([len(s) for s in decoded], dtype=np.int32)
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor("UPPER", upper.reshape(text.shape)),
                        pb_utils.Tensor("LENGTHS", lengths.reshape(text.shape)),
                    ]
                )
            )
        return responses
