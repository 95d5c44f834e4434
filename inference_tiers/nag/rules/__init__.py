"""The pack's rules, one module each; RULES is the order the pack applies and docs/nag-rules.md lists them."""

from inference_tiers.nag.rule import Rule
from inference_tiers.nag.rules import (
    bedrock_guarded_invoke,
    bedrock_guardrail_key,
    bedrock_invocation_logging,
    bedrock_invoke_wildcard,
    bedrock_profile_streaming,
    eks_control_plane_logging,
    eks_endpoint_access,
    eks_secrets_encryption,
    gateway_task_models,
    gpu_launch_template_imds,
    listener_https,
    log_group_key,
    sagemaker_endpoint_key,
    sagemaker_invoke_wildcard,
    sagemaker_model_isolation,
    sagemaker_trust_confused_deputy,
)

RULES: tuple[Rule, ...] = (
    bedrock_guardrail_key.RULE,
    bedrock_guarded_invoke.RULE,
    bedrock_invoke_wildcard.RULE,
    bedrock_profile_streaming.RULE,
    bedrock_invocation_logging.RULE,
    sagemaker_endpoint_key.RULE,
    sagemaker_model_isolation.RULE,
    sagemaker_invoke_wildcard.RULE,
    sagemaker_trust_confused_deputy.RULE,
    eks_endpoint_access.RULE,
    eks_secrets_encryption.RULE,
    eks_control_plane_logging.RULE,
    gpu_launch_template_imds.RULE,
    log_group_key.RULE,
    gateway_task_models.RULE,
    listener_https.RULE,
)
