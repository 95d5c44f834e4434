"""The Kata sandbox capacity of the agent-sandbox tier, rendered as plain dicts (no constructs, testable alone).

Karpenter (pinned >= 1.13, the first release with ``EC2NodeClass.spec.cpuOptions.nestedVirtualization``)
provisions the sandbox nodes from one ``EC2NodeClass`` and one ``NodePool``; kata-deploy (Helm, pinned) installs
Kata Containers on exactly those nodes; one ``RuntimeClass`` sends sandbox pods to them. Why each choice:

- Nodes get ``/dev/kvm`` either from nested virtualization (Intel 8th-gen C8i/M8i/R8i and their -flex and d
  variants, set at launch) or by being bare metal. Metal sizes are named ``metal-24xl``/``metal-48xl`` from the
  7th generation on, so they are selected by ``instance-hypervisor NotIn [nitro]`` (metal has an empty
  hypervisor), never by ``instance-size In [metal]``.
- The nodes are tainted ``inference-tiers/sandbox=kata:NoSchedule``; only the RuntimeClass carries the
  toleration, so a pod without the Kata runtime class cannot land there, and its node selector keeps Kata pods
  off the core nodes.
- A startup taint ``katacontainers.io/kata-runtime:NoSchedule`` closes the race between a new node and the
  kata-deploy DaemonSet: kata-deploy (4.0+) removes it once the runtime is installed. The ready label
  ``katacontainers.io/kata-runtime=true`` is declared on the NodePool, or Karpenter would not know it can
  satisfy the RuntimeClass node selector.
- Consolidation only ``WhenEmpty``: ``WhenEmptyOrUnderutilized`` would evict running sandboxes (their state is
  in the micro-VM). ``consolidateAfter`` must exceed kata-deploy's install minute.
- On-demand only: whether EC2 allows nested virtualization on Spot is contradicted between public sources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from inference_tiers.validation import Args

Manifest = dict[str, Any]
NodeMode = Literal["nested", "metal"]
NODE_MODES: tuple[NodeMode, NodeMode] = ("nested", "metal")
KataShim = Literal["qemu-runtime-rs", "clh-runtime-rs"]

# Karpenter: 1.14.1 is the newest release whose CRDs are vendored (tests/data/sandbox/karpenter); 1.13.0 added
# cpuOptions.nestedVirtualization (aws/karpenter-provider-aws#9043).
KARPENTER_VERSION = "1.14.1"
# The controller image of 1.14.1 by digest, as the release commit c88abbbad ("Stable Release updates Release
# v1.14.1") writes it into the published chart's values.yaml (tests/data/sandbox/SOURCE.md): pinned here so that
# the image cannot change under the same tag.
KARPENTER_IMAGE_DIGEST = "sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa"
KARPENTER_MINIMUM = (1, 13, 0)
KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_NAMESPACE = "kube-system"
KARPENTER_SERVICE_ACCOUNT = "karpenter"

# kata-deploy 4.1.0: the Rust runtime is the default shim since 4.0 (the Go shims are deprecated), and 4.0 added
# startupTaints. The chart version is the Kata release.
KATA_VERSION = "4.1.0"
KATA_CHART = "oci://ghcr.io/kata-containers/kata-deploy-charts/kata-deploy"
KATA_DEPLOY_IMAGE = "quay.io/kata-containers/kata-deploy"
KATA_NAMESPACE = "kube-system"
# Pod overhead of each shim, from the chart's templates/runtimeclasses.yaml at 4.1.0 (the VMM, the shim and
# virtiofsd outside the guest): what the scheduler adds to every sandbox pod's requests.
KATA_OVERHEAD: Mapping[str, Mapping[str, str]] = {
    "qemu-runtime-rs": {"memory": "320Mi", "cpu": "250m"},
    "clh-runtime-rs": {"memory": "130Mi", "cpu": "250m"},
}
KATA_SHIMS: tuple[KataShim, ...] = ("qemu-runtime-rs", "clh-runtime-rs")


def kata_overhead(shim: str) -> tuple[int, int]:
    """``shim``'s pod overhead as (CPU millicores, memory MiB); ArgumentError for a shim not in KATA_SHIMS."""
    overhead = KATA_OVERHEAD[Args("kata_overhead").one_of("shim", shim, KATA_SHIMS)]
    return int(overhead["cpu"].removesuffix("m")), int(overhead["memory"].removesuffix("Mi"))


# Instance families whose virtual sizes support CpuOptions.NestedVirtualization (EC2, February 2026).
NESTED_VIRTUALIZATION_FAMILIES = (
    "c8i",
    "c8i-flex",
    "c8id",
    "m8i",
    "m8i-flex",
    "m8id",
    "r8i",
    "r8i-flex",
    "r8id",
)
DEFAULT_NESTED_FAMILIES = ("c8i", "m8i", "r8i")
# x86 families with bare-metal sizes (c7i.metal-24xl, m7i.metal-48xl, c8i.metal-48xl, ...).
METAL_FAMILIES = ("c6i", "m6i", "r6i", "c7i", "m7i", "r7i", "c8i", "m8i", "r8i")
DEFAULT_METAL_FAMILIES = ("c7i", "m7i", "r7i")

NODE_POOL_LABEL = "inference-tiers/node-pool"
SANDBOX_NODE_POOL = "sandbox"
SANDBOX_TAINT: Mapping[str, str] = {"key": "inference-tiers/sandbox", "value": "kata", "effect": "NoSchedule"}
SANDBOX_TOLERATION: Mapping[str, str] = {
    "key": SANDBOX_TAINT["key"],
    "operator": "Equal",
    "value": SANDBOX_TAINT["value"],
    "effect": SANDBOX_TAINT["effect"],
}
KATA_READY_LABEL = "katacontainers.io/kata-runtime"
KATA_STARTUP_TAINT: Mapping[str, str] = {"key": KATA_READY_LABEL, "effect": "NoSchedule"}

_NAME = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_AMI_ALIAS = r"al2023@(latest|v[0-9]{8})"


class NodeArguments(TypedDict):
    """The sandbox-node choices a tier configures, as keyword arguments of both the spec and the construct."""

    node_mode: NodeMode
    instance_families: Sequence[str] | None
    kata_shim: KataShim
    max_vcpus: int
    max_memory_gib: int
    consolidate_after_minutes: int
    root_volume_gib: int
    ami_alias: str


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@dataclass(frozen=True)
class SandboxNodesSpec:
    """What the Kata sandbox nodes look like; every field is checked (``ArgumentError`` naming ``owner``).

    :param node_mode: ``nested`` (nested virtualization on virtual C8i/M8i/R8i sizes) or ``metal``.
    :param instance_families: Karpenter instance families. Default: c8i, m8i, r8i (nested) or c7i, m7i, r7i
        (metal).
    :param kata_shim: the Kata runtime: ``qemu-runtime-rs`` (the 4.x default) or ``clh-runtime-rs``.
    :param max_vcpus: NodePool limit on the vCPUs of all sandbox nodes together.
    :param max_memory_gib: NodePool limit on their memory.
    :param consolidate_after_minutes: how long a node must be empty before Karpenter removes it (2-1440).
    :param expire_after_hours: node lifetime before Karpenter replaces it (a replacement waits for the node's
        sandboxes: they carry ``karpenter.sh/do-not-disrupt``).
    :param root_volume_gib: root EBS volume of each node (container images and sandbox scratch space).
    :param ami_alias: ``al2023@latest`` or a pinned ``al2023@vYYYYMMDD`` release.
    :param name: name of the EC2NodeClass, the NodePool and the RuntimeClass prefix.
    """

    node_mode: NodeMode = "nested"
    instance_families: Sequence[str] | None = None
    kata_shim: KataShim = "qemu-runtime-rs"
    max_vcpus: int = 1000
    max_memory_gib: int = 4000
    consolidate_after_minutes: int = 10
    expire_after_hours: int = 720
    disruption_budget_percent: int = 10
    root_volume_gib: int = 200
    ami_alias: str = "al2023@latest"
    name: str = "sandbox-kata"
    owner: str = "SandboxNodesSpec"
    families: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        args = Args(self.owner)
        args.one_of("node_mode", self.node_mode, NODE_MODES)
        args.one_of("kata_shim", self.kata_shim, KATA_SHIMS)
        allowed = NESTED_VIRTUALIZATION_FAMILIES if self.node_mode == "nested" else METAL_FAMILIES
        default = DEFAULT_NESTED_FAMILIES if self.node_mode == "nested" else DEFAULT_METAL_FAMILIES
        families = (
            default
            if self.instance_families is None
            else args.sequence(
                "instance_families",
                self.instance_families,
                lambda name, value: args.one_of(name, value, allowed),
                min_items=1,
                max_items=len(allowed),
                unique=True,
            )
        )
        object.__setattr__(self, "families", tuple(families))
        args.integer("max_vcpus", self.max_vcpus, minimum=8, maximum=100_000)
        args.integer("max_memory_gib", self.max_memory_gib, minimum=16, maximum=400_000)
        args.integer("consolidate_after_minutes", self.consolidate_after_minutes, minimum=2, maximum=1440)
        args.integer("expire_after_hours", self.expire_after_hours, minimum=1, maximum=8760)
        args.integer("disruption_budget_percent", self.disruption_budget_percent, minimum=1, maximum=100)
        args.integer("root_volume_gib", self.root_volume_gib, minimum=30, maximum=16_384)
        args.text(
            "ami_alias",
            self.ami_alias,
            pattern=_AMI_ALIAS,
            description="al2023@latest or a pinned AL2023 release such as al2023@v20261101",
            allow_token=False,
        )
        args.text("name", self.name, pattern=_NAME, description="a DNS label", allow_token=False)

    @property
    def runtime_class_name(self) -> str:
        """The RuntimeClass sandbox pods name: its handler is the containerd runtime kata-deploy configures."""
        return f"kata-{self.kata_shim}"


def requirements(spec: SandboxNodesSpec) -> list[dict[str, Any]]:
    """NodePool requirements: the families, x86, on-demand, Linux; metal also excludes every virtual size."""
    found: list[dict[str, Any]] = [
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": list(spec.families)},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    if spec.node_mode == "metal":
        found.append(
            {"key": "karpenter.k8s.aws/instance-hypervisor", "operator": "NotIn", "values": ["nitro"]}
        )
    return found


def ec2_node_class(
    spec: SandboxNodesSpec,
    *,
    instance_profile: str,
    subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    volume_kms_key_id: str,
    tags: Mapping[str, str],
) -> Manifest:
    """The EC2NodeClass (``karpenter.k8s.aws/v1``); the arguments may be deploy-time tokens."""
    return karpenter_node_class(
        spec.name,
        ami_alias=spec.ami_alias,
        root_volume_gib=spec.root_volume_gib,
        instance_profile=instance_profile,
        subnet_ids=subnet_ids,
        security_group_ids=security_group_ids,
        volume_kms_key_id=volume_kms_key_id,
        tags=tags,
        cpu_options={"nestedVirtualization": "enabled"} if spec.node_mode == "nested" else None,
    )


def karpenter_node_class(
    name: str,
    *,
    ami_alias: str,
    root_volume_gib: int,
    instance_profile: str,
    subnet_ids: Sequence[str],
    security_group_ids: Sequence[str],
    volume_kms_key_id: str,
    tags: Mapping[str, str],
    cpu_options: Mapping[str, str] | None = None,
) -> Manifest:
    """An EC2NodeClass of the nodes Karpenter launches for this project (Kata sandboxes, the GPU pool): a
    stack-made instance profile, IMDSv2 with hop limit 1, an encrypted gp3 root volume with the given key."""
    node_class: Manifest = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "amiSelectorTerms": [{"alias": ami_alias}],
            # A profile made by the stack: Karpenter then needs no IAM instance-profile permissions.
            "instanceProfile": instance_profile,
            "subnetSelectorTerms": [{"id": subnet} for subnet in subnet_ids],
            "securityGroupSelectorTerms": [{"id": group} for group in security_group_ids],
            # IMDSv2 only, hop limit 1: nothing in a pod can reach the node role.
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {
                        "volumeSize": f"{root_volume_gib}Gi",
                        "volumeType": "gp3",
                        "encrypted": True,
                        "kmsKeyID": volume_kms_key_id,
                        "deleteOnTermination": True,
                    },
                }
            ],
            "tags": dict(tags),
        },
    }
    if cpu_options is not None:
        node_class["spec"]["cpuOptions"] = dict(cpu_options)
    return node_class


def node_pool(spec: SandboxNodesSpec) -> Manifest:
    """The NodePool (``karpenter.sh/v1``): tainted Kata nodes with limits and empty-only consolidation."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": spec.name},
        "spec": {
            "template": {
                "metadata": {"labels": {NODE_POOL_LABEL: SANDBOX_NODE_POOL, KATA_READY_LABEL: "true"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": spec.name},
                    "taints": [dict(SANDBOX_TAINT)],
                    "startupTaints": [dict(KATA_STARTUP_TAINT)],
                    "requirements": requirements(spec),
                    "expireAfter": f"{spec.expire_after_hours}h",
                    # After expiry a node waits for its sandboxes at most this long.
                    "terminationGracePeriod": "2h",
                },
            },
            "disruption": {
                "consolidationPolicy": "WhenEmpty",
                "consolidateAfter": f"{spec.consolidate_after_minutes}m",
                "budgets": [{"nodes": f"{spec.disruption_budget_percent}%"}],
            },
            "limits": {"cpu": str(spec.max_vcpus), "memory": f"{spec.max_memory_gib}Gi"},
        },
    }


def runtime_class(spec: SandboxNodesSpec) -> Manifest:
    """The RuntimeClass (``node.k8s.io/v1``): Kata handler, its overhead, Kata nodes only, their toleration."""
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": spec.runtime_class_name},
        "handler": spec.runtime_class_name,
        "overhead": {"podFixed": dict(KATA_OVERHEAD[spec.kata_shim])},
        "scheduling": {
            "nodeSelector": {NODE_POOL_LABEL: SANDBOX_NODE_POOL, KATA_READY_LABEL: "true"},
            "tolerations": [dict(SANDBOX_TOLERATION)],
        },
    }


def kata_deploy_values(spec: SandboxNodesSpec) -> dict[str, Any]:
    """Helm values of the kata-deploy chart: one shim, sandbox nodes only, our own RuntimeClass."""
    return {
        "image": {"reference": KATA_DEPLOY_IMAGE, "tag": KATA_VERSION},
        "deploymentMode": "daemonset",  # job mode installs new (Karpenter) nodes only on the next helm upgrade
        "k8sDistribution": "k8s",  # EKS AL2023: containerd at its standard paths
        "nodeSelector": {NODE_POOL_LABEL: SANDBOX_NODE_POOL},
        "tolerations": [
            dict(SANDBOX_TOLERATION),
            {"key": KATA_STARTUP_TAINT["key"], "operator": "Exists", "effect": KATA_STARTUP_TAINT["effect"]},
        ],
        "startupTaints": [f"{KATA_STARTUP_TAINT['key']}:{KATA_STARTUP_TAINT['effect']}"],
        "shims": {"disableAll": True, spec.kata_shim: {"enabled": True}},
        "defaultShim": {"amd64": spec.kata_shim},
        # The chart's RuntimeClasses carry no tolerations; runtime_class() renders the one sandboxes use.
        "runtimeClasses": {"enabled": False},
        # nydus is for confidential-containers guest pull; the sandboxes pull images on the host.
        "snapshotter": {"setup": []},
        "node-feature-discovery": {"enabled": False},
    }


def karpenter_values(
    *,
    cluster_name: str,
    node_selector: Mapping[str, str],
    interruption_queue: str = "",
    version: str = KARPENTER_VERSION,
) -> dict[str, Any]:
    """Helm values of the Karpenter chart ``version`` (controller on the core nodes, ``cluster_name`` may be a
    token). The controller image is pinned by digest for :data:`KARPENTER_VERSION` only: another release's chart
    keeps the tag and digest its release wrote into it, never 1.14.1's controller under another chart."""
    image = (
        {"tag": KARPENTER_VERSION, "digest": KARPENTER_IMAGE_DIGEST} if version == KARPENTER_VERSION else {}
    )
    return {
        "settings": {"clusterName": cluster_name, "interruptionQueue": interruption_queue},
        "serviceAccount": {"create": True, "name": KARPENTER_SERVICE_ACCOUNT},
        "replicas": 2,
        "nodeSelector": {"kubernetes.io/os": "linux", **node_selector},
        # Requests equal to limits: the controller is never throttled or evicted for memory on a busy core node.
        "controller": {
            **({"image": image} if image else {}),
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        },
    }


def check_version(args: Args, param: str, version: Any, minimum: tuple[int, ...]) -> str:
    """An exact ``X.Y.Z`` release at least ``minimum``."""
    floor = ".".join(map(str, minimum))
    text = args.text(
        param,
        version,
        pattern=r"[0-9]+\.[0-9]+\.[0-9]+",
        description=f"an exact release X.Y.Z, {floor} or later",
        allow_token=False,
    )
    if version_tuple(text) < minimum:
        raise args.error(param, version, f"an exact release X.Y.Z, {floor} or later")
    return text
