"""Content-addressed endpoint configs in synthesized templates."""

from __future__ import annotations

import copy
from typing import Any

from deploy.lifecycle.templates import pin_endpoint_configs


def template(instance_type: str) -> dict[str, Any]:
    return {
        "Resources": {
            "Model": {"Type": "AWS::SageMaker::Model", "Properties": {}},
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "ProductionVariants": [
                        {
                            "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                            "InstanceType": instance_type,
                        }
                    ]
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "DependsOn": ["Config", "Model"],
                "Properties": {
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}
                },
            },
            "Alarm": {"Type": "AWS::CloudWatch::Alarm", "DependsOn": "Config", "Properties": {}},
        },
        "Outputs": {
            "ConfigName": {"Value": {"Ref": "Config"}},
            "Dotted": {"Value": {"Fn::GetAtt": "Config.EndpointConfigName"}},
        },
    }


def config_id(pinned: dict[str, Any]) -> str:
    (name,) = [
        key
        for key, value in pinned["Resources"].items()
        if value["Type"] == "AWS::SageMaker::EndpointConfig"
    ]
    return name


def test_config_id_follows_its_properties_and_references_follow_it() -> None:
    original = template("ml.m5.xlarge")
    before = copy.deepcopy(original)
    pinned = pin_endpoint_configs(original)
    assert original == before  # input untouched
    name = config_id(pinned)
    assert name.startswith("Config") and name != "Config"
    endpoint = pinned["Resources"]["Endpoint"]
    assert endpoint["Properties"]["EndpointConfigName"] == {
        "Fn::GetAtt": [name, "EndpointConfigName"]
    }
    assert endpoint["DependsOn"] == [name, "Model"]
    assert pinned["Resources"]["Alarm"]["DependsOn"] == name
    assert pinned["Outputs"]["ConfigName"]["Value"] == {"Ref": name}
    assert pinned["Outputs"]["Dotted"]["Value"] == {"Fn::GetAtt": f"{name}.EndpointConfigName"}
    # Unrelated references are untouched.
    variant = pinned["Resources"][name]["Properties"]["ProductionVariants"][0]
    assert variant["ModelName"] == {"Fn::GetAtt": ["Model", "ModelName"]}


def test_same_properties_same_id_other_properties_other_id() -> None:
    a = config_id(pin_endpoint_configs(template("ml.m5.xlarge")))
    assert a == config_id(pin_endpoint_configs(template("ml.m5.xlarge")))
    assert a != config_id(pin_endpoint_configs(template("ml.g5.xlarge")))


def test_templates_without_endpoint_configs_pass_through() -> None:
    plain = {"Resources": {"B": {"Type": "AWS::S3::Bucket"}}}
    assert pin_endpoint_configs(plain) is plain
