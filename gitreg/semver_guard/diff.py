"""The classified difference between two versions' interfaces.

Every change is one of:

- `breaking`: a caller of the old version may fail, or silently lose
  something, with the new one: a variable removed (or renamed), a variable
  that becomes required, a type that no longer accepts what it accepted, an
  output removed, a resource or module call removed without a `moved` block
  (or with a `removed` block that destroys), a `required_providers` source
  changed or constraint that excludes versions the old one allowed, the same
  for `required_version`, a submodule removed;
- `possibly_breaking`: it cannot be decided from the two interfaces (two types
  that cannot be compared for sure, a move to an address not declared here):
  reported with both sides, never guessed;
- `additive`: a new optional variable, a new output, a new submodule, a widened
  type or constraint;
- `other`: descriptions, defaults, deprecations, new resources, and the like.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from gitreg.semver_guard.constraints import relation
from gitreg.semver_guard.interface import Interface, ModuleInterface, Variable
from gitreg.semver_guard.types import parse_type, widening

Kind = Literal["breaking", "possibly_breaking", "additive", "other"]
KINDS: tuple[Kind, ...] = ("breaking", "possibly_breaking", "additive", "other")


@dataclass(frozen=True)
class Change:
    kind: Kind
    module: str  # "" for the root module, else "modules/NAME"
    subject: str  # "variable", "output", "provider", "required_version", "resource", "submodule"
    name: str
    change: str  # a short key: "removed", "type_narrowed", "became_required", ...
    detail: str  # one sentence for people

    def as_json(self) -> dict[str, str]:
        return asdict(self)


def diff(old: Interface, new: Interface) -> list[Change]:
    """The changes from `old` to `new`, module by module (root first)."""
    changes: list[Change] = []
    for path in sorted(old.modules.keys() | new.modules.keys()):
        before, after = old.modules.get(path), new.modules.get(path)
        if before is None:
            changes.append(
                Change("additive", path, "submodule", path, "added", f"submodule {path} added")
            )
        elif after is None:
            changes.append(
                Change("breaking", path, "submodule", path, "removed", f"submodule {path} removed")
            )
        else:
            changes += _module(before, after)
    return changes


def counts(changes: list[Change]) -> dict[str, int]:
    return {kind: sum(c.kind == kind for c in changes) for kind in KINDS}


def _module(old: ModuleInterface, new: ModuleInterface) -> list[Change]:
    out: list[Change] = []
    at = old.path
    where = f" in {at}" if at else ""

    def add(kind: Kind, subject: str, name: str, change: str, detail: str) -> None:
        out.append(Change(kind, at, subject, name, change, detail + where))

    added_vars = [v for n, v in new.variables.items() if n not in old.variables]
    for name, var in old.variables.items():
        if name in new.variables:
            _variable(var, new.variables[name], add)
            continue
        hint = _renamed_to(var, added_vars)
        add("breaking", "variable", name, "removed", f'variable "{name}" removed{hint}')
    for var in added_vars:
        if var.has_default:
            add("additive", "variable", var.name, "added", f'optional variable "{var.name}" added')
        else:
            add(
                "breaking",
                "variable",
                var.name,
                "added_required",
                f'required variable "{var.name}" added',
            )
    for name, output in old.outputs.items():
        now = new.outputs.get(name)
        if now is None:
            add("breaking", "output", name, "removed", f'output "{name}" removed')
            continue
        if now.sensitive and not output.sensitive:
            # A caller that shows it, or uses it in for_each, now fails.
            add(
                "possibly_breaking",
                "output",
                name,
                "made_sensitive",
                f'output "{name}" became sensitive',
            )
        elif output.sensitive and not now.sensitive:
            add("other", "output", name, "not_sensitive", f'output "{name}" is no longer sensitive')
        if now.deprecated != output.deprecated:
            add(
                "other", "output", name, "deprecation", _deprecation("output", name, now.deprecated)
            )
        if now.description != output.description:
            add("other", "output", name, "description", f'output "{name}": description changed')
    for name in new.outputs.keys() - old.outputs.keys():
        add("additive", "output", name, "added", f'output "{name}" added')
    _providers(old, new, add)
    _required_version(old.required_version, new.required_version, add)
    _addresses(old, new, add)
    return out


def _variable(old: Variable, new: Variable, add: Any) -> None:
    name = old.name
    label = f'variable "{name}"'
    if old.has_default and not new.has_default:
        add(
            "breaking",
            "variable",
            name,
            "became_required",
            f"{label} became required (its default was removed)",
        )
    elif new.has_default and not old.has_default:
        add(
            "additive",
            "variable",
            name,
            "became_optional",
            f"{label} became optional (default {_show(new.default)})",
        )
    elif old.has_default and old.default != new.default:
        add(
            "other",
            "variable",
            name,
            "default",
            f"{label}: default {_show(old.default)} became {_show(new.default)}",
        )
    _variable_type(old, new, add)
    if old.nullable and not new.nullable:
        if new.has_default:
            add("other", "variable", name, "not_nullable", f"{label}: null now means its default")
        else:
            add("breaking", "variable", name, "not_nullable", f"{label} no longer accepts null")
    elif new.nullable and not old.nullable:
        add(
            "other",
            "variable",
            name,
            "nullable",
            f"{label}: null is now passed on instead of its default",
        )
    if new.sensitive != old.sensitive:
        state = "sensitive" if new.sensitive else "no longer sensitive"
        add("other", "variable", name, "sensitive", f"{label} is {state}")
    if new.deprecated != old.deprecated:
        add(
            "other", "variable", name, "deprecation", _deprecation("variable", name, new.deprecated)
        )
    if new.description != old.description:
        add("other", "variable", name, "description", f"{label}: description changed")


def _variable_type(old: Variable, new: Variable, add: Any) -> None:
    name, label = old.name, f'variable "{old.name}"'
    if old.type == new.type:
        return
    before, after = parse_type(old.type), parse_type(new.type)
    shown = f"{old.type or 'any'} -> {new.type or 'any'}"
    if before is None or after is None:
        add(
            "possibly_breaking",
            "variable",
            name,
            "type_unknown",
            f"{label}: type {shown} (not compared)",
        )
        return
    found = widening(before, after)
    reasons = "; ".join(r for _, r in found.reasons)
    if found.verdict == "narrower":
        narrowed = "; ".join(r for v, r in found.reasons if v == "narrower")
        add("breaking", "variable", name, "type_narrowed", f"{label}: type {shown}: {narrowed}")
    elif found.verdict == "unsure":
        add(
            "possibly_breaking",
            "variable",
            name,
            "type_unsure",
            f"{label}: type {shown}: {reasons}",
        )
    elif found.verdict == "wider":
        add("additive", "variable", name, "type_widened", f"{label}: type {shown}: {reasons}")
    elif found.verdict == "changed":
        add("other", "variable", name, "type_default", f"{label}: type {shown}: {reasons}")


def _providers(old: ModuleInterface, new: ModuleInterface, add: Any) -> None:
    for name, provider in old.providers.items():
        now = new.providers.get(name)
        label = f'provider "{name}"'
        if now is None:
            add("other", "provider", name, "removed", f"{label} no longer required")
            continue
        if _source(now.source) != _source(provider.source):
            add(
                "breaking",
                "provider",
                name,
                "source",
                f"{label}: source {provider.source or '-'} became {now.source or '-'}",
            )
        _constraint("provider", name, f"{label}: version", provider.version, now.version, add)
    for name in new.providers.keys() - old.providers.keys():
        p = new.providers[name]
        add(
            "other",
            "provider",
            name,
            "added",
            f'provider "{name}" required ({p.source} {p.version})'.replace(" )", ")"),
        )


def _source(source: str) -> str:
    """`aws` and `hashicorp/aws` and `registry.terraform.io/hashicorp/aws` are one provider."""
    parts = source.lower().split("/")
    if len(parts) == 1:
        parts = ["hashicorp", *parts]
    if len(parts) == 2:
        parts = ["registry.terraform.io", *parts]
    return "/".join(parts)


def _required_version(old: str, new: str, add: Any) -> None:
    _constraint("required_version", "required_version", "required_version", old, new, add)


def _constraint(subject: str, name: str, label: str, old: str, new: str, add: Any) -> None:
    if old.strip() == new.strip():
        return
    found, example = relation(old, new)
    shown = f'{label} "{old}" -> "{new}"'
    if found in ("narrower", "both"):
        add("breaking", subject, name, "narrowed", f"{shown}: {example}")
    elif found == "wider":
        add("additive", subject, name, "widened", f"{shown}: {example}")
    elif found == "unsure":
        add("possibly_breaking", subject, name, "unknown", f"{shown} (not compared)")
    else:
        add("other", subject, name, "rewritten", f"{shown}: the same versions")


_INDEX = re.compile(r"\[[^\]]*\]")


def _bare(address: str) -> str:
    """`aws_instance.a["x"]` -> `aws_instance.a`."""
    return _INDEX.sub("", address).strip()


def _addresses(old: ModuleInterface, new: ModuleInterface, add: Any) -> None:
    moves = {_bare(f): _bare(t) for f, t in new.moved}
    removals = {_bare(f): destroy for f, destroy in new.removed}
    for address in sorted(old.addresses - new.addresses):
        subject = "module call" if address.startswith("module.") else "resource"
        target = _follow(address, moves)
        if target is not None:
            if target in new.addresses or _in_call(target, new.addresses):
                add(
                    "other", subject, address, "moved", f"{address} moved to {target} (moved block)"
                )
            else:
                add(
                    "possibly_breaking",
                    subject,
                    address,
                    "moved_elsewhere",
                    f"{address} moved to {target}, which this version does not declare",
                )
        elif address in removals and not removals[address]:
            add(
                "other",
                subject,
                address,
                "forgotten",
                f"{address} removed from state without destroying it (removed block)",
            )
        elif address in removals:
            add(
                "breaking",
                subject,
                address,
                "destroyed",
                f"{address} removed and destroyed (removed block)",
            )
        else:
            add(
                "breaking",
                subject,
                address,
                "removed",
                f"{address} removed without a moved block: callers' {subject} would be destroyed",
            )
    for address in sorted(new.addresses - old.addresses):
        subject = "module call" if address.startswith("module.") else "resource"
        if address not in set(moves.values()):
            add("other", subject, address, "added", f"{address} added")


def _follow(address: str, moves: dict[str, str]) -> str | None:
    """Where chained `moved` blocks take `address`, or None."""
    seen = {address}
    target = moves.get(address)
    while target is not None and target in moves and target not in seen:
        seen.add(target)
        target = moves[target]
    return target


def _in_call(target: str, addresses: frozenset[str]) -> bool:
    """`module.x.aws_instance.a`: moved into a module call this version makes."""
    parts = target.split(".")
    return len(parts) > 2 and parts[0] == "module" and f"module.{parts[1]}" in addresses


def _renamed_to(old: Variable, added: list[Variable]) -> str:
    alike = [
        v
        for v in added
        if old.description and v.description == old.description and v.type == old.type
    ]
    return f' (renamed to "{alike[0].name}"?)' if len(alike) == 1 else ""


def _deprecation(subject: str, name: str, message: str) -> str:
    if message:
        return f'{subject} "{name}" deprecated: {message}'
    return f'{subject} "{name}" no longer deprecated'


def _show(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."
