"""broker.slotted: the plain slotted record classes (the log's BatchInfo, Record and RecordStats)
compare, print and refuse hashing as the ``@dataclass(slots=True)`` they replace."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import pytest

from broker.log.batch import BatchInfo
from broker.log.records import Record
from broker.log.streaming import RecordStats
from broker.slotted import Slotted


@dataclass(slots=True)
class AsDataclass:
    a: int
    b: list = field(default_factory=list)


class AsSlotted(Slotted):
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: list | None = None) -> None:
        self.a = a
        self.b = [] if b is None else b


def test_equality_repr_and_hash_are_a_dataclass_s():
    for cls in (AsDataclass, AsSlotted):
        assert cls(1, [2]) == cls(1, [2])
        assert cls(1, [2]) != cls(1, [3]) and cls(1) != cls(2)
        assert cls(1) == cls(1, [])
        with pytest.raises(TypeError):
            hash(cls(1))
        assert not hasattr(cls(1), "__dict__")
    assert repr(AsSlotted(1, [b"x"])) == repr(AsDataclass(1, [b"x"])).replace("AsDataclass", "AsSlotted")
    assert AsSlotted(1) != AsDataclass(1) and AsDataclass(1) != AsSlotted(1)  # another class: unequal
    assert AsSlotted(1).__eq__((1, [])) is NotImplemented


@pytest.mark.parametrize("cls", [BatchInfo, Record, RecordStats])
def test_the_log_s_records_name_every_field_in_their_slots_in_constructor_order(cls):
    """Equality and repr cover what the constructor sets (and broker/log/_native.c builds BatchInfo
    and RecordStats by their slots)."""
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert list(cls.__slots__) == params


def test_a_record_without_headers_has_an_empty_list_of_its_own():
    a, b = Record(0, 0), Record(1, 0, None, b"v", None)
    assert a.headers == b.headers == [] and a.headers is not b.headers
    assert (
        repr(a) == "Record(offset_delta=0, timestamp_delta=0, key=None, value=None, headers=[], attributes=0)"
    )
