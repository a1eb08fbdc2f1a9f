"""Search by what is inside a model: ``field:value`` terms over denormalised tokens.

A model's free text (name, descriptions, runner) is ``models.search_text``; its
``model_search_tokens`` row holds one token per fact of its latest version, each
``" field:value"``, lowercased, with spaces in values written as ``_`` (both kept by
``listing.refresh_model_listing``):

=============  ===========================================================
``runner:``    the runner's name (``runner:torchscript``)
``framework:`` the required framework version as written (``framework:=2.1.0``)
               and each version number in it (``framework:2.1.0``)
``input:``     each input's name, dtype and shape (``input:float32``,
               ``input:image``, ``input:[1,3,224,224]``)
``output:``    the same for outputs
``tensor:``    any input's or output's name
``dtype:``     any input's or output's dtype
``shape:``     any input's or output's shape; ``1x3x224x224`` is read as
               ``[1,3,224,224]``; a symbolic shape is its symbol
=============  ===========================================================

A query is whitespace-separated terms; every term must match. A ``field:value``
term matches a whole token, or every token starting with ``value`` when it ends
with ``*`` (``runner:torch*``). The other words, together, are one phrase found
anywhere in the free text (as search always was). Each term is one ``LIKE``: the
phrase on ``models.search_text``, field terms on the tokens table (a semi-join). The
tokens live apart because appending them to ``search_text`` made every free-text
scan of 100k models about three times slower on Postgres (measured; docs/lineage.md).
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from registry.carton.config import TensorSpec, parse_carton_toml
from registry.carton.errors import CartonFormatError
from registry.db.tables import Carton, Model, ModelSearchTokens

FIELDS = ("runner", "framework", "input", "output", "tensor", "dtype", "shape")
_VERSION = re.compile(r"\d+(?:\.\d+)*")
_DIMS = re.compile(r"^\d+(?:x\d+)+$")


def _value(text: object) -> str:
    return re.sub(r"\s+", "_", str(text).strip().lower())


def shape_token(shape: str | tuple[int | str, ...] | list[int | str]) -> str:
    if isinstance(shape, str):
        return _value(shape)
    return "[" + ",".join(_value(d) for d in shape) + "]"


def _tensor_tokens(kind: str, spec: TensorSpec) -> list[str]:
    name, dtype, shape = _value(spec.name), _value(spec.dtype), shape_token(spec.shape)
    return [
        f"{kind}:{name}",
        f"{kind}:{dtype}",
        f"{kind}:{shape}",
        f"tensor:{name}",
        f"dtype:{dtype}",
        f"shape:{shape}",
    ]


def search_tokens(carton: Carton) -> str:
    """The tokens of one carton, each after a space, with a space at the end."""
    tokens: list[str] = []
    if carton.runner_name:
        tokens.append(f"runner:{_value(carton.runner_name)}")
    if carton.framework_version:
        tokens.append(f"framework:{_value(carton.framework_version)}")
        tokens += [f"framework:{v}" for v in _VERSION.findall(carton.framework_version)]
    try:
        config = parse_carton_toml(carton.carton_toml)
    except CartonFormatError:  # stored cartons parsed at push; keep search working anyway
        config = None
    if config is not None:
        for spec in config.inputs:
            tokens += _tensor_tokens("input", spec)
        for spec in config.outputs:
            tokens += _tensor_tokens("output", spec)
    unique = list(dict.fromkeys(tokens))
    return "".join(" " + t for t in unique) + (" " if unique else "")


def _escape(text: str) -> str:
    return re.sub(r"([\\%_])", r"\\\1", text)


def _field_value(field: str, value: str) -> str:
    value = value.lower()
    if field in ("shape", "input", "output"):
        if _DIMS.match(value):
            return "[" + value.replace("x", ",") + "]"
        if "," in value and not value.startswith("["):
            return "[" + value + "]"
    return value


def parse_query(q: str) -> tuple[list[tuple[str, str, bool]], str]:
    """(field terms as (field, value, is_prefix), the free-text phrase)."""
    terms: list[tuple[str, str, bool]] = []
    words: list[str] = []
    for word in q.split():
        field, colon, value = word.partition(":")
        if colon and field.lower() in FIELDS and value.rstrip("*"):
            prefix = value.endswith("*")
            terms.append((field.lower(), _field_value(field.lower(), value.rstrip("*")), prefix))
        else:
            words.append(word)
    phrase = " ".join(words) if terms else q
    return terms, phrase.lower()


def search_conditions(q: str) -> list[Any]:
    """The WHERE conditions on ``models`` for query ``q`` (module doc)."""
    terms, phrase = parse_query(q)
    conditions: list[Any] = []
    if phrase.strip():
        conditions.append(Model.search_text.like(f"%{_escape(phrase)}%", escape="\\"))
    likes = [
        ModelSearchTokens.tokens.like(
            f"% {_escape(field)}:{_escape(value)}" + ("%" if prefix else " %"), escape="\\"
        )
        for field, value, prefix in terms
    ]
    if likes:
        conditions.append(Model.id.in_(select(ModelSearchTokens.model_id).where(*likes)))
    return conditions
