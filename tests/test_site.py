"""The documentation site (mkdocs.yml, `make docs`): every public name has its entry in
the API reference, the site builds with `--strict` and no warning, each name renders on
its page, and the version lives in one place that the CHANGELOG's release agrees with."""

import os
import pathlib
import re
import subprocess
import sys
import types

import kerasgen as kg

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"
DIRECTIVE = re.compile(r"^::: (kerasgen[\w.]*)$", re.M)


def public_names():
    """'kerasgen.X' for each class and function of kg.__all__, and 'kerasgen.m.X' for each
    name of the `__all__` of the modules kg.__all__ names (kg.samplers, kg.gpu, ...)."""
    names = set()
    for name in kg.__all__:
        value = getattr(kg, name)
        if isinstance(value, types.ModuleType):
            assert "__all__" in vars(value), f"kg.{name} has no __all__: what is public?"
            names.update(f"kerasgen.{name}.{member}" for member in value.__all__)
        else:
            names.add(f"kerasgen.{name}")
    return names


def documented():
    """{identifier: page} of every `::: identifier` in docs/api/*.md."""
    found = {}
    for page in sorted(API.glob("*.md")):
        for identifier in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            assert identifier not in found, f"{identifier} is in {found.get(identifier)} and {page}"
            found[identifier] = page
    return found


def test_every_public_name_has_an_entry_in_the_api_reference():
    public, entries = public_names(), set(documented())
    modules = {f"kerasgen.{n}" for n in kg.__all__
               if isinstance(getattr(kg, n), types.ModuleType)}
    assert not public - entries, f"public but not in docs/api/: {sorted(public - entries)}"
    stale = entries - public - modules
    assert not stale, f"docs/api/ names what is not public: {sorted(stale)}"


def test_every_api_page_is_in_the_navigation():
    nav = re.findall(r"^\s*- (?:[^:\n]+: )?(\S+\.md)$",
                     (ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.M)
    for page in [*API.glob("*.md"), *(ROOT / "docs").glob("*.md")]:
        assert str(page.relative_to(ROOT / "docs")) in nav, f"{page} is not in mkdocs.yml's nav"


def test_the_site_builds_strictly_and_renders_every_public_name(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                             "--site-dir", str(site)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=240)
    log = result.stdout + result.stderr
    assert result.returncode == 0, log
    assert "WARNING" not in log, log
    for identifier, page in documented().items():
        html = (site / "api" / page.stem / "index.html").read_text(encoding="utf-8")
        assert f'id="{identifier}"' in html, f"{identifier} did not render on {page.name}"
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "30-second example" in home and "--8&lt;--" not in home  # README's part, included
    changelog = (site / "changelog" / "index.html").read_text(encoding="utf-8")
    assert f"[{kg.__version__}]" in changelog


def test_the_version_is_in_one_place_and_the_changelog_releases_it():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    versions = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert versions[0] == "Unreleased", versions
    assert versions[1] == kg.__version__, (versions, kg.__version__)
    # setup.py reads it from kerasgen/__init__.py; no other file states it
    setup = (ROOT / "setup.py").read_text(encoding="utf-8")
    assert "__version__" in setup and kg.__version__ not in setup
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
