"""The scheduler registry: names, decorator, import paths, entry points, one-line errors."""

from __future__ import annotations

import importlib.metadata

import pytest
from test_scheduler_driver import graph_of

from levelflow.errors import LevelflowError
from levelflow.scheduler import (
    LevelBased,
    SchedulerSpecError,
    available_schedulers,
    make_scheduler,
    register,
)
from levelflow.scheduler.registry import _REGISTRY, ENTRY_POINT_GROUP

G = graph_of("a>b b>c")


class Plain(LevelBased):
    """A custom heuristic with two constructor arguments (strings from the spec)."""

    def __init__(self, graph, x="1", y="2", *, costs=None):
        super().__init__(graph, costs=costs)
        self.args = (int(x), int(y))


@pytest.fixture
def registered():
    register("test-plain")(Plain)
    yield
    _REGISTRY.pop("test-plain")


def test_builtins_are_available():
    names = available_schedulers()
    assert "levelbased" in names
    assert names == sorted(names)


def test_decorator_registers_and_passes_string_args(registered):
    assert "test-plain" in available_schedulers()
    s = make_scheduler("test-plain:5:6", G, costs=[1.0, 2.0, 3.0])
    assert isinstance(s, Plain) and s.args == (5, 6) and s.costs == [1.0, 2.0, 3.0]
    assert make_scheduler("test-plain", G).args == (1, 2)


def test_import_path_with_a_dot_resolves_the_class():
    s = make_scheduler("levelflow.scheduler.levelbased:LevelBased", G)
    assert type(s) is LevelBased


def test_import_path_passes_args(monkeypatch):
    import sys
    import types

    mod = types.ModuleType("fake_pkg.sched")
    mod.Plain = Plain
    monkeypatch.setitem(sys.modules, "fake_pkg", types.ModuleType("fake_pkg"))
    monkeypatch.setitem(sys.modules, "fake_pkg.sched", mod)
    s = make_scheduler("fake_pkg.sched:Plain:8:9", G)
    assert isinstance(s, Plain) and s.args == (8, 9)


def test_entry_point_resolution(monkeypatch):
    ep = importlib.metadata.EntryPoint(name="from-ep", group=ENTRY_POINT_GROUP,
                                       value="levelflow.scheduler.levelbased:LevelBased")
    calls = []

    def fake_entry_points(**kw):
        calls.append(kw)
        return [ep] if kw.get("group") == ENTRY_POINT_GROUP else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    assert "from-ep" in available_schedulers()
    s = make_scheduler("from-ep", G)
    assert type(s) is LevelBased
    assert {"group": ENTRY_POINT_GROUP} in calls


@pytest.mark.parametrize("spec, fragment", [
    ("nosuch", "unknown scheduler 'nosuch'"),
    ("nosuch.module:X", "cannot import nosuch.module"),
    ("levelflow.scheduler.levelbased:Nope", "has no 'Nope'"),
    ("levelflow.errors:LevelflowError", "is not a levelflow Scheduler"),
    ("levelbased:extra", "bad argument"),
    ("test-plain:notanint", "bad argument"),
])
def test_bad_specs_raise_one_line_listing_the_known_names(registered, spec, fragment):
    with pytest.raises(SchedulerSpecError) as info:
        make_scheduler(spec, G)
    msg = str(info.value)
    assert fragment in msg
    assert "\n" not in msg
    assert "levelbased" in msg.split("known schedulers:")[1]
    assert isinstance(info.value, LevelflowError)


def test_register_rejects_names_a_spec_could_not_reach():
    with pytest.raises(ValueError):
        register("a:b")
