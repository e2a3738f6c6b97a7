"""Evolution cycles on real stores: merging duplicates, keeping homonyms apart, splitting, taxonomy,
communities, and the cycle assets in a real Dagster instance."""

import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.evolve import merge, semantic, split, taxonomy
from smb_core.evolve.contexts import context_vectors
from smb_core.evolve.cycle import (finish_cycle, finish_layer, new_object_ids, next_cycle_key, open_cycle,
                                   pending_source_count, retire_stale)
from smb_core.extract.base import blocking_keys, partner_keys
from smb_core.extract.nlp import NLPExtractor
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.integrity import dangling_references, member_list_mismatches, unresolved_merges
from smb_core.model import CanonicalConcept, Claim, Community, Concept, Entity, EntityKind, Status, stable_id
from smb_core.query import MemoryBank
from smb_core.settings import Settings
from tests.conftest import canonical_objects, write_doc

DOCS = {
    "labs-history.md": "# Lumen Labs history\n\nDr. Mara Okafor founded Lumen Labs in Lisbon in 2017. "
    "Lumen Labs builds the vector database Lumen DB. The company uses Hierarchical Navigable Small World graphs "
    "for its vector indexes.\n",
    "labs-funding.md": "# Funding\n\nLumen Laboratories raised a seed round from Northwind Capital in 2018. "
    "Mara Okafor led the negotiation for Lumen Laboratories. HNSW remains the default vector index.\n",
    "planet.md": "# Mercury the planet\n\nMercury is the smallest planet in the Solar System. "
    "Astronomers observed Mercury from Lisbon in 2016.\n",
    "release.md": "# Release codenames\n\nThe Mercury release of Lumen DB shipped in 2019. "
    "Tomas Varga named the Mercury release after a mountain.\n",
}


def _ingest(bank: Bank, corpus: Path) -> None:
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="test")
    extract_sources(bank, [o.source_id for o in outcomes if o.source_id], get_extractor(bank.settings), "test")


@pytest.fixture
def evolved(bank: Bank, settings) -> tuple[Bank, object]:
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    _ingest(bank, settings.kbmd_dir)
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    result = merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    return bank, result


def _canonical_titles(bank: Bank) -> dict[str, list[str]]:
    with bank.reading() as db:
        objs = db.list_objects(type="canonical_entity", limit=1000)
        members = db.get_objects([m for o in objs for m in o.members])
    return {o.title: sorted(members[m].title for m in o.members) for o in objs}


def test_blocking_keys_join_acronym_and_expansion_but_not_two_expansions() -> None:
    assert partner_keys(blocking_keys("HNSW")) & blocking_keys("Hierarchical Navigable Small World")
    assert not partner_keys(blocking_keys("GPU indexing")) & blocking_keys("graph index")
    # an acronym may take the initials of "of", "and" ... or skip them, as where the extractor reads one
    assert merge.name_similarity("DOE", "Department of Energy") == merge.ACRONYM_SIMILARITY
    assert merge.name_similarity("USA", "United States of America") == merge.ACRONYM_SIMILARITY
    # an acronym and its expansion are a lead, not proof: their contexts or vectors must agree
    assert merge.name_similarity("HNSW", "Hierarchical Navigable Small World") == merge.ACRONYM_SIMILARITY
    assert not merge.decide(merge.ACRONYM_SIMILARITY, 0.2, 0.1, 0, False, False)
    assert merge.decide(merge.ACRONYM_SIMILARITY, 0.2, 0.7, 0, False, False)
    assert not merge.decide(merge.ACRONYM_SIMILARITY, 0.2, 0.1, 1, False, False)  # one shared hub is not enough
    assert "mara okafor" in blocking_keys("Dr. Mara Okafor")
    # an ampersand joins two things: "R&B" is rhythm and blues, never a person's initials
    assert merge.name_similarity("R&B", "Rhythm and Blues") == merge.ACRONYM_SIMILARITY
    assert merge.name_similarity("AT&T", "American Telephone & Telegraph") == merge.ACRONYM_SIMILARITY
    assert not partner_keys(blocking_keys("R&B")) & blocking_keys("Richard Band")
    assert merge.name_similarity("R&B", "Richard Band") < merge.NAME_SIMILAR
    assert merge.name_similarity("R&B", "R.B.") < merge.NAME_SIMILAR
    assert blocking_keys("R & B") == blocking_keys("R&B")  # spaced, the same acronym
    assert merge.name_similarity("R & B", "Rhythm and Blues") == merge.ACRONYM_SIMILARITY
    assert not partner_keys(blocking_keys("R & B")) & blocking_keys("Richard Band")
    assert merge.name_similarity("Rhythm & Blues", "Rhythm and Blues") == 1.0
    assert "algiers" in blocking_keys("Algiers (film)")
    # a legal form and an abbreviated "Mount" name nothing new
    assert blocking_keys("Tallis Instruments Ltd.") & blocking_keys("Tallis Instruments")
    assert blocking_keys("Orvane AG") & blocking_keys("Orvane")
    assert blocking_keys("Mt. Arveld") & blocking_keys("Mount Arveld")
    assert not blocking_keys("The Limited") & blocking_keys("Limited Brands")


def test_names_stating_different_numbers_in_words_or_roman_numerals_are_different_things() -> None:
    assert merge.name_similarity("forty years", "fifty years") == 0.0
    assert merge.name_similarity("Henry VII", "Henry VIII") == 0.0
    assert merge.name_similarity("the First World War", "the Second World War") == 0.0
    assert merge.numbers_in("World War II") == merge.numbers_in("the Second World War") == ["2"]
    assert merge.numbers_in("Vincent Xavier") == [] and merge.numbers_in("VIVID") == []  # not numerals
    assert merge.numbers_in("John V. Lindsay") == [] and merge.numbers_in("I.B.M.") == []  # initials
    assert merge.name_similarity("Louis XIV", "Louis XIV of France") > 0.5  # the same number: names decide


def test_cycle_merges_aliases_across_documents(evolved) -> None:
    bank, result = evolved
    titles = _canonical_titles(bank)
    okafor = next(members for title, members in titles.items() if "Okafor" in title)
    assert {"Dr. Mara Okafor", "Mara Okafor"} <= set(okafor) or {"Mara Okafor"} <= set(okafor)
    labs = next(members for title, members in titles.items() if title.startswith("Lumen Lab"))
    assert {"Lumen Labs", "Lumen Laboratories"} <= set(labs)
    assert result.groups >= 2 and result.merged_members >= 4
    with bank.reading() as db:
        merged = db.list_objects(type="entity", status="merged", limit=1000)
        assert merged and all(m.merged_into for m in merged)
        recorded = db.sql("SELECT count(*) FROM merges")[0][0]
    assert recorded == sum(len(members) for members in titles.values())
    assert unresolved_merges(bank) == []
    assert dangling_references(bank) == []
    assert bank.check_consistency()["consistent"]
    with bank.reading() as db:  # "Dr. Mara Okafor founded Lumen Labs": the edge now joins the two canonical objects
        left_on_members = db.sql("SELECT e.id FROM edges e JOIN objects o ON o.id IN (e.head, e.tail) "
                                 "WHERE o.status = 'merged' AND e.edge_type <> 'derives_from'")
    assert left_on_members == []


def _entity(doc: str, name: str, kind: str, context: str) -> Entity:
    return Entity(id=stable_id("ent", doc, name), title=name, entity_kind=EntityKind(kind), source_ids=[doc],
                  description=context)


def _merged_groups(bank: Bank, objects: list) -> list[list[str]]:
    """Write the objects, merge them in a first cycle, and return each canonical object's members."""
    bank.write(objects)
    result = merge.merge(bank, open_cycle(bank, "cycle-00001", "run-1"), [o.id for o in objects])
    return sorted(sorted(c.members) for c in canonical_objects(bank, result))


def test_homonyms_stay_apart_and_same_things_merge(bank: Bank) -> None:
    objects = [
        _entity("src-a", "Jordan", "person", "Jordan Whitfield joined the company as head of sales."),
        _entity("src-b", "Jordan", "place", "The company opened an office in Amman, the capital of Jordan."),
        _entity("src-c", "Jordan", "place", "Amman is the capital and largest city of Jordan."),
        _entity("src-d", "Mercury", "work", "The Mercury release of the database shipped in 2019."),
        _entity("src-e", "Mercury", "work", "Mercury is the smallest planet of the Solar System."),
    ]
    # the two places named Jordan, nothing else
    assert _merged_groups(bank, objects) == [sorted([objects[1].id, objects[2].id])]


def test_a_generic_institution_name_needs_agreeing_contexts_like_a_one_word_name(bank: Bank) -> None:
    objects = [
        _entity("src-a", "Department of Transport", "organization",
                "The Department of Transport in Dublin funds rural bus services across Ireland."),
        _entity("src-b", "Department of Transport", "organization",
                "The Department of Transport in Pretoria oversees the commuter rail network of South Africa."),
        _entity("src-c", "Lumen Shipping Company", "organization", "Lumen Shipping Company runs ferries to Dublin."),
        _entity("src-d", "Lumen Shipping Company", "organization", "Lumen Shipping Company bought two new ships."),
    ]
    # one department in each country; the same distinctive multi-word name is still enough on its own
    assert _merged_groups(bank, objects) == [sorted([objects[2].id, objects[3].id])]


def test_acronyms_numbers_and_narrower_concepts_do_not_chain_different_things(bank: Bank) -> None:
    objects = [
        _entity("src-a", "Cold War", "other", "The Cold War divided Europe between two blocs for decades."),
        _entity("src-b", "County Wexford", "place", "County Wexford is a county on the south-east coast of Ireland."),
        _entity("src-c", "CW", "organization", "CW sold its telephone business to a rival carrier."),
        _entity("src-d", "Cable & Wireless", "organization", "Cable & Wireless laid telegraph cables under the sea."),
        _entity("src-e", "September 2012", "date", "The album was released in September 2012."),
        _entity("src-f", "11 September 2015", "date", "The album was released on 11 September 2015."),
        _entity("src-g", "Apollo 11", "work", "Apollo 11 landed on the Moon."),
        _entity("src-h", "Apollo 13", "work", "Apollo 13 never landed on the Moon."),
        _entity("src-l", "Ali Khan", "person", "Ali Khan sang qawwali at the court."),
        _entity("src-m", "Nusrat Fateh Ali Khan", "person", "Nusrat Fateh Ali Khan sang qawwali worldwide."),
        _entity("src-n", "United States", "place", "The film was released in the United States."),
        _entity("src-o", "United States Army", "organization", "He served in the United States Army."),
        _entity("src-p", "Berlin International Film Festival", "other", "The film premiered at the Berlin "
                "International Film Festival."),
        _entity("src-q", "Cannes International Film Festival", "other", "The film premiered at the Cannes "
                "International Film Festival."),
        *(Concept(id=stable_id("con", doc, name), title=name, source_ids=[doc], description=f"She was a {name}.")
          for doc, name in (("src-i", "film director"), ("src-j", "french film director"),
                            ("src-k", "polish film director"))),
    ]
    title = {o.id: o.title for o in objects}
    groups = [sorted(title[m] for m in members) for members in _merged_groups(bank, objects)]
    # before, "CW" joined all three expansions into one object, the dates and the Apollo missions merged
    # on similar names and vectors, and "film director" joined every kind of film director
    assert all(len(g) <= 2 for g in groups), groups
    assert not any({"Cold War", "County Wexford"} <= set(g) for g in groups)
    assert not any(len([t for t in g if "Apollo" in t or "September" in t or "director" in t]) > 1 for g in groups)
    assert not any(len([t for t in g if "Khan" in t or "United" in t or "Festival" in t]) > 1 for g in groups)


def test_an_acronym_does_not_chain_two_different_full_names(bank: Bank) -> None:
    objects = [_entity("src-a", "Richard Band", "person", "Richard Band composed the score of the horror film."),
               _entity("src-b", "Robert Beatty", "person", "Robert Beatty composed the score of the horror film."),
               _entity("src-c", "RB", "person", "RB composed the score of the horror film.")]
    title = {o.id: o.title for o in objects}
    groups = [sorted(title[m] for m in members) for members in _merged_groups(bank, objects)]
    # "RB" is accepted beside each name on its own; before, the two composers became one person through it
    assert groups in ([["RB", "Richard Band"]], [["RB", "Robert Beatty"]]), groups


def test_a_later_cycle_does_not_chain_a_new_full_name_to_a_merged_acronym(bank: Bank) -> None:
    first = [_entity("src-a", "Richard Band", "person", "Richard Band composed the score of the horror film."),
             _entity("src-c", "RB", "person", "RB composed the score of the horror film.")]
    assert _merged_groups(bank, first) == [sorted(o.id for o in first)]
    later = _entity("src-b", "Robert Beatty", "person", "Robert Beatty composed the score of the horror film.")
    bank.write([later])
    assert merge.merge(bank, open_cycle(bank, "cycle-00002", "run-2"), [later.id]).canonical_ids == {}
    with bank.reading() as db:
        assert db.get_object(later.id).status == Status.ACTIVE  # not merged into Richard Band's object


def test_two_full_names_reaching_one_merged_acronym_through_different_members_stay_apart(bank: Bank) -> None:
    first = [_entity("src-c", "RB", "person", "RB composed the score of the horror film Puppet Master in 1989."),
             _entity("src-d", "RB", "person", "RB composed the score of the horror film Puppet Master and the war "
                     "film Ice Station Zebra in 1968.")]
    assert len(_merged_groups(bank, first)) == 1
    later = [_entity("src-a", "Richard Band", "person", "Richard Band composed the horror film Puppet Master in 1989."),
             _entity("src-b", "Robert Beatty", "person", "Robert Beatty composed the score of the war film Ice Station "
                     "Zebra in 1968."),
             _entity("src-e", "Robert Beatty", "person", "Robert Beatty composed the score of the war film Ice Station "
                     "Zebra.")]
    bank.write(later)
    result = merge.merge(bank, open_cycle(bank, "cycle-00002", "run-2"), [o.id for o in later])
    with bank.reading() as db:
        groups = sorted(sorted(db.get_object(m).title for m in c.members) for c in canonical_objects(bank, result))
    # Richard Band pairs with the first RB, Robert Beatty with the second: before, both joined the RB
    # object through their own member and became one person. The two Robert Beatty mentions, which pair
    # with each other, are still one person of their own.
    assert groups == [["RB", "RB", "Richard Band"], ["Robert Beatty", "Robert Beatty"]], groups
    assert member_list_mismatches(bank) == [] and unresolved_merges(bank) == []


def test_two_groups_joining_one_canonical_object_in_a_cycle_are_both_listed(bank: Bank) -> None:
    first = [_entity("src-a", "Mara Okafor", "person", "Mara Okafor studied astrophysics in Cambridge."),
             _entity("src-a", "Okafor", "person", "Okafor wrote software to find similar telescope images.")]
    bank.write(first)
    (canonical,) = merge.merge(bank, open_cycle(bank, "cycle-00001", "run-1"), [o.id for o in first]).canonical_ids
    # each joins through the member of its own name: two groups with one canonical object
    later = [_entity("src-c", "Mara Okafor", "person", "Mara Okafor gave the opening keynote in Lisbon."),
             _entity("src-d", "Okafor", "person", "Okafor wrote software to find similar telescope images.")]
    bank.write(later)
    merge.merge(bank, open_cycle(bank, "cycle-00002", "run-2"), [o.id for o in later])
    with bank.reading() as db:
        assert sorted(db.get_object(canonical).members) == sorted(o.id for o in first + later)
    assert member_list_mismatches(bank) == []


def test_a_new_mention_naming_two_canonical_objects_of_earlier_cycles_makes_them_one(bank: Bank) -> None:
    def org(doc: str, name: str, context: str, aliases: tuple = ()) -> Entity:
        return _entity(doc, name, "organization", context).model_copy(update={"aliases": list(aliases)})

    full = [org("src-a", "Halvard Marine Systems", "Halvard Marine Systems was founded in Bergen in 1911."),
            org("src-b", "Halvard Marine Systems", "Halvard Marine Systems employs 800 people in Norway.")]
    short = [org("src-c", "HMS", "HMS launched the research vessel Polar Tern in 2019."),
             org("src-d", "HMS", "HMS launched the research vessel Polar Tern from its yard in 2019.")]
    first = _merged_groups(bank, full + short)
    assert first == sorted([sorted(o.id for o in full), sorted(o.id for o in short)])  # nothing says they are one
    with bank.reading() as db:
        before = {o.id: o for o in db.list_objects(type="canonical_entity", limit=10)}
    # a later document gives both names at once: in one cycle with the others, all five would be one group
    later = org("src-e", "Halvard Marine Systems", "Halvard Marine Systems (HMS) launched the research vessel "
                "Polar Tern in 2019.", ("HMS",))
    bank.write([later])
    result = merge.merge(bank, open_cycle(bank, "cycle-00002", "run-2"), [later.id])
    assert result.absorbed == 1
    with bank.reading() as db:
        canonical = db.list_objects(type="canonical_entity", limit=10)
        (survivor,) = [c for c in canonical if c.status == Status.ACTIVE]
        (absorbed,) = [c for c in canonical if c.status == Status.MERGED]
        assert absorbed.merged_into == survivor.id
        assert sorted(survivor.members) == sorted(o.id for o in full + short + [later])
        assert {survivor.title, *survivor.aliases} >= {"HMS", "Halvard Marine Systems"}
        assert all(m.merged_into == survivor.id for m in db.get_objects(survivor.members).values())
    assert member_list_mismatches(bank) == [] and unresolved_merges(bank) == [] and dangling_references(bank) == []
    assert bank.check_consistency()["consistent"]
    # undoing the survivor's merges gives the absorbed object back, with the members it had
    merge.undo_merge(bank, survivor.id)
    with bank.reading() as db:
        again = db.get_object(absorbed.id)
        assert again.status == Status.ACTIVE and again.merged_into is None
        assert all(m.merged_into == absorbed.id for m in db.get_objects(before[absorbed.id].members).values())
    assert member_list_mismatches(bank) == [] and unresolved_merges(bank) == []


def test_an_object_absorbed_into_one_that_is_absorbed_in_turn_points_at_the_last(bank: Bank) -> None:
    def org(doc: str, name: str, context: str, aliases: tuple = ()) -> Entity:
        return _entity(doc, name, "organization", context).model_copy(update={"aliases": list(aliases)})

    _merged_groups(bank, [org("src-a", "Halvard Marine Systems", "Halvard Marine Systems was founded in Bergen."),
                          org("src-b", "Halvard Marine Systems", "Halvard Marine Systems employs 800 people."),
                          org("src-c", "HMS", "HMS launched the research vessel Polar Tern in 2019."),
                          org("src-d", "HMS", "HMS launched the research vessel Polar Tern from its yard.")])
    later = org("src-e", "Halvard Marine Systems", "Halvard Marine Systems (HMS) launched the Polar Tern.", ("HMS",))
    bank.write([later])
    merge.merge(bank, open_cycle(bank, "cycle-00002", "run-2"), [later.id])
    with bank.reading() as db:
        canonical = db.list_objects(type="canonical_entity", limit=10)
    (first,) = [c for c in canonical if c.status == Status.MERGED]
    (middle,) = [c for c in canonical if c.status == Status.ACTIVE]
    # a later chunk or cycle absorbs the survivor itself into a third canonical object, as merge does
    last = middle.model_copy(update={"id": "cen-halvard-group", "title": "Halvard Group", "aliases": [middle.title]})
    bank.write([last])
    with bank.reading() as db:
        members = list(db.get_objects(middle.members).values())
    for obj in members:
        obj.merged_into = last.id
    middle.status, middle.merged_into = Status.MERGED, last.id
    bank.update_objects([middle, *members])
    with bank.writing() as db:
        db.insert_rows("merges", merge.MERGE_RECORD_COLUMNS,
                       [("cycle-00003", last.id, middle.id, 1.0, '{"absorbed": true}', None, "[]")]
                       + [("cycle-00003", last.id, m.id, 1.0, "{}", middle.id, "[]") for m in members])
    assert unresolved_merges(bank) == [f"{first.id} -> {middle.id}"]  # the chain's first link is left behind

    merge.merge(bank, open_cycle(bank, "cycle-00004", "run-4"), [])
    assert unresolved_merges(bank) == [] and dangling_references(bank) == []
    with bank.reading() as db:
        assert db.get_object(first.id).merged_into == last.id
    assert bank.check_consistency()["consistent"]
    # undoing the last absorption restores the chain as it was: the middle object active, the first in it
    merge.undo_merge(bank, last.id)
    with bank.reading() as db:
        assert db.get_object(middle.id).status == Status.ACTIVE
        assert db.get_object(first.id).merged_into == middle.id
    assert unresolved_merges(bank) == []


def test_a_lone_surname_joins_the_one_full_name_of_its_document(bank: Bank) -> None:
    objects = [
        _entity("src-a", "Mara Okafor", "person", "Mara Okafor studied astrophysics."),
        _entity("src-a", "Okafor", "person", "The telescope produced millions of images, and Okafor wrote software."),
        _entity("src-b", "Johann Wilhelm", "person", "Johann Wilhelm was the eldest son."),
        _entity("src-b", "Adolf Wilhelm", "person", "Adolf Wilhelm died young."),
        _entity("src-b", "Wilhelm", "person", "Wilhelm inherited the duchy."),
    ]
    assert _merged_groups(bank, objects) == [sorted([objects[0].id, objects[1].id])]


@pytest.mark.parametrize("chunk", [merge.MERGE_CHUNK, 10])
def test_a_name_shared_by_more_mentions_than_one_block_still_merges_into_one(bank: Bank, chunk: int) -> None:
    count = merge.MAX_PER_KEY * 3
    mentions = [Concept(id=stable_id("con", str(i)), title="film", source_ids=[f"src-{i:03d}"]) for i in range(count)]
    bank.write(mentions)
    result = merge.merge(bank, open_cycle(bank, "cycle-00001", "run-1"), [m.id for m in mentions], chunk=chunk)
    assert result.groups == 1 and result.merged_members == count


def test_mentions_of_one_name_are_linked_by_its_key_not_by_whichever_ann_ties_come_back(bank: Bank) -> None:
    """More mentions of one name than ANN_NEIGHBOURS share one vector; which of them the index returns
    varies from run to run, so the vector lookup leaves them to the name's blocking key."""
    mentions = [Concept(id=stable_id("con", str(i)), title="film" if i % 2 else "Film", source_ids=[f"src-{i:03d}"])
                for i in range(merge.ANN_NEIGHBOURS + 4)]
    other = Concept(id=stable_id("con", "films"), title="films", source_ids=["src-999"])
    bank.write([*mentions, other])
    new = {m.id: m for m in mentions}
    close = merge._similar_names(bank, new, bank.vectors_of(list(new)))
    assert set(close) == set(new) and all(found in ([], [other.id]) for found in close.values())


@pytest.mark.slow
def test_merging_in_chunks_of_documents_makes_the_same_canonical_objects(tmp_path: Path, sample_corpus: Path,
                                                                        monkeypatch) -> None:
    """A first cycle over a large corpus merges chunk after chunk; on the sample corpus (about 700 names)
    chunks of 150 make the groups one batch makes (a mention merged in an earlier chunk keeps its
    context), and count each merged member once."""
    monkeypatch.setattr(merge, "SHOWN", 10_000)  # every canonical object kept whole, to compare
    first = Bank(settings=Settings(memory_bank_dir=tmp_path / "one", kbmd_dir=sample_corpus))
    first.init()
    _ingest(first, sample_corpus)
    shutil.copytree(tmp_path / "one", tmp_path / "chunked")
    results, groups = [], []
    for name, chunk in (("one", merge.MERGE_CHUNK), ("chunked", 150)):
        bank = Bank(settings=Settings(memory_bank_dir=tmp_path / name, kbmd_dir=sample_corpus))
        cycle = open_cycle(bank, "cycle-00001", "run-1")
        new_ids = new_object_ids(bank, cycle, ("entity", "concept"))
        assert len(new_ids) > 4 * 150
        results.append(merge.merge(bank, cycle, new_ids, chunk=chunk))
        with bank.reading() as db:
            canonical = [o for kind in ("canonical_entity", "canonical_concept")
                         for o in db.list_objects(type=kind, status="active", limit=10_000)]
            merged = db.sql("SELECT count(*) FROM objects WHERE layer = 1 AND status = 'merged'")[0][0]
        groups.append({tuple(sorted(o.members)) for o in canonical})  # titles may differ: the first chunk's lead
        assert results[-1].merged_members == merged and results[-1].groups == len(canonical)
        # the objects kept whole for the digest are as last written (11 are written by two chunks)
        assert {o.id: o.members for o in results[-1].shown} == {o.id: o.members for o in canonical}
    assert groups[0] == groups[1] and len(groups[0]) > 50


def test_a_names_context_vector_is_its_sentences_stored_claim_vector(bank: Bank, settings, monkeypatch) -> None:
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    _ingest(bank, settings.kbmd_dir)
    with bank.reading() as db:
        described = [o for o in db.list_objects(type="entity", limit=1000) if o.description]
        statements = {c.statement for c in db.list_objects(type="claim", limit=1000)}
    reused = [o for o in described if o.description in statements]
    assert reused and len(reused) < len(described)  # some sentences are claims, some (no verb) are not
    embedded: list[str] = []
    real_embed = bank.embedder.embed
    monkeypatch.setattr(bank.embedder, "embed", lambda texts: embedded.extend(texts) or real_embed(texts))
    vectors = context_vectors(bank, described)
    assert set(vectors) == {o.id for o in described}
    assert sorted(embedded) == sorted(o.description for o in described if o not in reused)
    fresh = real_embed([o.description for o in reused])
    assert all(float(vectors[o.id] @ v) > 0.99 for o, v in zip(reused, fresh))
    embedded.clear()  # the sentences that are not claims were stored: a later cycle reads them back
    again = context_vectors(bank, described)
    assert embedded == [] and all(np.array_equal(again[i], vectors[i]) for i in vectors)


def test_stored_sentence_vectors_are_embedded_again_only_if_damaged_or_made_by_another_embedder(bank, monkeypatch):
    from smb_core.evolve import sentence_vectors as store

    texts = ["Ada Example was a mathematician.", "Bob Other, a painter from Leeds.", "Ada Example was a mathematician."]
    embedded: list[str] = []
    real_embed = bank.embedder.embed
    monkeypatch.setattr(bank.embedder, "embed", lambda batch: embedded.extend(batch) or real_embed(batch))
    first = store.sentence_vectors(bank, texts)
    assert first.shape == (3, bank.embedder.dim) and embedded == sorted(set(texts))
    assert np.allclose(first, real_embed(texts), atol=1e-6)
    embedded.clear()
    assert np.array_equal(store.sentence_vectors(bank, texts), first) and embedded == []
    with bank.writing() as db:  # a damaged entry
        db.con.execute("UPDATE sentence_vectors SET vector = 'short'::BLOB WHERE key = ?",
                       [store.key(bank.embedder.name, texts[1])])
    assert np.array_equal(store.sentence_vectors(bank, texts), first) and embedded == [texts[1]]
    embedded.clear()
    with bank.writing() as db:  # damaged, though of the right size: zeros are no embedder's output
        db.con.execute("UPDATE sentence_vectors SET vector = ? WHERE key = ?",
                       [bytes(4 * bank.embedder.dim), store.key(bank.embedder.name, texts[0])])
    assert np.array_equal(store.sentence_vectors(bank, texts), first) and embedded == [texts[0]]
    monkeypatch.setattr(bank.embedder, "name", "another-embedder")
    embedded.clear()
    store.sentence_vectors(bank, texts[:1])
    assert embedded == texts[:1]  # another embedder never reads this one's vectors, which are dropped
    with bank.reading() as db:
        assert db.sql("SELECT count(*), min(embedder) FROM sentence_vectors")[0] == (1, "another-embedder")


def test_rerunning_a_merge_changes_nothing(evolved) -> None:
    bank, _ = evolved
    before = bank.status()
    cycle = open_cycle(bank, "cycle-00001", "run-2")
    again = merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    after = bank.status()
    assert again.merged_members == 0
    assert after["types"] == before["types"] and after["consistent"]


def test_extracting_an_evolved_bank_again_with_a_newer_extractor_undoes_no_merge(evolved) -> None:
    """A newer extractor version makes `smb ingest` extract every document again. Before, that upserted
    every merged member as active again, without its pointer: the next cycle's checks failed."""
    bank, result = evolved
    assert result.merged_members > 0 and member_list_mismatches(bank) == []
    with bank.reading() as db:
        before = dict(db.sql("SELECT id, status FROM objects WHERE layer = 1"))
        sources = [r[0] for r in db.sql("SELECT id FROM sources")]
        version = db.sql("SELECT any_value(version) FROM extractions")[0][0]
    with bank.writing() as db:
        db.con.execute("UPDATE extractions SET version = 'nlp-0'")
    summary = extract_sources(bank, sources, get_extractor(bank.settings), "run-2")
    assert (summary.documents, summary.superseded) == (len(DOCS), 0)
    with bank.reading() as db:
        after = dict(db.sql("SELECT id, status FROM objects WHERE layer = 1"))
        assert db.sql("SELECT DISTINCT version FROM extractions") == [(version,)]
    assert after == before and "merged" in after.values()
    assert member_list_mismatches(bank) == [] and unresolved_merges(bank) == []
    assert bank.check_consistency()["consistent"] is True


class _OlderExtractor(NLPExtractor):
    """An older extractor version, which missed Mara Okafor in the funding document (and her claim there)."""

    version = "nlp-older"

    def extract_many(self, items, batch_size: int = 64):
        out = super().extract_many(items, batch_size)
        for (doc, _), extraction in zip(items, out):
            if doc.path == "labs-funding.md":
                extraction.entities = [e for e in extraction.entities if e.title != "Mara Okafor"]
                extraction.claims = [c for c in extraction.claims if not c.statement.startswith("Mara Okafor")]
        return out


def test_what_extracting_a_document_again_finds_first_is_new_to_the_next_cycle_only(bank: Bank, settings) -> None:
    """Cycles take in document versions, and extracting one again (a newer extractor) makes no new version:
    what it finds first must still reach a cycle, or it would never be merged or checked for contradictions."""
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    outcomes = ingest_sources(bank, scan(settings.kbmd_dir), settings.kbmd_dir, run_id="test")
    sources = [o.source_id for o in outcomes]
    extract_sources(bank, sources, _OlderExtractor(), "run-0")
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    finish_cycle(bank, cycle)

    extract_sources(bank, sources, NLPExtractor(), "run-2")
    (funding,) = [o.source_id for o in outcomes if o.path == "labs-funding.md"]
    assert pending_source_count(bank) == 1  # the document whose objects wait: what starts an early cycle
    with bank.reading() as db:
        okafor, led = (db.sql(f"SELECT id FROM objects WHERE source = ? AND {where}", [funding])[0][0]
                       for where in ("type = 'entity' AND title = 'Mara Okafor'",
                                     "type = 'claim' AND text LIKE 'Mara Okafor led%'"))
    cycle = open_cycle(bank, "cycle-00002", "run-3")
    assert cycle.source_ids == []  # no new document version ...
    assert new_object_ids(bank, cycle, ("entity", "concept")) == [okafor]  # ... yet objects new to the bank
    assert new_object_ids(bank, cycle, ("claim",)) == [led]
    assert merge.merge(bank, cycle, [okafor]).merged_members == 2  # Dr. Mara Okafor's document and this one
    finish_cycle(bank, cycle)
    assert pending_source_count(bank) == 0
    assert new_object_ids(bank, open_cycle(bank, "cycle-00003", "run-4"), ("claim",)) == []  # taken in once
    assert new_object_ids(bank, open_cycle(bank, "cycle-00002", "run-3"), ("claim",)) == [led]  # a re-run: the same


@pytest.mark.parametrize("agent_knows_her", [False, True])
def test_a_canonical_object_no_active_document_names_any_more_is_superseded_with_its_members(
        evolved, agent_knows_her: bool) -> None:
    """Both documents naming Mara Okafor change and no longer name her: the old versions' objects are
    superseded, and so, at the next global passes, is the canonical object they had been merged into,
    unless an agent wrote of her without a document (that is support enough)."""
    bank, _ = evolved
    finish_cycle(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        titles = dict(db.sql("SELECT title, id FROM objects WHERE type = 'canonical_entity' AND status = 'active'"))
    okafor, lumen = titles["Mara Okafor"], titles["Lumen Laboratories"]
    if agent_knows_her:
        agents = Entity(id="ent-agents-okafor", title="Mara Okafor", entity_kind=EntityKind.PERSON,
                        status=Status.MERGED, merged_into=okafor, run_id="agent:tester")
        with bank.reading() as db:
            canonical = db.get_objects([okafor])[okafor]
        canonical.members = [*canonical.members, agents.id]
        bank.write([agents])
        bank.update_objects([canonical])
    corpus = bank.settings.kbmd_dir
    write_doc(corpus, "labs-history.md", "# Lumen Labs history\n\nLumen Labs builds Lumen DB in Lisbon.\n")
    write_doc(corpus, "labs-funding.md", "# Funding\n\nLumen Laboratories raised a seed round in 2018.\n")
    _ingest(bank, corpus)

    cycle = open_cycle(bank, "cycle-00002", "run-2")
    assert cycle.global_passes and len(cycle.source_ids) == 2
    result = semantic.run(bank, cycle)
    assert result.counts["canonical_no_longer_named"] == (0 if agent_knows_her else 1)
    with bank.reading() as db:
        found = db.get_objects([okafor, lumen])
        members = db.get_objects(found[okafor].members)
    if agent_knows_her:
        assert found[okafor].status is Status.ACTIVE and members["ent-agents-okafor"].status is Status.MERGED
    else:
        assert found[okafor].status is Status.SUPERSEDED and "no active document names" in found[okafor].status_reason
        assert len(members) == 2 and {m.status for m in members.values()} == {Status.SUPERSEDED}
    assert found[lumen].status is Status.ACTIVE  # the new versions still name it
    assert unresolved_merges(bank) == [] and member_list_mismatches(bank) == []
    assert bank.check_consistency()["consistent"] is True


def test_undo_merge_restores_members_and_edges(evolved) -> None:
    bank, result = evolved
    canonical = next(c for c in canonical_objects(bank, result) if c.type.value == "canonical_entity")
    with bank.reading() as db:
        edges_before = db.sql("SELECT count(*) FROM edges WHERE head = ? OR tail = ?", [canonical.id, canonical.id])[0][0]
    restored = merge.undo_merge(bank, canonical.id)
    with bank.reading() as db:
        members = db.get_objects(canonical.members)
        assert restored == len(canonical.members)
        assert all(m.status == Status.ACTIVE and m.merged_into is None for m in members.values())
        assert db.get_object(canonical.id).status == Status.DEPRECATED
        assert db.sql("SELECT count(*) FROM edges WHERE head = ? OR tail = ?", [canonical.id, canonical.id])[0][0] == 0
    assert edges_before > 0
    assert bank.check_consistency()["consistent"]


def test_sense_groups_separate_distinct_contexts() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=16), rng.normal(size=16)
    rows = [a + 0.05 * rng.normal(size=16) for _ in range(3)] + [b + 0.05 * rng.normal(size=16) for _ in range(3)]
    vectors = np.array([r / np.linalg.norm(r) for r in rows])
    groups = sorted(sorted(g) for g in split.sense_groups(vectors))
    assert groups == [[0, 1, 2], [3, 4, 5]]


def test_a_name_used_a_thousand_times_is_clustered_from_a_sample_and_every_use_assigned() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=64), rng.normal(size=64)
    rows = [(a if i % 3 else b) + 0.3 * rng.normal(size=64) for i in range(3 * split.MAX_CONTEXTS)]
    vectors = np.array([r / np.linalg.norm(r) for r in rows])
    groups = sorted(sorted(g) for g in split.sense_groups(vectors))
    assert groups == sorted([[i for i in range(len(rows)) if i % 3 == 0], [i for i in range(len(rows)) if i % 3]])


def test_a_mention_window_is_the_words_around_the_name() -> None:
    sentence = "Heavy tractors cause compaction of farm soil, which lowers crop yields."
    assert split.mention_window(sentence, "compaction", words=2) == "tractors cause compaction of farm"
    assert split.mention_window("Compaction's cost grows.", "compaction", words=4) == "Compaction's cost grows."
    assert split.mention_window("He filmed Film Actors Guild meetings.", "film actor") == \
        "He filmed Film Actors someone meetings."  # other names are masked: they tell families, not senses
    assert split.mention_window("Bửu Lân was the son of Emperor Dục Đức.", "son", words=3) == \
        "someone was the son of someone someone"
    assert split.mention_window("A sentence about something else.", "compaction") is None
    assert split.mention_window("Warner Bros. released it.", "war") is None  # a longer word is another word
    assert split.mention_window("Two companies merged.", "company", words=1) == "Two companies merged."
    assert split.mention_window("A Paris-based firm.", "paris", words=1) == "A Paris-based firm."


def test_one_sense_named_in_two_topics_is_not_split(bank: Bank, settings) -> None:
    """Whole sentences about westerns and about parliaments fall into two groups; the words around
    "film actor" do not, and it is one sense."""
    westerns = ["Tom Reed was a film actor in many Republic westerns about cattle ranchers, outlaws and gunfighters.",
                "Bill Hart was a film actor in silent westerns who played cowboys, outlaws and sheriffs on horseback.",
                "Jack Dune was a film actor in westerns about gunfighters, cattle drives and outlaws on the frontier."]
    politics = ["Anna Berg was a film actor until she was elected to parliament and chaired its finance committee.",
                "Paul Roy was a film actor until he was elected to parliament and served as minister of finance.",
                "Joe Kim was a film actor until he was elected to parliament and chaired the budget committee."]
    for i, sentence in enumerate(westerns + politics):
        write_doc(settings.kbmd_dir, f"doc-{i}.md", f"# Note {i}\n\n{sentence}\n")
    _ingest(bank, settings.kbmd_dir)
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    merged = merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    actor = next(c for c in canonical_objects(bank, merged) if c.title == "film actor")
    assert len(actor.members) == 6
    assert split.split_overloaded(bank, cycle, [actor.id]) == ([], [], [])


#: Two senses of "compaction", three documents each.
COMPACTION_STORAGE = ["Compaction merges small immutable storage segments into larger segment files on disk.",
                      "Compaction rewrites segment files and drops deleted rows from the storage engine.",
                      "During compaction the storage engine merges segments and reclaims disk space."]
COMPACTION_MEMORY = ["Compaction summarises the conversation history of the chat agent to fit its context window.",
                     "Compaction shortens an agent's dialogue memory by summarising old conversation turns.",
                     "The assistant applies compaction to old chat messages so the prompt stays short."]

def test_a_semantic_layer_stopped_during_the_split_keeps_the_batches_it_finished(bank: Bank, settings,
                                                                                monkeypatch) -> None:
    storage, memory = COMPACTION_STORAGE, COMPACTION_MEMORY
    for i, sentence in enumerate(storage + memory):
        write_doc(settings.kbmd_dir, f"doc-{i}.md", f"# Note {i}\n\n{sentence}\n")
    _ingest(bank, settings.kbmd_dir)
    real_batches = split.split_batches

    def stopping(*args, **kwargs):  # the run dies after the batch that splits "compaction"
        yield from real_batches(*args, **kwargs)
        raise RuntimeError("stopped")

    monkeypatch.setattr(split, "split_batches", stopping)
    with pytest.raises(RuntimeError, match="stopped"):
        semantic.run(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        (compaction,) = [c for c in db.list_objects(type="canonical_concept", limit=1000) if c.title == "compaction"]
        senses = db.sql("SELECT count(*) FROM edges WHERE head = ? AND edge_type = 'evolves_into'", [compaction.id])
    assert compaction.status == Status.SPLIT and senses == [(2,)]
    monkeypatch.setattr(split, "split_batches", real_batches)
    result = semantic.run(bank, open_cycle(bank, "cycle-00001", "run-1"))  # the re-run does not split it again
    assert result.counts["split"] == 0 and unresolved_merges(bank) == [] and bank.check_consistency()["consistent"]


def test_overloaded_concept_is_split_into_senses(bank: Bank, settings) -> None:
    storage, memory = COMPACTION_STORAGE, COMPACTION_MEMORY
    soil = ["Heavy tractors cause compaction of farm soil, which lowers crop yields."]
    for i, sentence in enumerate(storage + memory + soil):
        write_doc(settings.kbmd_dir, f"doc-{i}.md", f"# Note {i}\n\n{sentence}\n")
    _ingest(bank, settings.kbmd_dir)
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    merged = merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    compaction = next(c for c in canonical_objects(bank, merged) if c.title == "compaction")
    assert len(compaction.members) >= 5
    from smb_core.evolve.cycle import Cycle

    quiet = Cycle("cycle-00002", "run-2", [], 2, global_passes=False)  # brought none of its mentions
    assert split.split_overloaded(bank, quiet, [compaction.id], grown_since=[]) == ([], [], [])
    assert compaction.id in split.concepts_grown_by(bank, cycle.source_ids)
    subs, updated, edges = split.split_overloaded(bank, cycle, [compaction.id], grown_since=cycle.source_ids)
    assert len(subs) == 2 and all(len(s.members) >= 2 for s in subs)
    with bank.reading() as db:
        path_of = {d.id: d.path for d in db.sources()}
    for sub in subs:  # each sense gathers mentions from one group of documents only
        numbers = {int(path_of[source].split("-")[1].split(".")[0]) for source in sub.source_ids} - {6}
        assert numbers <= {0, 1, 2} or numbers <= {3, 4, 5}
    assert all(e.edge_type.value == "evolves_into" and e.head == compaction.id for e in edges)
    assert next(o for o in updated if o.id == compaction.id).status == Status.SPLIT
    # every mention moved to a sense, the one about soil too (a sense of one mention does not stand alone)
    assert sorted(m for sub in subs for m in sub.members) == sorted(compaction.members)
    bank.write(subs, edges, run_id="run-1")
    bank.update_objects(updated)
    assert unresolved_merges(bank) == []
    # a later mention joins a sense; the split concept is not brought back
    write_doc(settings.kbmd_dir, "doc-7.md", "# Note 7\n\nCompaction merges storage segment files on disk.\n")
    _ingest(bank, settings.kbmd_dir)
    later = open_cycle(bank, "cycle-00002", "run-2")
    new_ids = new_object_ids(bank, later, ("entity", "concept"))
    merge.merge(bank, later, new_ids)
    with bank.reading() as db:
        assert db.get_object(compaction.id).status == Status.SPLIT
        mention = next(o for o in db.get_objects(new_ids).values() if o.title == "compaction")
        assert mention.merged_into in {sub.id for sub in subs}
        senses = db.get_objects([sub.id for sub in subs])
    assert unresolved_merges(bank) == []
    # the mention paired with mentions of both senses; the other sense keeps its own
    other = next(s for s in senses.values() if s.id != mention.merged_into)
    assert sorted(other.members) == sorted(next(s for s in subs if s.id == other.id).members)
    assert member_list_mismatches(bank) == []
    # a list naming a member merged elsewhere (as banks evolved before this was kept) is repaired
    other.members = sorted({*other.members, mention.id})
    bank.update_objects([other])
    assert member_list_mismatches(bank) == [f"{other.id} lists {mention.id}, which is not merged into it"]
    assert merge.repair_member_lists(bank, later) == 1
    assert member_list_mismatches(bank) == []


SPEC_DOCS = [
    # one name in two clearly different senses (storage engines, chat agents) and a stray third
    "Compaction merges small immutable storage segments into larger segment files on disk.",
    "Compaction rewrites segment files and drops deleted rows from the storage engine.",
    "During compaction the storage engine merges segments and reclaims disk space.",
    "Compaction summarises the conversation history of the chat agent to fit its context window.",
    "Compaction shortens an agent's dialogue memory by summarising old conversation turns.",
    "The assistant applies compaction to old chat messages so the prompt stays short.",
    "Heavy tractors cause compaction of farm soil, which lowers crop yields.",
    # the same concepts under other surface forms (plural, spacing) in other documents
    "Our search team chose a vector database for semantic retrieval of product photos.",
    "The startup sells vector databases to insurers and regional banks.",
    "Engineers benchmarked a vector database against a classic search engine on recall and latency.",
    "The fraud team chose a graph database for its network of shared devices and addresses.",
    "Analysts moved the supplier records to graph databases after the audit.",
    "The payroll office runs a relational database with strict schemas and nightly backups.",
    "Most accounting systems still run on relational databases with stored procedures.",
    "The web tier uses a key-value store for session tokens and shopping carts.",
    "The platform keeps user profiles in key value stores behind a write-through cache.",
    "Every application needs a database, a backup plan and a monitoring dashboard.",
    "The old database was restored from a snapshot after the power failure.",
    "The search team built an inverted index over the product catalogue and the help pages.",
    "Modern search engines keep inverted indexes in memory for low latency.",
    "The chatbot relies on a language model for its answers to customer questions.",
    "Researchers compared three language models on the bar exam and the medical licensing exam.",
    "The retrieval service uses an embedding model for every incoming query.",
    "The lab trained two embedding models on legal contracts and court rulings.",
    "The agent consults a knowledge graph before it answers a question about suppliers.",
    "The archive team built knowledge graphs from old newspapers and parish registers.",
    "The operations team measured query latency, disk throughput and cache hit rates every night.",
    "The on-call engineer traced the outage to a misconfigured load balancer and an expired certificate.",
    "The data team publishes a weekly report on storage costs, error budgets and service levels.",
]


@pytest.mark.parametrize("batch_members", [split.BATCH_MEMBERS, 1])  # 1: each concept examined on its own
def test_a_cycle_over_100_concepts_merges_duplicates_splits_the_overloaded_and_builds_the_taxonomy(
        bank: Bank, settings, monkeypatch, batch_members: int) -> None:
    """The specification's case: one cycle of the semantic layer over 100+ concept mentions, some
    duplicates under other surface forms and one overloaded name."""
    monkeypatch.setattr(split, "BATCH_MEMBERS", batch_members)
    for i, sentence in enumerate(SPEC_DOCS):
        write_doc(settings.kbmd_dir, f"doc-{i:02d}.md", f"# Note {i}\n\n{sentence}\n")
    _ingest(bank, settings.kbmd_dir)
    with bank.reading() as db:
        assert db.sql("SELECT count(*) FROM objects WHERE type = 'concept'")[0][0] >= 100
    semantic.run(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        canonical = {c.title: c for c in db.list_objects(type="canonical_concept", limit=1000)}
        members = db.get_objects([m for c in canonical.values() for m in c.members])
        kinds = {k.title for k in db.list_objects(type="taxonomy", limit=1000)}
        contains = set(db.sql("SELECT h.title, t.title FROM edges e JOIN objects h ON h.id = e.head "
                              "JOIN objects t ON t.id = e.tail WHERE e.edge_type = 'contains'"))
        evolves = set(db.sql("SELECT head, tail FROM edges WHERE edge_type = 'evolves_into'"))
    # duplicates: one canonical object each, whatever the number or spacing
    for name, forms in {"vector database": {"vector database", "vector databases"},
                        "relational database": {"relational database", "relational databases"},
                        "key-value store": {"key-value store", "key value stores"},
                        "language model": {"language model", "language models"},
                        "knowledge graphs": {"knowledge graph", "knowledge graphs"}}.items():
        assert {members[m].title for m in canonical[name].members} == forms, name
    # the overloaded name is split into its senses, each linked from it
    compaction = canonical["compaction"]
    assert compaction.status == Status.SPLIT
    senses = [c for c in canonical.values() if c.sense and set(c.members) <= set(compaction.members)]
    assert len(senses) == 2 and {(compaction.id, s.id) for s in senses} <= evolves
    # the taxonomy: narrower kinds under their head noun
    assert "Kinds of database" in kinds
    assert {("database", "vector database"), ("database", "relational database")} <= contains
    assert member_list_mismatches(bank) == [] and unresolved_merges(bank) == [] and dangling_references(bank) == []


def test_taxonomy_from_head_nouns_and_is_a_claims(bank: Bank) -> None:
    concepts = [Concept(id=stable_id("con", name), title=name, source_ids=["src-x"])
                for name in ("index", "vector index", "graph index", "data structure", "hash table")]
    claim = Claim(id=stable_id("clm", "h"), title="A hash table is a data structure.",
                  statement="A hash table is a data structure.", source_ids=["src-y"])
    bank.write([*concepts, claim])
    kinds, edges = taxonomy.build_taxonomy(bank, open_cycle(bank, "cycle-00001", "run-1"))
    title = {c.id: c.title for c in concepts}
    contains = {(title[e.head], title[e.tail]) for e in edges if e.edge_type.value == "contains"}
    extends = {(title[e.head], title[e.tail]) for e in edges if e.edge_type.value == "extends"}
    assert contains == {("index", "vector index"), ("index", "graph index"), ("data structure", "hash table")}
    assert extends == {(child, parent) for parent, child in contains}
    assert sorted(k.title for k in kinds) == ["Kinds of data structure", "Kinds of index"]


def test_a_split_concept_stays_the_broader_term_of_narrower_kinds(bank: Bank) -> None:
    film = CanonicalConcept(id=stable_id("ccn", "film"), title="film", status=Status.SPLIT, source_ids=["src-x"])
    sense = CanonicalConcept(id=stable_id("ccn", "film", "movie"), title="film (movie)", source_ids=["src-x"])
    drama = Concept(id=stable_id("con", "drama film"), title="drama film", source_ids=["src-y"])
    bank.write([film, sense, drama])
    kinds, edges = taxonomy.build_taxonomy(bank, open_cycle(bank, "cycle-00001", "run-1"))
    assert [(k.title, k.members) for k in kinds] == [("Kinds of film", [drama.id])]
    assert {(e.head, e.tail, e.edge_type.value) for e in edges} == {(drama.id, film.id, "extends"),
                                                                  (film.id, drama.id, "contains")}


def test_a_grouping_not_found_again_is_superseded_and_points_to_its_successor(bank: Bank) -> None:
    def community(*members: str) -> Community:
        return Community(id=stable_id("com", *members), title=f"Community: {', '.join(members)}",
                         members=list(members), derived_from=list(members))

    old, kept = community("a", "b", "c"), community("x", "y", "z")
    tied, lone = community("a", "z", "w"), community("p", "q")  # one member in each of two; none in any
    bank.write([old, kept, tied, lone])
    successor = community("a", "b", "d")
    bank.write([successor])
    assert retire_stale(bank, open_cycle(bank, "cycle-00002", "run-2"), "community", [kept, successor]) == 3
    with bank.reading() as db:
        found = db.get_objects([old.id, kept.id])
        evolved_into = dict(db.sql("SELECT head, tail FROM edges WHERE edge_type = 'evolves_into'"))
    assert found[old.id].status == Status.SUPERSEDED and "cycle-00002" in found[old.id].status_reason
    assert found[kept.id].status == Status.ACTIVE
    assert evolved_into == {old.id: successor.id, tied.id: max(kept.id, successor.id)}


@pytest.mark.slow
def test_evolve_job_runs_a_cycle_and_is_idempotent(tmp_path: Path, sample_corpus: Path) -> None:
    from smb_pipeline.runner import run_evolve, run_ingest

    settings = Settings(memory_bank_dir=tmp_path / "bank", kbmd_dir=sample_corpus)
    with dg.instance_for_test() as instance:
        assert run_ingest(settings, instance=instance).success
        bank = Bank(settings=settings)
        assert pending_source_count(bank) == len(scan(sample_corpus))
        key, report = run_evolve(settings, instance=instance)
        assert report.success, report.failures
        assert key == "cycle-00001" and pending_source_count(bank) == 0
        status = bank.status()
        assert status["types"].get("canonical_entity", 0) > 0 and status["types"].get("community", 0) > 0
        assert status["consistent"]
        sides = [frozenset(side["statement"] for side in c["sides"])
                 for c in MemoryBank.open(settings.memory_bank_dir, settings=settings).contradictions()]
        assert frozenset({"Okafor founded Lumen Labs in Lisbon in 2017.",  # names differ, subject is the same
                          "Dr. Okafor founded Lumen Labs in Porto."}) in sides
        assert not any("co-founder" in statement for pair in sides for statement in pair)
        events = [r.event_log_entry.dagster_event for r in instance.get_records_for_run(report.run_ids[0]).records]
        checks = [e for e in events if e is not None and e.event_type_value == "ASSET_CHECK_EVALUATION"]
        assert checks and all(e.event_specific_data.passed for e in checks)
        assert {e.event_specific_data.check_name for e in checks} >= {
            "layer4_citations_resolve", "dispute_flags_match_open_contradictions"}
        with bank.reading() as db:
            layers = dict(db.sql("SELECT layer, count(*) FROM objects WHERE status = 'active' GROUP BY layer"))
            found = db.list_objects(type="insight", status="active", limit=1000)
            cited = db.get_objects([c for i in found for c in i.evidence])
        assert all(layers.get(layer, 0) > 0 for layer in range(1, 7)), layers
        assert {i.kind for i in found} == {"bridge_entity", "knowledge_gap"}  # one cycle: nothing restated yet
        assert all(i.evidence and i.source_ids and i.about for i in found)
        assert all(cited[c].type.value == "claim" for i in found for c in i.evidence)
        digests = {e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata["summary"].value
                   for e in events if e is not None and e.event_type_value == "ASSET_MATERIALIZATION"}
        assert set(digests) == {"semantic", "reflective", "synthetic", "narrative", "executive"}
        first_file = digests["synthetic"].split("](file://", 1)[1].split(")", 1)[0]
        assert Path(first_file).is_file()
        job = __import__("smb_pipeline.definitions", fromlist=["defs"]).defs().resolve_job_def("evolve")
        from smb_pipeline.runner import _run_config
        again = job.execute_in_process(instance=instance, partition_key=key, run_config=_run_config(settings, "ERROR"))
        assert again.success
        assert bank.status()["types"] == status["types"]


def test_a_cycle_whose_run_died_resumes_at_its_first_layer_not_done(bank: Bank, settings, monkeypatch) -> None:
    from smb_core.evolve import synthetic as synthetic_phase
    from smb_pipeline.runner import run_evolve, run_ingest

    def materialized(instance, run_id: str) -> list[str]:
        return [r.event_log_entry.dagster_event.asset_key.to_user_string()
                for r in instance.get_records_for_run(run_id).records
                if r.event_log_entry.dagster_event and r.event_log_entry.dagster_event.is_step_materialization]

    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    with dg.instance_for_test() as instance:
        assert run_ingest(settings, instance=instance).success
        real_run = synthetic_phase.run
        monkeypatch.setattr(synthetic_phase, "run", lambda *a: (_ for _ in ()).throw(RuntimeError("power cut")))
        key, died = run_evolve(settings, instance=instance)
        assert not died.success and "power cut" in died.failures[0]
        assert materialized(instance, died.run_ids[0]) == ["semantic", "reflective"]
        with bank.reading() as db:
            canonical = db.sql("SELECT count(*) FROM objects WHERE type = 'canonical_entity'")[0][0]
        monkeypatch.setattr(synthetic_phase, "run", real_run)

        again, resumed = run_evolve(settings, instance=instance)
        assert again == key and resumed.success, resumed.failures
        assert materialized(instance, resumed.run_ids[0]) == ["synthetic", "narrative", "executive"]
        with bank.reading() as db:
            assert db.sql("SELECT count(*) FROM objects WHERE type = 'canonical_entity'")[0][0] == canonical > 0
            assert db.sql("SELECT finished IS NOT NULL FROM cycles WHERE key = ?", [key])[0][0]

        following, full = run_evolve(settings, instance=instance)  # a new cycle runs every layer
        assert following == "cycle-00002" and full.success
        assert materialized(instance, full.run_ids[0]) == ["semantic", "reflective", "synthetic", "narrative",
                                                          "executive"]


def test_the_sensor_starts_a_cycle_once_enough_documents_wait_and_the_schedule_resumes_a_died_one(
        bank: Bank, settings, monkeypatch) -> None:
    from smb_core.settings import get_settings
    from smb_pipeline.defs.evolve.automation import evolution_schedule, new_documents_sensor
    from smb_pipeline.defs.resources import MemoryBankResource

    monkeypatch.setenv("SMB_EVOLUTION_MIN_NEW_DOCS", "4")
    get_settings.cache_clear()  # and again at the end
    resource = MemoryBankResource(bank_dir=str(settings.memory_bank_dir), kbmd_dir=str(settings.kbmd_dir))
    for name, text in list(DOCS.items())[:3]:
        write_doc(settings.kbmd_dir, name, text)
    _ingest(bank, settings.kbmd_dir)
    with dg.instance_for_test() as instance:
        def tick():
            with dg.build_sensor_context(instance=instance, resources={"bank": resource}) as context:
                return new_documents_sensor(context)

        def scheduled():  # (a schedule context opens its own instance: left open, it outlives this test)
            with dg.build_schedule_context(instance=instance, resources={"bank": resource}) as context:
                return evolution_schedule(context)

        assert isinstance(tick(), dg.SkipReason) and "3 new documents, waiting for 4" in tick().skip_message
        write_doc(settings.kbmd_dir, "release.md", DOCS["release.md"])
        _ingest(bank, settings.kbmd_dir)
        request = tick()
        assert request.partition_key == "cycle-00001" and instance.has_dynamic_partition("cycles", "cycle-00001")
        assert [k.to_user_string() for k in request.asset_selection] == [
            "semantic", "reflective", "synthetic", "narrative", "executive"]

        cycle = open_cycle(bank, "cycle-00001", "run-that-died")  # its run got through two layers
        finish_layer(bank, cycle, "semantic")
        finish_layer(bank, cycle, "reflective")
        assert "0 new documents" in tick().skip_message  # the cycle took them: the schedule resumes it
        request = scheduled()
        assert request.partition_key == "cycle-00001"
        assert [k.to_user_string() for k in request.asset_selection] == ["synthetic", "narrative", "executive"]

        instance.add_run(dg.DagsterRun(job_name="evolve", run_id="a-running-cycle", status=dg.DagsterRunStatus.STARTED))
        assert scheduled().skip_message == "a cycle is already running"
    get_settings.cache_clear()


def test_an_unfinished_cycle_is_run_again_before_a_new_one(evolved) -> None:
    bank, _ = evolved
    assert next_cycle_key(bank) == "cycle-00001"  # opened by the fixture, never finished
    with bank.writing() as db:
        db.con.execute("UPDATE cycles SET finished = now() WHERE key = 'cycle-00001'")
    assert next_cycle_key(bank) == "cycle-00002"
    assert open_cycle(bank, "cycle-00002", "run-2").source_ids == []  # cycle 1 consumed everything


def test_each_layer_of_a_run_reloads_its_cycle_without_writing_and_another_run_takes_it_over(evolved,
                                                                                              monkeypatch) -> None:
    bank, _ = evolved
    with bank.reading() as db:
        ((run, started),) = db.sql("SELECT run_id, started FROM cycles WHERE key = 'cycle-00001'")
    first = open_cycle(bank, "cycle-00001", run)
    writes: list[int] = []
    real_writing = type(bank).writing
    monkeypatch.setattr(type(bank), "writing", lambda self: writes.append(1) or real_writing(self))
    again = open_cycle(bank, "cycle-00001", run)  # a later layer of the same run
    assert writes == [] and (again.number, again.source_ids, again.global_passes) == (
        first.number, first.source_ids, first.global_passes)
    other = open_cycle(bank, "cycle-00001", "run-retry")  # a re-execution: the cycle is now its run's
    assert writes == [1] and other.source_ids == first.source_ids and other.run_id == "run-retry"
    with bank.reading() as db:
        ((now_run, now_started),) = db.sql("SELECT run_id, started FROM cycles WHERE key = 'cycle-00001'")
    assert now_run == "run-retry" and now_started >= started  # (utcnow is to the second)


def test_global_passes_run_when_enough_of_the_bank_is_new_or_enough_cycles_passed(bank: Bank, settings,
                                                                                monkeypatch) -> None:
    from smb_core.evolve import cycle as cycles

    def add(*names: str) -> None:
        for name in names:
            write_doc(settings.kbmd_dir, f"{name}.md", f"# {name}\n\nA note about {name}.\n")
        ingest_sources(bank, scan(settings.kbmd_dir), settings.kbmd_dir, run_id="test")

    opened = {}

    def run(key: str) -> bool:
        opened[key] = open_cycle(bank, key, f"run-{key}")
        cycles.finish_cycle(bank, opened[key])
        return opened[key].global_passes

    def since(key: str) -> set[str]:
        with bank.reading() as db:
            paths = {d.id: d.path for d in db.sources()}
        return {paths[s] for s in cycles.sources_since_global_passes(bank, opened[key])}

    add(*(f"doc{i}" for i in range(20)))
    assert run("cycle-00001")  # the first cycle always does
    add("doc20")  # 1 new of 21 documents: under 5%
    assert not run("cycle-00002")
    assert not open_cycle(bank, "cycle-00002", "again").global_passes  # re-running a cycle keeps its decision
    assert not run("cycle-00003")  # nothing new at all
    add("doc21")  # 2 new of 22 since the last global passes: over 5%
    assert run("cycle-00004")
    assert since("cycle-00002") == {"doc20.md"} and since("cycle-00004") == {"doc20.md", "doc21.md"}
    monkeypatch.setattr(cycles, "GLOBAL_REFRESH_CYCLES", 2)
    assert not run("cycle-00005") and run("cycle-00006")  # every 2nd cycle at the latest


def test_a_cycle_without_global_passes_leaves_the_groupings_as_they_were(bank: Bank, settings) -> None:
    from smb_core.evolve import semantic
    from smb_core.evolve.cycle import Cycle

    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    _ingest(bank, settings.kbmd_dir)
    semantic.run(bank, open_cycle(bank, "cycle-00001", "run-1"))
    with bank.reading() as db:
        before = dict(db.sql("SELECT id, status FROM objects WHERE type IN ('community', 'cluster', 'taxonomy')"))
    assert before and set(before.values()) == {"active"}
    quiet = Cycle("cycle-00002", "run-2", [], 2, global_passes=False)
    result = semantic.run(bank, quiet)
    with bank.reading() as db:
        after = dict(db.sql("SELECT id, status FROM objects WHERE type IN ('community', 'cluster', 'taxonomy')"))
    assert after == before
    assert result.counts["global_passes"] == 0 and "communities" not in result.counts
    full = semantic.run(bank, Cycle("cycle-00003", "run-3", [], 3))
    assert full.counts["global_passes"] == 1 and full.counts["taxonomy_nodes"] > 0


def test_namesakes_told_apart_by_their_documents_titles_are_never_joined(bank: Bank, settings) -> None:
    """Wikipedia-style titles qualify namesakes: the footballer and the politician John Whitcombe stay two
    people, even through a third document that names him plainly and could join either."""
    docs = {
        "footballer.md": "# John Whitcombe (footballer)\n\nJohn Whitcombe is an English footballer who plays as "
        "a goalkeeper for Exeter City.\n",
        "politician.md": "# John Whitcombe (politician)\n\nJohn Whitcombe is an Australian politician elected to "
        "the Senate for Tasmania in 2013.\n",
        "squad.md": "# Exeter City squad\n\nJohn Whitcombe kept goal for Exeter City in the 2019 cup run.\n",
    }
    for name, text in docs.items():
        write_doc(settings.kbmd_dir, name, text)
    _ingest(bank, settings.kbmd_dir)
    with bank.reading() as db:
        paths = dict(db.sql("SELECT id, path FROM sources"))
        mentions = {paths[e.source_ids[0]]: e.id for e in db.list_objects(type="entity", limit=1000)
                    if e.title == "John Whitcombe"}
    assert set(mentions) == set(docs)

    result = merge.merge(bank, open_cycle(bank, "cycle-00001", "run-1"), list(mentions.values()))
    groups = [set(c.members) for c in canonical_objects(bank, result)]
    assert not any({mentions["footballer.md"], mentions["politician.md"]} <= g for g in groups)
    # one namesake took it
    (joined,) = [c for c in canonical_objects(bank, result) if mentions["squad.md"] in c.members]
    assert any(a.endswith("(footballer)") or a.endswith("(politician)") for a in joined.aliases)
    # the lead's own qualified title is its name, not an alias of it
    lead = _entity("src-x", "Algiers (film)", "work", "Algiers is a 1938 film.")
    other = _entity("src-y", "Algiers", "work", "The film Algiers was remade in 1942.")
    canonical = merge._canonical([lead, other], None, open_cycle(bank, "cycle-00003", "run-3"), ["Algiers (film)"])
    assert canonical.title == "Algiers (film)" and canonical.aliases == ["Algiers"]

    # a later cycle: another plain mention meets the merged object and the other namesake
    write_doc(settings.kbmd_dir, "senate.md", "# Tasmanian senators\n\nJohn Whitcombe spoke in the Senate "
              "about salmon farming in Tasmania.\n")
    _ingest(bank, settings.kbmd_dir)
    cycle = open_cycle(bank, "cycle-00002", "run-2")
    merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    with bank.reading() as db:
        people = [c for c in db.list_objects(type="canonical_entity", limit=100) if c.title == "John Whitcombe"]
    assert not any({mentions["footballer.md"], mentions["politician.md"]} <= set(c.members) for c in people)


def test_a_persons_names_must_agree_word_for_word() -> None:
    assert merge.name_similarity("Mara Quint", "Mara Quist") >= merge.NAME_SIMILAR  # alike as strings
    assert merge.name_similarity("Mara Quint", "Mara Quist", person=True) < merge.NAME_SIMILAR
    assert merge.name_similarity("Elias Brandt", "Elias Brandtner", person=True) < merge.NAME_SIMILAR
    assert merge.name_similarity("J. Winslow", "John Winslow", person=True) >= merge.NAME_SIMILAR
    assert merge.name_similarity("Harold J. Winslow", "Harold Winslow", person=True) >= merge.NAME_SIMILAR
    assert merge.name_similarity("Lumen Labs", "Lumen Laboratories") >= merge.NAME_SIMILAR


def test_plurals_and_spacing_do_not_make_two_names() -> None:
    assert merge.name_similarity("solid-state battery", "solid-state batteries", concept=True) >= merge.NAME_SIMILAR
    assert merge.name_similarity("vector index", "vector indexes", concept=True) >= merge.NAME_SIMILAR
    assert merge.name_similarity("e-mail marketing", "email marketing", concept=True) == 1.0
    assert merge.name_similarity("DataHarbor", "Data Harbor") == 1.0
    assert merge.name_similarity("R&B", "R.B.") < merge.NAME_SIMILAR  # still two things joined, not initials
