"""An mkdocs hook: docstrings' doctest examples (``>>>`` lines and the output after them) render
as Python console code blocks, not as nested quotes, in the API reference and the pages; and
their Sphinx roles (``:class:`~streamtable.x.Name```, ``:meth:`Name.method```) render as code
(``Name``, ``Name.method``) rather than as the role's markup.

Registered as a Markdown extension in ``on_config``; mkdocstrings renders docstrings with the
site's Markdown extensions, so the examples of the reference are converted too. It runs after
the fenced-code preprocessor, so ``>>>`` inside a fenced block is left alone, and hands the
example over as HTML (a ``<pre>`` block), so Markdown does not read its ``#`` lines as headings.
"""

from __future__ import annotations

import html
import re
from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor

_FLAGS = re.compile(r"\s*#\s*doctest:.*$")
_ROLE = re.compile(r":(?:class|meth|func|attr|mod|exc|data|obj):`(~?)([^`]+)`")


def _role_as_code(match: re.Match[str]) -> str:
    target = match.group(2)
    return f"`{target.rsplit('.', 1)[-1] if match.group(1) else target}`"


class _DoctestBlocks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        block: list[str] = []
        indent = ""

        def close() -> None:
            code = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                             for line in block)
            placeholder = self.md.htmlStash.store(
                f'<pre><code class="language-pycon">{html.escape(code)}</code></pre>')
            out.extend(["", placeholder, ""])
            block.clear()

        for line in lines:
            if block:
                if line.strip():
                    shown = _FLAGS.sub("", line)
                    if shown.strip() != "...":  # a line that held only doctest flags
                        block.append(shown)
                    continue
                close()
            if line.lstrip().startswith(">>>"):
                indent = line[:len(line) - len(line.lstrip())]
                block.append(_FLAGS.sub("", line))
                continue
            out.append(_ROLE.sub(_role_as_code, line))
        if block:
            close()
        return out


class DoctestBlocksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 (Markdown's API)
        # after fenced_code (25), before the raw HTML blocks (20)
        md.preprocessors.register(_DoctestBlocks(md), "doctest_blocks", 22)


def on_config(config: Any) -> Any:
    config.markdown_extensions.append(DoctestBlocksExtension())
    return config
