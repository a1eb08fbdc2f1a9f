"""Server and model metadata, model configs and readiness, all read from carton.toml."""

from __future__ import annotations

from registry import __version__
from registry.errors import ModelNotReady
from registry.services.context import RegistryContext
from registry.services.health import database_problem
from registry.services.triton.versions import (
    READY,
    resolve_version,
    stored_config,
    version_numbers,
)
from registry.triton.documents import ModelConfig, ModelMetadata, ServerMetadata
from registry.triton.mapping import (
    BACKEND_FOR_RUNNER,
    batched_config,
    config_tensor,
    metadata_tensor,
)

SERVER_NAME = "carton-registry"
EXTENSIONS = ["model_repository", "model_repository(unload_dependents)", "binary_tensor_data"]


def server_metadata() -> ServerMetadata:
    return ServerMetadata(SERVER_NAME, __version__, list(EXTENSIONS))


def database_ready(ctx: RegistryContext) -> bool:
    return database_problem(ctx) is None


def model_metadata(ctx: RegistryContext, name: str, version: int | None) -> ModelMetadata:
    with ctx.sessions() as session:
        row = resolve_version(session, name, version)
        config = stored_config(session, row)
        return ModelMetadata(
            name=name,
            versions=version_numbers(session, row.model_id),
            platform=config.runner.runner_name,
            inputs=[metadata_tensor(s) for s in config.inputs],
            outputs=[metadata_tensor(s) for s in config.outputs],
        )


def model_config(ctx: RegistryContext, name: str, version: int | None) -> ModelConfig:
    """A Triton-style config for a stored carton (its runner as backend and platform)."""
    with ctx.sessions() as session:
        row = resolve_version(session, name, version)
        config = stored_config(session, row)
    runner = config.runner.runner_name
    backend, platform = BACKEND_FOR_RUNNER.get(runner, (runner, None))
    tensors = [*config.inputs, *config.outputs]
    max_batch_size, dims = batched_config(config.runner.opts, tensors)
    out = ModelConfig(
        name=name,
        backend=backend,
        version_policy={"specific": {"versions": [row.version]}},
        max_batch_size=max_batch_size,
        input=[config_tensor(s, d) for s, d in zip(config.inputs, dims, strict=False)],
        output=[
            config_tensor(s, d)
            for s, d in zip(config.outputs, dims[len(config.inputs) :], strict=True)
        ],
        parameters={
            "carton_runner_name": {"string_value": runner},
            "carton_manifest_sha256": {"string_value": row.manifest_sha256},
        },
    )
    if platform is not None:
        out.platform = platform
    return out


def require_ready(ctx: RegistryContext, name: str, version: int | None) -> None:
    """Raise ModelNotReady (with the reason recorded) unless the version is READY."""
    with ctx.sessions() as session:
        row = resolve_version(session, name, version)
        if row.state != READY:
            raise ModelNotReady(f"model {name!r} is not ready: {row.state_reason or row.state}")
