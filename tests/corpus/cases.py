"""The corpus: what each published repository is, where it came from, and what must happen.

Every case is a model repository copied from public AWS or NVIDIA material
(`repos/<case>/`, attribution in each file) and the client code published with
it (`clients/<case>.py`). Each goes through `deploy validate` (0 errors: these
are configs Triton loads, so SageMaker serves them), `deploy package` and the
local endpoint, where its client call either answers what the model computes
when run directly (`references`) or is refused with a message that names why
(`refused`: the backend that cannot run here, the missing BLS callee, the
package the SageMaker image lacks and its fix, ...).

Served cases are also called through the SDK (`deploy.client`) with the
published call's inputs. `gaps` names the stages (validate, package, serve,
sdk) that fail today and why; the test marks them `xfail(strict=True)`, so a
fix makes them pass and the entry must go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.corpus import reference as ref
from tests.corpus import standins as make

STAGES = ("validate", "package", "serve", "sdk")


@dataclass(frozen=True)
class Case:
    name: str  # the folder under repos/ and the module under clients/
    source: str  # where the repository and client come from
    served: bool = True  # False: no published call can run here (validate and package only)
    # Also served straight from its repository folder (`deploy serve REPO`, packaged on the fly)
    served_from_repository: bool = False
    instance: str | None = None  # the instance type the source deploys on (`--instance`)
    standins: tuple[Callable[[Path], None], ...] = ()
    references: Mapping[str, ref.Reference] = field(default_factory=dict)  # model -> outputs
    # Served when empty. Otherwise the client call must fail with a message in which each
    # entry appears as a word ("A|B": either): ("TensorRT",), ("torch", "EXECUTION_ENV_PATH").
    refused: tuple[str, ...] = ()
    # The refusal must also say what to do ("fix: ..."), not only relay Triton's load error.
    refusal_fix: bool = True
    warnings: tuple[str, ...] = ()  # each must appear in some `deploy validate` warning
    gaps: Mapping[str, str] = field(default_factory=dict)  # stage -> why it fails today

    @property
    def repo(self) -> Path:
        return Path(__file__).resolve().parent / "repos" / self.name


def _add_sub(given: ref.Arrays) -> ref.Arrays:
    a, b = given["INPUT0"], given["INPUT1"]
    return {"OUTPUT0": a + b, "OUTPUT1": a - b}


def _identity(prefix_in: str, prefix_out: str) -> Callable[[ref.Arrays], ref.Arrays]:
    def run(given: ref.Arrays) -> ref.Arrays:
        return {name.replace(prefix_in, prefix_out): value for name, value in given.items()}

    return run


def _simple_identity(given: ref.Arrays) -> ref.Arrays:
    # BYTES come back as bytes objects, whatever numpy type the client sent them as
    return {"OUTPUT0": np.vectorize(bytes, otypes=[object])(given["INPUT0"])}


AWS = "aws/amazon-sagemaker-examples"
SERVER = "triton-inference-server/server docs/examples/model_repository"
PYTHON_BACKEND = "triton-inference-server/python_backend examples"
TUTORIALS = "triton-inference-server/tutorials"

RESNET_INPUT = ("INPUT__0",)

CASES: tuple[Case, ...] = (
    # -- AWS's SageMaker Triton notebooks --------------------------------------------
    Case(
        "aws_mme_gpu_resnet_pt",
        f"{AWS} archived/mme-on-gpu/resnet50_mme_with_gpu.ipynb (TorchScript ResNet, MME GPU)",
        instance="ml.g4dn.4xlarge",
        standins=(make.torch_image_classifier("resnet/1/model.pt"),),
        references={"resnet": ref.torchscript("resnet/1/model.pt", ["INPUT__0"], ["OUTPUT__0"])},
    ),
    Case(
        "aws_mme_gpu_resnet_trt",
        f"{AWS} archived/mme-on-gpu/resnet50_mme_with_gpu.ipynb (TensorRT ResNet with warmup)",
        instance="ml.g4dn.4xlarge",
        standins=(make.placeholder("resnet/1/model.plan"),),
        refused=("TensorRT",),
    ),
    Case(
        "aws_mme_onnx_resnet",
        f"{AWS} archived/resnet_onnx_pytorch_tensorRT-backend/"
        "resnet_onnx_pytorch_tensorRT_backend_MME_triton.ipynb (ONNX ResNet, MME GPU)",
        instance="ml.g4dn.4xlarge",
        standins=(
            make.onnx_image_classifier("resnet/1/model.onnx", "input", "output", nchw_output=False),
        ),
        references={"resnet": ref.onnx("resnet/1/model.onnx")},
    ),
    Case(
        "aws_mme_cpu_jit",
        f"{AWS} archived/jit_trace/Triton_CPU_JIT_MME.ipynb (TorchScript detector, MME CPU, "
        "3 CPU instances, variable-size INT64/FP32 outputs)",
        instance="ml.m5.large",
        standins=(make.torch_detector("jit-resnet-v1-model/1/model.pt"),),
        references={
            "jit-resnet-v1-model": ref.torchscript(
                "jit-resnet-v1-model/1/model.pt",
                ["INPUT__0"],
                ["OUTPUT__0", "OUTPUT__1", "OUTPUT__2"],
            )
        },
    ),
    Case(
        "aws_nlp_bert_pt",
        f"{AWS} deploy_and_monitor/sm-triton_nlp_bert (TorchScript BERT, outputs OUTPUT__0 "
        "and 1634__1, KIND_GPU, dynamic batching)",
        instance="ml.g4dn.4xlarge",
        standins=(make.torch_bert("bert/1/model.pt"),),
        references={
            "bert": ref.torchscript(
                "bert/1/model.pt", ["INPUT__0", "INPUT__1"], ["OUTPUT__0", "1634__1"]
            )
        },
    ),
    Case(
        "aws_bert_ensemble",
        f"{AWS} deploy_and_monitor/sm-triton_mme_gpu_ensemble_dali/ensemble_hf (python "
        "tokenizer + TensorRT BERT + python pooling, each python step with its "
        "EXECUTION_ENV_PATH)",
        instance="ml.g4dn.4xlarge",
        standins=(
            make.placeholder("bert-trt/1/model.plan"),
            make.conda_pack("preprocess/processing_env.tar.gz"),
            make.conda_pack("postprocess/processing_env.tar.gz"),
            make.version_folder("ensemble"),
        ),
        refused=("TensorRT",),
    ),
    Case(
        "aws_dali_tf_ensemble",
        f"{AWS} deploy_and_monitor/sm-triton_mme_gpu_ensemble_dali (DALI + TensorFlow "
        "GraphDef inception ensemble)",
        instance="ml.g4dn.4xlarge",
        standins=(
            make.placeholder("dali/1/model.dali"),
            make.placeholder("inception_graphdef/1/model.graphdef"),
            make.labels("inception_graphdef/inception_labels.txt", 1001),
            make.version_folder("ensemble_dali_inception"),
        ),
        refused=("DALI|TensorFlow",),
    ),
    Case(
        "aws_dali",
        f"{AWS} deploy_and_monitor/sm-triton_mme_gpu_ensemble_dali (the ensemble's DALI "
        "step, its own TargetModel after `deploy package`)",
        instance="ml.g4dn.4xlarge",
        standins=(make.placeholder("dali/1/model.dali"),),
        refused=("DALI",),
    ),
    Case(
        "aws_fil_xgboost",
        f"{AWS} archived/xgboost_ensemble_python-fil-backend/mme_triton_xgb_fil_ensemble.ipynb "
        "(FIL backend, model_type xgboost_json)",
        instance="ml.g4dn.2xlarge",
        standins=(make.write_json("fil/1/xgboost.json", {"learner": {}, "version": [1, 7, 6]}),),
        refused=("FIL",),
    ),
    Case(
        "aws_sd_workshop",
        f"{AWS} archived/workshops/lab2-stable-diffusion/models (setup_conda, whose "
        "initialize copies the conda-pack archive to /tmp/conda, and sd_base, whose "
        "EXECUTION_ENV_PATH is that absolute path; MME, sm-triton-python-stablediff.ipynb)",
        instance="ml.g5.xlarge",
        served=False,  # sd_base needs diffusers and a GPU; setup_conda writes to /tmp/conda
        standins=(make.conda_pack("setup_conda/sd_env.tar.gz"),),
        warnings=("EXECUTION_ENV_PATH",),
    ),
    # -- python_backend examples -------------------------------------------------------
    Case(
        "pb_add_sub",
        f"{PYTHON_BACKEND}/add_sub",
        references={"add_sub": ref.numpy_function(_add_sub)},
    ),
    Case(
        "pb_auto_complete",
        f"{PYTHON_BACKEND}/auto_complete (no config.pbtxt; model.py defines auto_complete_config)",
        served_from_repository=True,
        references={
            "nobatch_auto_complete": ref.numpy_function(_add_sub),
            "batch_auto_complete": ref.numpy_function(_add_sub),
        },
    ),
    Case(
        "pb_bls_async",
        f"{PYTHON_BACKEND}/bls (async: bls_async calls the pytorch and add_sub models)",
        refused=("pytorch|add_sub",),
        refusal_fix=False,  # Triton's run-time error, as SageMaker relays it
        warnings=("add_sub", "pytorch", "torch"),
    ),
    Case(
        "pb_decoupled",
        f"{PYTHON_BACKEND}/decoupled (square_int32, decoupled transaction policy)",
        refused=("decoupled",),
        refusal_fix=False,  # Triton's HTTP endpoint refuses it, as on SageMaker
        warnings=("decoupled",),
    ),
    Case(
        "pb_pytorch",
        f"{PYTHON_BACKEND}/pytorch (python model importing torch, which the SageMaker "
        "Triton image's Python lacks)",
        refused=("torch", "EXECUTION_ENV_PATH|execution environment"),
        warnings=("torch",),
    ),
    Case(
        "pb_preprocessing",
        f"{PYTHON_BACKEND}/preprocessing (python preprocess + TensorRT ResNet50 ensemble)",
        standins=(
            make.placeholder("resnet50_trt/1/model.plan"),
            make.labels("resnet50_trt/labels.txt", 1000),
            make.version_folder("ensemble_python_resnet50"),
        ),
        refused=("TensorRT",),
        warnings=("torchvision",),
    ),
    # -- server docs/examples/model_repository ----------------------------------------
    Case(
        "srv_simple",
        f"{SERVER}/simple (ONNX INT32 add/sub)",
        standins=(make.onnx_add_sub("simple/1/model.onnx", "INT32"),),
        references={"simple": ref.onnx("simple/1/model.onnx")},
    ),
    Case(
        "srv_simple_string",
        f"{SERVER}/simple_string (ONNX STRING add/sub)",
        standins=(make.onnx_add_sub("simple_string/1/model.onnx", "STRING"),),
        references={"simple_string": ref.onnx_strings("simple_string/1/model.onnx")},
    ),
    Case(
        "srv_simple_identity",
        f"{SERVER}/simple_identity (python BYTES identity)",
        references={"simple_identity": ref.numpy_function(_simple_identity)},
    ),
    Case(
        "srv_simple_sequence",
        f"{SERVER}/simple_sequence (ONNX, sequence batcher START/READY controls)",
        standins=(make.onnx_sequence("simple_sequence/1/model.onnx", dyna=False),),
        references={
            "simple_sequence": ref.onnx_sequence(
                "simple_sequence/1/model.onnx", {"START": "START", "READY": "READY"}
            )
        },
    ),
    Case(
        "srv_simple_dyna_sequence",
        f"{SERVER}/simple_dyna_sequence (ONNX, START/END/READY/CORRID controls, 2 instances)",
        standins=(make.onnx_sequence("simple_dyna_sequence/1/model.onnx", dyna=True),),
        references={
            "simple_dyna_sequence": ref.onnx_sequence(
                "simple_dyna_sequence/1/model.onnx",
                {"START": "START", "END": "END", "READY": "READY", "CORRID": "CORRID"},
            )
        },
    ),
    Case(
        "srv_densenet_onnx",
        f"{SERVER}/densenet_onnx (ONNX, max_batch_size 0, input and output reshape, labels, "
        "top-3 classification)",
        standins=(
            make.onnx_image_classifier(
                "densenet_onnx/1/model.onnx", "data_0", "fc6_1", nchw_output=True
            ),
            make.labels("densenet_onnx/densenet_labels.txt", 1000),
        ),
        references={
            "densenet_onnx": ref.classification(
                ref.reshaped(
                    ref.onnx("densenet_onnx/1/model.onnx", {"data_0": (1, 3, 224, 224)}),
                    {"fc6_1": (1000,)},
                ),
                "fc6_1",
                3,
                "densenet_onnx/densenet_labels.txt",
                batched=False,
            )
        },
    ),
    # -- triton-inference-server/tutorials ----------------------------------------------
    Case(
        "tut_quick_deploy_pytorch",
        f"{TUTORIALS} Quick_Deploy/PyTorch (TorchScript ResNet50, max_batch_size 0, input and "
        "output reshape, all 1000 classes)",
        standins=(make.torch_image_classifier("resnet50/1/model.pt"),),
        references={
            "resnet50": ref.classification(
                ref.torchscript(
                    "resnet50/1/model.pt",
                    ["input__0"],
                    ["output__0"],
                    reshape={"input__0": (1, 3, 224, 224)},
                ),
                "output__0",
                1000,
                batched=False,
            )
        },
    ),
    Case(
        "tut_quick_deploy_tensorflow",
        f"{TUTORIALS} Quick_Deploy/TensorFlow (SavedModel ResNet50)",
        standins=(make.placeholder("resnet50/1/model.savedmodel/saved_model.pb"),),
        refused=("TensorFlow",),
    ),
    Case(
        "tut_part1_ocr",
        f"{TUTORIALS} Conceptual_Guide/Part_1-model_deployment (ONNX text detection and "
        "recognition, backend: onnxruntime without platform, tensor names with ':', '/', '.')",
        standins=(
            make.onnx_text_detection("text_detection/1/model.onnx"),
            make.onnx_text_recognition("text_recognition/1/model.onnx"),
        ),
        references={
            "text_detection": ref.onnx("text_detection/1/model.onnx"),
            "text_recognition": ref.onnx("text_recognition/1/model.onnx"),
        },
    ),
    Case(
        "tut_part2_dynamic_batching",
        f"{TUTORIALS} Conceptual_Guide/Part_2-improving_resource_utilization (ONNX text "
        "recognition, max_batch_size 8, dynamic batching, 2 GPU instances; 16 concurrent "
        "requests of batch 2)",
        standins=(make.onnx_text_recognition("text_recognition/1/model.onnx"),),
        references={"text_recognition": ref.onnx("text_recognition/1/model.onnx")},
    ),
    Case(
        "tut_part4_ort_trt",
        f"{TUTORIALS} Conceptual_Guide/Part_4-inference_acceleration/sample_configs/"
        "ORT_TRT_config.pbtxt (TensorRT execution accelerator, graph optimisation, warmup)",
        standins=(make.onnx_text_recognition("text_recognition/1/model.onnx"),),
        references={"text_recognition": ref.onnx("text_recognition/1/model.onnx")},
    ),
    Case(
        "tut_part4_ort_openvino",
        f"{TUTORIALS} Conceptual_Guide/Part_4-inference_acceleration/sample_configs/"
        "ORT_openvino_config.pbtxt (OpenVINO CPU execution accelerator)",
        standins=(make.onnx_text_recognition("text_recognition/1/model.onnx"),),
        references={"text_recognition": ref.onnx("text_recognition/1/model.onnx")},
    ),
    Case(
        "tut_part4_ort_cuda_ep",
        f"{TUTORIALS} Conceptual_Guide/Part_4-inference_acceleration/sample_configs/"
        "ORT_cuda_ep_config.pbtxt (CUDA execution provider parameters)",
        standins=(make.onnx_text_recognition("text_recognition/1/model.onnx"),),
        references={"text_recognition": ref.onnx("text_recognition/1/model.onnx")},
    ),
    Case(
        "tut_part7_iterative",
        f"{TUTORIALS} Conceptual_Guide/Part_7-iterative_scheduling/iterative-gpt2 (python, "
        "iterative sequence batching; auto_complete_config adds the tensors and makes it "
        "decoupled; imports torch and transformers). `deploy package` writes the completed "
        "config, which loads, and the import of torch fails as on SageMaker's image",
        refused=("torch", "EXECUTION_ENV_PATH|execution environment"),
        warnings=("decoupled", "transformers"),
    ),
    Case(
        "tut_data_pipelines",
        f"{TUTORIALS} Feature_Guide/Data_Pipelines (python two-step ensemble: STRING, UINT8, "
        "INT8, FP32 image, BOOL)",
        standins=(make.version_folder("ensemble_model"),),
        references={"ensemble_model": ref.numpy_function(_identity("_input_", "_output_"))},
    ),
    Case(
        "tut_identity",
        f"{TUTORIALS} Triton_Inference_Server_Python_API/identity-models (complete config with "
        "optional inputs; model.py also defines auto_complete_config)",
        served_from_repository=True,
        references={"identity": ref.numpy_function(_identity("_input", "_output"))},
    ),
    Case(
        "tut_llama2_vllm",
        f"{TUTORIALS} Popular_Models_Guide/Llama2/llama2vllm (vLLM backend, config completed "
        "by the backend)",
        standins=(
            # The published model.json (JSON holds no attribution comment, so it is written here):
            # tutorials Popular_Models_Guide/Llama2/llama2vllm/1/model.json @ e84895253165,
            # BSD-3-Clause, NVIDIA CORPORATION & AFFILIATES.
            make.write_json(
                "llama2vllm/1/model.json",
                {
                    "model": "meta-llama/Llama-2-7b-hf",
                    "trust_remote_code": True,
                    "download_dir": "/opt/tritonserver/model_repository/llama2vllm/hf-cache",
                    "gpu_memory_utilization": 0.5,
                },
            ),
        ),
        refused=("vLLM",),
    ),
)

BY_NAME = {case.name: case for case in CASES}
