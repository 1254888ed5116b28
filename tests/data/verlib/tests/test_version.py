import pytest
from verlib import InvalidVersion, Version


@pytest.mark.parametrize(
    "text",
    [
        "1.2.3",
        "0.0.0",
        "10.20.30",
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-0.3.7",
        "1.0.0+20130313144700",
        "1.0.0-beta+exp.sha.5114f85",
        "v2.0.0",
    ],
)
def test_parse_round_trip(text):
    assert str(Version.parse(text)) == text.lstrip("v")


@pytest.mark.parametrize("text", ["1", "1.2", "1.2.3.4", "01.2.3", "1.2.3-", "1.2.3-01", "a.b.c", "1.2.3+"])
def test_parse_rejects(text):
    with pytest.raises(InvalidVersion):
        Version.parse(text)


def test_parts():
    v = Version.parse("1.2.3-rc.1+build.5")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert v.pre == ("rc", "1") and v.build == ("build", "5")
    assert v.is_prerelease


def test_coerce():
    assert Version.coerce("1") == Version(1, 0, 0)
    assert Version.coerce("v1.2") == Version(1, 2, 0)
    with pytest.raises(InvalidVersion):
        Version.coerce("1.x")


def test_build_metadata_does_not_count():
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")
    assert hash(Version.parse("1.0.0+a")) == hash(Version.parse("1.0.0"))


def test_semver_precedence_example():
    chain = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    versions = [Version.parse(t) for t in chain]
    assert sorted(reversed(versions)) == versions


def test_numeric_parts_compare_numerically():
    assert Version.parse("1.10.0") > Version.parse("1.9.0")
    assert Version.parse("2.0.0") > Version.parse("1.99.99")


def test_release_is_above_its_prereleases():
    assert Version.parse("1.0.0-rc.1") < Version.parse("1.0.0")
    assert not Version.parse("1.0.0") < Version.parse("1.0.0-rc.1")


def test_compare_with_other_types():
    assert Version(1, 0, 0) != "1.0.0"
    with pytest.raises(TypeError):
        Version(1, 0, 0) < "1.0.0"  # noqa: B015


@pytest.mark.parametrize(
    ("text", "major", "minor", "patch"),
    [
        ("1.2.3", "2.0.0", "1.3.0", "1.2.4"),
        ("1.2.3-rc.1", "2.0.0", "1.3.0", "1.2.3"),
        ("0.0.9", "1.0.0", "0.1.0", "0.0.10"),
    ],
)
def test_bumps(text, major, minor, patch):
    v = Version.parse(text)
    assert (str(v.bump_major()), str(v.bump_minor()), str(v.bump_patch())) == (major, minor, patch)


def test_bump_pre():
    assert str(Version.parse("1.2.3").bump_pre()) == "1.2.4-rc.1"
    assert str(Version.parse("1.2.4-rc.1").bump_pre()) == "1.2.4-rc.2"
    assert str(Version.parse("1.2.4-beta").bump_pre()) == "1.2.4-beta.1"
