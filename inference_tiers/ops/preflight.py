"""``inference-tiers preflight``: read-only checks that an account and Region can take a tier's deploy.

Input is the tier settings' :class:`~inference_tiers.config.AccountRequirements`, the same configuration the
CDK app reads. Every check returns pass, warn (could not be verified, or will work with a caveat) or fail, each
warn/fail with the fix. AWS calls are read-only (Describe/Get/List); the image check also sends anonymous
manifest HEAD requests to public registries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from inference_tiers.config import AccountRequirements
from inference_tiers.instance_types import SAGEMAKER_PREFIX, find_gpu_instance_type
from inference_tiers.ops.checks import (
    CheckResult,
    Clients,
    Status,
    could_not_check,
    error_code,
    error_message,
)
from inference_tiers.ops.eks_addons import check_eks_addons
from inference_tiers.ops.images import check_images

# EC2 On-Demand vCPU quotas by instance family letter (Service Quotas, service code "ec2").
EC2_VCPU_QUOTAS = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
}
# SageMaker quota names are per instance type: "ml.g6e.2xlarge for endpoint usage".
SAGEMAKER_QUOTA_SUFFIX = {
    "sagemaker-endpoint": "for endpoint usage",
    "sagemaker-hyperpod": "for cluster usage",
}
CDK_BOOTSTRAP_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
# Templates from aws-cdk-lib v2 carry a CheckBootstrapVersion rule that rejects bootstrap versions 1 to 5.
MIN_BOOTSTRAP_VERSION = 6


def _ec2_name(instance_type: str) -> str:
    return instance_type.removeprefix(SAGEMAKER_PREFIX)


def check_instance_offerings(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """Which Availability Zones offer each EC2 / HyperPod instance type, and which offer all of them."""
    name = "instance type offerings"
    types = sorted({_ec2_name(n.instance_type) for n in req.instances if n.service != "sagemaker-endpoint"})
    if not types:
        return []
    offered: dict[str, set[str]] = defaultdict(set)
    try:
        pages = (
            clients.client("ec2")
            .get_paginator("describe_instance_type_offerings")
            .paginate(
                LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": types}]
            )
        )
        for page in pages:
            for offering in page["InstanceTypeOfferings"]:
                offered[offering["InstanceType"]].add(offering["Location"])
    except ClientError as error:
        return [could_not_check(name, error, "ec2:DescribeInstanceTypeOfferings")]
    missing = [t for t in types if not offered[t]]
    if missing:
        return [
            CheckResult(
                name,
                "fail",
                f"not offered in {clients.region}: {', '.join(missing)}",
                "choose another Region or instance type",
            )
        ]
    common = set.intersection(*(offered[t] for t in types))
    per_type = "; ".join(f"{t}: {', '.join(sorted(offered[t]))}" for t in types)
    if req.availability_zone_ids:
        lacking = sorted(set(req.availability_zone_ids) - common)
        if lacking:
            return [
                CheckResult(
                    name,
                    "fail",
                    f"configured AZ(s) {', '.join(lacking)} lack some of {', '.join(types)} ({per_type})",
                    f"use AZ ids that offer all: {', '.join(sorted(common)) or 'none'}",
                )
            ]
    if not common:
        return [
            CheckResult(
                name,
                "fail",
                f"no single AZ offers all of {', '.join(types)} ({per_type})",
                "split the instance types across tiers or choose types offered in one AZ",
            )
        ]
    return [CheckResult(name, "pass", f"AZs offering all of {', '.join(types)}: {', '.join(sorted(common))}")]


def _quota_value(quotas: Any, service_code: str, quota_code: str) -> float:
    try:
        return float(
            quotas.get_service_quota(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]["Value"]
        )
    except ClientError as error:
        if error_code(error) != "NoSuchResourceException":
            raise
        # No account-level value applied yet: the AWS default is what applies.
        response = quotas.get_aws_default_service_quota(ServiceCode=service_code, QuotaCode=quota_code)
        return float(response["Quota"]["Value"])


def _quotas_by_name(quotas: Any, service_code: str) -> dict[str, tuple[str, float]]:
    found: dict[str, tuple[str, float]] = {}
    for page in quotas.get_paginator("list_service_quotas").paginate(ServiceCode=service_code):
        for quota in page["Quotas"]:
            found[quota["QuotaName"]] = (quota["QuotaCode"], float(quota["Value"]))
    return found


def _increase_fix(service_code: str, quota_code: str, desired: float) -> str:
    return (
        f"aws service-quotas request-service-quota-increase --service-code {service_code} "
        f"--quota-code {quota_code} --desired-value {desired:g}"
    )


def check_ec2_quotas(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """On-Demand vCPU quotas for the EC2 instances (EKS node groups) the tier launches."""
    needed: dict[str, int] = defaultdict(int)
    for need in req.instances:
        facts = find_gpu_instance_type(need.instance_type)
        if need.service == "ec2" and facts is not None and facts.name[0] in EC2_VCPU_QUOTAS:
            needed[facts.name[0]] += facts.vcpus * need.count
    results = []
    for family, vcpus in sorted(needed.items()):
        code, quota_name = EC2_VCPU_QUOTAS[family]
        name = f"quota {quota_name} ({code})"
        try:
            value = _quota_value(clients.client("service-quotas"), "ec2", code)
        except ClientError as error:
            results.append(could_not_check(name, error, "servicequotas:GetServiceQuota"))
            continue
        if value < vcpus:
            fix = _increase_fix("ec2", code, vcpus)
            if req.capacity_reservation_ids:
                fix += " (instances in a Capacity Block do not need it, if every node runs in the block)"
            results.append(CheckResult(name, "fail", f"{value:g} vCPUs; the tier needs {vcpus}", fix))
        else:
            results.append(CheckResult(name, "pass", f"{value:g} vCPUs >= {vcpus} needed"))
    return results


def check_sagemaker_quotas(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """Per-instance-type SageMaker quotas: endpoint usage and HyperPod cluster usage, found by quota name."""
    needed: dict[str, int] = defaultdict(int)
    for need in req.instances:
        if need.service in SAGEMAKER_QUOTA_SUFFIX:
            needed[f"{need.instance_type} {SAGEMAKER_QUOTA_SUFFIX[need.service]}"] += need.count
    if not needed:
        return []
    try:
        quotas = _quotas_by_name(clients.client("service-quotas"), "sagemaker")
    except ClientError as error:
        return [could_not_check("SageMaker quotas", error, "servicequotas:ListServiceQuotas")]
    results = []
    for quota_name, count in sorted(needed.items()):
        name = f"quota {quota_name}"
        if quota_name not in quotas:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    "no such quota in this Region (instance type not offered)",
                    "choose an instance type SageMaker offers here",
                )
            )
            continue
        code, value = quotas[quota_name]
        if value < count:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{value:g}; the tier needs {count}",
                    _increase_fix("sagemaker", code, count),
                )
            )
        else:
            results.append(CheckResult(name, "pass", f"{value:g} >= {count} needed"))
    return results


def _ec2_reservation_ids(req: AccountRequirements) -> list[str]:
    """EC2 Capacity Reservation / Capacity Block ids (``cr-...``); SageMaker ARNs go to the training-plan check."""
    return [rid for rid in req.capacity_reservation_ids if not rid.startswith("arn:")]


def check_capacity_reservations(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """Configured On-Demand Capacity Reservations / Capacity Blocks exist, match and are (or will be) active."""
    name = "capacity reservations"
    ec2 = clients.client("ec2")
    types = sorted({_ec2_name(n.instance_type) for n in req.instances if n.service == "ec2"})
    reservation_ids = _ec2_reservation_ids(req)
    if not reservation_ids:
        if not types:
            return []
        try:
            visible = ec2.describe_capacity_reservations(
                Filters=[
                    {"Name": "instance-type", "Values": types},
                    {"Name": "state", "Values": ["active", "scheduled"]},
                ]
            )["CapacityReservations"]
        except ClientError as error:
            return [could_not_check(name, error, "ec2:DescribeCapacityReservations")]
        listed = ", ".join(
            f"{r['CapacityReservationId']} ({r['InstanceType']}, {r['State']})" for r in visible
        )
        return [
            CheckResult(
                name,
                "pass",
                "none configured: nodes launch On-Demand"
                + (f"; visible and unused by this config: {listed}" if listed else ""),
            )
        ]
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=reservation_ids)[
            "CapacityReservations"
        ]
    except ClientError as error:
        if error_code(error).startswith("InvalidCapacityReservationId"):
            return [
                CheckResult(
                    name,
                    "fail",
                    f"{error_code(error)}: {', '.join(reservation_ids)}",
                    "check the reservation ids and the Region (aws ec2 describe-capacity-reservations)",
                )
            ]
        return [could_not_check(name, error, "ec2:DescribeCapacityReservations")]
    results = []
    for reservation in found:
        rid, state, itype = (
            reservation["CapacityReservationId"],
            reservation["State"],
            reservation["InstanceType"],
        )
        kind = "Capacity Block" if reservation.get("ReservationType") == "capacity-block" else "reservation"
        detail = (
            f"{kind} {rid}: {itype} x{reservation.get('TotalInstanceCount', '?')} in "
            f"{reservation.get('AvailabilityZoneId') or reservation.get('AvailabilityZone')}, {state}"
        )
        if types and itype not in types:
            results.append(
                CheckResult(
                    name,
                    "fail",
                    f"{detail}; the tier launches {', '.join(types)}",
                    "use a reservation for the tier's instance type",
                )
            )
        elif state == "active":
            results.append(CheckResult(name, "pass", detail))
        elif state in ("scheduled", "pending", "payment-pending"):
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{detail} (starts {reservation.get('StartDate', '?')})",
                    "deploy after the reservation becomes active, or nodes stay pending",
                )
            )
        else:
            results.append(
                CheckResult(name, "fail", detail, "buy or create a new reservation and update the config")
            )
    return results


def _missing_or_unchecked(
    name: str, error: ClientError, not_found_codes: tuple[str, ...], missing: str, fix: str, permission: str
) -> CheckResult:
    """A failed check when ``error`` says the resource is missing here; otherwise "could not check" naming the
    permission the caller lacks (or the error that stopped the call)."""
    if error_code(error) in not_found_codes:
        return CheckResult(name, "fail", missing, fix)
    return could_not_check(name, error, permission)


def check_training_plans(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """Configured SageMaker training plans exist, serve this tier's resources and instance types, and are active."""
    results = []
    for arn in req.capacity_reservation_ids:
        if not arn.startswith("arn:"):
            continue
        resource = arn.split(":", 5)[-1]
        kind, _, plan = resource.partition("/")
        name = f"training plan {plan or arn}"
        if kind != "training-plan" or not plan:
            results.append(
                CheckResult(
                    name,
                    "warn",
                    f"{arn}: not a training-plan ARN, so this command cannot check it",
                    "check it in the SageMaker console (Training plans) before deploying",
                )
            )
            continue
        try:
            found = clients.client("sagemaker").describe_training_plan(TrainingPlanName=plan)
        except ClientError as error:
            results.append(
                _missing_or_unchecked(
                    name,
                    error,
                    ("ResourceNotFound", "ValidationException"),
                    f"not found in {clients.region} ({error_code(error)})",
                    "check the ARN and the Region (aws sagemaker list-training-plans)",
                    "sagemaker:DescribeTrainingPlan",
                )
            )
            continue
        results.append(_training_plan_result(name, found, req))
    return results


def _training_plan_result(name: str, plan: dict[str, Any], req: AccountRequirements) -> CheckResult:
    services = {n.service for n in req.instances}
    targets = set(plan.get("TargetResources", []))
    needed = sorted(
        target
        for service, target in (
            ("sagemaker-endpoint", "endpoint"),
            ("sagemaker-hyperpod", "hyperpod-cluster"),
        )
        if service in services and target not in targets
    )
    types = sorted({n.instance_type for n in req.instances if n.service in SAGEMAKER_QUOTA_SUFFIX})
    plan_types = sorted(
        {s["InstanceType"] for s in plan.get("ReservedCapacitySummaries", []) if "InstanceType" in s}
    )
    status = plan.get("Status", "?")
    detail = (
        f"{', '.join(plan_types) or '?'} x{plan.get('TotalInstanceCount', '?')} for "
        f"{', '.join(sorted(targets)) or '?'}, {status}"
    )
    if needed:
        return CheckResult(
            name,
            "fail",
            f"{detail}; the tier needs a plan for {', '.join(needed)}",
            "buy a training plan whose target resources include " + ", ".join(needed),
        )
    if plan_types and types and not set(plan_types) & set(types):
        return CheckResult(
            name,
            "fail",
            f"{detail}; the tier runs {', '.join(types)}",
            "list the plan's instance type in the tier's instance types",
        )
    if status == "Active":
        return CheckResult(name, "pass", detail)
    if status in ("Pending", "Scheduled"):
        return CheckResult(
            name,
            "warn",
            f"{detail} (starts {plan.get('StartTime', '?')})",
            "deploy after the plan becomes Active, or instances cannot be placed",
        )
    return CheckResult(name, "fail", detail, "buy a new training plan and update the config")


# Error codes with which Bedrock answers a model or profile that does not exist (or is not offered) here.
_BEDROCK_NOT_FOUND = ("ResourceNotFoundException", "ValidationException")


_FIRST_DEPLOY = (
    "deploy without sagemaker.create_endpoint first (it creates the bucket), upload the weights to its "
    "ModelWeightsPrefix output, then deploy with sagemaker.create_endpoint=true"
)


def _stack_weights_prefix(clients: Clients, stack_name: str, output_key: str) -> str | None:
    """The prefix a deployed stack's output names; None when the stack or the output does not exist."""
    try:
        (stack,) = clients.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        if error_code(error) == "ValidationError" and "does not exist" in error_message(error):
            return None
        raise
    return next((o["OutputValue"] for o in stack.get("Outputs", []) if o["OutputKey"] == output_key), None)


def check_sagemaker_weights(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """The S3 prefix the endpoint loads its weights from holds objects: over an empty or missing prefix the
    inference component cannot download the model and the deploy rolls back."""
    need = req.model_weights
    if need is None:
        return []
    name = "model weights in S3"
    uri = need.s3_uri
    if uri is None:
        try:
            uri = _stack_weights_prefix(clients, need.stack_name, need.output_key)
        except ClientError as error:
            return [could_not_check(name, error, "cloudformation:DescribeStacks")]
        if uri is None:
            return [
                CheckResult(
                    name,
                    "fail",
                    f"the endpoint would load from the model bucket {need.stack_name} creates, which is not "
                    "deployed yet (it would be empty)",
                    _FIRST_DEPLOY,
                )
            ]
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    try:
        listing = clients.client("s3").list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except ClientError as error:
        if error_code(error) == "NoSuchBucket":
            return [CheckResult(name, "fail", f"no bucket {bucket} for {uri}", "set sagemaker.model_s3_uri")]
        return [could_not_check(name, error, f"s3:ListBucket on {bucket}")]
    if not listing.get("KeyCount"):
        return [
            CheckResult(
                name,
                "fail",
                f"no objects under {uri}: the endpoint could not download the model",
                f"aws s3 sync <local model dir> {uri} --exclude '.cache/*'",
            )
        ]
    return [CheckResult(name, "pass", f"weights found under {uri}")]


def check_bedrock(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    """The configured model is offered and authorized here; the cross-Region inference profile exists."""
    results: list[CheckResult] = []
    bedrock = clients.client("bedrock")
    if req.bedrock_model_id:
        name = f"Bedrock model {req.bedrock_model_id}"
        try:
            details = bedrock.get_foundation_model(modelIdentifier=req.bedrock_model_id)["modelDetails"]
            availability = bedrock.get_foundation_model_availability(modelId=req.bedrock_model_id)
        except ClientError as error:
            results.append(
                _missing_or_unchecked(
                    name,
                    error,
                    _BEDROCK_NOT_FOUND,
                    f"not offered in {clients.region} ({error_code(error)})",
                    "choose a model listed by aws bedrock list-foundation-models here",
                    "bedrock:GetFoundationModel",
                )
            )
        else:
            results.append(_bedrock_model_result(name, details, availability, req))
    if req.bedrock_inference_profile_id:
        name = f"inference profile {req.bedrock_inference_profile_id}"
        try:
            profile = bedrock.get_inference_profile(
                inferenceProfileIdentifier=req.bedrock_inference_profile_id
            )
        except ClientError as error:
            results.append(
                _missing_or_unchecked(
                    name,
                    error,
                    _BEDROCK_NOT_FOUND,
                    f"not found in {clients.region}",
                    "choose one from aws bedrock list-inference-profiles here",
                    "bedrock:GetInferenceProfile",
                )
            )
        else:
            regions = sorted(
                {m["modelArn"].split(":")[3] for m in profile.get("models", []) if "modelArn" in m}
            )
            status: Status = "pass" if profile.get("status") == "ACTIVE" else "fail"
            results.append(
                CheckResult(
                    name,
                    status,
                    f"{profile.get('status')}, routes to {', '.join(regions)}",
                    "" if status == "pass" else "choose an ACTIVE inference profile",
                )
            )
    return results


def _bedrock_model_result(
    name: str, details: dict[str, Any], availability: dict[str, Any], req: AccountRequirements
) -> CheckResult:
    lifecycle = details.get("modelLifecycle", {}).get("status", "ACTIVE")
    agreement = availability.get("agreementAvailability", {}).get("status", "AVAILABLE")
    problems = [
        f"{key} {value}"
        for key, value, good in (
            ("authorization", availability.get("authorizationStatus"), "AUTHORIZED"),
            ("entitlement", availability.get("entitlementAvailability"), "AVAILABLE"),
            ("region availability", availability.get("regionAvailability"), "AVAILABLE"),
        )
        if value != good
    ]
    if problems:
        return CheckResult(
            name,
            "fail",
            "; ".join(problems),
            "enable the model (Bedrock console, Model access) or allow aws-marketplace:Subscribe",
        )
    if agreement != "AVAILABLE":
        return CheckResult(
            name,
            "warn",
            f"agreement {agreement}",
            "accept the model's offer: aws bedrock create-foundation-model-agreement",
        )
    on_demand = "ON_DEMAND" in details.get("inferenceTypesSupported", [])
    if not on_demand and not req.bedrock_inference_profile_id:
        return CheckResult(
            name,
            "fail",
            "only callable through an inference profile, and none is configured",
            "configure a cross-Region inference profile (us./eu./apac./global. prefix)",
        )
    if lifecycle != "ACTIVE":
        return CheckResult(name, "warn", f"lifecycle {lifecycle}", "plan a move to an ACTIVE model version")
    return CheckResult(
        name, "pass", f"ACTIVE and authorized ({', '.join(details.get('inferenceTypesSupported', []))})"
    )


def check_eks_version(clients: Clients, req: AccountRequirements) -> list[CheckResult]:
    if not req.kubernetes_version:
        return []
    name = f"EKS Kubernetes {req.kubernetes_version}"
    try:
        versions = clients.client("eks").describe_cluster_versions(clusterVersions=[req.kubernetes_version])[
            "clusterVersions"
        ]
    except ClientError as error:
        return [could_not_check(name, error, "eks:DescribeClusterVersions")]
    match = next((v for v in versions if v.get("clusterVersion") == req.kubernetes_version), None)
    fix = "choose a version in standard support: aws eks describe-cluster-versions"
    if match is None:
        return [CheckResult(name, "fail", f"not offered in {clients.region}", fix)]
    status = match.get("versionStatus") or match.get("status")
    if status == "STANDARD_SUPPORT":
        end = match.get("endOfStandardSupportDate")
        return [CheckResult(name, "pass", "standard support" + (f" until {end:%Y-%m-%d}" if end else ""))]
    if status == "EXTENDED_SUPPORT":
        return [CheckResult(name, "warn", "extended support (billed at a higher hourly rate)", fix)]
    return [CheckResult(name, "fail", f"status {status}", fix)]


def check_cdk_bootstrap(clients: Clients, account: str) -> list[CheckResult]:
    name = "CDK bootstrap"
    fix = f"npx cdk bootstrap aws://{account}/{clients.region}"
    try:
        value = clients.client("ssm").get_parameter(Name=CDK_BOOTSTRAP_PARAMETER)["Parameter"]["Value"]
    except ClientError as error:
        if error_code(error) != "ParameterNotFound":
            return [could_not_check(name, error, f"ssm:GetParameter on {CDK_BOOTSTRAP_PARAMETER}")]
        try:
            clients.client("cloudformation").describe_stacks(StackName="CDKToolkit")
        except ClientError as stack_error:
            if error_code(stack_error) == "ValidationError":
                return [
                    CheckResult(
                        name, "fail", f"not bootstrapped (no {CDK_BOOTSTRAP_PARAMETER}, no CDKToolkit)", fix
                    )
                ]
            return [could_not_check(name, stack_error, "cloudformation:DescribeStacks")]
        return [
            CheckResult(
                name,
                "warn",
                f"CDKToolkit stack exists but {CDK_BOOTSTRAP_PARAMETER} does not "
                "(bootstrapped with a custom qualifier?)",
                f"{fix} (default qualifier hnb659fds)",
            )
        ]
    version = int(value) if str(value).isdigit() else 0
    if version < MIN_BOOTSTRAP_VERSION:
        return [
            CheckResult(
                name,
                "fail",
                f"bootstrap version {value}; aws-cdk-lib v2 needs >= {MIN_BOOTSTRAP_VERSION}",
                fix,
            )
        ]
    return [CheckResult(name, "pass", f"bootstrap version {version}")]


CHECKS: tuple[Callable[[Clients, AccountRequirements], list[CheckResult]], ...] = (
    check_instance_offerings,
    check_ec2_quotas,
    check_sagemaker_quotas,
    check_capacity_reservations,
    check_training_plans,
    check_sagemaker_weights,
    check_bedrock,
    check_eks_version,
    check_eks_addons,
    check_images,
)


def run_preflight(clients: Clients, req: AccountRequirements, account: str) -> list[CheckResult]:
    """Every check that applies to ``req``, then the CDK bootstrap check."""
    results: list[CheckResult] = []
    for check in CHECKS:
        results.extend(check(clients, req))
    results.extend(check_cdk_bootstrap(clients, account))
    return results
