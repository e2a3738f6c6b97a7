"""Units of measure and currencies: what a number next to them measures.

Shared by the date rules (a number followed by a unit is a quantity, not a year: "1920 km") and the
contradiction rules (values compared in one base unit per dimension).
"""

from __future__ import annotations

#: unit -> (dimension, factor to the base unit) ; temperatures are converted separately.
UNITS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(["m", "metre", "metres", "meter", "meters"], ("length", 1.0)),
    **dict.fromkeys(["km", "kilometre", "kilometres", "kilometer", "kilometers"], ("length", 1000.0)),
    **dict.fromkeys(["cm", "centimetre", "centimetres", "centimeter", "centimeters"], ("length", 0.01)),
    **dict.fromkeys(["mm", "millimetre", "millimetres", "millimeter", "millimeters"], ("length", 0.001)),
    **dict.fromkeys(["mi", "mile", "miles"], ("length", 1609.344)),
    **dict.fromkeys(["ft", "foot", "feet"], ("length", 0.3048)),
    **dict.fromkeys(["yard", "yards", "yd"], ("length", 0.9144)),
    **dict.fromkeys(["inch", "inches", "in."], ("length", 0.0254)),
    **dict.fromkeys(["kg", "kilogram", "kilograms", "kilo", "kilos"], ("mass", 1.0)),
    **dict.fromkeys(["g", "gram", "grams"], ("mass", 0.001)),
    **dict.fromkeys(["t", "tonne", "tonnes", "ton", "tons"], ("mass", 1000.0)),
    **dict.fromkeys(["lb", "lbs", "pound", "pounds"], ("mass", 0.45359237)),
    **dict.fromkeys(["s", "sec", "second", "seconds"], ("time", 1.0)),
    **dict.fromkeys(["min", "mins", "minute", "minutes"], ("time", 60.0)),
    **dict.fromkeys(["h", "hr", "hrs", "hour", "hours"], ("time", 3600.0)),
    **dict.fromkeys(["day", "days"], ("time", 86400.0)),
    **dict.fromkeys(["week", "weeks"], ("time", 604800.0)),
    **dict.fromkeys(["month", "months"], ("time", 2629800.0)),
    **dict.fromkeys(["year", "years"], ("time", 31557600.0)),
    **dict.fromkeys(["kb", "kilobyte", "kilobytes"], ("data", 1e3)),
    **dict.fromkeys(["mb", "megabyte", "megabytes"], ("data", 1e6)),
    **dict.fromkeys(["gb", "gigabyte", "gigabytes"], ("data", 1e9)),
    **dict.fromkeys(["tb", "terabyte", "terabytes"], ("data", 1e12)),
    **dict.fromkeys(["w", "watt", "watts"], ("power", 1.0)),
    **dict.fromkeys(["kw", "kilowatt", "kilowatts"], ("power", 1e3)),
    **dict.fromkeys(["mw", "megawatt", "megawatts"], ("power", 1e6)),
    **dict.fromkeys(["gw", "gigawatt", "gigawatts"], ("power", 1e9)),
    **dict.fromkeys(["hp", "horsepower"], ("power", 745.7)),
    **dict.fromkeys(["n", "newton", "newtons"], ("force", 1.0)),
    **dict.fromkeys(["kn", "kilonewton", "kilonewtons"], ("force", 1e3)),
    **dict.fromkeys(["mah"], ("charge", 1.0)),
    **dict.fromkeys(["ah"], ("charge", 1000.0)),
    **dict.fromkeys(["kwh"], ("energy", 1.0)),
    **dict.fromkeys(["mwh"], ("energy", 1e3)),
    **dict.fromkeys(["ha", "hectare", "hectares"], ("area", 1e4)),
    **dict.fromkeys(["acre", "acres"], ("area", 4046.86)),
    **dict.fromkeys(["km2", "km²"], ("area", 1e6)),
    **dict.fromkeys(["l", "litre", "litres", "liter", "liters"], ("volume", 1.0)),
    **dict.fromkeys(["ml", "millilitre", "millilitres"], ("volume", 0.001)),
    **dict.fromkeys(["kph", "km/h"], ("speed", 1 / 3.6)),
    **dict.fromkeys(["mph"], ("speed", 0.44704)),
    **dict.fromkeys(["percent", "per cent", "%", "percentage"], ("percent", 1.0)),
    **dict.fromkeys(["ghz"], ("frequency", 1e9)),
    **dict.fromkeys(["mhz"], ("frequency", 1e6)),
    **dict.fromkeys(["pixel", "pixels", "px"], ("pixels", 1.0)),
}
CURRENCY_SYMBOLS = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy", "us$": "usd"}
CURRENCY_WORDS = {"dollar": "usd", "dollars": "usd", "usd": "usd", "euro": "eur", "euros": "eur", "eur": "eur",
                  "pound sterling": "gbp", "gbp": "gbp", "yen": "jpy", "cent": "usd", "cents": "usd"}
