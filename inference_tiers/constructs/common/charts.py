"""Helm charts installed from a local copy that a fetch script makes: what happens when it has not been run."""

from __future__ import annotations

from aws_cdk import Annotations, CfnRule, CfnRuleAssertion, Fn
from constructs import Construct


def refuse_unfetched_chart(scope: Construct, rule_id: str, warning_id: str, message: str) -> None:
    """Warn at synth (``warning_id``, ``message``) and add a template rule that fails with ``message`` before
    CloudFormation creates anything: synth stays possible (review, tests) while a placeholder chart stands in for
    one that was never fetched, and a deploy cannot get as far as installing the placeholder."""
    Annotations.of(scope).add_warning_v2(warning_id, message)
    CfnRule(
        scope,
        rule_id,
        assertions=[
            CfnRuleAssertion(
                assert_=Fn.condition_equals("not-packaged", "packaged"), assert_description=message
            )
        ],
    )
