"""Date normalisation for timelines: exact dates, months, years, ranges, vague dates, and numbers that
only look like years."""

import pytest

from smb_core.evolve.dates import display, event_date, find_dates, normalise


def _one(text: str) -> tuple[str, str | None, bool]:
    found = normalise(text)
    assert found is not None, text
    return found.date, found.end, found.approximate


@pytest.mark.parametrize("text, expected", [
    ("14 March 2019", ("2019-03-14", None, False)),
    ("on the 14th of March, 2019", ("2019-03-14", None, False)),
    ("March 14, 2019", ("2019-03-14", None, False)),
    ("Sept. 3, 2021", ("2021-09-03", None, False)),
    ("2019-03-14", ("2019-03-14", None, False)),
    ("1874-06-02", ("1874-06-02", None, False)),
    ("released 2019-05.", ("2019-05", None, False)),
])
def test_exact_days(text, expected) -> None:
    assert _one(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("in June 2018", ("2018-06", None, False)),
    ("In February 2018, Tagus Ventures led a seed round.", ("2018-02", None, False)),
    ("in May 2019", ("2019-05", None, False)),
    ("Jun 1874", ("1874-06", None, False)),
    ("March of 2020", ("2020-03", None, False)),
    ("founded Lumen Labs in Lisbon in 2017.", ("2017", None, False)),
    ("In 1874 the bridge opened.", ("1874", None, False)),
    ("(2019)", ("2019", None, False)),
    # a capitalised word after the year is a name or an initial, not a unit ("m", "w", "ha")
    ("In 1897 W. G. Grace scored a century.", ("1897", None, False)),
    ("In 1990 M. Okafor moved to Lisbon.", ("1990", None, False)),
    ("In 1994 Ha Long Bay became a World Heritage Site.", ("1994", None, False)),
])
def test_months_and_years(text, expected) -> None:
    assert _one(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("The war lasted 1914–1918.", ("1914", "1918", False)),
    ("1914-1918", ("1914", "1918", False)),
    ("1914-18", ("1914", "1918", False)),
    ("the 2001/02 season", ("2001", "2002", False)),
    ("from 1914 to 1918", ("1914", "1918", False)),
    ("between 2001 and 2003", ("2001", "2003", False)),
    ("from June 2018 until March 2019", ("2018-06", "2019-03", False)),
    ("June–August 2020", ("2020-06", "2020-08", False)),
    ("from October 1 to October 3, 2024", ("2024-10-01", "2024-10-03", False)),
    ("1–3 October 2024", ("2024-10-01", "2024-10-03", False)),
    ("March 3-5, 2021", ("2021-03-03", "2021-03-05", False)),
])
def test_ranges(text, expected) -> None:
    assert _one(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("around 1870", ("1870", None, True)),
    ("c. 1870", ("1870", None, True)),
    ("circa 1870", ("1870", None, True)),
    ("~1870", ("1870", None, True)),
    ("the early 1900s", ("1900", "1932", True)),
    ("the 1990s", ("1990", "1999", True)),
    ("the late 1990s", ("1997", "1999", True)),
    ("in the 2000s", ("2000", "2009", True)),
    ("the 1800s", ("1800", "1899", True)),
    ("mid-19th century", ("1833", "1866", True)),
    ("the nineteenth century", ("1800", "1899", True)),
    ("late 2019", ("2019-09", "2019-12", True)),
    ("early 2020", ("2020-01", "2020-04", True)),
    ("mid-2021", ("2021-05", "2021-08", True)),
    ("by the end of 2024", ("2024-12", None, True)),
    ("early March 2019", ("2019-03", None, True)),
    ("spring 2020", ("2020-03", "2020-05", True)),
    ("the winter of 2017", ("2017-12", "2018-02", True)),
    ("Q3 2021", ("2021-07", "2021-09", True)),
    ("the third quarter of 2021", ("2021-07", "2021-09", True)),
    ("H1 2022", ("2022-01", "2022-06", True)),
    ("c. 1870–1880", ("1870", "1880", True)),
])
def test_vague_dates_are_approximate_ranges(text, expected) -> None:
    assert _one(text) == expected


@pytest.mark.parametrize("text", [
    "version 2019.1", "$1,874", "1,874 people", "room 1920", "Room 1920 is on the left.", "1920 employees",
    "it costs €2000", "ticket #1999", "build 2048", "Lumen DB 1.0 shipped with the Apache License 2.0.",
    "call 555-1874", "a 2019.5 release", "page 1984", "ISO 8601", "the 737 MAX", "12:2019", "3/2019/7",
    # before the common era (timelines order years of the common era), and a studio's name
    "in the late 6th century BCE", "the 1st century BC", "about 1300 BC", "founded in 1870 B.C.",
    "an actor under contract to 20th Century Fox", "She died in 155 BC.", "invaded India in 326 BC",
    # three-digit numbers are years only where nothing else can be meant
    "a case of 837 x 310 mm", "in 628 soldiers",
    # a number with a unit of measure or a currency is a quantity
    "a run of 1920 kilometres", "weighs 1500 kg", "a 1200 hectares estate", "for 1999 dollars", "1800 MHz",
])
def test_things_that_are_not_dates(text) -> None:
    assert find_dates(text) == []


@pytest.mark.parametrize("text", ["they may 2019 differently", "mar 2019", "we march 2019 steps"])
def test_month_words_that_are_not_months_leave_a_bare_year(text) -> None:
    assert [d.date for d in find_dates(text)] == ["2019"]


@pytest.mark.parametrize("text, expected", [
    ("Charlemagne (2 April 748 – 28 January 814) was King of the Franks.", ("0748-04-02", "0814-01-28", False)),
    ("In September 833 he was appointed vizier.", ("0833-09", None, False)),
    ("Cleomenes died 875, in exile.", ("0875", None, False)),
    ("(973 – 1024)", ("0973", "1024", False)),
    ("c. 875,", ("0875", None, True)),
])
def test_years_before_1000_where_nothing_else_can_be_meant(text, expected) -> None:
    assert _one(text) == expected


@pytest.mark.parametrize("text, expected", [
    # a label counts only right before the number: here 'V' is a regnal number, not 'version'
    ("John V) (1339 – 1 November 1399) was Duke of Brittany.", ("1339", "1399-11-01", False)),
    # a source that lost a space after the year
    ("Aretha Franklin (March 25, 1942August 16, 2018) was a singer.", ("1942-03-25", None, False)),
    # a source that spaces its hyphens
    ("a name used since the early twenty- first century", ("2000", "2032", True)),
])
def test_untidy_sources(text, expected) -> None:
    assert _one(text) == expected


def test_several_dates_in_one_sentence_keep_their_order_and_offsets() -> None:
    text = "Okafor studied in Lagos in 2004, moved to Lisbon in June 2012 and founded a company in 2017."
    found = find_dates(text)
    assert [d.date for d in found] == ["2004", "2012-06", "2017"]
    assert [text[d.start:d.stop] for d in found] == ["2004", "June 2012", "2017"]


def test_event_date_prefers_a_later_mention_that_refines_the_first() -> None:
    assert event_date("ICSS 2026 will take place in Lisbon in June 2026.").date == "2026-06"
    assert event_date("VectorConf 2024 took place from October 1 to October 3, 2024.").end == "2024-10-03"
    assert event_date("Founded in 2017, the company moved in 2019.").date == "2017"
    assert event_date("No date here, only 42 things.") is None


@pytest.mark.parametrize("args, shown", [
    (("2019-03-14",), "14 March 2019"),
    (("2018-06",), "June 2018"),
    (("1870", None, True), "c. 1870"),
    (("1914", "1918"), "1914–1918"),
    (("1990", "1999", True), "the 1990s"),
    (("1900", "1932", True), "the early 20th century"),
    (("1833", "1866", True), "the mid-19th century"),
    (("2020-03", "2020-05", True), "spring 2020"),
    (("2021-07", "2021-09", True), "Q3 2021"),
    (("2019-09", "2019-12", True), "late 2019"),
    (("2024-10-01", "2024-10-03"), "1–3 October 2024"),
    (("2020-03", "2020-07", True), "c. March–July 2020"),
])
def test_display_reads_like_a_person_writes_dates(args, shown) -> None:
    assert display(*args) == shown
