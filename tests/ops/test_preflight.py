"""preflight: every check against botocore Stubbers (no network), success and each failure path."""

from __future__ import annotations

import datetime

import pytest

from inference_tiers.config import AccountRequirements, InstanceNeed
from inference_tiers.ops import preflight
from tests.ops.helpers import StubClients, client_error

P5_NODES = InstanceNeed("ec2", "p5.48xlarge", 2)


@pytest.fixture
def clients() -> StubClients:
    return StubClients()


def _offerings(*pairs: tuple[str, str]) -> dict[str, object]:
    return {
        "InstanceTypeOfferings": [
            {"InstanceType": t, "LocationType": "availability-zone-id", "Location": az} for t, az in pairs
        ]
    }


OFFERINGS_PARAMS = {
    "LocationType": "availability-zone-id",
    "Filters": [{"Name": "instance-type", "Values": ["g6e.2xlarge", "p5.48xlarge"]}],
}
TWO_TYPES = AccountRequirements(
    instances=(
        P5_NODES,
        InstanceNeed("sagemaker-hyperpod", "ml.g6e.2xlarge", 1),
        InstanceNeed("sagemaker-endpoint", "ml.g5.xlarge", 1),
    )
)


# --- instance type offerings -------------------------------------------------------------------------------


def test_offerings_pass_names_the_azs_with_every_type(clients: StubClients) -> None:
    clients.stub("ec2").add_response(
        "describe_instance_type_offerings",
        _offerings(("p5.48xlarge", "use1-az4"), ("p5.48xlarge", "use1-az6"), ("g6e.2xlarge", "use1-az6")),
        OFFERINGS_PARAMS,
    )
    [result] = preflight.check_instance_offerings(clients, TWO_TYPES)
    assert result.status == "pass" and result.detail.endswith(": use1-az6")
    clients.assert_done()


def test_offerings_fail_when_a_type_is_not_offered(clients: StubClients) -> None:
    clients.stub("ec2").add_response(
        "describe_instance_type_offerings", _offerings(("g6e.2xlarge", "use1-az6")), OFFERINGS_PARAMS
    )
    [result] = preflight.check_instance_offerings(clients, TWO_TYPES)
    assert result.status == "fail" and "not offered in us-east-1: p5.48xlarge" in result.detail


def test_offerings_fail_when_no_az_has_all(clients: StubClients) -> None:
    clients.stub("ec2").add_response(
        "describe_instance_type_offerings",
        _offerings(("p5.48xlarge", "use1-az4"), ("g6e.2xlarge", "use1-az6")),
        OFFERINGS_PARAMS,
    )
    [result] = preflight.check_instance_offerings(clients, TWO_TYPES)
    assert result.status == "fail" and "no single AZ offers all" in result.detail


def test_offerings_fail_when_a_configured_az_lacks_a_type(clients: StubClients) -> None:
    req = AccountRequirements(instances=(P5_NODES,), availability_zone_ids=("use1-az4", "use1-az1"))
    clients.stub("ec2").add_response(
        "describe_instance_type_offerings",
        _offerings(("p5.48xlarge", "use1-az4"), ("p5.48xlarge", "use1-az6")),
    )
    [result] = preflight.check_instance_offerings(clients, req)
    assert result.status == "fail" and "use1-az1" in result.detail
    assert result.fix == "use AZ ids that offer all: use1-az4, use1-az6"


def test_offerings_access_denied_is_a_warning_with_the_permission(clients: StubClients) -> None:
    client_error(clients.stub("ec2"), "describe_instance_type_offerings", "UnauthorizedOperation")
    [result] = preflight.check_instance_offerings(clients, AccountRequirements(instances=(P5_NODES,)))
    assert (
        result.status == "warn" and result.fix == "allow ec2:DescribeInstanceTypeOfferings for this identity"
    )


def test_offerings_skip_sagemaker_endpoints(clients: StubClients) -> None:
    req = AccountRequirements(instances=(InstanceNeed("sagemaker-endpoint", "ml.g5.xlarge", 1),))
    assert preflight.check_instance_offerings(clients, req) == []


# --- EC2 vCPU quotas -------------------------------------------------------------------------------------------


def _quota(code: str, value: float) -> dict[str, object]:
    return {"Quota": {"QuotaCode": code, "Value": value}}


P_QUOTA = {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"}


def test_ec2_p_quota_pass(clients: StubClients) -> None:
    clients.stub("service-quotas").add_response("get_service_quota", _quota("L-417A185B", 384), P_QUOTA)
    [result] = preflight.check_ec2_quotas(clients, AccountRequirements(instances=(P5_NODES,)))
    assert result.status == "pass" and result.detail == "384 vCPUs >= 384 needed"
    clients.assert_done()


def test_ec2_p_quota_fail_gives_the_increase_command(clients: StubClients) -> None:
    clients.stub("service-quotas").add_response("get_service_quota", _quota("L-417A185B", 192), P_QUOTA)
    [result] = preflight.check_ec2_quotas(clients, AccountRequirements(instances=(P5_NODES,)))
    assert result.status == "fail" and "the tier needs 384" in result.detail
    assert result.fix == (
        "aws service-quotas request-service-quota-increase --service-code ec2 "
        "--quota-code L-417A185B --desired-value 384"
    )


def test_ec2_quota_falls_back_to_the_aws_default(clients: StubClients) -> None:
    stub = clients.stub("service-quotas")
    client_error(stub, "get_service_quota", "NoSuchResourceException")
    stub.add_response(
        "get_aws_default_service_quota",
        _quota("L-DB2E81BA", 64),
        {"ServiceCode": "ec2", "QuotaCode": "L-DB2E81BA"},
    )
    req = AccountRequirements(instances=(InstanceNeed("ec2", "g6e.12xlarge", 2),))
    [result] = preflight.check_ec2_quotas(clients, req)
    assert result.status == "fail" and result.check.endswith("(L-DB2E81BA)") and "needs 96" in result.detail
    clients.assert_done()


def test_ec2_quota_access_denied_is_a_warning(clients: StubClients) -> None:
    client_error(clients.stub("service-quotas"), "get_service_quota", "AccessDeniedException")
    [result] = preflight.check_ec2_quotas(clients, AccountRequirements(instances=(P5_NODES,)))
    assert result.status == "warn"


# --- SageMaker quotas --------------------------------------------------------------------------------------------


def _sm_quotas(*quotas: tuple[str, str, float], token: str | None = None) -> dict[str, object]:
    page: dict[str, object] = {"Quotas": [{"QuotaName": n, "QuotaCode": c, "Value": v} for n, c, v in quotas]}
    if token:
        page["NextToken"] = token
    return page


SM_REQ = AccountRequirements(
    instances=(
        InstanceNeed("sagemaker-endpoint", "ml.g6e.2xlarge", 2),
        InstanceNeed("sagemaker-hyperpod", "ml.p5.48xlarge", 2),
    )
)


def test_sagemaker_quotas_found_by_name_across_pages(clients: StubClients) -> None:
    stub = clients.stub("service-quotas")
    stub.add_response(
        "list_service_quotas",
        _sm_quotas(("ml.g6e.2xlarge for endpoint usage", "L-AAAA", 4), token="t1"),
        {"ServiceCode": "sagemaker"},
    )
    stub.add_response(
        "list_service_quotas",
        _sm_quotas(("ml.p5.48xlarge for cluster usage", "L-BBBB", 1)),
        {"ServiceCode": "sagemaker", "NextToken": "t1"},
    )
    endpoint, cluster = preflight.check_sagemaker_quotas(clients, SM_REQ)
    assert (endpoint.status, endpoint.detail) == ("pass", "4 >= 2 needed")
    assert cluster.check == "quota ml.p5.48xlarge for cluster usage" and cluster.status == "fail"
    assert "--service-code sagemaker --quota-code L-BBBB --desired-value 2" in cluster.fix
    clients.assert_done()


def test_sagemaker_quota_missing_means_not_offered(clients: StubClients) -> None:
    clients.stub("service-quotas").add_response("list_service_quotas", _sm_quotas())
    results = preflight.check_sagemaker_quotas(clients, SM_REQ)
    assert [r.status for r in results] == ["fail", "fail"]
    assert "instance type not offered" in results[0].detail


def test_sagemaker_quotas_access_denied(clients: StubClients) -> None:
    client_error(clients.stub("service-quotas"), "list_service_quotas", "AccessDeniedException")
    [result] = preflight.check_sagemaker_quotas(clients, SM_REQ)
    assert result.status == "warn" and "servicequotas:ListServiceQuotas" in result.fix


# --- capacity reservations -------------------------------------------------------------------------------------------


def _reservation(
    state: str, *, itype: str = "p5.48xlarge", kind: str = "capacity-block"
) -> dict[str, object]:
    return {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "InstanceType": itype,
        "State": state,
        "TotalInstanceCount": 2,
        "AvailabilityZoneId": "use1-az6",
        "ReservationType": kind,
        "StartDate": datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC),
    }


CR_REQ = AccountRequirements(instances=(P5_NODES,), capacity_reservation_ids=("cr-0123456789abcdef0",))
CR_PARAMS = {"CapacityReservationIds": ["cr-0123456789abcdef0"]}


@pytest.mark.parametrize(
    ("state", "itype", "status", "text"),
    [
        (
            "active",
            "p5.48xlarge",
            "pass",
            "Capacity Block cr-0123456789abcdef0: p5.48xlarge x2 in use1-az6, active",
        ),
        ("scheduled", "p5.48xlarge", "warn", "starts 2026-12-03"),
        ("expired", "p5.48xlarge", "fail", "expired"),
        ("active", "p4d.24xlarge", "fail", "the tier launches p5.48xlarge"),
    ],
)
def test_configured_reservation_states(
    clients: StubClients, state: str, itype: str, status: str, text: str
) -> None:
    clients.stub("ec2").add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [_reservation(state, itype=itype)]},
        CR_PARAMS,
    )
    [result] = preflight.check_capacity_reservations(clients, CR_REQ)
    assert result.status == status and text in result.detail
    clients.assert_done()


def test_configured_reservation_not_found(clients: StubClients) -> None:
    client_error(
        clients.stub("ec2"), "describe_capacity_reservations", "InvalidCapacityReservationId.NotFound"
    )
    [result] = preflight.check_capacity_reservations(clients, CR_REQ)
    assert result.status == "fail" and "InvalidCapacityReservationId.NotFound" in result.detail


def test_no_reservation_configured_lists_visible_ones(clients: StubClients) -> None:
    clients.stub("ec2").add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [_reservation("scheduled")]},
        {
            "Filters": [
                {"Name": "instance-type", "Values": ["p5.48xlarge"]},
                {"Name": "state", "Values": ["active", "scheduled"]},
            ]
        },
    )
    [result] = preflight.check_capacity_reservations(clients, AccountRequirements(instances=(P5_NODES,)))
    assert result.status == "pass"
    assert (
        "none configured" in result.detail
        and "cr-0123456789abcdef0 (p5.48xlarge, scheduled)" in result.detail
    )


def test_reservations_access_denied(clients: StubClients) -> None:
    client_error(clients.stub("ec2"), "describe_capacity_reservations", "UnauthorizedOperation")
    [result] = preflight.check_capacity_reservations(clients, CR_REQ)
    assert result.status == "warn"


PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-week"
PLAN_REQ = AccountRequirements(
    instances=(InstanceNeed("sagemaker-endpoint", "ml.p5.48xlarge", 2),), capacity_reservation_ids=(PLAN_ARN,)
)


def _plan(
    status: str, *, targets: tuple[str, ...] = ("endpoint",), itype: str = "ml.p5.48xlarge"
) -> dict[str, object]:
    return {
        "TrainingPlanArn": PLAN_ARN,
        "TrainingPlanName": "p5-week",
        "Status": status,
        "TotalInstanceCount": 2,
        "TargetResources": list(targets),
        "StartTime": datetime.datetime(2026, 12, 3, tzinfo=datetime.UTC),
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-1",
                "InstanceType": itype,
                "TotalInstanceCount": 2,
                "Status": status,
            }
        ],
    }


def test_a_training_plan_arn_is_not_sent_to_ec2(clients: StubClients) -> None:
    # SageMaker reservations are ARNs; DescribeCapacityReservations would reject them as malformed ids.
    clients.stub("ec2")
    assert preflight.check_capacity_reservations(clients, PLAN_REQ) == []
    clients.assert_done()


@pytest.mark.parametrize(
    ("plan", "status", "text"),
    [
        (_plan("Active"), "pass", "ml.p5.48xlarge x2 for endpoint, Active"),
        (_plan("Scheduled"), "warn", "starts 2026-12-03"),
        (_plan("Expired"), "fail", "Expired"),
        (_plan("Active", targets=("hyperpod-cluster",)), "fail", "the tier needs a plan for endpoint"),
        (_plan("Active", itype="ml.p4d.24xlarge"), "fail", "the tier runs ml.p5.48xlarge"),
    ],
)
def test_training_plan_states(clients: StubClients, plan: dict[str, object], status: str, text: str) -> None:
    clients.stub("sagemaker").add_response("describe_training_plan", plan, {"TrainingPlanName": "p5-week"})
    [result] = preflight.check_training_plans(clients, PLAN_REQ)
    assert result.check == "training plan p5-week"
    assert result.status == status and text in result.detail
    clients.assert_done()


def test_training_plan_not_found(clients: StubClients) -> None:
    client_error(clients.stub("sagemaker"), "describe_training_plan", "ResourceNotFound")
    [result] = preflight.check_training_plans(clients, PLAN_REQ)
    assert result.status == "fail" and "not found in us-east-1" in result.detail


def test_training_plan_access_denied_names_the_permission(clients: StubClients) -> None:
    client_error(clients.stub("sagemaker"), "describe_training_plan", "AccessDeniedException")
    [result] = preflight.check_training_plans(clients, PLAN_REQ)
    assert result.status == "warn" and "sagemaker:DescribeTrainingPlan" in result.fix


def test_other_sagemaker_reservation_arns_are_a_warning(clients: StubClients) -> None:
    arn = "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-1"
    req = AccountRequirements(capacity_reservation_ids=(arn, "cr-0123456789abcdef0"))
    [result] = preflight.check_training_plans(clients, req)
    assert result.status == "warn" and "not a training-plan ARN" in result.detail


# --- Bedrock -------------------------------------------------------------------------------------------------------

MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def _model(types: list[str], lifecycle: str = "ACTIVE") -> dict[str, object]:
    return {
        "modelDetails": {
            "modelArn": f"arn:aws:bedrock:us-east-1::foundation-model/{MODEL}",
            "modelId": MODEL,
            "inferenceTypesSupported": types,
            "modelLifecycle": {"status": lifecycle},
        }
    }


def _availability(
    auth: str = "AUTHORIZED", region: str = "AVAILABLE", agreement: str = "AVAILABLE"
) -> dict[str, object]:
    return {
        "modelId": MODEL,
        "agreementAvailability": {"status": agreement},
        "authorizationStatus": auth,
        "entitlementAvailability": "AVAILABLE",
        "regionAvailability": region,
    }


def _stub_model(clients: StubClients, details: dict[str, object], availability: dict[str, object]) -> None:
    stub = clients.stub("bedrock")
    stub.add_response("get_foundation_model", details, {"modelIdentifier": MODEL})
    stub.add_response("get_foundation_model_availability", availability, {"modelId": MODEL})


def test_bedrock_model_and_profile_pass(clients: StubClients) -> None:
    _stub_model(clients, _model(["INFERENCE_PROFILE"]), _availability())
    clients.stub("bedrock").add_response(
        "get_inference_profile",
        {
            "inferenceProfileName": "US Claude",
            "inferenceProfileArn": f"arn:aws:bedrock:us-east-1:1:inference-profile/{PROFILE}",
            "inferenceProfileId": PROFILE,
            "status": "ACTIVE",
            "type": "SYSTEM_DEFINED",
            "models": [
                {"modelArn": f"arn:aws:bedrock:{r}::foundation-model/{MODEL}"}
                for r in ("us-east-1", "us-west-2")
            ],
        },
        {"inferenceProfileIdentifier": PROFILE},
    )
    model, profile = preflight.check_bedrock(
        clients, AccountRequirements(bedrock_model_id=MODEL, bedrock_inference_profile_id=PROFILE)
    )
    assert model.status == "pass"
    assert profile.status == "pass" and profile.detail == "ACTIVE, routes to us-east-1, us-west-2"
    clients.assert_done()


@pytest.mark.parametrize(
    ("details", "availability", "status", "text"),
    [
        (_model(["ON_DEMAND"]), _availability(auth="NOT_AUTHORIZED"), "fail", "authorization NOT_AUTHORIZED"),
        (
            _model(["ON_DEMAND"]),
            _availability(region="NOT_AVAILABLE"),
            "fail",
            "region availability NOT_AVAILABLE",
        ),
        (_model(["ON_DEMAND"]), _availability(agreement="NOT_AVAILABLE"), "warn", "agreement NOT_AVAILABLE"),
        (
            _model(["INFERENCE_PROFILE"]),
            _availability(),
            "fail",
            "only callable through an inference profile",
        ),
        (_model(["ON_DEMAND"], lifecycle="LEGACY"), _availability(), "warn", "lifecycle LEGACY"),
    ],
)
def test_bedrock_model_problems(
    clients: StubClients, details: dict[str, object], availability: dict[str, object], status: str, text: str
) -> None:
    _stub_model(clients, details, availability)
    [result] = preflight.check_bedrock(clients, AccountRequirements(bedrock_model_id=MODEL))
    assert result.status == status and text in result.detail


def test_bedrock_model_not_offered(clients: StubClients) -> None:
    client_error(clients.stub("bedrock"), "get_foundation_model", "ResourceNotFoundException", status=404)
    [result] = preflight.check_bedrock(clients, AccountRequirements(bedrock_model_id=MODEL))
    assert result.status == "fail" and "not offered in us-east-1" in result.detail


def test_bedrock_profile_not_found(clients: StubClients) -> None:
    client_error(clients.stub("bedrock"), "get_inference_profile", "ResourceNotFoundException", status=404)
    [result] = preflight.check_bedrock(clients, AccountRequirements(bedrock_inference_profile_id=PROFILE))
    assert result.status == "fail" and "list-inference-profiles" in result.fix


def test_bedrock_throttling_is_a_failure_naming_the_code(clients: StubClients) -> None:
    client_error(clients.stub("bedrock"), "get_foundation_model", "ThrottlingException", status=429)
    [result] = preflight.check_bedrock(clients, AccountRequirements(bedrock_model_id=MODEL))
    assert result.status == "fail" and result.detail.startswith("ThrottlingException")


# --- EKS version ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("versions", "status", "text"),
    [
        (
            [
                {
                    "clusterVersion": "1.35",
                    "versionStatus": "STANDARD_SUPPORT",
                    "endOfStandardSupportDate": datetime.datetime(2027, 3, 1, tzinfo=datetime.UTC),
                }
            ],
            "pass",
            "standard support until 2027-03-01",
        ),
        ([{"clusterVersion": "1.35", "versionStatus": "EXTENDED_SUPPORT"}], "warn", "extended support"),
        ([{"clusterVersion": "1.35", "versionStatus": "UNSUPPORTED"}], "fail", "status UNSUPPORTED"),
        ([], "fail", "not offered in us-east-1"),
    ],
)
def test_eks_version(clients: StubClients, versions: list[dict[str, object]], status: str, text: str) -> None:
    clients.stub("eks").add_response(
        "describe_cluster_versions", {"clusterVersions": versions}, {"clusterVersions": ["1.35"]}
    )
    [result] = preflight.check_eks_version(clients, AccountRequirements(kubernetes_version="1.35"))
    assert result.status == status and text in result.detail
    clients.assert_done()


def test_eks_version_not_configured_is_skipped(clients: StubClients) -> None:
    assert preflight.check_eks_version(clients, AccountRequirements()) == []


# --- CDK bootstrap -----------------------------------------------------------------------------------------------------

BOOTSTRAP = {"Name": "/cdk-bootstrap/hnb659fds/version"}


def _parameter(value: str) -> dict[str, object]:
    return {"Parameter": {"Name": BOOTSTRAP["Name"], "Type": "String", "Value": value}}


def test_bootstrap_pass(clients: StubClients) -> None:
    clients.stub("ssm").add_response("get_parameter", _parameter("30"), BOOTSTRAP)
    [result] = preflight.check_cdk_bootstrap(clients, "123456789012")
    assert result.status == "pass" and result.detail == "bootstrap version 30"


def test_bootstrap_too_old(clients: StubClients) -> None:
    clients.stub("ssm").add_response("get_parameter", _parameter("5"), BOOTSTRAP)
    [result] = preflight.check_cdk_bootstrap(clients, "123456789012")
    assert result.status == "fail" and result.fix == "npx cdk bootstrap aws://123456789012/us-east-1"


def test_bootstrap_custom_qualifier_is_a_warning(clients: StubClients) -> None:
    client_error(clients.stub("ssm"), "get_parameter", "ParameterNotFound")
    clients.stub("cloudformation").add_response(
        "describe_stacks",
        {
            "Stacks": [
                {
                    "StackName": "CDKToolkit",
                    "CreationTime": datetime.datetime(2026, 1, 1),
                    "StackStatus": "CREATE_COMPLETE",
                }
            ]
        },
        {"StackName": "CDKToolkit"},
    )
    [result] = preflight.check_cdk_bootstrap(clients, "123456789012")
    assert result.status == "warn" and "custom qualifier" in result.detail
    clients.assert_done()


def test_not_bootstrapped(clients: StubClients) -> None:
    client_error(clients.stub("ssm"), "get_parameter", "ParameterNotFound")
    client_error(
        clients.stub("cloudformation"),
        "describe_stacks",
        "ValidationError",
        "Stack with id CDKToolkit does not exist",
    )
    [result] = preflight.check_cdk_bootstrap(clients, "123456789012")
    assert result.status == "fail" and "not bootstrapped" in result.detail


def test_bootstrap_parameter_access_denied(clients: StubClients) -> None:
    client_error(clients.stub("ssm"), "get_parameter", "AccessDeniedException")
    [result] = preflight.check_cdk_bootstrap(clients, "123456789012")
    assert result.status == "warn" and "ssm:GetParameter" in result.fix


# --- all together ---------------------------------------------------------------------------------------------------------


def test_run_preflight_runs_only_the_checks_that_apply(clients: StubClients) -> None:
    clients.stub("eks").add_response(
        "describe_cluster_versions",
        {"clusterVersions": [{"clusterVersion": "1.35", "versionStatus": "STANDARD_SUPPORT"}]},
    )
    clients.stub("ssm").add_response("get_parameter", _parameter("30"))
    results = preflight.run_preflight(clients, AccountRequirements(kubernetes_version="1.35"), "123456789012")
    assert [r.check for r in results] == ["EKS Kubernetes 1.35", "CDK bootstrap"]
    clients.assert_done()
