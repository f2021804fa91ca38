"""Every ```python block in docs/ (the site's pages) and README.md runs as-is.

The blocks of one file run in order, in one namespace, inside a fresh temporary working
directory, as a reader pasting them into one script would. Use ```text or ```bash for
blocks that must not run.

A `print(...)` line whose comment starts with `# ->` is checked: what it prints must be
the comment's text, where `...` stands for anything (`print(len(gen))  # -> 3`). The call
and its comment must be on one line: a `# ->` comment on a line of its own, or after a
closing parenthesis that does not close a `print(` begun on that line, is an error rather
than prose nobody checks. Other comments are prose.

The pages in CHECKED_PAGES must keep at least one checked print; every other page with a
runnable block says in UNCHECKED_PAGES why it checks none.
"""

import pathlib
import re
import warnings

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALL_PAGES = sorted(ROOT.glob("docs/**/*.md")) + [p for p in [ROOT / "README.md"] if p.is_file()]

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


# A `# ->` comment on a line of its own, or after code that ends with `)`: meant as an
# expected output, but not on a line CHECKED_PRINT reads (a print over several lines, an
# assignment). `def f(x):  # -> y` and other prose after other code stays allowed.
MISPLACED_CHECK = re.compile(r"^[ \t]*(?:[^#\n]*\))?[ \t]*# ->")


def misplaced_checks(code, name, first_line):
    """['page.md:LINE: ...', ...] for each `# ->` comment that no print on its line makes."""
    return [f"{name}:{first_line + k}: a `# ->` comment must follow `print(...)` on its "
            f"line, or it is never checked: {line.strip()!r}"
            for k, line in enumerate(code.split("\n"))
            if MISPLACED_CHECK.match(line) and not CHECKED_PRINT.match(line)]


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


def test_misplaced_checks():
    code = ("print(1)  # -> 1\n"
            "# -> 1\n"
            "print(1,\n      2)  # -> 1 2\n"
            "x = len([1])  # -> 1\n"
            "def f(x):  # -> x, or (x, y)\n"
            "y = 2  # prose\n")
    found = misplaced_checks(code, "page.md", 5)
    assert [message.split(": ")[0] for message in found] == ["page.md:6", "page.md:8",
                                                                 "page.md:9"]
    assert "never checked: '# -> 1'" in found[0]


def test_block_parser():
    text = "intro\n```python\na = 1\n```\n```text\nnot run\n```\n  ```python\n  b = 2\n  ```\n"
    assert python_blocks(text) == [(3, "a = 1\n"), (9, "b = 2\n")]


def test_docs_folder_has_pages():
    assert list(ROOT.glob("docs/*.md")), "docs/ has no Markdown pages"


# Pages with no runnable block (performance tables, say) have nothing to run.
PAGES = [p for p in ALL_PAGES if python_blocks(p.read_text(encoding="utf-8"))]

# Pages whose snippets show their outputs as checked prints; each must keep at least one.
CHECKED_PAGES = [
    "README.md",
    "docs/array-generator.md",
    "docs/audio.md",
    "docs/augmentation.md",
    "docs/csv-generator.md",
    "docs/custom-datasets.md",
    "docs/determinism.md",
    "docs/distributed.md",
    "docs/getting-started.md",
    "docs/gpu.md",
    "docs/image-folder-generator.md",
    "docs/imbalance.md",
    "docs/label-modes.md",
    "docs/remote.md",
    "docs/migrating.md",
    "docs/observability.md",
    "docs/tables.md",
    "docs/targets.md",
    "docs/text.md",
    "docs/timeseries.md",
    "docs/performance.md",  # its tune_malloc() answer is True on Linux with glibc (CI's)
]
# Pages with runnable blocks and no checked print, with the reason.
UNCHECKED_PAGES: dict[str, str] = {"docs/api/index.md": "its one block is the import"}


def count_checked_prints(page):
    return sum(bool(CHECKED_PRINT.match(line))
               for _, code in python_blocks(page.read_text(encoding="utf-8"))
               for line in code.split("\n"))


def test_every_page_with_snippets_checks_outputs_or_says_why_not():
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert not set(CHECKED_PAGES) & set(UNCHECKED_PAGES)
    assert sorted(names - set(UNCHECKED_PAGES)) == sorted(CHECKED_PAGES), (
        "A page with ```python blocks belongs in CHECKED_PAGES (with `print(...)  # -> "
        "output` lines) or in UNCHECKED_PAGES with its reason.")
    unchecked = [name for name in CHECKED_PAGES if not count_checked_prints(ROOT / name)]
    assert not unchecked, f"These pages no longer check any output: {unchecked}"


# pages whose snippets train real models (a KerasHub detector): over 10 s on 2 cores
SLOW_PAGES = {"docs/targets.md"}


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=pytest.mark.slow) if str(p.relative_to(ROOT)) in SLOW_PAGES
    else p for p in PAGES], ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_snippets_run(page, tmp_path, monkeypatch):
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__", "__doc_expect": doc_expect}
    name = str(page.relative_to(ROOT))
    misplaced = [message for first_line, code in blocks
                 for message in misplaced_checks(code, name, first_line)]
    assert not misplaced, "\n".join(misplaced)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for first_line, code in blocks:
            # Compiling with the page's name and padding to its line number makes
            # tracebacks point at the Markdown line that failed.
            compiled = compile("\n" * (first_line - 1) + checked(code, name, first_line),
                               name, "exec")
            exec(compiled, namespace)
    # kerasgen's warnings are the page's to show: each one it gives is one it means
    ours = [str(w.message) for w in caught if _from_kerasgen(w)]
    expected = PAGE_WARNINGS.get(name, ())
    unexpected = [m for m in ours if not any(re.search(e, m) for e in expected)]
    assert not unexpected, f"{name} gives kerasgen warnings it does not mean: {unexpected}"
    missing = [e for e in expected if not any(re.search(e, m) for m in ours)]
    assert not missing, f"{name} no longer gives the warnings it shows: {missing}"


# The kerasgen warnings a page's snippets give on purpose (what the page shows users)
PAGE_WARNINGS = {
    "docs/csv-generator.md": [r"validation subset .* has no sample of 1 class: 'bird'"],
    "docs/determinism.md": [r"model\.predict\(\) reads ArrayGenerator in the order"],
}


def _from_kerasgen(caught):
    """Whether a recorded warning is one of kerasgen's own."""
    from kerasgen._redact import KerasgenWarning
    return issubclass(caught.category, KerasgenWarning)
