"""An application inference profile: a per-application handle on a model whose tags attribute its cost.

Invoke the profile's ARN as ``modelId``; once its tags are activated as cost-allocation tags, Cost Explorer and
the CUR split Bedrock spend per application. Name, description and model source cannot change in place
(CloudFormation replaces the profile), so the generated name includes a hash of the model source.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from aws_cdk import CfnTag, Names, Token
from aws_cdk import aws_bedrock as bedrock
from constructs import Construct

from inference_tiers.constructs.bedrock.model_access import (
    ApplicationProfile,
    CrossRegionProfile,
    FoundationModel,
)

# CloudFormation's patterns for AWS::Bedrock::ApplicationInferenceProfile (cfn-lint schema).
NAME_PATTERN = r"([0-9a-zA-Z][ _-]?)+"
DESCRIPTION_PATTERN = r"([0-9a-zA-Z:.][ _-]?)+"
TAG_PATTERN = r"[a-zA-Z0-9\s._:/=+@-]*"


def _check(value: str, where: str, pattern: str, max_length: int) -> None:
    if Token.is_unresolved(value):
        return
    if not isinstance(value, str) or not 1 <= len(value) <= max_length or not re.fullmatch(pattern, value):
        raise ValueError(
            f"{where}: got {value!r}; expected 1 to {max_length} characters matching ^{pattern}$ (letters, "
            "digits, and single spaces, underscores or hyphens between them"
            + (", colons and periods)" if pattern == DESCRIPTION_PATTERN else ")")
        )


def check_cost_tags(tags: Mapping[str, str], where: str) -> None:
    """Bedrock's tag rules: at most 200, keys 1-128 and values 0-256 of ``[a-zA-Z0-9 ._:/=+@-]``, no ``aws:``."""
    if len(tags) > 200:
        raise ValueError(f"{where}: got {len(tags)} tags; expected at most 200")
    for key, value in tags.items():
        if (
            not isinstance(key, str)
            or not 1 <= len(key) <= 128
            or not re.fullmatch(TAG_PATTERN, key)
            or key.lower().startswith("aws:")
        ):
            raise ValueError(
                f"{where}: got tag key {key!r}; expected 1-128 characters of letters, digits, spaces and "
                "._:/=+@- not starting with 'aws:'"
            )
        if not isinstance(value, str) or len(value) > 256 or not re.fullmatch(TAG_PATTERN, value):
            raise ValueError(
                f"{where}: got tag value {value!r} for {key!r}; expected at most 256 characters of letters, "
                "digits, spaces and ._:/=+@-"
            )


class ApplicationInferenceProfile(Construct):
    """``AWS::Bedrock::ApplicationInferenceProfile`` copying a foundation model or a cross-Region profile.

    :param model_source: the model (this Region) or system inference profile the profile copies.
    :param profile_name: 1-64 characters matching ``^([0-9a-zA-Z][ _-]?)+$``. Default: generated from the
        construct path and the model source.
    :param description: 1-200 characters matching ``^([0-9a-zA-Z:.][ _-]?)+$`` (no commas or other
        punctuation). Default: none.
    :param cost_tags: tags to activate as cost-allocation tags. Default: none.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        model_source: FoundationModel | CrossRegionProfile,
        profile_name: str | None = None,
        description: str | None = None,
        cost_tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if not isinstance(model_source, FoundationModel | CrossRegionProfile):
            raise ValueError(
                f"ApplicationInferenceProfile.model_source: got {model_source!r}; expected a FoundationModel or "
                "CrossRegionProfile"
            )
        if profile_name is not None:
            _check(profile_name, "ApplicationInferenceProfile.profile_name", NAME_PATTERN, 64)
        if description is not None:
            _check(description, "ApplicationInferenceProfile.description", DESCRIPTION_PATTERN, 200)
        tags = dict(cost_tags or {})
        check_cost_tags(tags, "ApplicationInferenceProfile.cost_tags")
        source_hash = hashlib.sha256(model_source.invoke_id(self).encode()).hexdigest()[:8]
        name = (
            profile_name or f"{Names.unique_resource_name(self, max_length=55, separator='-')}-{source_hash}"
        )
        self.resource = bedrock.CfnApplicationInferenceProfile(
            self,
            "Resource",
            inference_profile_name=name,
            description=description,
            model_source=bedrock.CfnApplicationInferenceProfile.InferenceProfileModelSourceProperty(
                copy_from=model_source.arn(self)
            ),
            tags=[CfnTag(key=key, value=value) for key, value in sorted(tags.items())],
        )
        self.source = model_source
        self.cost_tags = tags

    @property
    def profile_arn(self) -> str:
        """The ARN to pass as ``modelId``."""
        return self.resource.attr_inference_profile_arn

    @property
    def profile_id(self) -> str:
        return self.resource.attr_inference_profile_id

    @property
    def model_source(self) -> ApplicationProfile:
        """This profile as a model source for ``ModelInvokeAccess``."""
        return ApplicationProfile(profile_arn=self.profile_arn, source=self.source)
