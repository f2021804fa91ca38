"""Every ```python block in docs/*.md and README.md runs as-is.

The blocks of one file run in order, in one namespace, inside a fresh temporary working
directory, as a reader pasting them into one script would. Use ```text or ```bash for
blocks that must not run.

A `print(...)` line whose comment starts with `# ->` is checked: what it prints must be
the comment's text, where `...` stands for anything (`print(len(gen))  # -> 3`). Other
comments are prose.
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


# print(ARGS)  # -> EXPECTED   (one line; the comment is what the call must print)
CHECKED_PRINT = re.compile(
    r"^(?P<indent>[ \t]*)print\((?P<args>.*)\)[ \t]*# -> (?P<expected>.*?)[ \t]*$")


def checked(code, name, first_line):
    """`code` with each checked print turned into a call of `__doc_expect` (same lines)."""
    lines = code.split("\n")
    for k, line in enumerate(lines):
        match = CHECKED_PRINT.match(line)
        if match:
            where = f"{name}:{first_line + k}"
            lines[k] = (f"{match['indent']}__doc_expect({where!r}, {match['expected']!r}, "
                        f"{match['args']})")
    return "\n".join(lines)


def doc_expect(where, expected, *args, sep=" "):
    """Prints as print would, and checks it against the comment (`...`: anything)."""
    text = sep.join(str(arg) for arg in args)
    print(text)
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    assert re.fullmatch(pattern, text, re.DOTALL), (
        f"{where}: the snippet printed {text!r}, its comment says {expected!r}")


def test_checked_prints():
    code = checked("x = [1, 2]\nprint(len(x), x)  # -> 2 [1, ...]\nprint(x)  # prose\n",
                   "page.md", 10)
    assert code.splitlines()[1].startswith("__doc_expect('page.md:11', '2 [1, ...]', ")
    namespace = {"__doc_expect": doc_expect}
    exec(code, namespace)
    with pytest.raises(AssertionError, match="page.md:1: the snippet printed '3'"):
        exec(checked("print(3)  # -> 4", "page.md", 1), namespace)


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
    namespace = {"__name__": "__main__", "__doc_expect": doc_expect}
    name = str(page.relative_to(ROOT))
    for first_line, code in blocks:
        # Compiling with the page's name and padding to its line number makes tracebacks
        # point at the Markdown line that failed.
        compiled = compile("\n" * (first_line - 1) + checked(code, name, first_line), name,
                           "exec")
        exec(compiled, namespace)
