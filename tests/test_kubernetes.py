"""The Kubernetes manifests (deploy/kubernetes) as a cluster would read them: every resource the
kustomization lists validates strictly against the Kubernetes API schemas, and the pieces that
refer to each other (autoscalers, disruption budgets, network policies, Services) agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"
# The oldest Kubernetes the manifests support (native gRPC probes are GA from 1.27).
KUBERNETES_VERSION = "1.30.0"


def resources() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    found = []
    for name in kustomization["resources"]:
        found.extend(doc for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc)
    return found


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in resources() if doc["kind"] == kind}


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return deployment["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_every_manifest_file_is_listed_in_the_kustomization() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    on_disk = {path.name for path in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(kustomization["resources"])


@pytest.mark.parametrize("resource", resources(), ids=lambda doc: f"{doc['kind']}/{doc['metadata']['name']}")
def test_resource_validates_strictly_against_the_kubernetes_schemas(resource: dict[str, Any]) -> None:
    kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def test_a_misspelt_field_is_refused_by_the_strict_validation() -> None:
    # The check above can fail: an unknown field is an error, not ignored.
    deployment = by_kind("Deployment")["agentmesh-executor"]
    broken = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("name", ["agentmesh-executor", "agentmesh-gateway"])
def test_stateless_services_are_scaled_and_protected(name: str) -> None:
    deployment = by_kind("Deployment")[name]
    autoscaler = by_kind("HorizontalPodAutoscaler")[name]
    budget = by_kind("PodDisruptionBudget")[name]
    assert autoscaler["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": name,
    }
    assert autoscaler["spec"]["minReplicas"] >= 2
    # The autoscaler owns the replica count; a fixed one would be reset on every apply.
    assert "replicas" not in deployment["spec"]
    assert selects(budget["spec"]["selector"]["matchLabels"], pod_labels(deployment))
    assert budget["spec"]["minAvailable"] < autoscaler["spec"]["minReplicas"]


def test_executors_get_longer_to_stop_than_their_drain_and_handover() -> None:
    pod = by_kind("Deployment")["agentmesh-executor"]["spec"]["template"]["spec"]
    env = {item["name"]: item.get("value") for item in pod["containers"][0]["env"]}
    # Past the drain grace, runs are handed over (up to 5 s) and the outboxes get their cleanup
    # time (5 s): a kill before that would leave runs to wait for their leases to expire.
    handover_and_closing = 10
    assert pod["terminationGracePeriodSeconds"] > (
        float(env["AGENTMESH_EXECUTOR_SHUTDOWN_GRACE_SECONDS"]) + handover_and_closing
    )


def test_only_the_mesh_services_that_call_them_reach_the_internal_services() -> None:
    deployments = by_kind("Deployment")
    policies = by_kind("NetworkPolicy")
    deny = policies["agentmesh-default-deny-ingress"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    callers = {
        "agentmesh-registry": {"agentmesh-gateway", "agentmesh-executor", "agentmesh-memory"},
        "agentmesh-memory": {"agentmesh-gateway", "agentmesh-executor"},
        "agentmesh-executor": {"agentmesh-gateway", "agentmesh-executor"},
    }
    for service, allowed in callers.items():
        policy = policies[service]["spec"]
        assert selects(policy["podSelector"]["matchLabels"], pod_labels(deployments[service]))
        grpc_port = deployments[service]["spec"]["template"]["spec"]["containers"][0]["ports"][0][
            "containerPort"
        ]
        reaching = {
            name
            for rule in policy["ingress"]
            if grpc_port in {port["port"] for port in rule["ports"]}
            for peer in rule.get("from", [{}])
            for name, deployment in deployments.items()
            if selects(peer.get("podSelector", {}).get("matchLabels", {}), pod_labels(deployment))
            and "namespaceSelector" not in peer
        }
        assert reaching == allowed, service


def test_secrets_come_from_the_secret_never_from_the_config_map() -> None:
    config = by_kind("ConfigMap")["agentmesh-config"]["data"]
    assert not {key for key in config if any(word in key for word in ("SECRET", "PASSWORD", "DATABASE_URL"))}
    for deployment in by_kind("Deployment").values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            for item in container.get("env", []):
                if "SECRET" in item["name"] or "PASSWORD" in item["name"]:
                    assert item["valueFrom"]["secretKeyRef"]["name"] == "agentmesh-secrets"
