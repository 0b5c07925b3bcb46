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


def _resolve(target: str, obj: griffe.Object) -> str:
    """The full path of ``target`` as written in the docstring of ``obj``."""
    if target.startswith("jaxgrid"):
        return target
    target = target.lstrip(".")
    scopes = [obj if obj.is_class or obj.is_module else obj.parent]
    while scopes[-1] is not None and scopes[-1].parent is not None:
        scopes.append(scopes[-1].parent)
    head = target.split(".")[0]
    for scope in scopes:
        if scope is not None and head in scope.members:
            return f"{scope.path}.{target}"
    return target


class RstRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring into autorefs links."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        """Rewrite the roles of ``obj``'s docstring, once it is loaded."""
        if obj.docstring is None:
            return

        def link(match: re.Match) -> str:
            short, target = match.group(2), match.group(3)
            path = _resolve(target, obj)
            shown = target.rsplit(".", 1)[-1] if short else target
            return f"[`{shown}`][{path}]"

        obj.docstring.value = ROLE.sub(link, obj.docstring.value)
