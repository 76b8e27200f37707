"""Sphinx configuration: the streamcrypt documentation site (``make docs``).

The pages are the Markdown files beside this one (MyST): the Quickstart, the guides
(``guides/``), the specifications and internals; the API reference is generated
from the docstrings, one page per public module (``_ext/api_pages.py`` says what goes on
each page and fails the build when a public name goes undocumented).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from sphinx.util.nodes import make_refnode

import streamcrypt

project = "streamcrypt"
author = "the streamcrypt authors"
copyright = "the streamcrypt authors"
release = streamcrypt.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.viewcode",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
templates_path = ["_templates"]

myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autoclass_content = "both"
autodoc_preserve_defaults = True  # signatures show DEFAULT_POLICY, not its expansion

html_theme = "furo"
html_title = f"streamcrypt {release}"

sys.path.insert(0, str(Path(__file__).parent / "_ext"))
import api_pages  # noqa: E402  (the local extension below)

extensions.append("api_pages")
autosummary_context = {"api": api_pages.plan()}


def _titled_links(app: Any, relative_path: Path, parent_docname: str, content: list[str]) -> None:
    """A file included from the repository's root (SECURITY.md) links a page by its path,
    ``[docs/FORMAT.md](docs/FORMAT.md)``, which reads well on GitHub; on the site the link
    shows the page's title instead (MyST fills an empty link text with it)."""
    content[0] = re.sub(r"\[(docs/[\w/-]+\.md)\]\(\1\)", r"[](\1)", content[0])


def _short_names(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Resolve a bare name in a docstring (``:class:`FormatError```, written for the
    reader of the source) to the one documented object of that name, if there is one."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target or "." in target:
        return None
    matches = [
        (full, entry)
        for full, entry in env.get_domain("py").objects.items()
        if full.rsplit(".", 1)[-1] == target and not entry.aliased
    ]
    if len(matches) != 1:
        return None
    full, entry = matches[0]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, full)


def setup(app: Any) -> None:
    app.connect("include-read", _titled_links)
    app.connect("missing-reference", _short_names)
