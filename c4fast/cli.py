"""Command-line flags and JSON files derived from frozen config dataclasses.

The configs (``SearchConfig``, ``SelfPlayConfig``, ``RunConfig``, ``TrainConfig``,
``LoopConfig``, ...) are the single source of every default. This module turns a config
class into argparse flags and back, and a config into JSON and back, so that no default
is typed twice and a child process receives the exact config its parent built.

Why a 150-line helper rather than jsonargparse or tyro: the configs are plain frozen
dataclasses with a handful of scalar types; both libraries would add a dependency (and
its own help format) to every process, including the torch-free Saiblo player, for what
a small recursive walk over ``dataclasses.fields`` does.

Conventions:

- A field's flag is ``--`` + its name with ``-`` for ``_``, prefixed by the path of the
  nested config for nested fields unless the parent field is declared ``flatten``
  (``field(metadata=flatten())``) — e.g. ``RunConfig.search.full_playouts`` is
  ``--full-playouts``, ``LoopConfig.run.search.full_playouts`` is
  ``--run.full-playouts``.
- ``metadata=opt("help")`` documents a field. Booleans get ``--x`` / ``--no-x``.
- Flags default to "not given": only flags on the command line override the base config
  (the class defaults, or a ``--config FILE.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import types
import typing
from typing import Any, TypeVar

__all__ = ["opt", "flatten", "add_config_arguments", "config_from_args", "config_to_dict",
           "config_from_dict", "load_config", "save_config", "ConfigError"]

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or flag value that does not fit the config class."""


def opt(help: str = "", cli: bool = True, metavar: str | None = None) -> dict:
    """Field metadata: help text, and whether it is a flag at all."""
    return {"help": help, "cli": cli, "metavar": metavar}


def flatten(help: str = "") -> dict:
    """Metadata for a nested-config field whose flags carry no prefix."""
    return {"help": help, "flatten": True, "cli": True}


def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _scalar_type(tp) -> tuple[Any, bool]:
    """(python type of the value, optional?) for a field annotation."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _scalar_type(args[0])[0], True
    return tp, False


def _value_parser(tp, optional: bool):
    def parse(text: str):
        if optional and text.lower() in ("none", "null", ""):
            return None
        if tp is float:
            v = float(text)
            if not math.isfinite(v):
                raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
            return v
        if tp is int:
            return int(text)
        if tp is str:
            return text
        origin = typing.get_origin(tp)
        if origin is tuple:
            return tuple(x.strip() for x in text.split(",") if x.strip())
        raise argparse.ArgumentTypeError(f"unsupported type {tp}")

    parse.__name__ = getattr(tp, "__name__", "value")
    return parse


def _dest(path: tuple[str, ...]) -> str:
    return "cfg__" + "__".join(path)


def add_config_arguments(parser: argparse.ArgumentParser, cls, prefix: str = "",
                         path: tuple[str, ...] = (), group=None, base=None,
                         skip: frozenset[str] = frozenset()) -> None:
    """Add one flag per field of `cls` (recursively) to `parser`; see the module docstring.

    `base`, if given, is the instance whose values the help shows as defaults. `skip` names dotted
    field paths (``"selfplay.out"``) that get no flag (a parent command sets them).
    """
    base = base if base is not None else _default_instance(cls)
    hints = _hints(cls)
    target = group or parser.add_argument_group(cls.__name__, (cls.__doc__ or "").strip().split("\n")[0])
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if meta.get("cli") is False or ".".join(path + (f.name,)) in skip:
            continue
        tp = hints[f.name]
        value = getattr(base, f.name) if base is not None else None
        if dataclasses.is_dataclass(tp):
            sub_prefix = prefix if meta.get("flatten") else f"{prefix}{f.name.replace('_', '-')}."
            add_config_arguments(parser, tp, sub_prefix, path + (f.name,), None, value, skip)
            continue
        name = "--" + prefix + f.name.replace("_", "-")
        help_text = meta.get("help", "")
        kind, optional = _scalar_type(tp)
        if kind is bool:
            dest = _dest(path + (f.name,))
            target.add_argument(name, dest=dest, action=argparse.BooleanOptionalAction,
                                default=argparse.SUPPRESS, help=f"{help_text} (default: {value})")
            continue
        target.add_argument(name, dest=_dest(path + (f.name,)), type=_value_parser(kind, optional),
                            default=argparse.SUPPRESS, metavar=meta.get("metavar") or f.name.upper(),
                            help=f"{help_text} (default: {_show(value)})")


def _show(v) -> str:
    if isinstance(v, tuple):
        return ",".join(map(str, v))
    return str(v)


def _default_instance(cls):
    try:
        return cls()
    except TypeError:  # a config with required fields: no defaults to show
        return None


def config_from_args(cls: type[T], args: argparse.Namespace, base: T | None = None) -> T:
    """`base` (default ``cls()``) with every flag given on the command line applied.

    Raises :class:`ConfigError` if the result is invalid (the config's own checks).
    """
    given = [(tuple(k[5:].split("__")), v) for k, v in vars(args).items() if k.startswith("cfg__")]
    cfg = base if base is not None else cls()
    tree: dict = {}
    for path, value in given:
        node = tree
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = value
    return _apply(cfg, tree)


def _apply(cfg, changes: dict):
    """`cfg` with the nested `changes` applied, each level in one ``replace`` so that
    cross-field checks see all new values together."""
    flat = {k: (_apply(getattr(cfg, k), v) if isinstance(v, dict) else v) for k, v in changes.items()}
    try:
        return dataclasses.replace(cfg, **flat)
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e)) from None


def config_to_dict(cfg) -> dict:
    """A JSON-ready dict of a (nested) config; tuples become lists."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def config_from_dict(cls: type[T], data: dict, where: str = "config") -> T:
    """Rebuild `cls` from :func:`config_to_dict` output; unknown or mistyped keys are a
    :class:`ConfigError` naming the key. Missing keys take the class defaults. A key of
    the class's ``RETIRED_FIELDS`` (name -> off value: a removed switch) is dropped when it
    holds that value, so files written before the removal still load, and refused otherwise."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    retired = getattr(cls, "RETIRED_FIELDS", {})
    for k in sorted(set(data) & set(retired)):
        if data[k] != retired[k]:
            raise ConfigError(f"{where}.{k}: the switch was removed from c4fast (docs/ABLATIONS.md); "
                              f"{data[k]!r} is not its off value {retired[k]!r}")
    data = {k: v for k, v in data.items() if k not in retired}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown} for {cls.__name__}")
    kwargs = {}
    for k, v in data.items():
        tp = hints[k]
        kind, optional = _scalar_type(tp)
        if dataclasses.is_dataclass(tp):
            kwargs[k] = config_from_dict(tp, v, f"{where}.{k}")
        elif v is None and optional:
            kwargs[k] = None
        elif typing.get_origin(kind) is tuple or kind is tuple:
            if not isinstance(v, (list, tuple)):
                raise ConfigError(f"{where}.{k}: expected a list, got {v!r}")
            kwargs[k] = tuple(v)
        elif kind is float and isinstance(v, (int, float)) and not isinstance(v, bool):
            kwargs[k] = float(v)
        elif kind in (int, str, bool) and type(v) is kind:
            kwargs[k] = v
        else:
            raise ConfigError(f"{where}.{k}: expected {getattr(kind, '__name__', kind)}, got {v!r}")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def load_config(cls: type[T], path: str | os.PathLike) -> T:
    """Read a JSON config file written by :func:`save_config` (or by hand); text that
    starts with ``{`` is taken as the JSON itself (a config passed inline)."""
    if isinstance(path, str) and path.lstrip().startswith("{"):
        try:
            return config_from_dict(cls, json.loads(path), "--config")
        except json.JSONDecodeError as e:
            raise ConfigError(f"--config is not valid JSON: {e}") from None
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read config {os.fspath(path)!r}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"config {os.fspath(path)!r} is not valid JSON: {e}") from None
    return config_from_dict(cls, data, os.path.basename(os.fspath(path)))


def save_config(cfg, path: str | os.PathLike) -> None:
    """Write `cfg` as indented JSON, atomically."""
    from c4fast.runtime import atomic_write_json

    atomic_write_json(path, config_to_dict(cfg))
