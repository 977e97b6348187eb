"""IMAGE (UINT8, HWC) -> PIXELS (FP32, CHW), scaled to [0, 1] and normalised per channel."""

import numpy as np
import triton_python_backend_utils as pb_utils

# CIFAR-10 channel statistics, the usual normalisation for 32x32 RGB classifiers.
MEAN = np.array([0.4914, 0.4822, 0.4465], dtype=np.float32).reshape(1, 3, 1, 1)
STD = np.array([0.2470, 0.2435, 0.2616], dtype=np.float32).reshape(1, 3, 1, 1)


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            image = pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy()
            pixels = image.astype(np.float32).transpose(0, 3, 1, 2) / 255.0
            pixels = np.ascontiguousarray((pixels - MEAN) / STD, dtype=np.float32)
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("PIXELS", pixels)])
            )
        return responses
