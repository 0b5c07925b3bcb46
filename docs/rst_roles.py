"""A griffe extension: docstrings' reStructuredText roles as mkdocs cross-references.

jaxgrid's docstrings use Sphinx roles (``:class:`~jaxgrid.env.Environment```,
``:func:`jaxgrid.make```, ``:mod:``, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``)
and double backticks for code. mkdocstrings renders docstrings as Markdown, so each role
becomes an autorefs link ``[`Environment`][jaxgrid.env.Environment]``, which the strict
build resolves (a reference to a name that does not exist fails it). A target without a
dot, or starting with a dot, is looked up from the object that holds the docstring: its
class (for methods and attributes) and then its module.
"""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|mod|meth|attr|data|exc|obj):`(~?)([\w.]+)(?:\(\))?`")


def _resolve(target: str, obj: griffe.Object, package: griffe.Module) -> str:
    """The full path of ``target`` as written in the docstring of ``obj``, through aliases
    (a name a module imports is documented where it is defined)."""
    target = target.lstrip(".")
    if not target.startswith(package.name):
        scope = obj if obj.is_class or obj.is_module else obj.parent
        head = target.split(".")[0]
        while scope is not None and head not in scope.members:
            scope = scope.parent
        if scope is None:
            return target
        target = f"{scope.path}.{target}"
    try:
        found = package.modules_collection.get_member(target)
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return target
    try:
        return found.final_target.path if found.is_alias else found.path
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return target


def _objects(obj: griffe.Object):
    """``obj`` and every object it holds, aliases left out."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _objects(member)


class RstRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring of the package into autorefs links."""

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        """Rewrite the roles once the whole package is loaded (so every target exists)."""
        for obj in _objects(pkg):
            if obj.docstring is None:
                continue

            def link(match: re.Match, obj=obj) -> str:
                short, target = match.group(2), match.group(3)
                shown = target.rsplit(".", 1)[-1] if short else target
                return f"[`{shown}`][{_resolve(target, obj, pkg)}]"

            obj.docstring.value = ROLE.sub(link, obj.docstring.value)
