"""Garbage collection of a state directory: the epoch directories, bases and segments that no
kept manifest names."""

from __future__ import annotations

import shutil
from pathlib import Path


def delete_unreferenced(root: Path, epochs: set[str], kept: list[dict]) -> None:
    """Delete under `root` (epochs/) what no kept manifest names: older epochs, or the bases
    and segments in them (`epochs`: the kept epochs; one whose manifest is unreadable in
    `kept` stays whole)."""
    named = set().union(*(referenced(d) for d in kept))
    current = int(kept[0]["epoch"])
    for child in root.iterdir():
        if child.name in epochs or not child.name.isdigit() and not child.name.startswith(
                ".tmp-"):
            continue
        if child.name.isdigit() and int(child.name) > current:
            continue  # newer than CURRENT: maybe acknowledged; never deleted here
        referenced_here = False
        for kind in ("rel", "base", "seg/rel", "seg/base"):
            for sub in sorted((child / kind).glob("*")):
                if f"{child.name}/{kind}/{sub.name}" in named:
                    referenced_here = True
                else:  # e.g. epoch 0's `path` once later epochs rewrote it
                    shutil.rmtree(sub, ignore_errors=True)
        if not referenced_here:
            shutil.rmtree(child, ignore_errors=True)


def referenced(data: dict) -> set[str]:
    """Return the directories a manifest names, as `<epoch>/<kind>/<name>` under epochs/."""
    out = set()
    for kind, key in (("rel", "relations"), ("base", "base")):
        for name, info in data[key].items():
            if info["epoch"] is not None:
                out.add(f"{info['epoch']}/{kind}/{name}")
            out.update(f"{seg['epoch']}/seg/{kind}/{name}" for seg in info.get("segments", []))
    return out
