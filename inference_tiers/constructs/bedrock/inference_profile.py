"""An application inference profile: a per-application handle on a model whose tags attribute its cost.

Invoke the profile's ARN as ``modelId``; once its tags are activated as cost-allocation tags, Cost Explorer and
the CUR split Bedrock spend per application. Name, description and model source cannot change in place
(CloudFormation replaces the profile), so the generated name includes a hash of the model source.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnTag, Names
from aws_cdk import aws_bedrock as bedrock
from constructs import Construct

from inference_tiers.constructs.bedrock.model_access import (
    ApplicationProfile,
    CrossRegionProfile,
    FoundationModel,
)
from inference_tiers.validation import Args

# CloudFormation's patterns for AWS::Bedrock::ApplicationInferenceProfile (cfn-lint schema).
NAME_PATTERN = r"([0-9a-zA-Z][ _-]?)+"
DESCRIPTION_PATTERN = r"([0-9a-zA-Z:.][ _-]?)+"
TAG_PATTERN = r"[a-zA-Z0-9\s._:/=+@-]*"


def check_cost_tags(args: Args, param: str, tags: Any) -> dict[str, str]:
    """Bedrock's tag rules: at most 200, keys 1-128 and values 0-256 of ``[a-zA-Z0-9 ._:/=+@-]``, no ``aws:``.

    Keys must be known at synth time (the ``aws:`` rule and uniqueness are checked on them); a value may be a
    deploy-time token (a team name from a parameter), passed through unparsed.
    """
    checked = args.mapping(
        param,
        tags,
        lambda name, value: args.text(
            name, value, pattern=TAG_PATTERN, min_length=0, max_length=256, description=_TAG_TEXT
        ),
        max_items=200,
    )
    for key in checked:
        args.text(
            f"{param} key", key, pattern=TAG_PATTERN, max_length=128, description=_TAG_TEXT, allow_token=False
        )
        if key.lower().startswith("aws:"):
            raise args.error(f"{param} key", key, "a tag key that does not start with 'aws:' (reserved)")
    return checked


_TAG_TEXT = "letters, digits, spaces and ._:/=+@-"


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
        args = Args("ApplicationInferenceProfile")
        args.instance(
            "model_source",
            model_source,
            FoundationModel | CrossRegionProfile,  # type: ignore[arg-type]
            "a FoundationModel or CrossRegionProfile (an application profile cannot copy another one)",
        )
        if profile_name is not None:
            args.text(
                "profile_name",
                profile_name,
                pattern=NAME_PATTERN,
                max_length=64,
                description=f"a name matching ^{NAME_PATTERN}$ (letters, digits, and single spaces, underscores "
                "or hyphens between them)",
            )
        if description is not None:
            args.text(
                "description",
                description,
                pattern=DESCRIPTION_PATTERN,
                max_length=200,
                description=f"a description matching ^{DESCRIPTION_PATTERN}$ (letters, digits, colons and "
                "periods, and single spaces, underscores or hyphens between them; no commas)",
            )
        tags = check_cost_tags(args, "cost_tags", {} if cost_tags is None else cost_tags)
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
        """The ``bedrock.CfnApplicationInferenceProfile`` itself, for properties this construct does not
        set."""
        self.source = model_source
        """The foundation model or cross-Region profile the profile copies (``model_source``)."""
        self.cost_tags = tags
        """The profile's tags, key to value (empty for none): activate them as cost-allocation tags to split
        Bedrock spend per application."""

    @property
    def profile_arn(self) -> str:
        """The ARN to pass as ``modelId``."""
        return self.resource.attr_inference_profile_arn

    @property
    def profile_id(self) -> str:
        """The profile's id (a deploy-time string): the last part of :attr:`profile_arn`."""
        return self.resource.attr_inference_profile_id

    @property
    def model_source(self) -> ApplicationProfile:
        """This profile as a model source for ``ModelInvokeAccess``."""
        return ApplicationProfile(profile_arn=self.profile_arn, source=self.source)
