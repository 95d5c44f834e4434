"""InferenceChecks: the cdk-nag v3 pack of generative-AI inference rules, usable in any CDK app.

    Validations.of(app).add_plugins(InferenceChecks(app))

Findings are acknowledged exactly like cdk-nag's: ``Validations.of(scope).acknowledge(Acknowledgment(id=...,
reason=...))`` on the resource or any construct above it, with the granular id where the rule reports one.
"""

from __future__ import annotations

import typing

import jsii
from aws_cdk import CfnResource, PolicyValidationPluginReport
from cdk_nag import IApplyRule, NagMessageLevel, NagPack, NagRuleCompliance
from constructs import IConstruct

from inference_tiers.nag.facts import ConstructTreeFacts
from inference_tiers.nag.rule import PACK_NAME, Result, Rule
from inference_tiers.nag.rules import RULES


@jsii.implements(IApplyRule)
class _Finding:
    """A rule's outcome on one resource that cdk-nag must report unless it is acknowledged: non-compliant, the
    findings it returned, or the error its check raised (which cdk-nag turns into a finding of that rule).

    The pack evaluates its rules in Python and hands cdk-nag only these: each member cdk-nag reads is a round trip
    through the jsii kernel, and a compliant outcome needs none. jsii reads an interface's members from the class,
    so they are properties, not instance attributes.
    """

    def __init__(self, rule: Rule, node: CfnResource, outcome: Result | Exception) -> None:
        self._rule = rule
        self._node = node
        self._outcome = outcome

    @property
    def rule_suffix_override(self) -> str | None:
        return self._rule.suffix

    @property
    def info(self) -> str:
        return self._rule.info

    @property
    def explanation(self) -> str:
        return f"{self._rule.explanation} See {self._rule.documentation}"

    @property
    def level(self) -> NagMessageLevel:
        return self._rule.level

    @property
    def node(self) -> CfnResource:
        return self._node

    def rule(self, node: CfnResource) -> Result:
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome


class InferenceChecks(NagPack):
    """Generative-AI inference rules (Bedrock, SageMaker, EKS/GPU, gateway); see docs/nag-rules.md.

    :param scope: the app (or any construct) the pack is registered on, as cdk-nag's packs take it.
    :param verbose: add each rule's explanation (what to change, and the AWS documentation) to the finding.
        Default True: a finding of this pack should say how to fix it without a trip to the docs.
    """

    def __init__(self, scope: IConstruct | None = None, *, verbose: bool = True) -> None:
        super().__init__(scope, verbose=verbose)
        self._pack_name = PACK_NAME
        self._rules_by_type: dict[str, list[Rule]] = {}
        for rule in RULES:
            for resource_type in rule.resource_types:
                self._rules_by_type.setdefault(resource_type, []).append(rule)
        self._facts: ConstructTreeFacts | None = None

    @property
    def name(self) -> str:
        return "inference-tiers"

    def validate_scope(self, scope: IConstruct) -> PolicyValidationPluginReport:
        # Facts about the rest of the app are read fresh for each validation: the tree may have grown since.
        self._facts = ConstructTreeFacts(scope.node.root)
        try:
            return super().validate_scope(scope)
        finally:
            self._facts = None

    def _check_resource(self, node: CfnResource) -> None:
        assert self._facts is not None, "cdk-nag calls checkResource only from validateScope"
        for rule in self._rules_by_type.get(self._facts.kind(node), ()):
            outcome: Result | Exception
            try:
                outcome = rule.check(self._facts.resource(node), self._facts)
            # cdk-nag reports an error as a finding of this rule, as it does for its own rules.
            except Exception as error:
                outcome = error
            if outcome not in _PASSED:
                # IApplyRule's typing declares its members settable; cdk-nag only reads them.
                self._apply_rule(typing.cast(IApplyRule, _Finding(rule, node, outcome)))


# Outcomes cdk-nag's applyRule does nothing with: it acts only on NON_COMPLIANT and on each finding of a list (cdk-nag
# 3.0.2, lib/nag-pack.js, NagPack.applyRule).
_PASSED: tuple[Result, ...] = (NagRuleCompliance.COMPLIANT, NagRuleCompliance.NOT_APPLICABLE, [])
