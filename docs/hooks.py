"""MkDocs hooks (mkdocs.yml `hooks:`): the pages made from the code, at every build.

- `cli.md` (from the Typer app) and `spec-reference.md` (from tributary.schema.json) are added as pages
  rendered now; they are not files in git, so they cannot be stale.
- The layer table (architecture.md) and the benchmarks table (benchmarks.md) are kept in git between
  markers so they read on GitHub; a stale one is a warning, which `mkdocs build --strict` makes an error.
- README.md is the home page (`index.md`), its `docs/...` links made relative to the site, and its links
  to framework/cli/ and tributary.schema.json pointed at the references made from them.
- CONTRIBUTING.md (at the top of the repository, where GitHub shows it) is added as `contributing.md`, and
  the pages' `../CONTRIBUTING.md` links point at it.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
log = logging.getLogger("mkdocs.hooks.tributary")


@functools.cache
def _gen() -> Any:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location("tributary_docs_gen", HERE / "gen.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_files(files: Files, config: Any) -> Files:
    gen = _gen()
    files.append(File.generated(config, "cli.md", content=gen.cli_reference()))
    files.append(File.generated(config, "spec-reference.md", content=gen.spec_reference()))
    # the README is the site's home page; its links into docs/ are relative to the repository's top
    home = (
        (REPO / "README.md")
        .read_text(encoding="utf-8")
        .replace("](docs/", "](")
        .replace("](CONTRIBUTING.md)", "](contributing.md)")
        .replace("](framework/cli/)", "](cli.md)")
        .replace("](tributary.schema.json)", "](spec-reference.md)")
    )
    files.append(File.generated(config, "index.md", content=home))
    contributing = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8").replace("](docs/", "](")
    files.append(File.generated(config, "contributing.md", content=contributing))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    gen = _gen()
    if page.file.src_uri in gen.MARKED_TABLES and markdown != gen.render_marked(page.file.src_uri, markdown):
        log.warning(f"docs/{page.file.src_uri}: the generated table is stale; run: python docs/gen.py")
    return markdown.replace("](../CONTRIBUTING.md)", "](contributing.md)")
