import pytest
from verlib import InvalidRange, Version, parse_range

RELEASES = [
    "0.9.0",
    "1.0.0",
    "1.2.0",
    "1.2.5",
    "1.3.0-rc.1",
    "1.3.0",
    "1.10.1",
    "2.0.0-beta.1",
    "2.0.0",
    "2.1.0",
]


@pytest.mark.parametrize(
    ("spec", "version", "expected"),
    [
        (">=1.2, <2", "1.2.0", True),
        (">=1.2, <2", "1.10.1", True),
        (">=1.2, <2", "2.0.0", False),
        (">=1.2, <2", "1.1.9", False),
        ("^1.2.3", "1.9.0", True),
        ("^1.2.3", "2.0.0", False),
        ("^0.2.3", "0.2.9", True),
        ("^0.2.3", "0.3.0", False),
        ("^0.0.3", "0.0.4", False),
        ("~1.4.2", "1.4.9", True),
        ("~1.4.2", "1.5.0", False),
        ("=1.2.0", "1.2.0", True),
        ("!=1.2.0", "1.2.0", False),
        ("<1 || >=2", "0.5.0", True),
        ("<1 || >=2", "1.5.0", False),
        ("*", "3.0.0", True),
        ("", "0.0.1", True),
    ],
)
def test_matches(spec, version, expected):
    assert parse_range(spec).matches(version) is expected


def test_prereleases_are_excluded_unless_asked():
    r = parse_range(">=1.2, <2")
    assert not r.matches("1.3.0-rc.1")
    assert r.matches("1.3.0-rc.1", prereleases=True)


def test_a_prerelease_comparator_admits_its_own_prereleases():
    r = parse_range(">=2.0.0-beta.1, <3")
    assert r.matches("2.0.0-beta.2")
    assert not r.matches("2.1.0-beta.1")


def test_filter_and_best():
    r = parse_range("^1.2")
    assert [str(v) for v in r.filter(RELEASES)] == ["1.2.0", "1.2.5", "1.3.0", "1.10.1"]
    assert str(r.best(RELEASES)) == "1.10.1"
    assert parse_range(">=3").best(RELEASES) is None
    assert str(parse_range("^2").best(RELEASES, prereleases=True)) == "2.1.0"


def test_best_of_versions():
    assert parse_range("~1.2").best([Version(1, 2, 0), Version(1, 2, 7), Version(1, 3, 0)]) == Version(
        1, 2, 7
    )


def test_str():
    assert str(parse_range(">=1.2, <2 || ^3.1.0")) == ">=1.2.0, <2.0.0 || >=3.1.0, <4.0.0"


@pytest.mark.parametrize("spec", [">=1.2 ||", ">=x", "<<1", ">=1.2.3.4"])
def test_invalid(spec):
    with pytest.raises(InvalidRange):
        parse_range(spec)
