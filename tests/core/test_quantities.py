"""Kubernetes quantities: what each reads as, what Gangway writes back, and what is refused."""

import re
from decimal import Decimal

import pytest
from hypothesis import given, strategies as st

from core.quantities import (
    QUANTITY_PATTERN, NotAQuantity, NotFinite, TooLarge, cpu_millicores, format_cpu, format_memory, format_quantity, memory_bytes,
    memory_text, parse_quantity,
)

GiB = 2**30


@pytest.mark.parametrize(("text", "millicores"), [
    ("2", 2000), ("500m", 500), ("0.5", 500), (".5", 500), ("+2", 2000), ("1.5", 1500), ("2000m", 2000),
    ("1e3", 1_000_000), ("1E-3", 1), ("100u", Decimal("0.1")), ("1k", 1_000_000), (2, 2000), (0.5, 500),
], ids=str)
def test_cpu_reads_as_millicores(text, millicores):
    assert cpu_millicores(text) == millicores


@pytest.mark.parametrize(("text", "size"), [
    ("4Gi", 4 * GiB), ("512Mi", 512 * 2**20), ("1Ki", 1024), ("2Ti", 2 * 2**40), ("1Pi", 2**50), ("1Ei", 2**60),
    ("1k", 1000), ("1M", 10**6), ("1G", 10**9), ("1T", 10**12), ("1P", 10**15), ("1E", 10**18),
    ("1e3", 1000), ("1E3", 1000), ("1.5Gi", 3 * 2**29), ("128974848", 128974848), (4096, 4096),
], ids=str)
def test_memory_reads_as_bytes(text, size):
    assert memory_bytes(text) == size


@pytest.mark.parametrize("text", [
    "", " 2", "2 ", "lots", "4K", "4ki", "4GB", "1_000", "0x10", "2..5", "--2", "e3", "Gi", "1e", "٣", "２", "1e٣",
    True, None, [], {},
], ids=repr)
def test_what_is_not_a_quantity_is_refused(text):
    with pytest.raises(NotAQuantity):
        parse_quantity(text)


@pytest.mark.parametrize("value", ["NaN", "nan", "inf", "-inf", "Infinity", "+Infinity", float("nan"), float("inf")],
                         ids=repr)
def test_nan_and_infinities_are_refused_as_not_finite(value):
    with pytest.raises(NotFinite):
        cpu_millicores(value)
    with pytest.raises(ValueError):
        memory_bytes(value)


@pytest.mark.parametrize("text", ["1e99999999999", "1e1000000", "1e" + "9" * 5000], ids=lambda text: text[:16])
def test_an_exponent_beyond_what_can_be_held_is_too_large(text):
    with pytest.raises(TooLarge):
        parse_quantity(text)


def test_a_quantity_whose_millicores_are_beyond_what_can_be_held_is_too_large():
    assert parse_quantity("1e999999") == Decimal("1e999999")
    with pytest.raises(TooLarge):
        cpu_millicores("1e999999")


@pytest.mark.parametrize("text", ["1e-99999999999", "1e-" + "9" * 5000], ids=lambda text: text[:16])
def test_an_exponent_below_what_can_be_held_reads_as_zero(text):
    assert parse_quantity(text) == 0


@given(st.from_regex(QUANTITY_PATTERN, fullmatch=True))
def test_what_the_schema_pattern_allows_is_a_quantity(text):
    # The API's schema gives this pattern for the spec's quantities: a string it allows is never refused as
    # no quantity (only, by its field, as out of range).
    try:
        assert parse_quantity(text) >= 0
    except TooLarge:
        pass


@given(st.text(alphabet="0123456789+-.eEmkKMGTPinu٣ \n", max_size=8))
def test_a_quantity_with_no_minus_sign_is_what_the_schema_pattern_allows(text):
    try:
        parse_quantity(text)
        is_quantity = not text.startswith("-")
    except NotAQuantity:
        is_quantity = False
    except TooLarge:
        is_quantity = True
    assert (re.search(QUANTITY_PATTERN, text) is not None and not text.endswith("\n")) == is_quantity


def test_negative_quantities_parse_so_callers_name_their_range():
    assert (cpu_millicores("-1"), memory_bytes("-1Ki")) == (-1000, -1024)


def test_many_digits_are_read_exactly_not_rounded():
    assert cpu_millicores("1.0000000000000000000000000001") != 1000
    assert memory_bytes("9007199254740993") == 2**53 + 1


@pytest.mark.parametrize(("resource", "amount", "expected"), [
    ("cpu", 2000, "2"), ("cpu", 500, "500m"), ("cpu", 1500, "1500m"), ("cpu", 0, "0"),
    ("memory", 4 * GiB, "4Gi"), ("memory", 512 * 2**20, "512Mi"), ("memory", 1000, "1000"), ("memory", 1024, "1Ki"),
    ("memory", 2 * 2**40, "2Ti"), ("memory", 3 * 2**50, "3Pi"), ("memory", 2**60, "1Ei"), ("memory", 1536, "1536"),
    ("memory", 0, "0"), ("gpu", 8, "8"),
], ids=str)
def test_quantities_are_written_as_kubernetes_does(resource, amount, expected):
    assert format_quantity(resource, amount) == expected


@pytest.mark.parametrize("amount", [1, 999, 1000, 1500, 64000, 1024_000])
def test_cpu_round_trips(amount):
    assert cpu_millicores(format_cpu(amount)) == amount


@pytest.mark.parametrize("amount", [1, 1000, 1024, 1536, 4 * GiB, 3 * 2**40 + 2**20, 2**53, 5 * 2**60])
def test_memory_round_trips(amount):
    assert memory_bytes(format_memory(amount)) == amount


@pytest.mark.parametrize(("size", "text"), [
    (4 * GiB, "4 GiB"), (3 * 2**29, "1.5 GiB"), (2 * 2**40, "2 TiB"), (512, "512 B"), (5 * 2**20, "5 MiB"),
    (2**50, "1 PiB"), (2**61, "2 EiB"),
], ids=str)
def test_memory_reads_for_people_in_its_largest_unit(size, text):
    assert memory_text(size) == text
