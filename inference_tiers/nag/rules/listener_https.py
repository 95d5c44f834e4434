"""GW2: a load-balancer listener serves HTTPS (or TLS), or only redirects to HTTPS."""

from __future__ import annotations

from collections.abc import Mapping

from cdk_nag import NagMessageLevel, NagRuleCompliance

from inference_tiers.nag import iam
from inference_tiers.nag.rule import AppFacts, Resource, Result, Rule


def _redirects_to_https(action: object) -> bool:
    if not isinstance(action, Mapping) or action.get("Type") != "redirect":
        return False
    config = action.get("RedirectConfig")
    return isinstance(config, Mapping) and config.get("Protocol") == "HTTPS"


def check(resource: Resource, facts: AppFacts) -> Result:
    protocol = resource.properties.get("Protocol")
    if protocol is None:
        return NagRuleCompliance.NOT_APPLICABLE  # Gateway Load Balancer listeners carry GENEVE, no protocol
    if protocol in ("HTTPS", "TLS"):
        return NagRuleCompliance.COMPLIANT
    actions = iam.as_list(resource.properties.get("DefaultActions"))
    if actions and all(_redirects_to_https(a) for a in actions):
        return NagRuleCompliance.COMPLIANT
    return NagRuleCompliance.NON_COMPLIANT


RULE = Rule(
    suffix="GW2",
    level=NagMessageLevel.ERROR,
    info="The load-balancer listener serves plain HTTP or TCP.",
    explanation=(
        "Prompts, completions and API keys cross this listener; in clear text anyone on the path reads them. "
        "Use Protocol HTTPS (ALB) or TLS (NLB) with a certificate and an ELBSecurityPolicy-TLS13 policy, or "
        "make the plain listener only redirect to HTTPS."
    ),
    documentation="https://docs.aws.amazon.com/elasticloadbalancing/latest/application/create-https-listener.html",
    resource_types=frozenset({"AWS::ElasticLoadBalancingV2::Listener"}),
    check=check,
)
