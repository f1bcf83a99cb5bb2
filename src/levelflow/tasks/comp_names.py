"""Names in parsed statements mapped as a component instance maps them (tasks/comp_instances.py).

Relations and types are separate namespaces, as in Soufflé: `.decl node(n: node)` names the
relation `node` and the type `node`, and an instance may rename one and not the other. A map
holds relation names (atoms, path atoms, declarations, I/O directives, `eqrel`,
`choice-domain`, subsumptive rules' pair relations), type names (attribute, field, base and
cast types, type declarations) and ADT branch names (their declarations and `$Branch` terms).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace

from levelflow.tasks.ast import (
    IO,
    Atom,
    Cast,
    Loc,
    PathExpr,
    RawDecl,
    Record,
    Rule,
    TypeDef,
    TypeRef,
)
from levelflow.tasks.subsume import SUB


@dataclass(frozen=True)
class NameMap:
    """Relation, type and ADT branch names to their new names (a name not held is kept)."""

    rels: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)

    def rel(self, name: str) -> str:
        """Return a relation's new name; `@sub:r` (tasks/subsume.py) follows r."""
        if name.startswith(SUB):
            return SUB + self.rels.get(name[len(SUB):], name[len(SUB):])
        return self.rels.get(name, name)

    def __bool__(self) -> bool:
        return bool(self.rels or self.types or self.branches)


def _own(node, names: NameMap) -> dict:
    """Return the changes to the names `node` itself holds (not its children's)."""
    kind = type(node)
    if kind is Atom or kind is IO:
        new = names.rel(node.relation)
        return {"relation": new} if new != node.relation else {}
    if kind is PathExpr and node.name:
        new = names.rel(node.name)
        return {"name": new} if new != node.name else {}
    if kind is RawDecl:
        return {"name": names.rel(node.name)} if node.name in names.rels else {}
    if kind is TypeRef or kind is TypeDef:
        changes = {"name": names.types[node.name]} if node.name in names.types else {}
        if kind is TypeDef and node.kind == "adt" and names.branches:
            changes["fields"] = tuple((names.branches.get(b, b), fs) for b, fs in node.fields)
        return changes
    if kind is Cast and node.type in names.types:
        return {"type": names.types[node.type]}
    if kind is Record and node.branch.startswith("$") and node.branch[1:] in names.branches:
        return {"branch": "$" + names.branches[node.branch[1:]]}
    return {}


def rename(node, names: NameMap):
    """Return `node` (a statement, term or tuple of them) with its names mapped; unchanged parts
    are shared, so a statement without any mapped name is returned as it is."""
    if isinstance(node, tuple):
        if isinstance(node, Loc):
            return node
        new = tuple(rename(x, names) for x in node)
        return node if all(a is b for a, b in zip(new, node, strict=True)) else new
    if not is_dataclass(node):
        return node
    changes = _own(node, names)
    for f in fields(node):
        if f.name in changes:
            value = changes[f.name]  # the fields of an ADT's branches: their types too
            if f.name != "fields":
                continue
        else:
            value = getattr(node, f.name)
        if isinstance(value, tuple) or is_dataclass(value):
            new = rename(value, names)
            if new is not value:
                changes[f.name] = new
    return replace(node, **changes) if changes else node


def rename_fact(rule: Rule, names: NameMap) -> Rule:
    """Return a fact of constants with its relation mapped (its arguments hold no names)."""
    head = rule.heads[0]
    new = names.rel(head.relation)
    return rule if new == head.relation else Rule((replace(head, relation=new),), (), rule.loc)
