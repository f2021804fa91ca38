"""Every ```python block in docs/*.md and README.md runs as-is.

The blocks of one file run in order, in one namespace, inside a fresh temporary working
directory, as a reader pasting them into one script would. Use ```text or ```bash for
blocks that must not run.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALL_PAGES = sorted(ROOT.glob("docs/*.md")) + [p for p in [ROOT / "README.md"] if p.is_file()]

# A fence opening with ```python (at any indentation) up to the next closing ```.
BLOCK = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$",
                   re.MULTILINE | re.DOTALL)


def python_blocks(text):
    """[(line number of the block's first code line, dedented code), ...] in file order."""
    blocks = []
    for match in BLOCK.finditer(text):
        indent = match.group("indent")
        lines = match.group("code").splitlines()
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line
                         for line in lines)
        first_line = text.count("\n", 0, match.start("code")) + 1
        blocks.append((first_line, code + "\n"))
    return blocks


def test_block_parser():
    text = "intro\n```python\na = 1\n```\n```text\nnot run\n```\n  ```python\n  b = 2\n  ```\n"
    assert python_blocks(text) == [(3, "a = 1\n"), (9, "b = 2\n")]


def test_docs_folder_has_pages():
    assert list(ROOT.glob("docs/*.md")), "docs/ has no Markdown pages"


# Pages with no runnable block (performance tables, say) have nothing to run.
PAGES = [p for p in ALL_PAGES if python_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_snippets_run(page, tmp_path, monkeypatch):
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    name = str(page.relative_to(ROOT))
    for first_line, code in blocks:
        # Compiling with the page's name and padding to its line number makes tracebacks
        # point at the Markdown line that failed.
        compiled = compile("\n" * (first_line - 1) + code, name, "exec")
        exec(compiled, namespace)
