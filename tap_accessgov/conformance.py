"""Records that always fit the SCHEMA the tap sent, whatever shape the service sends.

The service's shapes change between releases (``annotations`` went from a list to a map), and
fields appear in any release. The SCHEMA message goes out before the first record and a loader
types its columns after it, so a value in a shape the schema does not allow would reach the
loader as an invalid record, and a validating loader (target-postgres by default, or any plain
pipe) stops the run at the first one. The SDK turns Python values into JSON ones
(``TYPE_CONFORMANCE_LEVEL``) but never checks a value against the schema, so the tap does it,
once, for every stream (``TapStream.post_process``):

- a field the schema does not declare is left out, with one warning per field and run (the
  SDK would warn for every record);
- an integer sent as a decimal string (protobuf JSON's int64) becomes an integer, ``""``
  null: that is the service's normal form, so it is silent;
- a string property sent as another JSON value (a number, an object: the field's type
  changed) is kept as its JSON text: nothing is lost, and an id or enum sent as a number stays
  readable and joinable;
- any other value the schema does not allow (a list where a map is declared, an object where a
  date-time is) is dropped from the record, which keeps its other fields; one warning per field
  and run names the field, the type declared and the type sent, never the value (it may be
  personal data). A list with one such item is dropped whole: dropping items would change
  what it says;
- a record without one of its key fields (the schema's required properties) is skipped, with
  one warning per field: it cannot be keyed.

Why not widen the schema when a new shape shows up: the SCHEMA has already gone out and the
warehouse's columns are typed after it, and typed columns are what the models read. Why not
keep every misfit as JSON text: a map or a date as text in a column typed otherwise is just
as invalid. Free-form values (maps, ``profile``, protobuf Any) are declared as objects that
take any keys and values (schemas.py), so the shapes most likely to vary never misfit.

The check is one pass of type tests compiled once per schema; warnings and repairs cost only
for a record that does not fit.
"""

from __future__ import annotations

import json
import re
import typing as t

if t.TYPE_CHECKING:
    import logging

Record = dict[str, t.Any]
Notes = list[tuple[str, str]]  # (path of the value, what was done), collected while repairing
# A compiled property: the value itself when it fits, a converted value where the conversion
# is the service's normal form, else UNFIT; with notes (repairing), every other conversion too,
# each noted.
Fit = t.Callable[[t.Any, Notes | None], t.Any]

UNFIT: t.Any = object()


class DateTime:
    """The fitting class of a date-time property: a string that must also be RFC 3339, which
    the per-record path tests inline (``_RFC3339``)."""


_DECIMAL = re.compile(r"-?\d+")
# ASCII digits: a pattern's \d matches any Unicode digit, which no loader parses as a date.
_RFC3339 = re.compile(
    r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d)", re.ASCII
)
_IS_RFC3339 = _RFC3339.fullmatch
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}


def _sent(value: t.Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _dropped(notes: Notes | None, path: str, value: t.Any, declared: str) -> t.Any:
    if notes is not None:
        notes.append((path, f"sent {_sent(value)} where the schema says {declared}: dropped"))
    return UNFIT


def fitting_class(schema: dict[str, t.Any]) -> type | None:
    """The one class of value that fits a property as it is, tested before calling its
    ``Fit`` (a class test is cheaper than a call: this is the per-record path): ``str`` for a
    plain string, ``dict`` for a free-form object, ``DateTime`` for a date-time...; None
    where every value needs its Fit."""
    types = schema.get("type", [])
    kinds = [k for k in ([types] if isinstance(types, str) else types) if k != "null"]
    if kinds == ["string"]:
        return DateTime if schema.get("format") == "date-time" else str
    if kinds == ["object"] and not schema.get("properties"):
        return dict
    return {"integer": int, "boolean": bool}.get(kinds[0]) if len(kinds) == 1 else None


def compile_property(schema: dict[str, t.Any], path: str) -> Fit:
    """The check (and repair) of one property's values, from its JSON schema."""
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    nullable = "null" in types
    kinds = [kind for kind in types if kind != "null"]
    if len(kinds) != 1:
        return _any  # no type, or several: any JSON value
    kind = kinds[0]
    if kind == "string":
        if schema.get("format") == "date-time":
            return _date_time(path, nullable)
        return _string(path, nullable)
    if kind == "integer":
        return _integer(path, nullable)
    if kind == "boolean":
        return _scalar(path, nullable, bool, "boolean")
    if kind == "number":
        return _number(path, nullable)
    if kind == "array":
        return _array(compile_property(schema.get("items", {}), f"{path}[]"), path, nullable)
    if kind == "object":
        properties = schema.get("properties") or {}
        declared = [
            (name, fitting_class(sub), compile_property(sub, f"{path}.{name}"))
            for name, sub in properties.items()
        ]
        return _object(declared, path, nullable)
    return _any


def _any(value: t.Any, notes: Notes | None) -> t.Any:
    return value


def _string(path: str, nullable: bool) -> Fit:
    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if value.__class__ is str or (value is None and nullable):
            return value
        if notes is None or value is None:
            return _dropped(notes, path, value, "string")
        notes.append((path, f"sent {_sent(value)} where the schema says string: kept as JSON text"))
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    return fit


def _date_time(path: str, nullable: bool) -> Fit:
    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if (value.__class__ is str and _IS_RFC3339(value)) or (value is None and nullable):
            return value
        return _dropped(notes, path, value, "date-time")

    return fit


def _integer(path: str, nullable: bool) -> Fit:
    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if value.__class__ is int or (value is None and nullable):
            return value
        if value.__class__ is str:  # protobuf JSON's int64; "" is an unset one
            if _DECIMAL.fullmatch(value):
                return int(value)
            if value == "" and nullable:
                return None
        return _dropped(notes, path, value, "integer")

    return fit


def _number(path: str, nullable: bool) -> Fit:
    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if value.__class__ in (int, float) or (value is None and nullable):
            return value
        return _dropped(notes, path, value, "number")

    return fit


def _scalar(path: str, nullable: bool, cls: type, declared: str) -> Fit:
    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if value.__class__ is cls or (value is None and nullable):
            return value
        return _dropped(notes, path, value, declared)

    return fit


def _array(items: Fit, path: str, nullable: bool) -> Fit:
    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if value.__class__ is not list:
            return value if value is None and nullable else _dropped(notes, path, value, "array")
        for index, item in enumerate(value):
            fitted = items(item, notes)
            if fitted is not item:
                if fitted is UNFIT:
                    if notes is not None:
                        notes.append((path, "an item does not fit: the whole array dropped"))
                    return UNFIT
                value[index] = fitted
        return value

    return fit


def _object(declared: list[tuple[str, type | None, Fit]], path: str, nullable: bool) -> Fit:
    """An object: its declared properties checked (each nested one is optional, so a misfit
    is dropped alone); other keys pass, as JSON schema allows unless told otherwise."""

    def fit(value: t.Any, notes: Notes | None) -> t.Any:
        if value.__class__ is not dict:
            return value if value is None and nullable else _dropped(notes, path, value, "object")
        for name, cls, sub in declared:
            if name in value:
                item = value[name]
                if item.__class__ is cls or (
                    cls is DateTime and item.__class__ is str and _IS_RFC3339(item)
                ):
                    continue
                fitted = sub(item, notes)
                if fitted is not item:
                    if fitted is not UNFIT:
                        value[name] = fitted
                    elif notes is None:
                        return UNFIT
                    else:
                        del value[name]
        return value

    return fit


class RecordConformance:
    """One stream's records made to fit its schema (see the module's docstring), with one
    warning per field and run for what had to be changed."""

    def __init__(self, schema: dict[str, t.Any], logger: logging.Logger, stream: str) -> None:
        properties = schema["properties"]
        self._fits = {name: compile_property(sub, name) for name, sub in properties.items()}
        self._classes = {name: fitting_class(sub) for name, sub in properties.items()}
        self._required = tuple(schema.get("required", ()))
        self._required_keys = frozenset(self._required)
        self._logger = logger
        self._stream = stream
        self._reported: set[tuple[str, str]] = set()
        self._unknown: set[str] = set()

    def apply(self, row: Record) -> Record | None:
        """``row`` itself when it fits (int64 strings made integers), else its repair: None
        for a record that cannot be keyed."""
        fits = self._fits
        classes = self._classes
        for key, value in row.items():
            cls = classes.get(key, UNFIT)
            if value.__class__ is cls or (
                cls is DateTime and value.__class__ is str and _IS_RFC3339(value)
            ):
                continue
            fit = fits.get(key)
            if fit is None:
                return self._repaired(row)
            fitted = fit(value, None)
            if fitted is not value:
                if fitted is UNFIT:
                    return self._repaired(row)
                row[key] = fitted  # an existing key: safe while iterating
        # A null key field fails its own check (a required property is not nullable).
        if not self._required_keys <= row.keys():
            return self._repaired(row)
        return row

    def _repaired(self, row: Record) -> Record | None:
        notes: Notes = []
        repaired: Record = {}
        unknown = []
        for key, value in row.items():
            fit = self._fits.get(key)
            if fit is None:
                unknown.append(key)
            elif (fitted := fit(value, notes)) is not UNFIT:
                repaired[key] = fitted
        if new := sorted(key for key in unknown if key not in self._unknown):
            self._unknown.update(new)
            self._logger.warning(
                "The service sent fields this tap does not know yet (%s); they are not extracted: %s",
                self._stream,
                ", ".join(new),
            )
        for path, what in notes:
            self._warn_once(path, what)
        missing = [key for key in self._required if repaired.get(key) is None]
        for key in missing:
            self._warn_once(key, "missing or unusable: records without it are skipped")
        return None if missing else repaired

    def _warn_once(self, path: str, what: str) -> None:
        if (path, what) not in self._reported:
            self._reported.add((path, what))
            self._logger.warning(
                "%s.%s: %s (said once per run; a newer tap may know this shape)",
                self._stream,
                path,
                what,
            )
