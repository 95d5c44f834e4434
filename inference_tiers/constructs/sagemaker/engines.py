"""Serving engines for SageMaker real-time endpoints: pinned images and each container's configuration convention.

Each engine's container reads its settings from environment variables, with its own naming:

- ``vllm``: the SageMaker flavour of the vLLM Deep Learning Container turns ``SM_VLLM_<FLAG>`` into
  ``vllm serve --<flag>`` (aws/model-hosting-container-standards, docs/sagemaker/01_quickstart.md).
- ``sglang``: the SGLang DLC turns ``SM_SGLANG_<FLAG>`` into ``--<flag>`` of ``sglang.launch_server``.
- ``lmi``: LMI / DJL-Serving reads ``HF_MODEL_ID`` and passes ``OPTION_<ENGINE_ARG>`` to its vLLM backend.
- ``byoc``: your own image; it must listen on port 8080 and answer ``GET /ping`` and ``POST /invocations``.
  The construct sets no engine variables for it: ``engine_args`` become environment variables unchanged.

DLC images live in AWS-owned ECR registries whose account differs by Region, so the image URI is built from a
``CfnMapping`` on ``AWS::Region`` and stacks stay environment-agnostic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Aws, CfnMapping, Stack, Token
from aws_cdk import aws_ecr as ecr
from constructs import Construct

from inference_tiers.validation import Args, is_token

Engine = Literal["vllm", "sglang", "lmi", "byoc"]
ENGINES: tuple[Engine, ...] = ("vllm", "sglang", "lmi", "byoc")

# Where SageMaker mounts an S3 model prefix inside the container.
MODEL_MOUNT_PATH = "/opt/ml/model"
# ContainerDefinition.Environment: at most 100 variables, names like this, values of at most 1024 characters.
ENVIRONMENT_VARIABLE = r"[a-zA-Z_][a-zA-Z0-9_]{0,1023}"
MAX_ENVIRONMENT_VARIABLES = 100
MAX_ENVIRONMENT_VALUE = 1024

# The AWS Deep Learning Containers registry account per Region (aws/deep-learning-containers
# docs/reference/region_availability.md, checked by tests/sagemaker/test_dlc_accounts.py). Most commercial
# Regions share 763104351884; opt-in and China Regions have their own.
DLC_REGISTRY_ACCOUNTS: dict[str, str] = {
    **{
        region: "763104351884"
        for region in (
            "us-east-1",
            "us-east-2",
            "us-west-1",
            "us-west-2",
            "ap-south-1",
            "ap-northeast-1",
            "ap-northeast-2",
            "ap-southeast-1",
            "ap-southeast-2",
            "ca-central-1",
            "eu-central-1",
            "eu-west-1",
            "eu-west-2",
            "eu-west-3",
            "eu-north-1",
            "sa-east-1",
        )
    },
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-northeast-3": "364406365360",
    "ap-southeast-3": "907027046896",
    "eu-south-1": "692866216735",
    "me-south-1": "217643126080",
    "me-central-1": "914824155844",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}

# Host AMIs by the container's CUDA version (docs: inference-gpu-drivers, container-nvidia-compliance).
# The default host AMI on g4dn/g5 ships NVIDIA driver 470, which cannot start CUDA 12.4+ containers
# (CannotStartContainerError, often without a container log).
INFERENCE_AMI_VERSIONS = (
    "al2-ami-sagemaker-inference-gpu-2",
    "al2-ami-sagemaker-inference-gpu-2-1",
    "al2-ami-sagemaker-inference-gpu-3-1",
    "al2023-ami-sagemaker-inference-gpu-4-1",
)
_AMI_BY_CUDA: tuple[tuple[range, str], ...] = (
    (range(121, 127), "al2-ami-sagemaker-inference-gpu-3-1"),  # driver 550
    (range(128, 131), "al2023-ami-sagemaker-inference-gpu-4-1"),  # driver 580, CUDA 13.0
)

_CUDA_TAG = re.compile(r"(?:^|[-_.])cu(1[0-9]{2})(?:$|[-_.])")
_ECR_IMAGE = re.compile(
    r"(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(?::(?P<tag>[A-Za-z0-9_.-]{1,128})|@sha256:[0-9a-f]{64})"
)
_ECR_IMAGE_TEXT = (
    "an Amazon ECR image URI such as 123456789012.dkr.ecr.us-east-1.amazonaws.com/my-repo:1.0 "
    "(SageMaker pulls images only from ECR; copy public images into your own repository)"
)


@dataclass(frozen=True)
class DlcImage:
    """A pinned Deep Learning Container: repository, tag and the CUDA version the tag was built with."""

    repository: str
    tag: str

    @property
    def cuda_version(self) -> int | None:
        return cuda_version_of(self.tag)

    def __str__(self) -> str:
        return f"{self.repository}:{self.tag}"


@dataclass(frozen=True)
class EngineConvention:
    """How one engine's container is configured: variable names for the settings this library manages."""

    engine: Engine
    image: DlcImage | None
    arg_prefix: str
    model_var: str | None
    served_name_var: str | None
    tensor_parallel_var: str | None
    max_model_len_var: str | None
    max_sequences_var: str | None
    fixed: Mapping[str, str] = field(default_factory=dict)

    def environment(
        self,
        *,
        model: str,
        served_model_name: str | None,
        tensor_parallel_degree: int,
        max_model_len: int | None,
        max_concurrent_sequences: int | None,
        engine_args: Mapping[str, str],
        args: Args,
    ) -> dict[str, str]:
        """The container environment: managed settings, fixed engine settings, then ``engine_args``.

        Raises ``args``' ArgumentError if an ``engine_args`` entry would override a setting this library manages.
        """
        managed = {
            self.model_var: model,
            self.served_name_var: served_model_name,
            self.tensor_parallel_var: str(tensor_parallel_degree),
            self.max_model_len_var: None if max_model_len is None else str(max_model_len),
            self.max_sequences_var: None
            if max_concurrent_sequences is None
            else str(max_concurrent_sequences),
        }
        env = {name: value for name, value in managed.items() if name is not None and value is not None}
        env.update(self.fixed)
        for arg, value in engine_args.items():
            name = self.arg_variable(arg)
            if name in env:
                raise args.error(
                    "engine_args",
                    arg,
                    f"a flag this construct does not set itself ({arg!r} sets {name}: use the matching "
                    f"parameter, served_model_name, tensor_parallel_degree, max_model_len or "
                    f"max_concurrent_sequences)",
                )
            env[name] = value
        return env

    @property
    def arg_pattern(self) -> str:
        """What an ``engine_args`` key may look like: a flag name, or (BYOC) an environment variable name."""
        return r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*" if self.arg_prefix else ENVIRONMENT_VARIABLE

    def arg_variable(self, arg: str) -> str:
        """``enable-prefix-caching`` -> ``SM_VLLM_ENABLE_PREFIX_CACHING`` (BYOC: the name unchanged)."""
        if not self.arg_prefix:
            return arg
        return self.arg_prefix + arg.strip("-").replace("-", "_").upper()


# Pinned images, all in the DLC registry (vllm: the SageMaker OpenAI-compatible samples; sglang: DLC release
# notes sglang-0.5.8-gpu-sagemaker; djl-inference: LMI 28 with vLLM 0.26). Why these: the newest tags with a
# SageMaker serving entry point at the time of writing. vLLM 0.20.2 and LMI 0.36.0 are CUDA 13.0 builds and
# SGLang 0.5.8 a CUDA 12.9 build, so all three need the driver-580 host AMI. ``image_uri`` overrides them
# (for example with a private ECR copy in a Region the DLC registry does not serve).
ENGINE_CONVENTIONS: dict[Engine, EngineConvention] = {
    "vllm": EngineConvention(
        engine="vllm",
        image=DlcImage("vllm", "0.20.2-gpu-py312-cu130-ubuntu22.04-sagemaker"),
        arg_prefix="SM_VLLM_",
        model_var="SM_VLLM_MODEL",
        served_name_var="SM_VLLM_SERVED_MODEL_NAME",
        tensor_parallel_var="SM_VLLM_TENSOR_PARALLEL_SIZE",
        max_model_len_var="SM_VLLM_MAX_MODEL_LEN",
        max_sequences_var="SM_VLLM_MAX_NUM_SEQS",
    ),
    "sglang": EngineConvention(
        engine="sglang",
        image=DlcImage("sglang", "0.5.8-gpu-py312-cu129-ubuntu22.04-sagemaker"),
        arg_prefix="SM_SGLANG_",
        model_var="SM_SGLANG_MODEL_PATH",
        served_name_var="SM_SGLANG_SERVED_MODEL_NAME",
        tensor_parallel_var="SM_SGLANG_TP_SIZE",
        max_model_len_var="SM_SGLANG_CONTEXT_LENGTH",
        max_sequences_var="SM_SGLANG_MAX_RUNNING_REQUESTS",
    ),
    "lmi": EngineConvention(
        engine="lmi",
        image=DlcImage("djl-inference", "0.36.0-lmi28.0.0-cu130"),
        arg_prefix="OPTION_",
        model_var="HF_MODEL_ID",
        served_name_var=None,
        tensor_parallel_var="OPTION_TENSOR_PARALLEL_DEGREE",
        max_model_len_var="OPTION_MAX_MODEL_LEN",
        max_sequences_var="OPTION_MAX_ROLLING_BATCH_SIZE",
        # LMI >= v15 serves vLLM through its native async (V1) service; rolling batch must then be disabled.
        # Fail fast so a broken model stops the container instead of leaving a half-started worker.
        fixed={
            "OPTION_ASYNC_MODE": "true",
            "OPTION_ROLLING_BATCH": "disable",
            "OPTION_ENTRYPOINT": "djl_python.lmi_vllm.vllm_async_service",
            "SERVING_FAIL_FAST": "true",
        },
    ),
    "byoc": EngineConvention(
        engine="byoc",
        image=None,
        arg_prefix="",
        model_var=None,
        served_name_var=None,
        tensor_parallel_var=None,
        max_model_len_var=None,
        max_sequences_var=None,
    ),
}


def cuda_version_of(tag: str) -> int | None:
    """``0.20.2-gpu-py312-cu130-ubuntu22.04-sagemaker`` -> 130; None when the tag names no CUDA version."""
    match = _CUDA_TAG.search(tag)
    return int(match.group(1)) if match else None


def inference_ami_for_cuda(cuda_version: int | None, *, image: str, args: Args) -> str:
    """The host AMI whose NVIDIA driver runs ``cuda_version``; ArgumentError for ``inference_ami_version``
    (naming ``image``) if this library cannot tell."""
    for versions, ami in _AMI_BY_CUDA:
        if cuda_version in versions:
            return ami
    shown = "a deploy-time image URI" if is_token(image) else f"image {image!r}"
    cuda = "unknown" if cuda_version is None else f"cu{cuda_version}"
    raise args.error(
        "inference_ami_version",
        None,
        f"one of {', '.join(INFERENCE_AMI_VERSIONS)}: it cannot be derived from {shown} (CUDA version {cuda})",
    )


@dataclass(frozen=True)
class ResolvedImage:
    """An image URI (possibly a token) and the ECR repository ARN the execution role may pull from."""

    uri: str
    repository_arn: str
    cuda_version: int | None


def dlc_image(scope: Construct, image: DlcImage, *, args: Args) -> ResolvedImage:
    """The Region-aware URI of a DLC image (``Fn::FindInMap`` on ``AWS::Region``) and its repository ARN.

    A stack in a Region the mapping lacks fails here rather than at deploy (``FindInMap`` finds no key).
    """
    region = Stack.of(scope).region
    if not Token.is_unresolved(region) and region not in DLC_REGISTRY_ACCOUNTS:
        raise args.error(
            "image_uri",
            None,
            f"your ECR image URI: the stack's Region {region} has no Deep Learning Containers registry in this "
            f"library ({', '.join(DLC_REGISTRY_ACCOUNTS)})",
        )
    mapping = CfnMapping(
        scope,
        "DlcRegistry",
        mapping={region: {"account": account} for region, account in DLC_REGISTRY_ACCOUNTS.items()},
    )
    account = mapping.find_in_map(Aws.REGION, "account")
    return ResolvedImage(
        uri=f"{account}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{image.repository}:{image.tag}",
        repository_arn=Stack.of(scope).format_arn(
            service="ecr", account=account, resource="repository", resource_name=image.repository
        ),
        cuda_version=image.cuda_version,
    )


def parse_ecr_image(uri: str, *, args: Args, param: str = "image_uri") -> re.Match[str]:
    """Check ``uri`` is a private ECR image (``<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`` or
    ``@sha256:``) known at synth time; ArgumentError naming ``param`` otherwise."""
    text = args.text(
        param, uri, pattern=_ECR_IMAGE.pattern, max_length=512, allow_token=False, description=_ECR_IMAGE_TEXT
    )
    match = _ECR_IMAGE.fullmatch(text)
    assert match is not None  # args.text checked the pattern
    return match


def ecr_image(
    scope: Construct, uri: str, *, args: Args, repository: ecr.IRepository | None = None
) -> ResolvedImage:
    """A private ECR image and the repository the execution role may pull from: ``repository`` when given,
    otherwise the one named in ``uri``.

    A deploy-time ``uri`` (``repository.repository_uri_for_tag(...)``, a ``DockerImageAsset``'s ``image_uri``)
    is used unparsed, so it needs ``repository``; its CUDA version is unknown.
    """
    if repository is not None:
        repository = args.implements("image_repository", repository, ecr.IRepository)
    if is_token(uri):
        if repository is None:
            raise args.error(
                "image_repository",
                None,
                "the ecr.IRepository image_uri points into (image_uri is a deploy-time token, so the repository "
                "the execution role may pull from cannot be read from it)",
            )
        return ResolvedImage(uri=uri, repository_arn=repository.repository_arn, cuda_version=None)
    match = parse_ecr_image(uri, args=args)
    repository_arn = (
        repository.repository_arn
        if repository is not None
        else Stack.of(scope).format_arn(
            service="ecr",
            region=match["region"],
            account=match["account"],
            resource="repository",
            resource_name=match["repository"],
        )
    )
    return ResolvedImage(
        uri=uri, repository_arn=repository_arn, cuda_version=cuda_version_of(match["tag"] or "")
    )
