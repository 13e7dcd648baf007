# SPDX-License-Identifier: MIT
"""Every public name of the elector package has a docstring, so that help()
shows it: the modules (elector, elector.aio, elector.tooz_driver and the C
extension elector._elector), their classes, functions and exceptions, and
every public method and property a class defines. A public name is one not
starting with "_"; for a module, the names of __all__ when it has one. A
class's docstring says what its constructor takes (__init__ needs none). A
method overriding a documented one of a base class (tooz's driver API) may
rely on the base's docstring, which help() shows."""

import importlib
import inspect
import types

import pytest

MODULES = ["elector", "elector.aio", "elector.tooz_driver", "elector._elector"]


def _module(name):
    if name == "elector.tooz_driver":
        pytest.importorskip("tooz")
    return importlib.import_module(name)


def _public(mod):
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    for n in names:
        obj = getattr(mod, n)
        if inspect.ismodule(obj):
            continue
        # What the module imports from elsewhere is documented there.
        owner = getattr(obj, "__module__", mod.__name__)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and owner != mod.__name__:
            continue
        yield n, obj


def _doc(obj):
    doc = obj.__doc__ if not isinstance(obj, property) else obj.fget.__doc__
    return (doc or "").strip()


def missing(mod):
    """The public names of mod without a docstring, as "module.name"."""
    out = []
    if not _doc(mod):
        out.append(mod.__name__)
    for n, obj in _public(mod):
        if not (inspect.isclass(obj) or callable(obj)):
            continue  # constants: documented by the module (error codes)
        if not _doc(obj):
            out.append(f"{mod.__name__}.{n}")
        if not inspect.isclass(obj):
            continue
        for m, attr in vars(obj).items():
            if m.startswith("_"):
                continue
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if not (isinstance(attr, (property, types.FunctionType))
                    or inspect.ismethoddescriptor(attr)
                    or inspect.isgetsetdescriptor(attr)
                    or inspect.ismemberdescriptor(attr)):
                continue
            # A method that overrides a documented one (tooz's API) shows the
            # base's docstring in help(): inspect.getdoc() finds it.
            if not _doc(attr) and not (inspect.getdoc(getattr(obj, m)) or "").strip():
                out.append(f"{mod.__name__}.{n}.{m}")
    return out


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_has_a_docstring(name):
    assert missing(_module(name)) == []


def test_help_shows_the_docstrings():
    import pydoc
    import elector
    text = pydoc.render_doc(elector.Client, renderer=pydoc.plaintext)
    assert elector.Client.__doc__.strip().splitlines()[0] in text
    assert elector.Client.session.__doc__.strip().splitlines()[0] in text


def test_the_check_finds_a_missing_docstring():
    """Self-test: a planted module with an undocumented class, method,
    function and property fails the walk."""
    mod = types.ModuleType("planted", "A documented module.")

    class Documented:
        """Documented."""

        def method(self):
            pass

        @property
        def prop(self):
            return 0

    def function():
        pass

    class Bare(Exception):
        pass

    for obj in (Documented, function, Bare):
        obj.__module__ = "planted"
    mod.Documented, mod.function, mod.Bare = Documented, function, Bare
    assert sorted(missing(mod)) == ["planted.Bare", "planted.Documented.method",
                                    "planted.Documented.prop", "planted.function"]
