"""The time zone a schedule names, if any: an IANA name ("Europe/Berlin"), UTC/GMT, or a city
the IANA database names a zone after ("18:30 Berlin time", "9:00 in New York",
"at 8am Tokyo timezone"). The phrase is cut out of the text, so the rest can be read as
the schedule itself."""

from __future__ import annotations

import functools
import re
import zoneinfo

from bot.recurrence.cron import zone_named

UTC_NAMES = ("utc", "gmt")


@functools.cache
def _zones() -> dict[str, str]:
    """IANA names by their lower-case form."""
    return {name.lower(): name for name in zoneinfo.available_timezones()}


@functools.cache
def _cities() -> dict[str, str]:
    """City (the last part of a zone's name, `_` as a space) -> zone, for the zones under a
    continent or ocean; a city named twice keeps the first in sorted order."""
    cities: dict[str, str] = {}
    for name in sorted(zoneinfo.available_timezones()):
        area, _, place = name.partition("/")
        if not place or area in ("Etc", "SystemV", "US", "Brazil", "Canada", "Chile", "Mexico"):
            continue
        city = place.rpartition("/")[2].replace("_", " ").lower()
        cities.setdefault(city, name)
    return cities


@functools.cache
def _city_pattern() -> re.Pattern[str]:
    names = "|".join(re.escape(c) for c in sorted(_cities(), key=len, reverse=True))
    return re.compile(
        rf"(?:\bin\s+|\(\s*)?\b({names})(?:\s+(?:local\s+)?(?:time\s*zone|timezone|time))?\b\s*\)?"
        r"|\b(utc|gmt)\b",
        re.IGNORECASE,
    )


_IANA = re.compile(
    r"\(?\b(?:in\s+|tz=)?([A-Za-z]+(?:/[A-Za-z][A-Za-z0-9_+\-]*)+)\b\)?", re.IGNORECASE
)


def take_zone(text: str) -> tuple[str, str | None]:
    """(`text` without its zone phrase, the IANA zone it named or None)."""
    for match in _IANA.finditer(text):
        # An unknown name is refused by zone_named, with what to write instead.
        zone = _zones().get(match[1].lower()) or zone_named(match[1])
        return _cut(text, match), zone
    for match in _city_pattern().finditer(text):
        spelled = match[0].lower()
        if match[2] is not None:
            return _cut(text, match), "UTC"
        # A bare city counts only when it is clearly a zone ("in Berlin", "Berlin time").
        if spelled.startswith(("in ", "(")) or spelled.rstrip(") ").endswith(("time", "zone")):
            return _cut(text, match), _cities()[match[1].lower()]
    return text, None


def _cut(text: str, match: re.Match[str]) -> str:
    return f"{text[: match.start()]} {text[match.end() :]}".strip()
