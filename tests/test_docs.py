"""The documentation site builds with no warning (a broken reference fails), its configuration
page is the generated one (see test_config), and its API reference documents every public name
(``streamtable.__all__``, ``streamtable.testing``, ``streamtable.serde``, ``StreamsApp``) and
every public member of their classes, each name with an example, and nothing internal."""

from __future__ import annotations

import importlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = ("streamtable", "streamtable.testing", "streamtable.serde")
MEMBER_KINDS = (classmethod, staticmethod, property)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocstrings", reason="the docs extra (make test installs it)")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def api_ids(site: Path) -> set[str]:
    return set(re.findall(r'id="(streamtable\.[^"]+)"', (site / "api" / "index.html").read_text()))


def test_mkdocs_build_is_strict_and_clean(site: Path) -> None:
    api = (site / "api" / "index.html").read_text()
    for documented in ("map_values", "StreamsApp", "TopologyTestDriver", "ApplicationFailedError"):
        assert documented in api, documented
    assert "state.location" in (site / "configuration" / "index.html").read_text()


def test_doctest_examples_and_roles_render_as_code(site: Path) -> None:
    api = (site / "api" / "index.html").read_text()
    assert '<pre><code class="language-pycon">&gt;&gt;&gt; TimeWindows.of(' in api
    assert "<blockquote>" not in api
    assert "doctest:" not in api  # the flags of an example are not shown
    assert ":class:" not in api and ":meth:" not in api
    assert "(made by\n<code>TopologyTestDriver.create_input_topic</code>)" in api


def public_names() -> dict[str, Any]:
    """Every public name: ``name -> object``."""
    from streamtable.runtime.spark.app import StreamsApp

    names: dict[str, Any] = {"StreamsApp": StreamsApp}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            names[name] = getattr(module, name)
    return names


def documented_paths(name: str, obj: Any) -> set[str]:
    """The paths the reference may document ``obj`` under: where it is defined, or a module
    of the package that exports it under ``name``."""
    paths = {f"{m}.{name}" for m, module in list(sys.modules.items())
             if m.startswith("streamtable") and getattr(module, name, None) is obj}
    if inspect.isclass(obj) or inspect.isfunction(obj):
        paths.add(f"{obj.__module__}.{obj.__qualname__}")
    return paths


def api_filters() -> dict[str, list[tuple[re.Pattern[str], bool]]]:
    """The ``filters`` of each ``:::`` entry of docs/api.md (mkdocstrings' syntax: a regex, or
    ``!regex`` to leave out what matches), after the site's default ``!^_``."""
    import yaml

    text = (ROOT / "docs" / "api.md").read_text()
    out: dict[str, list[tuple[re.Pattern[str], bool]]] = {}
    for m in re.finditer(r"^::: (\S+)\n((?:[ \t]+.*\n)*)", text, re.M):
        options = (yaml.safe_load(m.group(2)) or {}).get("options", {}) if m.group(2) else {}
        filters = options.get("filters", ["!^_"])
        out[m.group(1)] = [(re.compile(f.removeprefix("!")), f.startswith("!")) for f in filters]
    return out


def shown(name: str, filters: list[tuple[re.Pattern[str], bool]]) -> bool:
    return all(bool(regex.search(name)) != leave_out for regex, leave_out in filters)


def public_members(cls: type) -> list[str]:
    """Methods and properties ``cls`` defines (not its fields), public, not aliases of another
    member, and not overriding a documented method of a base class of the package."""
    members = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        function = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if not (inspect.isfunction(function) or isinstance(value, property)):
            continue
        if inspect.isfunction(function) and function.__name__ != name:
            continue  # an alias, documented with the member it names
        if any(name in vars(base) for base in cls.__mro__[1:]
               if base.__module__.startswith("streamtable")):
            continue
        members.append(name)
    return members


def test_every_public_name_is_in_the_reference(api_ids: set[str]) -> None:
    missing = [name for name, obj in public_names().items()
               if not documented_paths(name, obj) & api_ids]
    assert not missing, f"public names missing from the API reference: {missing}"


def test_every_public_member_is_in_the_reference_and_no_internal_one(api_ids: set[str]) -> None:
    filters = api_filters()
    missing, internal = [], []
    for name, obj in public_names().items():
        if not inspect.isclass(obj):
            continue
        for path in documented_paths(name, obj) & api_ids:
            entry_filters = filters.get(path) or [(re.compile("^_"), True)]
            for member in public_members(obj):
                if shown(member, entry_filters) and f"{path}.{member}" not in api_ids:
                    missing.append(f"{path}.{member}")
            internal += [i for i in api_ids if i.startswith(f"{path}.")
                         and not shown(i[len(path) + 1:].split(".")[0], entry_filters)]
    assert not missing, f"public members missing from the API reference: {missing}"
    assert not internal, f"internal members shown in the API reference: {internal}"


def test_streams_app_shows_its_api_not_its_internals(api_ids: set[str]) -> None:
    app = "streamtable.runtime.spark.app.StreamsApp"
    for public in ("start", "run_until_caught_up", "stop", "store", "health"):
        assert f"{app}.{public}" in api_ids, public
    for internal in ("prepare", "process_batch", "source_options", "shared_location",
                     "task_state", "spark"):
        assert f"{app}.{internal}" not in api_ids, internal


def test_every_public_name_has_an_example() -> None:
    griffe = pytest.importorskip("griffe", reason="the docs extra (make test installs it)")
    without = []
    for name, obj in public_names().items():
        if inspect.isclass(obj) or inspect.isfunction(obj):
            doc = obj.__doc__ or ""
        else:  # a constant: its docstring is the one written after it in its module
            module = griffe.load(type(obj).__module__, search_paths=[str(ROOT / "src")])
            docstring = module[name].docstring
            doc = docstring.value if docstring else ""
        if ">>>" not in doc:
            without.append(name)
    assert not without, f"public names whose docstring has no example: {without}"
