"""Every public module, class, function and method of jaxgrid says what it is."""

import importlib
import inspect
import pkgutil

import jaxgrid

OPTIONAL = ("jaxgrid.interop.gymnasium_env", "jaxgrid.interop.pettingzoo_env")  # gym extra


def _public_objects():
    for info in pkgutil.walk_packages(jaxgrid.__path__, "jaxgrid."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            if info.name in OPTIONAL:
                continue
            raise
        yield info.name, module
        for name, value in vars(module).items():
            if name.startswith("_") or getattr(value, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(value) or inspect.isclass(value):
                yield f"{info.name}.{name}", value
            if inspect.isclass(value):
                for attr, member in vars(value).items():
                    if attr.startswith("_") or not inspect.isfunction(member):
                        continue
                    inherited = any(
                        getattr(getattr(base, attr, None), "__doc__", None)
                        for base in value.__mro__[1:]
                    )
                    if not inherited:
                        yield f"{info.name}.{name}.{attr}", member


def test_every_public_name_has_a_docstring():
    missing = [name for name, obj in _public_objects() if not (obj.__doc__ or "").strip()]
    assert not missing, f"no docstring: {missing}"
