"""Prompt templates: jinja2 files shipped as package data, rendered in one place.

Every text the model reads that compactor writes (pointers, placeholders, READ_TOOL_RESULT
answers, summaries, replans) is a template here, so wording is changed without touching code.
A user folder (``CompactorConfig.templates``) overrides templates by file name.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jinja2

_BUILTIN = Path(__file__).parent


@functools.cache
def _environment(folder: Path | None) -> jinja2.Environment:
    folders = [str(folder), str(_BUILTIN)] if folder is not None else [str(_BUILTIN)]
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folders),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # plain text for a model, not HTML
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(name: str, folder: Path | None = None, /, **context: Any) -> str:
    """Render the template ``name`` (for example ``"pointer.j2"``).

    Args:
        name: the template's file name.
        folder: a folder whose templates take precedence over the built-in ones.
        **context: the template's variables; a missing one is an error.

    Raises:
        jinja2.UndefinedError: a variable the template uses was not given.
        jinja2.TemplateNotFound: no such template.
    """
    return _environment(folder).get_template(name).render(**context)


def names() -> list[str]:
    """The built-in template names."""
    return sorted(path.name for path in _BUILTIN.glob("*.j2"))
