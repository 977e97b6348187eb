"""The calls of AWS's "Triton BERT (PyTorch) on SageMaker" notebook: a v2 JSON body sent as
application/octet-stream, then a binary body built by tritonclient with both outputs binary.

Source: github.com/aws/amazon-sagemaker-examples,
deploy_and_monitor/sm-triton_nlp_bert/sm-triton_nlp_bert.ipynb @ 2d519b52c3a2 (Apache-2.0;
Copyright Amazon.com, Inc. or its affiliates), cells [13], [26] and [28]. Changes: the endpoint
name is a parameter and TargetModel is added (the notebook serves the model alone, on a single-model
endpoint); `tokenize_text` returns seeded token ids instead of downloading BertTokenizer.
"""

import json

import numpy as np
import tritonclient.http as httpclient


def tokenize_text(text):
    rng = np.random.default_rng(len(text))
    length = min(len(text.split()) + 2, 128)
    input_ids = [101, *rng.integers(1000, 30000, size=length - 2).tolist(), 102]
    input_ids += [0] * (128 - length)
    attention_mask = [1] * length + [0] * (128 - length)
    return input_ids, attention_mask


def _get_sample_tokenized_text_binary(text, input_names, output_names):
    inputs = []
    outputs = []
    inputs.append(httpclient.InferInput(input_names[0], [1, 128], "INT32"))
    inputs.append(httpclient.InferInput(input_names[1], [1, 128], "INT32"))
    indexed_tokens, attention_mask = tokenize_text(text)

    indexed_tokens = np.array(indexed_tokens, dtype=np.int32)
    indexed_tokens = np.expand_dims(indexed_tokens, axis=0)
    inputs[0].set_data_from_numpy(indexed_tokens, binary_data=True)

    attention_mask = np.array(attention_mask, dtype=np.int32)
    attention_mask = np.expand_dims(attention_mask, axis=0)
    inputs[1].set_data_from_numpy(attention_mask, binary_data=True)

    outputs.append(httpclient.InferRequestedOutput(output_names[0], binary_data=True))
    outputs.append(httpclient.InferRequestedOutput(output_names[1], binary_data=True))
    request_body, header_length = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs
    )
    return request_body, header_length


def get_sample_tokenized_text_binary_pt(text):
    return _get_sample_tokenized_text_binary(
        text, ["INPUT__0", "INPUT__1"], ["OUTPUT__0", "1634__1"]
    )


def run(client, endpoint_name, target_models):
    calls = []
    text_triton = (
        "Triton Inference Server provides a cloud and edge inferencing solution optimized "
        "for both CPUs and GPUs."
    )
    input_ids, attention_mask = tokenize_text(text_triton)

    payload = {
        "inputs": [
            {"name": "INPUT__0", "shape": [1, 128], "datatype": "INT32", "data": input_ids},
            {"name": "INPUT__1", "shape": [1, 128], "datatype": "INT32", "data": attention_mask},
        ]
    }
    response = client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/octet-stream",
        Body=json.dumps(payload),
        TargetModel=target_models["bert"],
    )
    document = json.loads(response["Body"].read().decode("utf8"))
    calls.append(
        {
            "model": "bert",
            "inputs": {
                "INPUT__0": np.array([input_ids], np.int32),
                "INPUT__1": np.array([attention_mask], np.int32),
            },
            "outputs": {
                o["name"]: np.array(o["data"], np.float32).reshape(o["shape"])
                for o in document["outputs"]
            },
        }
    )

    text_sm = (
        "Amazon SageMaker helps data scientists and developers to prepare, build, train, and "
        "deploy high-quality machine learning (ML) models quickly by bringing together a broad "
        "set of capabilities purpose-built for ML."
    )
    request_body, header_length = get_sample_tokenized_text_binary_pt(text_sm)
    response = client.invoke_endpoint(
        EndpointName=endpoint_name,
        ContentType="application/vnd.sagemaker-triton.binary+json;json-header-size={}".format(
            header_length
        ),
        Body=request_body,
        TargetModel=target_models["bert"],
    )
    # Parse json header size length from the response
    header_length_prefix = "application/vnd.sagemaker-triton.binary+json;json-header-size="
    header_length_str = response["ContentType"][len(header_length_prefix) :]
    # Read response body
    result = httpclient.InferenceServerClient.parse_response_body(
        response["Body"].read(), header_length=int(header_length_str)
    )
    input_ids, attention_mask = tokenize_text(text_sm)
    calls.append(
        {
            "model": "bert",
            "inputs": {
                "INPUT__0": np.array([input_ids], np.int32),
                "INPUT__1": np.array([attention_mask], np.int32),
            },
            "outputs": {
                "OUTPUT__0": result.as_numpy("OUTPUT__0"),
                "1634__1": result.as_numpy("1634__1"),
            },
        }
    )
    return calls
