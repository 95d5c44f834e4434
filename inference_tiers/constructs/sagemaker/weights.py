"""Where a SageMaker endpoint's container loads model weights from: an uncompressed S3 prefix or a model hub."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from inference_tiers.config import ConfigError

_S3_PREFIX_URI = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<prefix>(?:[^/\s]+/)+)")
_HUB_MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?")


@dataclass(frozen=True)
class ModelWeights:
    """Model weights for the serving container. Build with one of the ``from_*`` class methods.

    S3 prefixes are the default choice: SageMaker copies the uncompressed files to ``/opt/ml/model`` (no
    multi-hour tar.gz step for large models), the container needs no hub token and the model can run with
    network isolation. Hub downloads need internet egress, so network isolation is turned off for them.
    """

    bucket_name: str | None = None
    prefix: str = ""
    bucket: s3.IBucket | None = None
    key: kms.IKey | None = None
    hub_model_id: str | None = None

    @classmethod
    def from_bucket(cls, bucket: s3.IBucket, prefix: str) -> ModelWeights:
        """Every object under ``prefix`` (which must end with ``/``) in ``bucket``; its KMS key is granted too."""
        _check_prefix(prefix, key="prefix")
        return cls(bucket_name=bucket.bucket_name, prefix=prefix, bucket=bucket, key=bucket.encryption_key)

    @classmethod
    def from_s3_uri(cls, uri: str, *, key: kms.IKey | None = None, setting: str = "s3_uri") -> ModelWeights:
        """``s3://bucket/prefix/`` (trailing slash required); ``key``: the bucket's KMS key, if it has one.

        A malformed ``uri`` raises ConfigError (a ValueError) naming ``setting``.
        """
        match = _S3_PREFIX_URI.fullmatch(uri)
        if match is None:
            raise ConfigError(
                setting,
                uri,
                "s3://<bucket>/<prefix>/ (an uncompressed model directory: config.json, tokenizer and "
                "safetensors files; the trailing slash is required)",
            )
        return cls(bucket_name=match["bucket"], prefix=match["prefix"], key=key)

    @classmethod
    def from_hub(cls, model_id: str) -> ModelWeights:
        """A Hugging Face Hub model id such as ``Qwen/Qwen3-8B``, downloaded by the container at start-up."""
        if not _HUB_MODEL_ID.fullmatch(model_id):
            raise ValueError(
                f"hub model id: got {model_id!r}; expected <organisation>/<model> such as Qwen/Qwen3-8B"
            )
        return cls(hub_model_id=model_id)

    @property
    def is_s3(self) -> bool:
        return self.bucket_name is not None

    @property
    def s3_uri(self) -> str:
        if self.bucket_name is None:
            raise ValueError("s3_uri: these weights come from a model hub, not S3")
        return f"s3://{self.bucket_name}/{self.prefix}"

    def read_statements(self, scope: Construct) -> list[iam.PolicyStatement]:
        """List and read access to the prefix only (and decrypt with the bucket's key, if known)."""
        if self.bucket_name is None:
            return []
        bucket_arn = self.bucket.bucket_arn if self.bucket else _bucket_arn(scope, self.bucket_name)
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

    def nag_resource_id(self, scope: Construct) -> str | None:
        """How cdk-nag names the prefix wildcard of :meth:`read_statements` (None for hub weights)."""
        if self.bucket_name is None:
            return None
        cfn_bucket = self.bucket.node.default_child if self.bucket else None
        if isinstance(cfn_bucket, s3.CfnBucket):
            return f"<{Stack.of(scope).get_logical_id(cfn_bucket)}.Arn>/{self.prefix}*"
        return f"arn:<AWS::Partition>:s3:::{self.bucket_name}/{self.prefix}*"


def _check_prefix(prefix: str, *, key: str) -> None:
    if Token.is_unresolved(prefix):
        return
    if not re.fullmatch(r"(?:[^/\s]+/)+", prefix):
        raise ValueError(
            f"{key}: got {prefix!r}; expected a key prefix ending with '/', such as models/qwen3-8b/"
        )


def _bucket_arn(scope: Construct, bucket_name: str) -> str:
    return Stack.of(scope).format_arn(service="s3", region="", account="", resource=bucket_name)
