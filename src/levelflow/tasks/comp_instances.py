"""Component instances lowered to plain statements, as Soufflé's ComponentInstantiation does.

An instance `.init a = C<args>` holds, in order: the instances C's body makes, then what C
collects: per base (its arguments read through C's), the instances the base's body makes and
what the base collects, then C's own types, relations, directives and clauses. Type parameters
are replaced by their arguments in each part. Then every relation and type the instance holds
(nested instances' included) is renamed `a.name`, everywhere it is named: in the instance and in
the clauses not yet placed.

A clause whose head its component does not declare waits (an "orphan"), renamed by each
instance made meanwhile, and is placed in the first one that then declares its head (the
enclosing instance that declares it, as a rule), else at the top level: so a relation the body
names but does not declare stays global.

`.override r` in C drops the clauses its bases (directly or not) write to r themselves,
facts included; not those that reach r from a component instantiated inside a base, which is
made with nothing overridden and whose clauses wait as orphans until r's instance.
"""

from __future__ import annotations

from levelflow.tasks.ast import Rule
from levelflow.tasks.comp_names import NameMap, rename, rename_fact
from levelflow.tasks.components import MAX_INHERITANCE, Comp, Init, check_arity, lookup
from levelflow.tasks.errors import DatalogError
from levelflow.tasks.subsume import SUB

MAX_INSTANCE_DEPTH = 32
MAX_INSTANCES = 10_000  # a few components nesting two instances each would otherwise explode

# A clause not yet placed: (rule, whether the lexer took it whole, so constants only).
Orphan = tuple[Rule, bool]


class _Instances:
    """The state of instantiating one program: its top-level components and a budget."""

    def __init__(self, top: dict[str, Comp], new_parsed) -> None:
        self.top = top
        self.new_parsed = new_parsed  # parser.Parsed (not imported: the parser imports this)
        self.made = 0

    def instance(self, init: Init, scope: Comp | None, binding: dict[str, str],
                 orphans: list[Orphan], depth: int):
        """Return the statements of instance `init` written in `scope`, all renamed."""
        if depth > MAX_INSTANCE_DEPTH:
            raise DatalogError(f"component instances nest deeper than {MAX_INSTANCE_DEPTH}",
                               init.loc)
        self.made += 1
        if self.made > MAX_INSTANCES:
            raise DatalogError(f"the components make more than {MAX_INSTANCES} instances",
                               init.loc)
        comp = lookup(self.top, scope, init.comp, binding)
        if comp is None:
            raise DatalogError(f"component '{binding.get(init.comp, init.comp)}' is not "
                               "defined", init.loc)
        args = tuple(binding.get(a, a) for a in init.args)
        check_arity(comp, args, init.loc)
        active = dict(zip(comp.params, args, strict=True))
        res = self.new_parsed()
        for nested in comp.inits:
            res.absorb(self.instance(nested, comp, active, orphans, depth + 1))
        self.collect(comp, active, res, orphans, frozenset(), depth, frozenset())
        prefix = init.name + "."
        names = NameMap({d.name: prefix + d.name for d in res.decls},
                        {t.name: prefix + t.name for t in res.types},
                        {b: prefix + b for t in res.types if t.kind == "adt" for b, _ in t.fields})
        orphans[:] = [(_rename_rule(r, fast, names), fast) for r, fast in orphans]
        return _rename_parsed(res, names, self.new_parsed)

    def collect(self, comp: Comp, binding: dict[str, str], res, orphans: list[Orphan],
                overridden: frozenset[str], depth: int, seen: frozenset) -> None:
        """Add to `res` what `comp` and its bases hold; `overridden`: the relations whose
        clauses a component derived from `comp` overrides."""
        if comp in seen:
            raise DatalogError(f"component '{comp.name}' inherits from itself", comp.loc)
        if len(seen) > MAX_INHERITANCE:
            raise DatalogError(f"components inherit through more than {MAX_INHERITANCE} "
                               "levels", comp.loc)
        below = overridden | set(comp.parsed.overrides)
        for base, base_args, loc in comp.bases:
            found = lookup(self.top, comp.outer, base, binding)
            if found is None:
                raise DatalogError(f"component '{binding.get(base, base)}' is not defined", loc)
            args = tuple(binding.get(a, a) for a in base_args)
            check_arity(found, args, loc)
            active = dict(zip(found.params, args, strict=True))
            for nested in found.inits:  # no override reaches into these
                res.absorb(self.instance(nested, found, active, orphans, depth + 1))
            self.collect(found, active, res, orphans, below, depth, seen | {comp})
        own = comp.parsed
        types = NameMap(types=binding)
        local = _rename_parsed(own, types, self.new_parsed) if binding else own
        for name in ("types", "decls", "ios", "eqrels", "choices", "pragmas", "plans",
                     "functors"):
            getattr(res, name).extend(getattr(local, name))
        res.aggregates |= local.aggregates
        res.surface = res.surface or local.surface
        declared = {d.name for d in res.decls}
        for rule in [*local.rules, *local.subsumptions]:
            fast = id(rule) in local.fast
            for one in _one_head(rule):
                if _head(one).split(".", 1)[0] in overridden:
                    continue
                if _head(one) in declared:
                    _add(res, one, fast)
                else:
                    orphans.append((one, fast))
        waiting = []
        for rule, fast in orphans:
            if _head(rule) in declared:
                _add(res, rule, fast)
            else:
                waiting.append((rule, fast))
        orphans[:] = waiting


def instantiate_all(p) -> None:
    """Add the statements of the top-level instances of parser `p` to what it parsed."""
    made = _Instances(p.comps, type(p.out))
    for init in p.inits:
        orphans: list[Orphan] = []
        p.out.absorb(made.instance(init, None, {}, orphans, 1))
        for rule, fast in orphans:
            _add(p.out, rule, fast)


def _head(rule: Rule) -> str:
    """Return the relation a clause writes (a subsumptive rule: the one it prunes)."""
    name = rule.heads[0].relation
    return name[len(SUB):] if name.startswith(SUB) else name


def _one_head(rule: Rule) -> list[Rule]:
    """Return `a, b :- body.` as one clause per head, as Soufflé reads it."""
    if len(rule.heads) == 1:
        return [rule]
    return [Rule((head,), rule.body, rule.loc) for head in rule.heads]


def _add(out, rule: Rule, fast: bool) -> None:
    """Add a clause to a Parsed, among the subsumptive rules if it is one."""
    (out.subsumptions if rule.heads[0].relation.startswith(SUB) else out.rules).append(rule)
    if fast:
        out.fast.add(id(rule))


def _rename_rule(rule: Rule, fast: bool, names: NameMap) -> Rule:
    return rename_fact(rule, names) if fast else rename(rule, names)


def _rename_parsed(src, names: NameMap, new_parsed):
    """Return a new Parsed: `src`'s statements with their names mapped."""
    out = new_parsed()
    for name in ("decls", "types", "ios", "subsumptions"):
        setattr(out, name, [rename(x, names) for x in getattr(src, name)])
    for rule in src.rules:
        fast = id(rule) in src.fast
        out.rules.append(new := _rename_rule(rule, fast, names))
        if fast:
            out.fast.add(id(new))
    out.eqrels = [(names.rel(r), loc) for r, loc in src.eqrels]
    out.choices = [(names.rel(r), *rest) for r, *rest in src.choices]
    for name in ("pragmas", "plans", "functors", "overrides"):
        setattr(out, name, list(getattr(src, name)))
    out.aggregates, out.surface = src.aggregates, src.surface
    return out
