"""Dates in claim text, normalised to ISO 8601 at the precision the text gives.

`find_dates` finds every date expression in a sentence: exact days ("14 March 2019", "March 14,
2019", "2019-03-14"), months ("June 2018"), years ("in 2017"), ranges ("1914–1918", "from 1914 to
1918", "between 2001 and 2003") and vague dates ("around 1870", "the early 1900s", "mid-19th century",
"late 2019", "spring 2020", "Q3 2021"). A vague date becomes the range it most plausibly covers, with
`approximate=True`, so that timelines can still order it.

Regular expressions, not spaCy: a claim is one sentence, the patterns below cover what timelines need,
and they run in microseconds per claim on a bank of 150k objects. Numbers that only look like years
("version 2019.1", "$1,874", "room 1920", "1920 employees") are rejected by their context; years
before 1000 count only next to a month or a word that makes them years ("2 April 748", "died 875");
dates before the common era are left out. Timelines and the contradiction rules both read dates here.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass

from smb_core.evolve.units import CURRENCY_WORDS, UNITS

MONTHS = {name: number for number, names in enumerate([
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
    ("november", "nov"), ("december", "dec")], start=1) for name in names}
_ABBREVIATIONS = {name for name in MONTHS if len(name) <= 4} - {"may", "june", "july"}
MONTH_NAMES = [""] + [calendar.month_name[i] for i in range(1, 13)]

#: Meteorological seasons of the northern hemisphere: (first month, last month); winter runs into the next year.
SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 14)}

_ORDINAL_WORDS = {w: i for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth fourteenth "
    "fifteenth sixteenth seventeenth eighteenth nineteenth twentieth".split(), start=1)}
_ORDINAL_WORDS["twenty-first"] = 21

#: Words before a number that make it a label, not a year ("room 1920", "version 2019").
_LABELS = {"room", "rooms", "suite", "apartment", "apt", "version", "ver", "v", "build", "release", "page", "pages",
           "p", "pp", "no", "nr", "number", "num", "flight", "route", "highway", "bus", "tram", "model", "port",
           "line", "chapter", "section", "item", "ticket", "issue", "pr", "order", "code", "id", "platform", "gate",
           "exit", "unit", "box", "lot", "table", "figure", "fig", "step", "rule", "article", "art", "vol",
           "volume", "episode", "ep", "level", "floor", "row", "seat", "size", "score", "top", "rank", "patch"}
#: Words after a number that make it a quantity, not a year ("1920 employees", "1920 km").
_QUANTITIES = {"people", "persons", "employees", "staff", "users", "customers", "members", "items", "rows", "records",
               "vectors", "dimensions", "documents", "files", "lines", "words", "tokens", "pages", "points", "votes",
               "times", "ms", "units", "copies", "stars", "downloads", "requests", "queries", "calls", "cores",
               "nodes", "servers", "shards", "bytes", "rpm", "hz", "x", *UNITS, *CURRENCY_WORDS}

_PART = r"(?:early|mid|middle|late)"
_M = "|".join(sorted(MONTHS, key=len, reverse=True))
_YEAR = r"(1\d{3}|20\d{2})"
#: Next to a month name a three-digit number is a year too ("2 April 748", "September 833"), and a
#: letter may follow it where a source lost a space ("(March 25, 1942August 16, 2018)").
_MONTH_YEAR = r"(1\d{3}|20\d{2}|[1-9]\d{2})"
_DASH = r"\s*(?:–|—|-|/)\s*"
#: "twenty-first", also as "twenty- first" (some sources space their hyphens)
_ORDINAL = "|".join(w.replace("-", r"-\s*") for w in sorted(_ORDINAL_WORDS, key=len, reverse=True))

#: (kind, pattern), most specific first; a later pattern never takes text an earlier one matched.
_PATTERNS = [
    ("iso", re.compile(rf"(?<![\w.]){_YEAR}-(\d{{2}})(?:-(\d{{2}}))?(?![\w.-]*\d)")),
    ("day_range", re.compile(rf"\b({_M})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\s*(?:–|—|-|to|until|through)\s*"
                             rf"(?:({_M})\.?\s+)?(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_MONTH_YEAR}(?!\d)", re.I)),
    ("day_range_dmy", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s+({_M})\.?)?\s*(?:–|—|-|to|until|through)\s*"
                                 rf"(\d{{1,2}})(?:st|nd|rd|th)?\s+({_M})\.?,?\s+{_MONTH_YEAR}(?!\d)", re.I)),
    ("dmy", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_M})\.?,?\s+{_MONTH_YEAR}(?!\d)", re.I)),
    ("mdy", re.compile(rf"\b({_M})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+{_MONTH_YEAR}(?!\d)", re.I)),
    ("month_range", re.compile(rf"\b({_M})\.?\s*(?:–|—|-|to|until|through)\s*({_M})\.?,?\s+(?:of\s+)?"
                               rf"{_MONTH_YEAR}(?!\d)", re.I)),
    ("month", re.compile(rf"\b(?:({_PART})[\s-]+)?({_M})\.?,?\s+(?:of\s+)?{_MONTH_YEAR}(?!\d)", re.I)),
    ("season", re.compile(rf"\b(?:({_PART})[\s-]+)?(spring|summer|autumn|fall|winter)\s+(?:of\s+)?{_YEAR}\b",
                          re.I)),
    ("quarter", re.compile(rf"\b(?:Q([1-4])\s*(?:of\s+)?|(first|second|third|fourth|1st|2nd|3rd|4th)\s+quarter\s+"
                           rf"of\s+){_YEAR}\b", re.I)),
    ("half", re.compile(rf"\b(?:H([12])\s*|(first|second|1st|2nd)\s+half\s+of\s+){_YEAR}\b", re.I)),
    ("decade", re.compile(rf"\b(?:({_PART})[\s-]+)?(1\d{{2}}0|20\d0)s\b", re.I)),
    ("century", re.compile(rf"\b(?:({_PART})[\s-]+)?(\d{{1,2}})(?:st|nd|rd|th)[\s-]+century\b", re.I)),
    ("century_word", re.compile(rf"\b(?:({_PART})[\s-]+)?({_ORDINAL})"
                                r"[\s-]+century\b", re.I)),
    ("year_part", re.compile(rf"\b(?:({_PART})[\s-]+|(?:the\s+)?(beginning|start|end|middle)\s+of\s+){_YEAR}\b"
                             r"(?![.,]\d)", re.I)),
    ("year_range", re.compile(rf"(?<![\w$€£¥#.,/:-]){_YEAR}{_DASH}(1\d{{3}}|20\d{{2}}|\d{{2}})(?![\w%]|[.,:/]\d)")),
    ("year", re.compile(rf"(?<![\w$€£¥#.,/:-]){_YEAR}(?![\w%]|[.,:/-]\d)")),
    # years before 1000 only where nothing else can be meant: "died 875", "(973 – 1024)", "in 628."
    ("old_year", re.compile(r"(?:\b(?:born|died|b\.|d\.|c\.|ca\.|circa|in|since|until|after|before)\s+|\(\s*)"
                            r"(\d{3})(?=\s*(?:[)–-]|,|;|\.(?!\d)|$|\s+(?:AD|BC|CE|BCE|and|when|after|before)\b))")),
]

_BEFORE_COMMON_ERA = re.compile(r"\s*(?:BCE?\b|B\.\s?C\.(?:E\.)?)")
#: A capitalised "Century" followed by a capitalised word is a name ("20th Century Fox"), not a date.
_CENTURY_NAME = re.compile(r"\s+[A-Z]")

#: What joins two dates into a range: the connector between them and, for some, the word before the first.
_RANGE_JOIN = re.compile(r"^\s*(–|—|-|to|until|till|through|thru|and)\s*$", re.I)
_RANGE_WORDS = {"–", "—", "-", "to", "until", "till", "through", "thru"}
_RANGE_LEAD = re.compile(r"\b(from|between)\s+$", re.I)
_APPROX_WORDS = r"(?:\b(?:around|about|approximately|roughly|circa|c\.|ca\.|some\s*time\s+in)\s+|~\s*)"
_APPROX_LEAD = re.compile(rf"{_APPROX_WORDS}$", re.I)
#: A mention that starts with one of those words ("around 1870"): the text only hedges the date.
HEDGED = re.compile(_APPROX_WORDS, re.I)


@dataclass(frozen=True)
class DateMention:
    """A date found in text: ISO start (and end for ranges) at the precision the text gives."""

    date: str
    end: str | None
    approximate: bool
    start: int  # character offsets of the expression in the text
    stop: int

    def sort_key(self) -> tuple[str, str]:
        return self.date, self.end or self.date


def find_dates(text: str) -> list[DateMention]:
    """Every date expression in `text`, in order of appearance, with ranges joined into one mention."""
    found: list[DateMention] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            if _BEFORE_COMMON_ERA.match(text, m.end()):
                continue  # the timelines order years of the common era: "1st century BC" is not 0001-0099
            mention = _parse(kind, m, text)
            if mention is not None:
                found.append(mention)
                taken.append((m.start(), m.end()))
    found.sort(key=lambda d: d.start)
    return [_mark_approximate(d, text) for d in _join_ranges(found, text)]


def event_date(text: str) -> DateMention | None:
    """The date a sentence happened at, for ordering it: its first date, or a later one that makes the
    first more precise ("ICSS 2026 takes place in June 2026" -> June 2026)."""
    dates = find_dates(text)
    if not dates:
        return None
    first = dates[0]
    finer = [d for d in dates[1:] if first.end is None and d.date.startswith(first.date + "-")]
    return finer[0] if finer else first


def normalise(text: str) -> DateMention | None:
    """The date a short expression ("c. 1870", "Q3 2021") stands for, or None if it holds no date."""
    dates = find_dates(text)
    return dates[0] if dates else None


# ---- parsing one match ----------------------------------------------------------------------

def _parse(kind: str, m: re.Match, text: str) -> DateMention | None:
    g = m.groups()
    start, stop, approx, end = m.start(), m.end(), False, None
    if kind == "iso":
        year, month, day = int(g[0]), int(g[1]), int(g[2]) if g[2] else None
        if not 1 <= month <= 12 or (day is not None and not 1 <= day <= _days(year, month)):
            return None
        date = _iso(year, month, day)
    elif kind in ("dmy", "mdy"):
        day, month, year = (int(g[0]), g[1], int(g[2])) if kind == "dmy" else (int(g[1]), g[0], int(g[2]))
        if not 1 <= day <= _days(year, MONTHS[month.lower()]) or not _is_month(month, text, start, True):
            return None
        date = _iso(year, MONTHS[month.lower()], day)
    elif kind in ("day_range", "day_range_dmy"):
        if kind == "day_range":
            m1, d1, m2, d2, year = g[0], int(g[1]), g[2] or g[0], int(g[3]), int(g[4])
        else:
            d1, m1, d2, m2, year = int(g[0]), g[1] or g[3], int(g[2]), g[3], int(g[4])
        first, last = (MONTHS[m1.lower()], d1), (MONTHS[m2.lower()], d2)
        if not (1 <= d1 <= _days(year, first[0]) and 1 <= d2 <= _days(year, last[0]) and first < last):
            return None
        date, end = _iso(year, *first), _iso(year, *last)
    elif kind == "month_range":
        if not (_is_month(g[0], text, start, False) and _is_month(g[1], text, start, True)):
            return None
        year = int(g[2])
        date, end = _iso(year, MONTHS[g[0].lower()]), _iso(year, MONTHS[g[1].lower()])
    elif kind == "month":
        part, month, year = g[0], g[1], int(g[2])
        if not _is_month(month, text, start, bool(part)):
            return None
        date, approx = _iso(year, MONTHS[month.lower()]), bool(part)
    elif kind == "season":
        first, last = _part_of(*SEASONS[g[1].lower()], g[0])
        year = int(g[2])
        date, end, approx = _month_iso(year, first), _month_iso(year, last), True
    elif kind in ("quarter", "half"):
        n = int(g[0]) if g[0] else _ordinal(g[1])
        months = 3 if kind == "quarter" else 6
        year = int(g[2])
        date, end, approx = _iso(year, months * (n - 1) + 1), _iso(year, months * n), True
    elif kind == "decade":
        decade = int(g[1])
        # "the 1800s" is a century; "the 1990s" and "the 2000s" are decades
        first, last = (decade, decade + 99) if decade % 100 == 0 and decade < 2000 else (decade, decade + 9)
        first, last = _part_of(first, last, g[0])
        date, end, approx = str(first), str(last), True
        start = _extend_left(text, start, r"\bthe\s+$")
    elif kind in ("century", "century_word"):
        n = int(g[1]) if kind == "century" else _ORDINAL_WORDS[re.sub(r"\s", "", g[1].lower())]
        if not 1 <= n <= 21 or (m.group(0).endswith("Century") and _CENTURY_NAME.match(text, stop)):
            return None
        first, last = _part_of(100 * (n - 1), 100 * (n - 1) + 99, g[0])
        date, end, approx = f"{first:04d}", f"{last:04d}", True
        start = _extend_left(text, start, r"\bthe\s+$")
    elif kind == "year_part":
        year, part = int(g[2]), (g[0] or g[1]).lower()
        if part in ("beginning", "start"):
            date = _iso(year, 1)
        elif part == "end":
            date = _iso(year, 12)
        else:
            first, last = _part_of(1, 12, part)
            date, end = _iso(year, first), _iso(year, last)
        approx = True
    elif kind == "year_range":
        if not _looks_like_year(text, start, stop):
            return None
        year = int(g[0])
        last = int(g[1]) if len(g[1]) == 4 else int(g[0][:2] + g[1])
        if last <= year or last - year > 200:
            return None  # "1990-85" or "1200-2000" is no range of years
        date, end = str(year), str(last)
    elif kind == "old_year":
        date, start = _iso(int(g[0])), m.start(1)
    else:  # a bare year
        if not _looks_like_year(text, start, stop):
            return None
        date = g[0]
    return DateMention(date, end, approx, start, stop)


def _is_month(word: str, text: str, start: int, qualified: bool) -> bool:
    """'May 2019' is a month; 'they may 2019' or 'we march 2019' is a verb. A month name counts when
    capitalised (except 'May', which also starts sentences), after a preposition, or next to a day;
    an abbreviation such as 'mar' or 'jan' only capitalised."""
    lower = word.lower()
    if lower in _ABBREVIATIONS:
        return word[:1].isupper()
    if qualified or (word[:1].isupper() and lower != "may"):
        return True
    return re.search(r"\b(in|of|since|until|by|from|during|before|after|to|and|through)\s+$", text[:start],
                     re.I) is not None


def _looks_like_year(text: str, start: int, stop: int) -> bool:
    """A bare four-digit number is a year unless a label precedes it or a unit follows it."""
    label = re.search(r"([\w#]+)\.?\s*$", text[max(0, start - 20):start])  # right before it: "room 1920"
    if label and label.group(1).lower() in _LABELS:
        return False
    if re.search(r"[#№]\s*$", text[:start]):
        return False
    after = re.match(r"\s*([\w%/]+)", text[stop:stop + 20])
    # a capitalised word is a name or an initial, not a unit: "in 1897 W. G. Grace", "in 1990 Ha Long Bay"
    return not (after and after.group(1).lower() in _QUANTITIES and not after.group(1).istitle())


def _join_ranges(found: list[DateMention], text: str) -> list[DateMention]:
    """'1914 to 1918', 'from June 2018 until 2019', 'between 2001 and 2003' become one range each."""
    out: list[DateMention] = []
    i = 0
    while i < len(found):
        a = found[i]
        if i + 1 < len(found):
            b = found[i + 1]
            join = _RANGE_JOIN.match(text[a.stop:b.start])
            lead = _RANGE_LEAD.search(text[:a.start])
            word = join.group(1).lower() if join else ""
            ok = join and (word in _RANGE_WORDS or (word == "and" and lead and lead.group(1).lower() == "between"))
            if ok and b.sort_key() >= a.sort_key() and a.end is None:
                start = lead.start() if lead else a.start
                out.append(DateMention(a.date, b.end or b.date, a.approximate or b.approximate, start, b.stop))
                i += 2
                continue
        out.append(a)
        i += 1
    return out


def _mark_approximate(d: DateMention, text: str) -> DateMention:
    """'around 1870', 'c. 1870', 'about the 1990s': the date is approximate."""
    lead = _APPROX_LEAD.search(text[:d.start])
    if lead is None:
        return d
    return DateMention(d.date, d.end, True, lead.start(), d.stop)


def _part_of(first: int, last: int, part: str | None) -> tuple[int, int]:
    """The early, middle or late third of a span of years or months (the whole span without a part)."""
    if not part:
        return first, last
    third = (last - first + 1) / 3
    part = part.lower()
    if part == "early":
        return first, round(first + third - 1)
    if part == "late":
        return round(last - third + 1), last
    return round(first + third), round(last - third)


def _extend_left(text: str, start: int, pattern: str) -> int:
    m = re.search(pattern, text[:start], re.I)
    return m.start() if m else start


def _ordinal(word: str) -> int:
    return {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}[word.lower()]


def _days(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def _iso(year: int, month: int | None = None, day: int | None = None) -> str:
    out = f"{year:04d}"
    if month:
        out += f"-{month:02d}"
    if day:
        out += f"-{day:02d}"
    return out


def _month_iso(year: int, month: int) -> str:
    """Months past December roll into the next year (winter 2020 ends in February 2021)."""
    return _iso(year + (month - 1) // 12, (month - 1) % 12 + 1)


# ---- for readers ----------------------------------------------------------------------------

def display(date: str, end: str | None = None, approximate: bool = False) -> str:
    """A date as a person writes it: '14 March 2019', 'June 2018', 'c. 1870', '1914–1918', 'the 1990s',
    'spring 2020'."""
    if end and end != date:
        named = _named_period(date, end) if approximate else None
        if named:
            return named
        a, b = date.split("-"), end.split("-")
        if len(a) == len(b) == 2 and a[0] == b[0]:  # months of one year: "March–May 2020"
            text = f"{MONTH_NAMES[int(a[1])]}–{MONTH_NAMES[int(b[1])]} {a[0]}"
        elif len(a) == len(b) == 3 and a[:2] == b[:2]:  # days of one month: "1–3 October 2024"
            text = f"{int(a[2])}–{_display_one(end)}"
        elif len(a) == len(b) == 3 and a[0] == b[0]:  # "30 September – 2 October 2024"
            text = f"{int(a[2])} {MONTH_NAMES[int(a[1])]} – {_display_one(end)}"
        else:
            text = f"{_display_one(date)}–{_display_one(end)}"
    else:
        text = _display_one(date)
    return f"c. {text}" if approximate else text


_MONTH_PERIODS = {(1, 4): "early {}", (5, 8): "mid-{}", (9, 12): "late {}", (1, 3): "Q1 {}", (4, 6): "Q2 {}",
                  (7, 9): "Q3 {}", (10, 12): "Q4 {}", (1, 6): "the first half of {}", (7, 12): "the second half of {}",
                  (3, 5): "spring {}", (6, 8): "summer {}", (9, 11): "autumn {}"}


def _named_period(date: str, end: str) -> str | None:
    """The name of a vague period that `find_dates` turns into this range ('the early 1990s'), if any."""
    a, b = date.split("-"), end.split("-")
    if len(a) == len(b) == 2:
        if a[0] == b[0] and (int(a[1]), int(b[1])) in _MONTH_PERIODS:
            return _MONTH_PERIODS[int(a[1]), int(b[1])].format(a[0])
        if int(a[1]) == 12 and int(b[1]) == 2 and int(b[0]) == int(a[0]) + 1:
            return f"winter {a[0]}"
        return None
    if len(a) == len(b) == 1:
        first, last = int(a[0]), int(b[0])
        decade, century = first // 10 * 10, first // 100 * 100
        for span, name in (((decade, decade + 9), f"{decade}s"), ((century, century + 99), _century(century))):
            for part in (None, "early", "mid", "late"):
                if _part_of(*span, part) == (first, last):
                    return f"the {part + (' ' if part != 'mid' else '-') if part else ''}{name}"
    return None


def _century(first_year: int) -> str:
    n = first_year // 100 + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix} century"


def _display_one(date: str) -> str:
    parts = date.split("-")
    if len(parts) == 3:
        return f"{int(parts[2])} {MONTH_NAMES[int(parts[1])]} {parts[0]}"
    if len(parts) == 2:
        return f"{MONTH_NAMES[int(parts[1])]} {parts[0]}"
    return str(int(parts[0])) if parts[0].isdigit() else parts[0]
