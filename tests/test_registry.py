"""The one plug-in registry (clawgym.core.registry): registered, built-in (lazy) and entry-point plug-ins."""

from __future__ import annotations

import sys

import pytest

from clawgym.core.registry import Registry, UnknownPlugin
from plugin_dist import install_dist


def test_registered_builtin_and_entry_point_plugins_are_found_by_name(tmp_path, monkeypatch):
    reg: Registry = Registry("widget", "clawgym.test_widgets", builtin={"json-dumps": "json:dumps"})

    @reg.register("mine")
    def mine():
        return 1

    install_dist(tmp_path, monkeypatch, "widget-dist", {"widget_pkg.impl": "def make():\n    return 'third'\n"},
                 {"clawgym.test_widgets": {"third": "widget_pkg.impl:make"}})
    assert reg.names() == ["json-dumps", "mine", "third"]
    assert "widget_pkg.impl" not in sys.modules  # listing loads nothing
    assert reg.get("mine") is mine
    import json

    assert reg.get("json-dumps") is json.dumps
    assert reg.get("third")() == "third"
    assert "widget_pkg.impl" in sys.modules


def test_unknown_names_are_a_usage_error_naming_the_known_ones():
    reg: Registry = Registry("widget", "clawgym.test_widgets_none", builtin={"a": "json:dumps"})
    with pytest.raises(UnknownPlugin, match=r"unknown widget 'b'; registered: a"):
        reg.get("b")
    with pytest.raises(ValueError):
        reg.get("b")


def test_a_plugin_of_the_wrong_kind_is_refused():
    def check(name, obj):
        if not callable(obj):
            raise TypeError(f"widget {name!r} is not callable")

    reg: Registry = Registry("widget", "clawgym.test_widgets_none", check=check)
    with pytest.raises(TypeError, match="not callable"):
        reg.add("x", 3)
    with pytest.raises(ValueError, match="bad widget name"):
        reg.add("no spaces", len)
