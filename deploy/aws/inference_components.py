"""SageMaker inference components and their copy autoscaling, as `deploy up` drives them.

One `InferenceComponents` holds the three clients a component needs: SageMaker
(Create/Update/Describe/List/DeleteInferenceComponent), Application Auto Scaling
(the copy count's scalable target and policies) and CloudWatch (the
scale-from-zero alarm). Clients come from a factory by service name, so tests
hand in botocore clients with a Stubber (moto has no inference-component API).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deploy.aws.session import AwsCallError, aws_call
from deploy.errors import AwsError

COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"
INVOCATIONS_PER_COPY = "SageMakerInferenceComponentInvocationsPerCopy"
NO_CAPACITY_METRIC = "NoCapacityInvocationFailures"
TARGET_POLICY = "InvocationsPerCopy"
STEP_POLICY = "ScaleFromZero"


def resource_id(name: str) -> str:
    return f"inference-component/{name}"


def alarm_name(name: str) -> str:
    return f"{name}-{NO_CAPACITY_METRIC}"


@dataclass(frozen=True)
class Requested:
    """What one component should run: the request's Specification and copy bounds."""

    name: str
    image: str
    artifact_url: str
    environment: Mapping[str, str]
    accelerators: int
    cpus: float
    memory_mb: int
    min_copies: int
    max_copies: int

    def specification(self) -> dict[str, Any]:
        requirements: dict[str, Any] = {
            "NumberOfCpuCoresRequired": self.cpus,
            "MinMemoryRequiredInMb": self.memory_mb,
        }
        if self.accelerators:
            requirements["NumberOfAcceleratorDevicesRequired"] = float(self.accelerators)
        return {
            "Container": {
                "Image": self.image,
                "ArtifactUrl": self.artifact_url,
                "Environment": dict(self.environment),
            },
            "ComputeResourceRequirements": requirements,
        }


@dataclass(frozen=True)
class Deployed:
    """One component as SageMaker and Application Auto Scaling describe it."""

    name: str
    status: str
    image: str
    artifact_url: str
    environment: Mapping[str, str]
    accelerators: int
    cpus: float
    memory_mb: int
    min_copies: int | None  # None: no scalable target
    max_copies: int | None
    failure_reason: str = ""
    current_copies: int | None = None  # RuntimeConfig, where SageMaker gives it
    desired_copies: int | None = None


@dataclass(frozen=True)
class Scaling:
    """Copy autoscaling: invocations per copy, the cooldowns, and where alarms notify."""

    invocations_per_copy: float
    scale_in_cooldown_s: int
    scale_out_cooldown_s: int
    alarm_topic: str | None


class InferenceComponents:
    def __init__(self, client: Callable[[str], Any]) -> None:
        self._client = client

    @property
    def _sm(self) -> Any:
        return self._client("sagemaker")

    @property
    def _aas(self) -> Any:
        return self._client("application-autoscaling")

    @property
    def _cw(self) -> Any:
        return self._client("cloudwatch")

    # -- reading --------------------------------------------------------------------------

    def names(self, endpoint: str) -> list[str]:
        """The components on `endpoint` (ListInferenceComponents)."""
        names: list[str] = []
        token: str | None = None
        while True:
            request: dict[str, Any] = {"EndpointNameEquals": endpoint}
            if token:
                request["NextToken"] = token
            with aws_call("sagemaker:ListInferenceComponents", where=f"endpoint {endpoint}"):
                page = self._sm.list_inference_components(**request)
            names.extend(item["InferenceComponentName"] for item in page["InferenceComponents"])
            token = page.get("NextToken")
            if not token:
                return sorted(names)

    def describe(self, name: str) -> dict[str, Any] | None:
        try:
            with aws_call(
                "sagemaker:DescribeInferenceComponent", where=f"inference component {name}"
            ):
                response: dict[str, Any] = self._sm.describe_inference_component(
                    InferenceComponentName=name
                )
        except AwsCallError as exc:
            if exc.code == "ValidationException" and "not" in exc.message.lower():
                return None
            raise
        return response

    def on_endpoint(self, endpoint: str) -> dict[str, Deployed]:
        """Each component on `endpoint`, with its copy bounds."""
        described = {name: self.describe(name) for name in self.names(endpoint)}
        found = {name: item for name, item in described.items() if item is not None}
        bounds: dict[str, tuple[int, int]] = {}
        if found:
            ids = [resource_id(name) for name in found]
            with aws_call("application-autoscaling:DescribeScalableTargets", where=ids[0]):
                targets = self._aas.describe_scalable_targets(
                    ServiceNamespace="sagemaker", ResourceIds=ids, ScalableDimension=COPY_DIMENSION
                )["ScalableTargets"]
            for target in targets:
                name = target["ResourceId"].split("/", 1)[1]
                bounds[name] = (int(target["MinCapacity"]), int(target["MaxCapacity"]))
        return {name: _deployed(item, bounds.get(name)) for name, item in found.items()}

    # -- changing -------------------------------------------------------------------------

    def create(self, endpoint: str, variant: str, wanted: Requested) -> None:
        with aws_call(
            "sagemaker:CreateInferenceComponent", where=f"inference component {wanted.name}"
        ):
            self._sm.create_inference_component(
                InferenceComponentName=wanted.name,
                EndpointName=endpoint,
                VariantName=variant,
                Specification=wanted.specification(),
                # One copy to start, even for a minimum of 0: the first rollout proves
                # the model loads; autoscaling scales it in afterwards.
                RuntimeConfig={"CopyCount": max(wanted.min_copies, 1)},
            )

    def update(self, wanted: Requested, deployment: Mapping[str, Any]) -> None:
        """A new Specification, rolled out copy batch by copy batch (`deployment`:
        the DeploymentConfig); the copy count stays autoscaling's."""
        with aws_call(
            "sagemaker:UpdateInferenceComponent", where=f"inference component {wanted.name}"
        ):
            self._sm.update_inference_component(
                InferenceComponentName=wanted.name,
                Specification=wanted.specification(),
                DeploymentConfig=dict(deployment),
            )

    def delete(self, name: str) -> None:
        """The component, its scalable target (and so its policies) and its alarm."""
        # A component whose creation failed was never scaled.
        with (
            aws_call("application-autoscaling:DeregisterScalableTarget", where=resource_id(name)),
            contextlib.suppress(self._aas.exceptions.ObjectNotFoundException),
        ):
            self._aas.deregister_scalable_target(
                ServiceNamespace="sagemaker",
                ResourceId=resource_id(name),
                ScalableDimension=COPY_DIMENSION,
            )
        with aws_call("cloudwatch:DeleteAlarms", where=alarm_name(name)):
            self._cw.delete_alarms(AlarmNames=[alarm_name(name)])
        with aws_call("sagemaker:DeleteInferenceComponent", where=f"inference component {name}"):
            self._sm.delete_inference_component(InferenceComponentName=name)

    def delete_all(
        self, endpoint: str, *, timeout_s: float, sleep: Callable[[float], None], poll_s: float
    ) -> list[str]:
        """Delete every component on `endpoint` and wait until SageMaker no longer lists
        them (the endpoint cannot be deleted before); their names."""
        names = self.names(endpoint)
        for name in names:
            self.delete(name)
        deadline = time.monotonic() + timeout_s
        pending = list(names)
        while pending:
            pending = [name for name in pending if self.describe(name) is not None]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise AwsError(
                    f"inference component(s) {', '.join(pending)} still being deleted after "
                    f"{timeout_s:.0f} s",
                    where=f"endpoint {endpoint}",
                    fix="SageMaker carries on; re-run `deploy down` later",
                )
            sleep(poll_s)
        return names

    def scale(self, wanted: Requested, scaling: Scaling) -> None:
        """Copy autoscaling: target tracking on invocations per copy; for a minimum of 0,
        the step policy and the alarm on NoCapacityInvocationFailures that add the
        first copy back (AWS's scale-from-zero recipe)."""
        rid = resource_id(wanted.name)
        with aws_call("application-autoscaling:RegisterScalableTarget", where=rid):
            self._aas.register_scalable_target(
                ServiceNamespace="sagemaker",
                ResourceId=rid,
                ScalableDimension=COPY_DIMENSION,
                MinCapacity=wanted.min_copies,
                MaxCapacity=wanted.max_copies,
            )
        with aws_call("application-autoscaling:PutScalingPolicy", where=rid):
            self._aas.put_scaling_policy(
                PolicyName=TARGET_POLICY,
                ServiceNamespace="sagemaker",
                ResourceId=rid,
                ScalableDimension=COPY_DIMENSION,
                PolicyType="TargetTrackingScaling",
                TargetTrackingScalingPolicyConfiguration={
                    "TargetValue": scaling.invocations_per_copy,
                    "PredefinedMetricSpecification": {"PredefinedMetricType": INVOCATIONS_PER_COPY},
                    "ScaleInCooldown": scaling.scale_in_cooldown_s,
                    "ScaleOutCooldown": scaling.scale_out_cooldown_s,
                },
            )
        if wanted.min_copies > 0:
            with aws_call("cloudwatch:DeleteAlarms", where=alarm_name(wanted.name)):
                self._cw.delete_alarms(AlarmNames=[alarm_name(wanted.name)])
            return
        with aws_call("application-autoscaling:PutScalingPolicy", where=rid):
            step = self._aas.put_scaling_policy(
                PolicyName=STEP_POLICY,
                ServiceNamespace="sagemaker",
                ResourceId=rid,
                ScalableDimension=COPY_DIMENSION,
                PolicyType="StepScaling",
                StepScalingPolicyConfiguration={
                    "AdjustmentType": "ChangeInCapacity",
                    "MetricAggregationType": "Maximum",
                    "Cooldown": 60,
                    "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}],
                },
            )
        actions = [step["PolicyARN"]] + ([scaling.alarm_topic] if scaling.alarm_topic else [])
        with aws_call("cloudwatch:PutMetricAlarm", where=alarm_name(wanted.name)):
            self._cw.put_metric_alarm(
                AlarmName=alarm_name(wanted.name),
                AlarmDescription=f"A request found no copy of {wanted.name}: add one",
                Namespace="AWS/SageMaker",
                MetricName=NO_CAPACITY_METRIC,
                Dimensions=[{"Name": "InferenceComponentName", "Value": wanted.name}],
                Statistic="Sum",
                Period=60,
                EvaluationPeriods=1,
                DatapointsToAlarm=1,
                # At or above 1: a single call wakes the model.
                Threshold=1,
                ComparisonOperator="GreaterThanOrEqualToThreshold",
                TreatMissingData="missing",
                AlarmActions=actions,
            )


def _deployed(item: Mapping[str, Any], bounds: tuple[int, int] | None) -> Deployed:
    specification = item.get("Specification", {})
    container = specification.get("Container", {})
    needs = specification.get("ComputeResourceRequirements", {})
    runtime = item.get("RuntimeConfig", {})
    return Deployed(
        name=item["InferenceComponentName"],
        status=item.get("InferenceComponentStatus", ""),
        image=container.get("DeployedImage", {}).get("SpecifiedImage", ""),
        artifact_url=container.get("ArtifactUrl", ""),
        environment=dict(container.get("Environment", {})),
        accelerators=int(needs.get("NumberOfAcceleratorDevicesRequired", 0)),
        cpus=float(needs.get("NumberOfCpuCoresRequired", 0)),
        memory_mb=int(needs.get("MinMemoryRequiredInMb", 0)),
        min_copies=bounds[0] if bounds else None,
        max_copies=bounds[1] if bounds else None,
        failure_reason=item.get("FailureReason", ""),
        current_copies=runtime.get("CurrentCopyCount"),
        desired_copies=runtime.get("DesiredCopyCount"),
    )
