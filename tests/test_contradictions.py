"""Layer-3 contradiction detection without an LLM: `judge` on clear cases, and `find_contradictions` on a
real bank (two documents that disagree become one contradiction, two edges and one question, once)."""

from __future__ import annotations

import pytest

from smb_core.corpus import scan
from smb_core.evolve.contradictions import Verdict, find_contradictions, judge
from smb_core.evolve.contradictions.finder import _judged_pair, _named_in, _share_a_name
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.model import Claim, Contradiction, Question, Status, stable_id
from tests.conftest import write_doc

# Written for these tests; none of these sentences is in bench/data/contradiction_pairs.jsonl.
CONTRADICTIONS = [
    ("date", "The Orvieto Observatory was founded in 1874.",
     "Founded in 1881, the Orvieto Observatory is the oldest in the province."),
    ("date", "Novelist Agnes Thorvald was born on 2 June 1920.",
     "Agnes Thorvald was born on 19 October 1922 in Malmo."),
    ("date", "Gemstone OS 2.0 was released in April 2015.", "Gemstone OS 2.0 came out in September 2017."),
    ("date", "The Treaty of Ostrova was signed in 1712.", "Delegates signed the Treaty of Ostrova in 1709."),
    ("place", "The chemist Irene Vasquez was born in Valencia.",
     "Irene Vasquez was born in Granada to a family of farmers."),
    ("place", "Polder Systems is headquartered in Utrecht.", "Polder Systems has its headquarters in Rotterdam."),
    ("place", "The 2009 Vesper Summit took place in Nairobi.", "Accra hosted the 2009 Vesper Summit."),
    ("person_role", "The novel 'Northern Gate' was written by Ellen Marsh.",
     "Peter Doyle is the author of 'Northern Gate'."),
    ("person_role", "Beacon Analytics was founded by Ravi Menon.", "Sofia Klein founded Beacon Analytics in 2004."),
    ("person_role", "The first CEO of Quorra Bio was Lukas Brandt.",
     "Nadia Rahimi was the first chief executive of Quorra Bio."),
    ("number", "The Elmstead Reservoir has a maximum depth of 40 metres.",
     "The Elmstead Reservoir reaches a maximum depth of 95 metres."),
    ("number", "Garnet Logistics employs 800 people.", "Garnet Logistics has a workforce of 3,500 employees."),
    ("number", "Harbor Stadium seats 30,000 spectators.", "Harbor Stadium has a capacity of 55,000."),
    ("polarity", "Skyline Notes supports offline editing.", "Skyline Notes does not support offline editing."),
    ("polarity", "The Tamber 3 camera is waterproof.", "The Tamber 3 camera is not waterproof."),
    ("polarity", "Lindale College was never accredited by the regional board.",
     "The regional board accredited Lindale College in 1975."),
    ("date", "Delegates from Brill attended the Calder Book Fair for the first time in 2011.",
     "Delegates from Brill attended the Calder Book Fair for the first time in 1998."),
    # an acronym that opens the parentheses is another name of what comes before them
    ("date", "Halvard Marine Systems (HMS) was founded in 1911 in Bergen.", "HMS was founded in 1924."),
    ("exclusive_predicate", "The jazz drummer Ray Colby is still alive.", "Ray Colby died in 2015 in New Orleans."),
    ("exclusive_predicate", "The game 'Starfall Saga' was cancelled in 2018.",
     "'Starfall Saga' was released in 2019 for consoles."),
    ("exclusive_predicate", "Iodine-131 is a stable isotope.", "Iodine-131 is radioactive."),
]

COMPATIBLE = [
    ("refinement", "The Orvieto Observatory was founded in 1874.", "The Orvieto Observatory was founded in May 1874."),
    ("refinement", "Irene Vasquez was born in Spain.", "Irene Vasquez was born in Valencia in 1931."),
    ("refinement", "Luis Ferreira died in the summer of 1967.", "Luis Ferreira died on 14 July 1967."),
    ("different_version", "Gemstone OS 2.0 was released in 2015.", "Gemstone OS 3.0 was released in 2018."),
    ("different_version", "The third edition of 'Field Botany' has 300 pages.",
     "The fifth edition of 'Field Botany' has 520 pages."),
    ("temporal_change", "Ravi Menon was CEO of Beacon Analytics from 2004 to 2010.",
     "Sofia Klein has been CEO of Beacon Analytics since 2011."),
    ("temporal_change", "Until 2016, Skyline Notes did not support offline editing.",
     "Since 2016, Skyline Notes has supported offline editing."),
    ("temporal_change", "In 2000 the town of Brill had 9,000 inhabitants.",
     "By 2020 the population of Brill had grown to 14,000."),
    ("multi_valued", "Carla Muniz directed 'Iron Tide'.", "Carla Muniz directed the 2003 drama 'Salt Roads'."),
    ("multi_valued", "Polder Systems has offices in Berlin.", "Polder Systems has offices in Madrid and Lisbon."),
    ("multi_valued", "The linguist Omar Haddad speaks Arabic.", "Omar Haddad speaks fluent Spanish."),
    ("different_subject", "The north tower of Castle Brede was built in 1320.",
     "The south tower of Castle Brede was built in 1410."),
    ("different_subject", "Lukas Brandt, the founder of Quorra Bio, was born in 1961.",
     "Quorra Bio's second CEO, Nadia Rahimi, was born in 1970."),
    ("different_subject", "The Android app of Skyline Notes supports offline editing.",
     "The web version of Skyline Notes does not support offline editing."),
    ("different_attribute", "The Vellum X5 has 8 GB of memory.", "The Vellum X5 has 256 GB of storage."),
    ("different_attribute", "Garnet Logistics was founded in 1990.", "Garnet Logistics went public in 2006."),
    ("approximate", "Garnet Logistics has about 3,500 employees.", "Garnet Logistics employs 3,420 people."),
    ("approximate", "Harbor Stadium seats more than 50,000 spectators.", "Harbor Stadium has a capacity of 55,000."),
    ("approximate", "The Harbor Line is 50 kilometres long.", "The Harbor Line has a total length of about 31 miles."),
    ("paraphrase", "Crestline Group bought Meridian Bank in 2011.",
     "Meridian Bank was acquired by Crestline Group in 2011."),
    ("paraphrase", "Notely does not charge for exports.", "Exports are free of charge in Notely."),
    ("paraphrase", "Peter Doyle succeeded Ellen Marsh as director of the Orrin Museum in 1999.",
     "Ellen Marsh was replaced as director of the Orrin Museum by Peter Doyle in 1999."),
    ("unrelated", "Irene Vasquez was born in 1931.", "Luis Ferreira was born in 1935."),
    # subjects that name no one in particular, or different people
    ("anaphoric", "The film was released on 5 May 1995 in France.",
     "The film was released on 12 June 1996 in France."),
    ("anaphoric", "He died in 1927 and was succeeded by his son Monivong.",
     "Upon the death of Monivong in 1941, Sihanouk took the throne."),
    ("other_person", "James Adam (born 13 May 1931) is a Scottish former footballer.",
     "James Adam Reuben (born May 1986) is a British financier."),
    ("other_person", "Frederick died in 1190 in Asia Minor.", "In 1572 his older brother Frederick Heinrich died."),
    ("other_person", "Cyrus Iveric (born February 1970, Upper Jorenell) is a specialist in public health.",
     "Linnea Tamarman (born September 1992, Upper Jorenell) is a specialist in supply chain software."),
    ("other_person", "John Smith (born 1950) is an English footballer.",
     "John Smith (born 1962) is an American politician."),
    ("other_work", "Lonely Hearts is a 1982 Australian film directed by Paul Cox.",
     "Lonely Hearts is a 2006 American crime film directed by Todd Robinson."),
    ("other_work", "Super Hits is a compilation album by the band Blood, Sweat & Tears, released in 1998.",
     "Blood, Sweat & Tears is the second album by the band Blood, Sweat & Tears, released in 1968."),
    ("life_dates", "Frederick Barbarossa (1122 – 10 June 1190) was Holy Roman Emperor from 1155 until his death.",
     "Beatrice I (1143 – 15 November 1184) was Holy Roman Empress by marriage to Frederick Barbarossa."),
    ("repeat_event", "'Vertigo' was released in 1958.", "'Vertigo' was re-released in 1983."),
    # "for the first time": the first of the whole clause's event, which differs here
    ("other_occasion", "Delegates from Brill attended the Calder Book Fair for the first time in 2011.",
     "Delegates from Brill attended the Ostend Music Week for the first time in 1998."),
    ("other_occasion", "The Orrin Quartet performed in Vienna for the first time in 1952.",
     "The Orrin Quartet performed in Oslo for the first time in 1961."),
    ("many_sponsors", "Harlan Systems sponsored the Northwind Summit in 1990.",
     "Valdor Press sponsored the Northwind Summit in 1990."),
    ("narrower_occasion", "The Orrin Quartet performed for the first time in 1952.",
     "The Orrin Quartet performed in Oslo for the first time in 1961."),
    ("shared_role", "Tomas Varga is the co-founder and chief scientist of Lumen Labs.",
     "Dr. Mara Okafor is the founder and chief executive officer of Lumen Labs."),
    # a timeline entry repeats its year: the sentence is about November, not the whole of 1961
    ("other_time", "1961 : Valenga hosted the Northwind Summit in November 1961.",
     "Wesiga hosted the Northwind Summit on 9 December 1961."),
    # ... and so its end is November's too: the release came before the cancellation
    ("other_time", "1961 : 'Starfall Saga' was released in November 1961.",
     "'Starfall Saga' was cancelled on 5 December 1961."),
    # an era marker names no place
    ("era", "Cleomenes II died in 309 BC.", "Cleomenes II died in AD 309."),
    # a range is one span of time, not its two ends
    ("within_range", "The Orvieto Observatory was founded between 1872 and 1876.",
     "The Orvieto Observatory was founded in 1874."),
    ("within_range", "The Treaty of Ostrova was signed in 1709–1712.",
     "Delegates signed the Treaty of Ostrova in 1710."),
]


@pytest.mark.parametrize("kind,a,b", CONTRADICTIONS,
                         ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CONTRADICTIONS)])
def test_judge_finds_clear_contradictions_in_either_order(kind, a, b):
    verdict = judge(a, b)
    assert isinstance(verdict, Verdict), (a, b)
    assert verdict.kind == kind
    assert verdict.attribute and verdict.explanation
    assert judge(b, a) is not None


@pytest.mark.parametrize("kind,a,b", COMPATIBLE, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(COMPATIBLE)])
def test_judge_leaves_compatible_statements_alone(kind, a, b):
    assert judge(a, b) is None, (a, b, judge(a, b))
    assert judge(b, a) is None


def test_parses_stored_in_the_bank_give_the_same_verdicts_and_are_not_parsed_again(bank, monkeypatch):
    from smb_core.evolve import parses
    from smb_core.evolve.contradictions import sentences

    pairs = [(a, b) for _, a, b in CONTRADICTIONS + COMPATIBLE]
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    monkeypatch.setattr(sentences, "_CACHE", {})
    expected = [judge(a, b) for a, b in pairs]
    parsed: list[str] = []
    real_parse = sentences._analyse_many

    def counting_parse(batch, keep=0):
        batch = list(batch)
        parsed.extend(batch)
        return real_parse(batch, keep)

    monkeypatch.setattr(sentences, "_analyse_many", counting_parse)
    monkeypatch.setattr(sentences, "_CACHE", {})
    sentences._analyse_stored(bank, texts)
    assert parsed == texts  # nothing stored yet
    with bank.reading() as db:
        assert len(db.parses([parses.key(t) for t in texts])) == len(texts)
    with bank.writing() as db:  # a damaged entry is parsed again, not fatal
        db.con.execute("UPDATE parses SET doc = 'not a parse'::BLOB WHERE key = ?", [parses.key(texts[0])])

    monkeypatch.setattr(sentences, "_CACHE", {})  # a new process: only the bank remembers
    parsed.clear()
    sentences._analyse_stored(bank, texts)
    assert parsed == [texts[0]]
    assert [judge(a, b) for a, b in pairs] == expected
    assert sum(v is not None for v in expected) == len(CONTRADICTIONS)

    monkeypatch.setattr(parses, "_pipeline", lambda: "en_upgraded_model-9.9/spacy-9.9")
    parses.save(bank, {texts[0]: sentences._CACHE[texts[0]].doc})
    with bank.reading() as db:  # parses of the old pipeline can never be read again: dropped
        assert db.sql("SELECT count(*), min(pipeline) FROM parses")[0] == (1, "en_upgraded_model-9.9/spacy-9.9")


def test_a_full_parse_cache_evicts_the_oldest_parses_never_those_about_to_be_judged(bank, monkeypatch):
    from smb_core.evolve.contradictions import sentences

    texts = list(dict.fromkeys(t for _, a, b in CONTRADICTIONS[:4] for t in (a, b)))
    monkeypatch.setattr(sentences, "_CACHE", {})
    monkeypatch.setattr(sentences, "_CACHE_LIMIT", 4)
    sentences._analyse_stored(bank, texts[:4])
    sentences._analyse_stored(bank, [texts[0], *texts[4:6]])  # texts[0] again, with two new ones
    assert list(sentences._CACHE) == [texts[3], texts[0], texts[4], texts[5]]  # the oldest went
    parsed_one_by_one = []
    monkeypatch.setattr(sentences, "_analyse_many", lambda batch, keep=0: parsed_one_by_one.extend(batch) or {})
    sentences._analyse_stored(bank, texts[:6])  # more than the limit, all stored: all stay for judging
    assert set(sentences._CACHE) == set(texts[:6]) and parsed_one_by_one == []


def test_a_pair_no_rule_can_compare_is_settled_without_analysing_its_names_or_dates(monkeypatch):
    from smb_core.evolve.contradictions import sentences

    monkeypatch.setattr(sentences, "_CACHE", {})
    a, b = "Mara Okafor joined Lumen Labs in 2017.", "Mara Okafor left Lumen Labs in 2020."
    assert judge(a, b) is None
    assert all("names" not in sentences._CACHE[t].__dict__ for t in (a, b))
    # the number and exclusive-state rules need no shared predicate: a number or a state on each side will do
    for c, d in [("Lake Vell covers 42 square kilometres.", "Lake Vell has an area of 57 square kilometres."),
                 ("The jazz drummer Ray Colby is still alive.", "Ray Colby died in 2015 in New Orleans.")]:
        assert not sentences._analyse(c).relation_keys & sentences._analyse(d).relation_keys
        assert judge(c, d) is not None


def test_judge_ignores_identical_and_empty_statements():
    assert judge("Lumen Labs was founded in 2017.", "Lumen Labs was founded in 2017.") is None
    assert judge("", "Lumen Labs was founded in 2017.") is None


def test_a_document_title_stands_for_its_surname_too():
    """In the article on Mara Okafor, "Okafor founded ..." is about her, as "Mara Okafor founded ..." is."""
    same = _judged_pair(("Okafor founded Lumen Labs in Lisbon in 2017.", "Dr. Mara Okafor"),
                        ("Mara Okafor founded Lumen Labs in Lisbon in 2017.", "Company history"))
    assert same[0] == same[1] and judge(*same) is None
    other = _judged_pair(("Okafor founded Lumen Labs in Lisbon in 2017.", "Dr. Mara Okafor"),
                         ("Mara Okafor founded Lumen Labs in Porto.", "Company history"))
    assert judge(*other).attribute == "founding place"


def test_only_the_names_a_claim_uses_make_two_claims_about_one_subject():
    """Claims reference canonical entities, which carry every alias of their members: two claims about
    two men called Charles both reach a canonical "Charles" with the alias "Earl Charles"."""
    aliases = {"charles": "person", "earl charles": "person"}
    a = Claim(id="clm-a", title="x", statement="Their only son, Charles, Lord Dalkeith, died in infancy in 1663.")
    b = Claim(id="clm-b", title="y", statement="After Charles died in 1574, Catherine ruled through her sons.")
    assert _share_a_name(aliases, aliases)  # what every candidate pair was checked on
    named_a, named_b = _named_in(aliases, a, "William Douglas, 9th Earl of Morton"), _named_in(aliases, b, "Catherine")
    assert named_a == named_b == {"charles": "person"} and not _share_a_name(named_a, named_b)
    c = Claim(id="clm-c", title="z", statement="Earl Charles died in 1663.")
    assert _share_a_name(named_a, _named_in(aliases, c, "Earls of Morton")) is False  # a lone first name
    assert _share_a_name(_named_in(aliases, c, ""), _named_in(aliases, c, ""))


# ---- end to end on a real bank ------------------------------------------------------------------

DOC_A = """# Lumen Labs

Lumen Labs was founded in 2017 by Mara Okafor. The company builds vector databases for search.
"""
DOC_B = """# The history of Lumen Labs

Lumen Labs was founded in 2014 in Lisbon. Its engineers later moved to Berlin.
"""


def _ingest(bank, settings) -> list[str]:
    corpus = settings.kbmd_dir
    write_doc(corpus, "a/lumen.md", DOC_A)
    write_doc(corpus, "b/lumen-history.md", DOC_B)
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="run-1")
    source_ids = [o.source_id for o in outcomes]
    extract_sources(bank, source_ids, get_extractor(settings), run_id="run-1")
    return source_ids


def _claim_id(db, statement: str) -> str:
    (claim,) = [c for c in db.list_objects(type="claim", limit=1000) if c.statement == statement]
    return claim.id


def test_two_documents_that_disagree_give_one_contradiction_with_edges_and_a_question(bank, settings):
    source_ids = _ingest(bank, settings)
    with bank.reading() as db:
        claim_ids = [c.id for c in db.list_objects(type="claim", limit=1000)]
        a = _claim_id(db, "Lumen Labs was founded in 2017 by Mara Okafor.")
        b = _claim_id(db, "Lumen Labs was founded in 2014 in Lisbon.")

    found = find_contradictions(bank, claim_ids, run_id="cycle-1")
    assert len(found.contradictions) == 1 and len(found.questions) == 1
    bank.write([*found.contradictions, *found.questions], found.edges, run_id="cycle-1")

    with bank.reading() as db:
        (ctr,) = db.list_objects(type="contradiction", limit=100)
        (question,) = db.list_objects(type="question", limit=100)
        edges = db.sql("SELECT tail FROM edges WHERE head = ? AND edge_type = 'contradicts'", [ctr.id])
    assert isinstance(ctr, Contradiction)
    assert ctr.id == stable_id("ctr", *sorted([a, b]))
    assert set(ctr.claim_ids) == {a, b} and set(ctr.derived_from) == {a, b}
    assert set(ctr.source_ids) == set(source_ids)  # both documents
    assert {s.source_id for s in ctr.source_spans} == set(source_ids)
    assert ctr.resolution == "open" and ctr.tags == ["date"] and ctr.attribute
    assert ctr.run_id == "cycle-1"
    assert "2017" in ctr.description and "2014" in ctr.description
    assert {r[0] for r in edges} == {a, b}
    assert isinstance(question, Question)
    assert question.id == stable_id("qst", ctr.id)
    assert set(question.about) == {a, b, ctr.id} and question.derived_from == [ctr.id]
    assert "a/lumen.md" in question.question and "b/lumen-history.md" in question.question
    assert bank.check_consistency()["consistent"]


def test_a_cycle_checks_at_most_its_share_of_claims_and_later_cycles_check_the_rest(settings):
    from smb_core.bank import Bank
    from smb_core.evolve import reflective
    from smb_core.evolve.cycle import open_cycle

    settings = settings.model_copy(update={"contradiction_claims_per_cycle": 3})
    bank = Bank(settings=settings)
    bank.init()
    _ingest(bank, settings)
    with bank.reading() as db:
        claims = db.sql("SELECT count(*) FROM objects WHERE type = 'claim'")[0][0]
    assert claims > 3
    first = reflective.run(bank, open_cycle(bank, "cycle-00001", "run-1")).counts
    assert (first["new_claims"], first["claims_checked"], first["claims_waiting"]) == (claims, 3, claims - 3)
    assert bank.status()["claims_awaiting_contradiction_check"] == claims - 3
    with bank.reading() as db:  # a waiting claim deprecated meanwhile leaves the backlog unchecked
        first_waiting = db.sql("SELECT claim_id FROM contradiction_backlog ORDER BY claim_id LIMIT 1")[0][0]
        (gone,) = db.get_objects([first_waiting]).values()
    gone.status = Status.DEPRECATED
    bank.update_objects([gone])
    waiting, number = first["claims_waiting"] - 1, 1
    while number == 1 or (waiting and number <= claims):  # a backlog that never shrinks fails below
        number += 1
        cycle = open_cycle(bank, f"cycle-{number:05d}", f"run-{number}")
        assert gone.id not in reflective._claims_to_check(bank, cycle, 3)[1]
        counts = reflective.run(bank, cycle).counts
        assert counts["new_claims"] == 0 and counts["claims_checked"] == min(3, waiting)
        waiting = counts["claims_waiting"]
    assert waiting == 0
    with bank.reading() as db:
        (ctr,) = db.list_objects(type="contradiction", limit=100)
    assert "2017" in ctr.description and "2014" in ctr.description
    assert bank.status()["claims_awaiting_contradiction_check"] == 0


def test_running_again_neither_duplicates_nor_downgrades(bank, settings):
    _ingest(bank, settings)
    with bank.reading() as db:
        claim_ids = [c.id for c in db.list_objects(type="claim", limit=1000)]
    first = find_contradictions(bank, claim_ids, run_id="cycle-1")
    bank.write([*first.contradictions, *first.questions], first.edges, run_id="cycle-1")
    (ctr,) = first.contradictions
    with bank.reading() as db:
        stored = db.get_object(ctr.id)
    stored.resolution, stored.explanation = "explained", "the 2014 date is the incorporation of a predecessor"
    bank.update_objects([stored])

    again = find_contradictions(bank, claim_ids, run_id="cycle-2")
    assert again.contradictions == [] and again.questions == [] and again.edges == []
    bank.write([*again.contradictions, *again.questions], again.edges, run_id="cycle-2")
    with bank.reading() as db:
        assert db.count_by_type()["contradiction"] == 1
        assert db.count_by_type()["question"] == 1
        kept = db.get_object(ctr.id)
        assert db.sql("SELECT count(*) FROM edges WHERE edge_type = 'contradicts'")[0][0] == 2
    assert kept.resolution == "explained" and kept.run_id == "cycle-1"


@pytest.mark.parametrize("title_a, a, title_b, b", [
    ("John Smith (footballer)", "John Smith was born in 1950 in Leeds.",
     "John Smith (politician)", "John Smith was born in 1962 in Ohio."),
    # a place's title qualified by its region, beside the bare name (which may be either namesake)
    ("Newbury", "Newbury was founded in 1079 by Ernulf de Hesdin.",
     "Newbury, Ohio", "Newbury was founded in 1838 by settlers from Connecticut."),
])
def test_same_name_in_documents_about_different_subjects_is_not_a_contradiction(bank, settings, title_a, a,
                                                                                 title_b, b):
    corpus = settings.kbmd_dir
    write_doc(corpus, "first.md", f"# {title_a}\n\n{a}\n")
    write_doc(corpus, "second.md", f"# {title_b}\n\n{b}\n")
    outcomes = ingest_sources(bank, scan(corpus), corpus)
    extract_sources(bank, [o.source_id for o in outcomes], get_extractor(settings))
    with bank.reading() as db:
        claim_ids = [c.id for c in db.list_objects(type="claim", limit=100)]
    assert len(claim_ids) == 2
    assert judge(a, b) is not None
    assert find_contradictions(bank, claim_ids, run_id="cycle-1").contradictions == []


def test_claims_of_one_document_are_not_compared_with_each_other(bank, settings):
    corpus = settings.kbmd_dir
    write_doc(corpus, "solo.md", "# Lumen Labs\n\nLumen Labs was founded in 2017.\n\nLumen Labs was founded in 2014.\n")
    outcomes = ingest_sources(bank, scan(corpus), corpus)
    extract_sources(bank, [o.source_id for o in outcomes], get_extractor(settings))
    with bank.reading() as db:
        claim_ids = [c.id for c in db.list_objects(type="claim", limit=100)]
    assert len(claim_ids) == 2
    assert find_contradictions(bank, claim_ids, run_id="cycle-1").contradictions == []


def test_pairs_already_judged_in_a_run_are_not_judged_again():
    from smb_core.evolve.contradictions.finder import _PairSet

    seen = _PairSet()
    assert seen.add_new({("clm-a", "clm-b"), ("clm-a", "clm-c")}) == {("clm-a", "clm-b"), ("clm-a", "clm-c")}
    assert seen.add_new({("clm-a", "clm-b"), ("clm-b", "clm-c")}) == {("clm-b", "clm-c")}
    assert seen.add_new({("clm-b", "clm-c"), ("clm-c", "clm-b")}) == {("clm-c", "clm-b")}  # pairs are ordered


def test_a_shared_name_pairs_claims_only_when_one_of_them_is_about_it(bank, settings, monkeypatch):
    from smb_core.evolve.contradictions import finder

    corpus = settings.kbmd_dir
    write_doc(corpus, "ana.md", "# Ana Ruiz\n\nAna Ruiz joined Lumen Labs in 2019.\n")
    write_doc(corpus, "ben.md", "# Ben Okoro\n\nBen Okoro left Lumen Labs in 2021.\n")
    write_doc(corpus, "lumen.md", "# Lumen Labs\n\nLumen Labs was founded in 2017.\n")
    write_doc(corpus, "history.md", "# A history\n\nLumen Labs was founded in 2014.\n")
    outcomes = ingest_sources(bank, scan(corpus), corpus)
    extract_sources(bank, [o.source_id for o in outcomes], get_extractor(settings))
    judged = []
    monkeypatch.setattr(finder, "judge", lambda a, b: judged.append({a, b}) or judge(a, b))
    with bank.reading() as db:
        claim_ids = [c.id for c in db.list_objects(type="claim", limit=100)]
    found = find_contradictions(bank, claim_ids, run_id="cycle-1", k=0)  # shared names alone
    assert [c.tags for c in found.contradictions] == [["date"]]
    # the founding claims are about Lumen Labs: each is judged against the three others; the people's
    # two claims, which only mention it, are not judged against each other
    assert found.pairs_judged == len(judged) == 5
    assert not any(" joined " in " ".join(pair) and " left " in " ".join(pair) for pair in judged)
