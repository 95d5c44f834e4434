"""The shared argument checks: each check accepts what it documents, refuses the rest with a named message."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam

from inference_tiers.validation import Args, ArgumentError, describe, is_token

ARGS = Args("Widget")


class Color(StrEnum):
    RED = "RED"
    BLUE = "BLUE"


@pytest.fixture(scope="module")
def stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Stack")


def test_message_names_owner_parameter_value_and_what_is_accepted() -> None:
    with pytest.raises(ArgumentError) as raised:
        ARGS.integer("copies", 0, minimum=1, maximum=8)
    assert str(raised.value) == "Widget: parameter 'copies' got 0; expected an integer from 1 to 8"
    assert (raised.value.owner, raised.value.param, raised.value.value) == ("Widget", "copies", 0)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("check", "value", "match"),
    [
        (lambda v: ARGS.integer("n", v, minimum=1), "1", "expected an integer"),
        (lambda v: ARGS.integer("n", v, minimum=1), True, "expected an integer"),
        (lambda v: ARGS.integer("n", v, minimum=1), 1.0, "expected an integer"),
        (lambda v: ARGS.integer("n", v, maximum=4), 5, "at most 4"),
        (lambda v: ARGS.number("x", v, minimum=0, exclusive_minimum=True), 0, "greater than 0"),
        (lambda v: ARGS.number("x", v), float("nan"), "a number"),
        (lambda v: ARGS.number("x", v), "0.5", "a number"),
        (lambda v: ARGS.boolean("b", v), "true", "True or False"),
        (lambda v: ARGS.text("s", v), "", "a non-empty string"),
        (lambda v: ARGS.text("s", v), 3, "a non-empty string"),
        (lambda v: ARGS.text("s", v, max_length=3), "abcd", "at most 3 characters"),
        (lambda v: ARGS.text("s", v, pattern=r"[a-z]+"), "A", r"matching \[a-z\]\+"),
        (lambda v: ARGS.choice("c", v, Color), "GREEN", "one of Color.RED, Color.BLUE"),
        (lambda v: ARGS.one_of("o", v, ["a", "b"]), "c", "one of 'a', 'b'"),
        (lambda v: ARGS.one_of("o", v, [1, 2]), True, "one of 1, 2"),
        (
            lambda v: ARGS.duration("d", v, maximum=cdk.Duration.minutes(1)),
            cdk.Duration.minutes(2),
            "at most",
        ),
        (lambda v: ARGS.duration("d", v), 90, r"Duration.seconds"),
        (lambda v: ARGS.duration("d", v), cdk.Duration.millis(1500), "whole seconds"),
        (lambda v: ARGS.sequence("words", v), "darn", "a string is not a list"),
        (lambda v: ARGS.sequence("words", v, max_items=1), ["a", "b"], "0 to 1 items"),
        (lambda v: ARGS.sequence("words", v, unique=True), ["a", "a"], r"'words\[1\]'.*at most once"),
        (lambda v: ARGS.sequence("words", v, lambda n, i: ARGS.text(n, i)), ["a", ""], r"'words\[1\]'"),
        (lambda v: ARGS.mapping("tags", v, key_pattern="[a-z]+"), {"A": "x"}, "'tags key'"),
        (lambda v: ARGS.mapping("tags", v), ["a"], "a mapping"),
        (lambda v: ARGS.implements("grantee", v, iam.IGrantable), "arn:aws:iam::1:role/x", "not a string"),
        (lambda v: ARGS.implements("grantee", v, iam.IGrantable), object(), "an IGrantable"),
        (lambda v: ARGS.instance("color", v, Color), "RED", "a Color"),
    ],
)
def test_misuse_is_refused_with_the_parameter_named(check: Any, value: Any, match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        check(value)


def test_accepted_values_come_back_normalized(stack: cdk.Stack) -> None:
    role = iam.Role(stack, "Role", assumed_by=iam.AccountRootPrincipal())
    assert ARGS.integer("n", 3, minimum=1, maximum=3) == 3
    assert ARGS.number("x", 2, minimum=0, exclusive_minimum=True) == 2
    assert ARGS.choice("c", "BLUE", Color) is Color.BLUE
    assert ARGS.choice("c", Color.RED, Color) is Color.RED
    assert ARGS.sequence("words", ["a", "b"], lambda n, v: ARGS.text(n, v)) == ("a", "b")
    assert ARGS.mapping("tags", {"a": 1}) == {"a": 1}
    assert ARGS.implements("grantee", role, iam.IGrantable) is role
    imported = iam.Role.from_role_arn(stack, "Imported", "arn:aws:iam::123456789012:role/x")
    assert ARGS.implements("role", imported, iam.IRole) is imported


def test_tokens_pass_unparsed_where_allowed_and_are_refused_where_not(stack: cdk.Stack) -> None:
    text_token = cdk.CfnParameter(stack, "Email").value_as_string
    number_token = cdk.CfnParameter(stack, "Count", type="Number").value_as_number
    assert ARGS.text("email", text_token, pattern=r"[^@]+@[^@]+") == text_token
    assert ARGS.integer("count", number_token, minimum=1, allow_token=True) == number_token
    assert ARGS.number("x", number_token, minimum=1, allow_token=True) == number_token
    duration = cdk.Duration.seconds(number_token)
    assert ARGS.duration("d", duration, maximum=cdk.Duration.seconds(1)) is duration
    with pytest.raises(ArgumentError, match="known at synth time"):
        ARGS.text("name", text_token, allow_token=False)
    with pytest.raises(ArgumentError, match="an integer"):
        ARGS.integer("count", number_token)
    assert is_token(text_token) and is_token(number_token) and not is_token("plain")
    assert describe(text_token) == "a deploy-time token"


def test_seconds_gives_whole_seconds_and_passes_second_tokens_unparsed(stack: cdk.Stack) -> None:
    assert ARGS.seconds("t", cdk.Duration.minutes(2), maximum=cdk.Duration.hours(1)) == 120
    number_token = cdk.CfnParameter(stack, "Seconds", type="Number").value_as_number
    seconds = ARGS.seconds("t", cdk.Duration.seconds(number_token))
    assert stack.resolve(seconds) == {"Ref": "Seconds"}
    with pytest.raises(
        ArgumentError, match=r"'t' got a deploy-time token; expected .*Duration.seconds\(token\)"
    ):
        ARGS.seconds("t", cdk.Duration.minutes(number_token))
    with pytest.raises(
        ArgumentError, match=r"'t' got Duration 2 hours; expected a Duration of at most 1 hour"
    ):
        ARGS.seconds("t", cdk.Duration.hours(2), maximum=cdk.Duration.hours(1))
    with pytest.raises(ArgumentError, match="expected a Duration"):
        ARGS.seconds("t", 30)


def test_integer_bounds_are_shown_in_full() -> None:
    with pytest.raises(ArgumentError, match=r"expected an integer from 1 to 16777216$"):
        ARGS.integer("n", 0, minimum=1, maximum=16_777_216)


def test_implements_does_not_read_properties_that_raise(stack: cdk.Stack) -> None:
    from aws_cdk import aws_ec2 as ec2

    # An imported VPC without a CIDR raises when vpc_cidr_block is read; it is still an IVpc.
    vpc = ec2.Vpc.from_vpc_attributes(stack, "ImportedVpc", vpc_id="vpc-1", availability_zones=["a"])
    assert ARGS.implements("vpc", vpc, ec2.IVpc) is vpc
