"""Typed access to request parameters, shared by every action's decoder.

Both protocols are first brought into the JSON 1.0 shape (`query.py` does it for Query), so a
decoder reads one shape. Query values arrive as strings, JSON values as numbers or booleans:
the getters accept both and raise the SQS error for a bad value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any

from gateway.common.errors import InvalidParameterValue, MissingParameter


class Params:
    def __init__(self, raw: Mapping[str, Any]) -> None:
        self._raw = raw

    def __contains__(self, name: str) -> bool:
        return self._raw.get(name) is not None

    def names_none_of(self, names: frozenset[str]) -> bool:
        """Whether no member of `names` is in the request at all (one set operation)."""
        return self._raw.keys().isdisjoint(names)

    def raw(self, name: str) -> Any:
        return self._raw.get(name)

    def required_str(self, name: str) -> str:
        value = self._raw.get(name)  # `optional_str`, in place: several per message sent
        if value is None or value == "":
            raise MissingParameter.named(name)
        if not isinstance(value, str):
            raise _invalid(name, value)
        return value

    def optional_str(self, name: str) -> str | None:
        value = self._raw.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise _invalid(name, value)
        return value

    def optional_int(self, name: str) -> int | None:
        value = self._raw.get(name)
        if value is None:
            return None
        if isinstance(value, bool):
            raise _invalid(name, value)
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise _invalid(name, value) from None
        raise _invalid(name, value)

    def int_in_range(self, name: str, low: int, high: int, reason: str | None = None) -> int | None:
        """An optional integer within [low, high]; `reason` replaces the default wording."""
        value = self.optional_int(name)
        if value is not None and not low <= value <= high:
            raise InvalidParameterValue(
                f"Value {value} for parameter {name} is invalid. "
                f"Reason: {reason or f'Must be between {low} and {high}, if provided.'}"
            )
        return value

    def str_list(self, name: str) -> list[str]:
        value = self._raw.get(name)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _invalid(name, value)
        return list(value)

    def str_map(self, name: str) -> dict[str, str]:
        value = self._raw.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise _invalid(name, value)
        out: dict[str, str] = {}
        for key, item in value.items():
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif isinstance(item, int):
                item = str(item)
            if not isinstance(key, str) or not isinstance(item, str):
                raise _invalid(name, value)
            out[key] = item
        return out

    def map_of_maps(self, name: str) -> dict[str, Mapping[str, Any]]:
        value = self._raw.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict) or not _all_dicts(value.values()):
            raise _invalid(name, value)
        return dict(value)

    def entries(self, name: str = "Entries") -> list[Params]:
        value = self._raw.get(name)
        if value is None:
            return []
        if not isinstance(value, list) or not _all_dicts(value):
            raise _invalid(name, value)
        return [Params(v) for v in value]


def _all_dicts(values: Iterable[Any]) -> bool:
    # `all(isinstance(v, dict) for v in values)` without a generator step per value: this
    # checks every entry of every batch request.
    return all(map(isinstance, values, repeat(dict)))


def _invalid(name: str, value: Any) -> InvalidParameterValue:
    return InvalidParameterValue(f"Value {value} for parameter {name} is invalid.")
