"""Binding `.functor` declarations to the `--functors` module (tasks/user_functors.py): each
call `@f(...)` renamed to its bound form, the declarations' problems reported."""

from __future__ import annotations

from levelflow.tasks.ast import Call, Rule, Term
from levelflow.tasks.typecheck import primitive_of
from levelflow.tasks.user_functors import encode, load, map_rule, map_term, module_path


def bind_functors(parsed, resolved: dict[str, str], report) -> list[Rule]:
    """Return the rules with each `@f(...)` renamed to its bound form; report a `.functor`
    declared twice or without a binding, and a call to an undeclared functor."""
    path, names, unbound = module_path(), {}, {}
    for d in parsed.functors:
        if d.name in names or d.name in unbound:
            report(d.loc, f"functor '{d.name}' is declared twice")
            continue
        params = tuple(primitive_of(t.name, t.loc, resolved, report) for t in d.params)
        result = primitive_of(d.result.name, d.result.loc, resolved, report)
        why = _binding_problem(d.name, path)
        if why is None:
            names[d.name] = encode(d.name, params, result, path)
        else:
            unbound[d.name] = f"functor '{d.name}' has no binding: {why}"
            report(d.loc, unbound[d.name])

    def rename(term: Term) -> Term:
        if isinstance(term, Call):
            args = tuple(rename(a) for a in term.args)
            if term.name.startswith("@"):
                if term.name[1:] not in names:  # call_type refuses an undeclared one
                    if term.name[1:] in unbound:
                        report(term.loc, unbound[term.name[1:]])
                    return Call(term.name, args, term.loc)
                return Call(names[term.name[1:]], args, term.loc)
            return Call(term.name, args, term.loc)
        return map_term(term, rename)
    fast = parsed.fast  # the lexer's facts: constants only, no calls
    return [map_rule(r, rename) if id(r) not in fast and _calls(r) else r for r in parsed.rules]


def _binding_problem(name: str, path: str | None) -> str | None:
    """Return why `name` cannot be bound to a function of the module at `path`, or None."""
    if path is None:
        return (f"pass --functors FILE.py, a Python module that defines {name} (run, update, "
                "shell, graph; serve never loads one)")
    try:
        fn = load(path, name)
    except Exception as e:  # noqa: BLE001 - importing the user's module runs its code
        return f"cannot import {path}: {type(e).__name__}: {e}"
    return None if fn is not None else f"{path} defines no function {name}"


def _calls(rule: Rule) -> bool:
    """Return whether a rule calls a user functor (its text holds `@` only then)."""
    found = []

    def see(term: Term) -> Term:
        if isinstance(term, Call) and term.name.startswith("@"):
            found.append(term)
        return map_term(term, see)
    map_rule(rule, see)
    return bool(found)
