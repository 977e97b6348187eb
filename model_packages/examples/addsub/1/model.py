"""OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1 (FP32, batched).

Tensors cross the backend through DLPack rather than as_numpy()/Tensor(name,
array): the backend stub's numpy interop is compiled against numpy 1 and
misreads numpy 2 arrays, while DLPack works with either.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            a = np.from_dlpack(pb_utils.get_input_tensor_by_name(request, "INPUT0"))
            b = np.from_dlpack(pb_utils.get_input_tensor_by_name(request, "INPUT1"))
            responses.append(
                pb_utils.InferenceResponse(
                    output_tensors=[
                        pb_utils.Tensor.from_dlpack("OUTPUT0", (a + b).astype(np.float32)),
                        pb_utils.Tensor.from_dlpack("OUTPUT1", (a - b).astype(np.float32)),
                    ]
                )
            )
        return responses
