"""Bedrock model-invocation logging: an account-and-Region setting that CloudFormation has no type for.

``AWS::Bedrock::ModelInvocationLoggingConfiguration`` does not exist (Cloud Control answers
TypeNotFoundException), so an ``AwsCustomResource`` calls ``PutModelInvocationLoggingConfiguration`` on create
and update and ``DeleteModelInvocationLoggingConfiguration`` on delete. The setting is global to the account
and Region: a second configuration overwrites the first and deleting either turns logging off, hence one per
app and environment (checked here) and opt-in in the tier.

Destinations: a KMS-encrypted, TLS-only, private, retained S3 bucket with a lifecycle and server access logs,
and a KMS-encrypted CloudWatch log group with a retention, written by a role only Bedrock in this account and
Region can assume. The Put call validates those permissions synchronously, so it runs after them.
"""

from __future__ import annotations

from aws_cdk import CfnResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import custom_resources as cr
from constructs import Construct

from inference_tiers.constructs.common.encryption import allow_log_encryption, retained_key
from inference_tiers.constructs.common.nag import acknowledge
from inference_tiers.constructs.common.storage import access_logs_bucket, private_bucket
from inference_tiers.validation import Args

DEFAULT_OBJECT_EXPIRATION = Duration.days(365)
LOGGING_ACTIONS = (
    "bedrock:PutModelInvocationLoggingConfiguration",
    "bedrock:DeleteModelInvocationLoggingConfiguration",
)


class ModelInvocationLogging(Construct):
    """Turns on model-invocation logging for this stack's account and Region (and off again on delete).

    :param text_data: log prompts and responses of text models. Default True.
    :param image_data: log image inputs/outputs. Default False (images may carry personal data).
    :param embedding_data: log embeddings. Default False.
    :param video_data: log video inputs/outputs. Default False.
    :param audio_data: log audio inputs/outputs (speech models). Default False.
    :param log_retention: CloudWatch log retention. Default one year.
    :param object_expiration: how long log objects stay in S3. Default 365 days.
    :param key_prefix: S3 key prefix of the logs. Default ``bedrock-invocation-logs``.
    :param kms_key: key for the bucket and log groups. Default: a new key with rotation, retained.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        text_data: bool = True,
        image_data: bool = False,
        embedding_data: bool = False,
        video_data: bool = False,
        audio_data: bool = False,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        object_expiration: Duration = DEFAULT_OBJECT_EXPIRATION,
        key_prefix: str = "bedrock-invocation-logs",
        kms_key: kms.IKey | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        # Log delivery to the access-log bucket by bucket policy, not the legacy LogDeliveryWrite ACL, whatever
        # the app's feature flags (a user's app may not set it): context set here applies to every child.
        self.node.set_context("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy", True)
        self._built = False  # True once complete: only then does it hold this account's and Region's setting
        args = Args("ModelInvocationLogging")
        flags = {
            name: args.boolean(name, value)
            for name, value in (
                ("text_data", text_data),
                ("image_data", image_data),
                ("embedding_data", embedding_data),
                ("video_data", video_data),
                ("audio_data", audio_data),
            )
        }
        if not any(flags.values()):
            raise args.error(
                "text_data",
                text_data,
                "True, or another of image_data, embedding_data, video_data, audio_data True (every *_data "
                "flag is False, so nothing would be logged)",
            )
        args.instance(
            "log_retention",
            log_retention,
            logs.RetentionDays,
            "a logs.RetentionDays (RetentionDays.ONE_YEAR...)",
        )
        # The bucket policy grants <prefix>/AWSLogs/...: a leading, trailing or doubled '/' would grant a path
        # Bedrock does not write to. A deploy-time prefix is used unparsed in both places.
        args.text(
            "key_prefix",
            key_prefix,
            pattern=r"[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*",
            max_length=1024,
            description="ASCII letters, digits, '-' or '_', in segments separated by single '/' (no leading or "
            "trailing '/')",
        )
        args.duration("object_expiration", object_expiration, minimum=Duration.days(1))
        if object_expiration.is_unresolved() or object_expiration.to_milliseconds() % 86_400_000:
            raise args.error(
                "object_expiration",
                object_expiration,
                "a Duration of a whole number of days known at synth time (Duration.days(n), n >= 1)",
            )
        if kms_key is not None:
            args.implements("kms_key", kms_key, kms.IKey)
        self._check_single_per_environment(args)
        stack = Stack.of(self)
        bedrock_in_this_account = {
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:*"},
        }

        self.kms_key: kms.IKey = kms_key or retained_key(
            self, "Key", "Encrypts Amazon Bedrock model-invocation logs (S3 and CloudWatch Logs)"
        )
        """The key of :attr:`bucket`, :attr:`log_group` and :attr:`provider_log_group` (``kms_key``, or a new
        retained key): grant ``kms:Decrypt`` on it to whoever reads the logs."""
        # S3 SSE-KMS writes by Bedrock, and CloudWatch Logs encrypting this account's log groups.
        self.kms_key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("bedrock.amazonaws.com")],
                actions=["kms:GenerateDataKey"],
                resources=["*"],
                conditions=bedrock_in_this_account,
            )
        )
        allow_log_encryption(self.kms_key, self, "*")

        # The access-log bucket is not logged itself: that would recurse.
        self.access_logs_bucket = access_logs_bucket(self, "AccessLogsBucket", expiration=object_expiration)
        """The bucket that receives the S3 server access logs of :attr:`bucket` (SSE-S3, the only encryption
        log delivery supports; objects expire after ``object_expiration``)."""
        self.bucket = private_bucket(
            self,
            "Bucket",
            key=self.kms_key,
            access_logs=self.access_logs_bucket,
            access_logs_prefix="invocation-log-bucket/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=object_expiration,
                    noncurrent_version_expiration=Duration.days(30),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
        )
        """The bucket Bedrock writes invocation logs to, under
        ``<key_prefix>/AWSLogs/<account>/BedrockModelInvocationLogs/`` (encrypted with :attr:`kms_key`,
        retained; objects expire after ``object_expiration``): grant log readers on it."""
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("bedrock.amazonaws.com")],
                actions=["s3:PutObject"],
                resources=[
                    self.bucket.arn_for_objects(
                        f"{key_prefix}/AWSLogs/{stack.account}/BedrockModelInvocationLogs/*"
                    )
                ],
                conditions=bedrock_in_this_account,
            )
        )

        self.log_group = logs.LogGroup(
            self,
            "LogGroup",
            encryption_key=self.kms_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        """The CloudWatch log group Bedrock writes invocation logs to (encrypted with :attr:`kms_key`, kept
        for ``log_retention``, retained)."""
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("bedrock.amazonaws.com", conditions=bedrock_in_this_account),
            description="Lets Amazon Bedrock write model-invocation logs to one log group",
        )
        """The role Bedrock assumes to write to :attr:`log_group`; only Bedrock in this account and Region may
        assume it."""
        self.log_group.grant(self.role, "logs:CreateLogStream", "logs:PutLogEvents")

        logging_config = {
            "loggingConfig": {
                "textDataDeliveryEnabled": text_data,
                "imageDataDeliveryEnabled": image_data,
                "embeddingDataDeliveryEnabled": embedding_data,
                "videoDataDeliveryEnabled": video_data,
                "audioDataDeliveryEnabled": audio_data,
                "s3Config": {"bucketName": self.bucket.bucket_name, "keyPrefix": key_prefix},
                "cloudWatchConfig": {
                    "logGroupName": self.log_group.log_group_name,
                    "roleArn": self.role.role_arn,
                },
            }
        }
        put = cr.AwsSdkCall(
            service="Bedrock",
            action="PutModelInvocationLoggingConfiguration",
            parameters=logging_config,
            physical_resource_id=cr.PhysicalResourceId.of("bedrock-model-invocation-logging"),
        )
        self.provider_log_group = logs.LogGroup(
            self,
            "ProviderLogGroup",
            encryption_key=self.kms_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        """The log group of the ``AwsCustomResource`` Lambda function that calls the Bedrock API on deploy
        (encrypted with :attr:`kms_key`, kept for ``log_retention``, retained)."""
        self.custom_resource = cr.AwsCustomResource(
            self,
            "Configuration",
            resource_type="Custom::BedrockModelInvocationLogging",
            on_create=put,
            on_update=put,
            on_delete=cr.AwsSdkCall(service="Bedrock", action="DeleteModelInvocationLoggingConfiguration"),
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [
                    iam.PolicyStatement(actions=list(LOGGING_ACTIONS), resources=["*"]),
                    iam.PolicyStatement(
                        actions=["iam:PassRole"],
                        resources=[self.role.role_arn],
                        conditions={"StringEquals": {"iam:PassedToService": "bedrock.amazonaws.com"}},
                    ),
                ]
            ),
            install_latest_aws_sdk=False,  # the Lambda runtime's SDK has the Bedrock client; no npm at deploy
            log_group=self.provider_log_group,
        )
        """The ``AwsCustomResource`` that puts the logging configuration on create and update and deletes it
        on delete: depend on it for something that must run once logging is on."""
        # PutModelInvocationLoggingConfiguration checks the destinations' permissions when it is called: the
        # call waits for the bucket policy and the role's policy (the bucket, log group and role it references).
        call = self.custom_resource.node.find_child("Resource")
        assert self.bucket.policy is not None  # created by enforce_ssl and the Bedrock statement above
        call.node.add_dependency(self.bucket.policy, self.role.node.find_child("DefaultPolicy"))
        acknowledge(
            self.custom_resource,
            "AwsSolutions-IAM5[Resource::*]",
            "Put/DeleteModelInvocationLoggingConfiguration act on the account-wide setting and support no "
            "resource-level permissions, so IAM requires Resource '*'.",
        )
        # AwsCustomResource runs one Lambda function per stack; its role logs through the AWS managed policy.
        provider = stack.node.try_find_child(
            f"AWS{cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace('-', '')}"
        )
        if provider is not None:  # if aws-cdk renames it, cdk-nag and cfn-lint report the findings again
            # aws-cdk adds a DependsOn on the function's role, which its Role attribute already implies.
            function = provider.node.default_child
            assert isinstance(function, CfnResource)
            function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
            acknowledge(
                provider,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                "The AwsCustomResource provider function (created by aws-cdk) writes its own logs with "
                "AWSLambdaBasicExecutionRole, which allows only log-group and log-stream writes.",
            )
        self._built = True

    def _check_single_per_environment(self, args: Args) -> None:
        """A second configuration in the same account and Region would silently overwrite this one."""
        here = Stack.of(self)
        for construct in self.node.root.node.find_all():
            # One whose construction failed (an ArgumentError) configures nothing and does not count.
            if construct is self or not isinstance(construct, ModelInvocationLogging) or not construct._built:
                continue
            other = Stack.of(construct)
            if (other.account, other.region) == (here.account, here.region):
                raise args.error(
                    "scope",
                    self.node.path,
                    f"one ModelInvocationLogging per account and Region (the first is at {construct.node.path}): "
                    "Bedrock keeps a single logging configuration per account and Region",
                )
