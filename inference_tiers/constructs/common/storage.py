"""The S3 buckets every tier creates, with one set of secure defaults: private, TLS-only, versioned, retained."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.constructs.common.checkov import skip_check

# How long a deleted or overwritten access-log object stays recoverable: versioning keeps someone who can delete
# log objects from erasing the record of their own requests, for long enough to notice and restore them.
ACCESS_LOG_NONCURRENT_EXPIRATION = Duration.days(90)
# Log delivery writes whole objects; a stray incomplete multipart upload is removed after this long.
ABORT_INCOMPLETE_UPLOADS_AFTER = Duration.days(7)


def access_logs_bucket(
    scope: Construct, construct_id: str, *, expiration: Duration | None = None
) -> s3.Bucket:
    """A destination for S3 server access logs: SSE-S3 (the only encryption log delivery supports), private,
    TLS-only, versioned, retained. One lifecycle rule expires noncurrent versions after
    ``ACCESS_LOG_NONCURRENT_EXPIRATION``, aborts incomplete multipart uploads after
    ``ABORT_INCOMPLETE_UPLOADS_AFTER`` and, with ``expiration`` (default: kept), expires log objects after that
    long. Object ownership is left to aws-cdk, which grants log delivery by bucket policy under the
    ``@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy`` flag (set in cdk.json)."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.S3_MANAGED,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        versioned=True,
        lifecycle_rules=[
            s3.LifecycleRule(
                expiration=expiration,
                noncurrent_version_expiration=ACCESS_LOG_NONCURRENT_EXPIRATION,
                abort_incomplete_multipart_upload_after=ABORT_INCOMPLETE_UPLOADS_AFTER,
            )
        ],
        removal_policy=RemovalPolicy.RETAIN,
    )
    skip_check(
        bucket,
        "CKV_AWS_18",
        "This bucket is the server access log destination of the stack's other buckets; logging it into "
        "itself would log every log delivery, without end",
    )
    return bucket


def private_bucket(
    scope: Construct,
    construct_id: str,
    *,
    key: kms.IKey | None,
    access_logs: s3.IBucket | None,
    access_logs_prefix: str,
    **props: Any,
) -> s3.Bucket:
    """A versioned, private, TLS-only, retained bucket, encrypted with ``key`` (SSE-KMS with a bucket key) or,
    with ``key=None``, SSE-S3 for readers whose AWS managed policies grant no key use. Server access logs go to
    ``access_logs`` under ``access_logs_prefix`` when given. ``props``: any other ``s3.Bucket`` property."""
    return s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS if key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=key,
        bucket_key_enabled=True if key else None,
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned=True,
        removal_policy=RemovalPolicy.RETAIN,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=access_logs_prefix if access_logs else None,
        **props,
    )
