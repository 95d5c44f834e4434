"""Where a SageMaker endpoint's container loads model weights from: an uncompressed S3 prefix or a model hub."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.validation import Args

_BUCKET_NAME = r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
_PREFIX = r"(?:[^/\s]+/)+"
_S3_PREFIX_URI = rf"s3://{_BUCKET_NAME}/{_PREFIX}"
_HUB_MODEL_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?"
_PREFIX_TEXT = "a key prefix ending with '/', such as models/qwen3-8b/ (or a deploy-time token)"
_HUB_TEXT = "<organisation>/<model> such as Qwen/Qwen3-8B (or a deploy-time token)"


def _prefix(args: Args, param: str, value: Any) -> str:
    return args.text(param, value, pattern=_PREFIX, max_length=1024, description=_PREFIX_TEXT)


def _hub_model_id(args: Args, param: str, value: Any) -> str:
    return args.text(param, value, pattern=_HUB_MODEL_ID, description=_HUB_TEXT)


@dataclass(frozen=True)
class ModelWeights:
    """Model weights for the serving container. Build with one of the ``from_*`` class methods.

    S3 prefixes are the default choice: SageMaker copies the uncompressed files to ``/opt/ml/model`` (no
    multi-hour tar.gz step for large models), the container needs no hub token and the model can run with
    network isolation. Hub downloads need internet egress, so network isolation is turned off for them.

    Fields (checked when created): ``bucket_name`` and ``prefix`` (ending with ``/``), with the ``bucket`` and
    its KMS ``key`` when known; or ``hub_model_id``. Bucket names, prefixes and hub ids may be deploy-time tokens.
    """

    bucket_name: str | None = None
    """The S3 bucket holding the weights (a token is accepted); ``None`` for hub weights."""
    prefix: str = ""
    """The key prefix of the uncompressed model directory, ending with ``/`` (a token is accepted); empty
    for hub weights."""
    bucket: s3.IBucket | None = None
    """The bucket, when known (``from_bucket``); ``None``: its ARN is built from
    :attr:`bucket_name`."""
    key: kms.IKey | None = None
    """The bucket's KMS key, which the execution role may decrypt with; ``None``: no key to grant."""
    hub_model_id: str | None = None
    """The Hugging Face Hub model id the container downloads at start-up, such as ``Qwen/Qwen3-8B``;
    ``None`` for S3 weights."""

    def __post_init__(self) -> None:
        args = Args("ModelWeights")
        if (self.bucket_name is None) == (self.hub_model_id is None):
            raise args.error(
                "bucket_name",
                self.bucket_name,
                "exactly one of bucket_name (with prefix) and hub_model_id; build the weights with "
                "ModelWeights.from_bucket, from_s3_uri or from_hub",
            )
        if self.hub_model_id is not None:
            _hub_model_id(args, "hub_model_id", self.hub_model_id)
            if self.prefix or self.bucket is not None or self.key is not None:
                raise args.error(
                    "hub_model_id", self.hub_model_id, "no prefix, bucket or key with hub weights"
                )
            return
        args.text("bucket_name", self.bucket_name, pattern=_BUCKET_NAME, description="an S3 bucket name")
        _prefix(args, "prefix", self.prefix)
        if self.bucket is not None:
            args.implements("bucket", self.bucket, s3.IBucket)
        if self.key is not None:
            args.implements("key", self.key, kms.IKey)

    @classmethod
    def from_bucket(cls, bucket: s3.IBucket, prefix: str) -> ModelWeights:
        """Every object under ``prefix`` (ending with ``/``; may be a token) in ``bucket``; its KMS key is
        granted too."""
        args = Args("ModelWeights.from_bucket")
        bucket = args.implements("bucket", bucket, s3.IBucket)
        prefix = _prefix(args, "prefix", prefix)
        return cls(bucket_name=bucket.bucket_name, prefix=prefix, bucket=bucket, key=bucket.encryption_key)

    @classmethod
    def from_s3_uri(cls, uri: str, *, key: kms.IKey | None = None) -> ModelWeights:
        """``s3://bucket/prefix/`` (trailing slash required); ``key``: the bucket's KMS key, if it has one.

        The URI is split into bucket and prefix, so it must be known at synth time; for a deploy-time bucket
        or prefix use :meth:`from_bucket` (with ``s3.Bucket.from_bucket_name`` for a bucket of another stack).
        """
        args = Args("ModelWeights.from_s3_uri")
        uri = args.text(
            "uri",
            uri,
            pattern=_S3_PREFIX_URI,
            allow_token=False,
            description="s3://<bucket>/<prefix>/ (an uncompressed model directory: config.json, tokenizer and "
            "safetensors files; the trailing slash is required; for deploy-time values use "
            "ModelWeights.from_bucket)",
        )
        if key is not None:
            args.implements("key", key, kms.IKey)
        bucket_name, _, prefix = uri.removeprefix("s3://").partition("/")
        return cls(bucket_name=bucket_name, prefix=prefix, key=key)

    @classmethod
    def from_hub(cls, model_id: str) -> ModelWeights:
        """A Hugging Face Hub model id such as ``Qwen/Qwen3-8B``, downloaded by the container at start-up."""
        return cls(hub_model_id=_hub_model_id(Args("ModelWeights.from_hub"), "model_id", model_id))

    @property
    def is_s3(self) -> bool:
        """Whether the weights come from S3 (mounted at ``/opt/ml/model``, network isolation on) rather than a
        model hub."""
        return self.bucket_name is not None

    @property
    def s3_uri(self) -> str:
        """``s3://<bucket_name>/<prefix>``; raises ``ValueError`` for hub weights."""
        if self.bucket_name is None:
            raise ValueError("ModelWeights.s3_uri: these weights come from a model hub, not S3")
        return f"s3://{self.bucket_name}/{self.prefix}"

    def objects_arn(self, scope: Construct) -> str | None:
        """The ARN pattern of every object under the prefix (None for hub weights)."""
        bucket_arn = self._bucket_arn(scope)
        return None if bucket_arn is None else f"{bucket_arn}/{self.prefix}*"

    def read_statements(self, scope: Construct) -> list[iam.PolicyStatement]:
        """List and read access to the prefix only (and decrypt with the bucket's key, if known)."""
        bucket_arn = self._bucket_arn(scope)
        if bucket_arn is None:
            return []
        statements = [
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[f"{bucket_arn}/{self.prefix}*"]),
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{self.prefix}*"]}},
            ),
        ]
        if self.key is not None:
            statements.append(iam.PolicyStatement(actions=["kms:Decrypt"], resources=[self.key.key_arn]))
        return statements

    def _bucket_arn(self, scope: Construct) -> str | None:
        if self.bucket is not None:
            return self.bucket.bucket_arn
        if self.bucket_name is None:
            return None
        return Stack.of(scope).format_arn(service="s3", region="", account="", resource=self.bucket_name)
