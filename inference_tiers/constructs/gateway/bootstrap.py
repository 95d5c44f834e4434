"""DatabaseBootstrap: the proxy's own PostgreSQL role and database, provisioned by a custom resource as the master
user (RDS Data API) before anything connects as that role; optionally followed by LiteLLM's migrations as an ECS
task (the ``gateway`` tier). The ``platform`` tier's chart runs its migrations in its own hook instead.

The handler is ``assets/gateway/migrate/index.py``: it runs the ECS task only when the resource's properties
name one (``TaskDefinitionArn``).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import CfnElement, CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from inference_tiers import ASSETS_DIR
from inference_tiers.constructs.common.checkov import skip_check
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.gateway.state import GatewayDatabase
from inference_tiers.litellm.database import bootstrap_queries

ASSETS = ASSETS_DIR / "gateway"
PASSWORD_PLACEHOLDER = ":password"


@dataclass(frozen=True)
class MigrationTask:
    """The ECS task that applies LiteLLM's migrations once the role exists.

    :param cluster: the ECS cluster it runs in.
    :param task_definition: the proxy's task definition.
    :param container_name: its proxy container.
    :param command: the container's command that migrates and exits (``proxy_command(migrate_only=True)``).
    :param subnets: where the task runs (it pulls its image through their routes).
    :param security_group: the task's security group.
    """

    cluster: ecs.Cluster
    task_definition: ecs.TaskDefinition
    container_name: str
    command: str
    subnets: ec2.SelectedSubnets
    security_group: ec2.ISecurityGroup


def asset_function(
    scope: Construct,
    name: str,
    *,
    asset: str,
    entry: str,
    timeout: Duration,
    memory_size: int,
    description: str,
    encryption_key: kms.IKey,
) -> tuple[lambda_.Function, logs.LogGroup]:
    """A Python function from ``assets/gateway/<asset>`` (``<name>Handler``) writing to its own log group
    (``<name>Logs``: ``encryption_key``, one year, retained)."""
    log_group = logs.LogGroup(
        scope,
        f"{name}Logs",
        encryption_key=encryption_key,
        retention=logs.RetentionDays.ONE_YEAR,
        removal_policy=RemovalPolicy.RETAIN,
    )
    handler = lambda_.Function(
        scope,
        f"{name}Handler",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler=entry,
        code=lambda_.Code.from_asset(str(ASSETS / asset)),
        timeout=timeout,
        memory_size=memory_size,
        log_group=log_group,
        description=description,
    )
    return handler, log_group


class DatabaseBootstrap(Construct):
    """Creates (or updates) the proxy's role ``database.username`` with the password of ``database.app_secret``
    and its database ``database.database_name``, once per deploy that changes its properties; with
    ``migration_task``, then runs that task and waits for it to exit 0.

    Make whatever connects as the role depend on this construct. ``encryption_key`` must let CloudWatch Logs use
    it (``allow_log_encryption``). Attributes: ``resource`` (the ``CustomResource``), ``handler`` (its function).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        database: GatewayDatabase,
        encryption_key: kms.IKey,
        migration_task: MigrationTask | None = None,
    ) -> None:
        """
        :param database: the proxy's database (master secret, app secret, cluster with the Data API).
        :param encryption_key: encrypts the function's log group.
        :param migration_task: the ECS migration task to run after the role. Default: none (the caller
            migrates, e.g. the LiteLLM chart's hook).
        """
        super().__init__(scope, construct_id)
        description = "Provisions the gateway's database role" + (
            " and runs LiteLLM's migrations once per deploy" if migration_task else " once per deploy"
        )
        handler, log_group = asset_function(
            self,
            "Migration",
            asset="migrate",
            entry="index.on_event",
            timeout=Duration.minutes(14),
            memory_size=256,
            description=description,
            encryption_key=encryption_key,
        )
        self.handler = handler
        """The custom resource's function (``assets/gateway/migrate``)."""
        handler.add_to_role_policy(
            iam.PolicyStatement(
                actions=["rds-data:ExecuteStatement"], resources=[database.cluster.cluster_arn]
            )
        )
        database.master_secret.grant_read(handler)
        database.app_secret.grant_read(handler)
        # The ECS task's properties first: the gateway tier's template keeps its order.
        properties = {} if migration_task is None else _allow_migration_task(handler, migration_task)
        properties |= {
            "DatabaseClusterArn": database.cluster.cluster_arn,
            "Database": database.database_name,
            "MasterSecretArn": database.master_secret.secret_arn,
            "AppSecretArn": database.app_secret.secret_arn,
            "Queries": bootstrap_queries(
                username=database.username,
                database=database.database_name,
                password_placeholder=PASSWORD_PLACEHOLDER,
            ),
        }
        provider = cr.Provider(self, "MigrationProvider", on_event_handler=handler, log_group=log_group)
        self._acknowledge(handler, provider, migration_task)
        self.resource = CustomResource(
            self,
            "Migration",
            service_token=provider.service_token,
            resource_type="Custom::LiteLLMMigration",
            properties=properties,
        )
        """The ``Custom::LiteLLMMigration`` resource."""
        # The Data API runs statements only on an available writer (Aurora user guide, Data API limitations):
        # wait for the whole cluster, its instances included.
        self.resource.node.add_dependency(database.cluster)
        if migration_task is not None:
            # The task runs as the task and execution roles in the private subnets and pulls its image through
            # their NAT routes: wait for the roles' policies and those routes too.
            self.resource.node.add_dependency(
                migration_task.task_definition.task_role,
                migration_task.task_definition,
                migration_task.subnets.internet_connectivity_established,
            )

    def _acknowledge(
        self, handler: lambda_.Function, provider: cr.Provider, task: MigrationTask | None
    ) -> None:
        basic = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"
        acknowledge(
            handler, basic, "The migration function uses the basic execution role only to write its logs"
        )
        acknowledge(provider, basic, "The aws-cdk Provider framework function uses it only to write its logs")
        stack = Stack.of(self)
        if task is not None:
            acknowledge(
                handler,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:task/<{stack.get_logical_id(_cfn(task.cluster))}>/*]",
                "DescribeTasks needs the migration task's ARN, known only after RunTask: any task of this "
                "gateway's own cluster, read-only",
            )
        acknowledge(
            provider,
            f"AwsSolutions-IAM5[Resource::<{stack.get_logical_id(_cfn(handler))}.Arn>:*]",
            "The Provider framework invokes any version of the migration function, and only that function",
        )
        # The Provider's own framework function gets its skips from FrameworkFunctionSkips (build_app).
        skip_check(
            handler,
            "CKV_AWS_117",
            "Calls only AWS APIs (RDS Data API, ECS, Secrets Manager, Lambda): no VPC resource to reach",
        )
        skip_check(
            handler,
            "CKV_AWS_115",
            "No reserved concurrency: CloudFormation runs one operation at a time per stack, so migrations never "
            "overlap, and any reservation fails in accounts at the new-account quota of 10 concurrent "
            "executions (UnreservedConcurrentExecution must stay at least 10)",
        )
        skip_check(
            handler,
            "CKV_AWS_116",
            "Invoked synchronously by CloudFormation through the Provider framework, which reports every failure to the stack: no asynchronous event to dead-letter",
        )


def _allow_migration_task(handler: lambda_.Function, task: MigrationTask) -> dict[str, object]:
    """Let ``handler`` run ``task`` (and pass its roles to ECS); return the properties that name it."""
    handler.add_to_role_policy(
        iam.PolicyStatement(
            actions=["ecs:RunTask"],
            resources=[task.task_definition.task_definition_arn],
            conditions={"ArnEquals": {"ecs:cluster": task.cluster.cluster_arn}},
        )
    )
    tasks = Stack.of(handler).format_arn(
        service="ecs", resource="task", resource_name=f"{task.cluster.cluster_name}/*"
    )
    handler.add_to_role_policy(iam.PolicyStatement(actions=["ecs:DescribeTasks"], resources=[tasks]))
    roles = [task.task_definition.task_role.role_arn, task.task_definition.obtain_execution_role().role_arn]
    handler.add_to_role_policy(
        iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=roles,
            conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
        )
    )
    return {
        "ClusterArn": task.cluster.cluster_arn,
        "TaskDefinitionArn": task.task_definition.task_definition_arn,
        "ContainerName": task.container_name,
        "MigrateCommand": task.command,
        "Subnets": task.subnets.subnet_ids,
        "SecurityGroups": [task.security_group.security_group_id],
    }


def _cfn(construct: Construct) -> CfnElement:
    resource = construct.node.default_child
    assert isinstance(resource, CfnElement), f"{construct.node.path} has no CloudFormation resource"
    return resource
