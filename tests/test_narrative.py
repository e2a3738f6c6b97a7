"""Layer 5 on real stores: timelines of dated claims, narratives, the evolution record of a cycle,
idempotent re-runs, and the files a whole cycle writes for the sample corpus."""

import re
from pathlib import Path

import pytest

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.evolve import narrative, reflective, semantic
from smb_core.evolve.cycle import Cycle, open_cycle
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.integrity import dangling_references
from smb_core.model import (
    CanonicalEntity, Claim, Community, Contradiction, Edge, EdgeType, Entity, EntityKind, SourceSpan, Status,
    stable_id,
)
from tests.conftest import write_doc

LINK = re.compile(r"\]\((\.\./[^)]+\.md)\)")


def _claim(doc: str, text: str, subject: str = "") -> Claim:
    span = SourceSpan(source_id=doc, start=0, end=len(text), line_start=3, line_end=3)
    return Claim(id=stable_id("clm", doc, text), title=text[:100], statement=text, source_ids=[doc],
                 source_spans=[span], subject=subject)


def _entity(doc: str, name: str) -> Entity:
    return Entity(id=stable_id("ent", doc, name), title=name, entity_kind=EntityKind.PERSON, source_ids=[doc])


def _refs(claims: list[Claim], entity_id: str) -> list[Edge]:
    return [Edge.between(c.id, entity_id, EdgeType.REFERENCES) for c in claims]


@pytest.fixture
def ada(bank: Bank):
    """A person named in dated claims of two documents, one in a single dated claim, and a dispute."""
    ada, solo = _entity("src-a", "Ada Example"), _entity("src-a", "Solo Thing")
    claims_a = [_claim("src-a", "Ada Example was born in London in 1815."),
                _claim("src-a", "Ada Example met Charles Babbage in June 1833."),
                _claim("src-a", "Ada Example likes tea."),
                _claim("src-a", "He was a friend of Ada Example from 1833 to 1852.", subject="Charles Babbage")]
    claims_b = [_claim("src-b", "Ada Example published her notes on the engine in 1843."),
                _claim("src-b", "Ada Example was born in 1816.")]
    solo_claim = _claim("src-a", "Solo Thing was built in 1900.")
    dispute = Contradiction(id="ctr-ada-birth", title="Conflicting birth year of Ada Example",
                            claim_ids=[claims_a[0].id, claims_b[1].id], derived_from=[claims_a[0].id, claims_b[1].id],
                            source_ids=["src-a", "src-b"])
    bank.write([ada, solo, *claims_a, *claims_b, solo_claim, dispute],
               [*_refs([*claims_a, *claims_b], ada.id), *_refs([solo_claim], solo.id),
                Edge.between(dispute.id, claims_a[0].id, EdgeType.CONTRADICTS),
                Edge.between(dispute.id, claims_b[1].id, EdgeType.CONTRADICTS)], run_id="ingest")
    return bank, ada, solo, claims_a + claims_b


def _cycle(key: str = "cycle-00001", run_id: str = "run-1", sources=("src-a", "src-b"), number: int = 1) -> Cycle:
    return Cycle(key, run_id, list(sources), number)


def _layer5(bank: Bank) -> dict[str, object]:
    with bank.reading() as db:
        return {o.id: o for t in ("timeline", "narrative", "evolution")
                for o in db.list_objects(type=t, limit=10_000)}


def _assert_links_resolve(bank: Bank, obj) -> None:
    here = (bank.root / obj.path()).parent
    links = LINK.findall(obj.body)
    assert links, obj.id
    for link in links:
        assert (here / link).resolve().is_file(), f"{obj.id}: broken link {link}"


def test_timeline_orders_dated_claims_of_an_entity_and_cites_them(ada, lookup_path) -> None:
    bank, ada_entity, solo, claims = ada
    result = narrative.run(bank, _cycle())
    objects = _layer5(bank)
    timeline = objects[stable_id("tml", ada_entity.id)]
    assert timeline.subject == ada_entity.id
    assert [e.date for e in timeline.events] == ["1815", "1816", "1833", "1833-06", "1843"]
    assert timeline.events[2].end == "1852"  # a range
    assert "Ada Example likes tea." not in timeline.body  # undated
    assert "Charles Babbage was a friend of Ada Example" in timeline.body  # the pronoun, resolved
    assert set(timeline.source_ids) == {"src-a", "src-b"}
    assert set(timeline.derived_from) == {c.id for c in claims if c.statement != "Ada Example likes tea."}
    assert timeline.run_id == "run-1" and timeline.tags == ["cycle:cycle-00001"]
    assert "**Disputed**" in timeline.body and "ctr-ada-birth" in timeline.body
    for event in timeline.events:
        assert f"(../../layer-1/claims/{event.object_id}.md)" in timeline.body
    _assert_links_resolve(bank, timeline)
    assert stable_id("tml", solo.id) not in objects  # one dated claim is no timeline
    assert result.counts["timelines"] == 1 and result.counts["events"] == 5
    assert any(line.startswith("- timeline: [Timeline of Ada Example") and "](file://" in line for line in result.summary)
    # found by its title: the description only counts the events between the title's dates
    assert float(bank.vectors_of([timeline.id])[timeline.id] @ bank.embedder.embed([timeline.title])[0]) > 0.9999
    with bank.reading() as db:
        edges = db.sql("SELECT tail, edge_type FROM edges WHERE head = ?", [timeline.id])
    assert (ada_entity.id, "references") in edges
    assert {t for t, kind in edges if kind == "derives_from"} == set(timeline.derived_from)
    assert dangling_references(bank) == []


def test_narrative_tells_the_dated_claims_as_cited_prose(ada, lookup_path) -> None:
    bank, ada_entity, _, _ = ada
    narrative.run(bank, _cycle())
    story = _layer5(bank)[stable_id("nar", ada_entity.id)]
    assert story.subject == ada_entity.id
    assert [s.date for s in story.statements] == ["1815", "1816", "1833", "1833-06", "1843"]
    assert all(s.object_id and s.span for s in story.statements)
    assert "In 1815, Ada Example was born in London [[1]](../../layer-1/claims/" in story.body
    assert "In June 1833, Ada Example met Charles Babbage [[4]]" in story.body
    assert "disputed" in story.body
    _assert_links_resolve(bank, story)


def test_rerunning_the_phase_changes_nothing(ada) -> None:
    bank, *_ = ada
    first = narrative.run(bank, _cycle())
    before = {i: (o.body, o.created, o.derived_from) for i, o in _layer5(bank).items()}
    with bank.reading() as db:
        edges_before = db.sql("SELECT count(*) FROM edges")[0][0]
    again = narrative.run(bank, _cycle())
    after = {i: (o.body, o.created, o.derived_from) for i, o in _layer5(bank).items()}
    with bank.reading() as db:
        edges_after = db.sql("SELECT count(*) FROM edges")[0][0]
    assert again.counts == first.counts
    assert after == before and edges_after == edges_before
    assert bank.check_consistency()["consistent"]


def test_event_dates_are_stored_and_parsed_again_only_if_damaged_or_under_new_rules(ada, monkeypatch) -> None:
    from smb_core.evolve import dates, event_dates

    bank, ada_entity, *_ = ada
    undated = _claim("src-a", "Ada Example lived in room 1920.")  # looks dated to SQL, has no date
    bank.write([undated], _refs([undated], ada_entity.id), run_id="ingest")
    met = "Ada Example met Charles Babbage in June 1833."
    parsed: list[str] = []
    real = dates.event_date
    monkeypatch.setattr(dates, "event_date", lambda text: parsed.append(text) or real(text))
    first = narrative.run(bank, _cycle())
    timelines = {i: o.body for i, o in _layer5(bank).items() if i.startswith("tml")}
    assert {met, undated.statement} <= set(parsed)
    parsed.clear()
    assert narrative.run(bank, _cycle()).counts == first.counts
    assert parsed == []  # every date read back from the bank, none parsed again
    assert {i: o.body for i, o in _layer5(bank).items() if i.startswith("tml")} == timelines
    with bank.writing() as db:  # a damaged entry
        db.con.execute("UPDATE event_dates SET mention = '{\"date\": 1}' WHERE key = ?", [event_dates.key(met)])
    narrative.run(bank, _cycle())
    assert parsed == [met]  # parsed again, and only that one
    monkeypatch.setattr(event_dates, "rules", lambda: "changed rules")
    narrative.run(bank, _cycle())
    assert met in parsed[1:]  # new rules: parsed again
    with bank.reading() as db:
        assert db.sql("SELECT DISTINCT rules FROM event_dates") == [("changed rules",)]


def test_only_subjects_named_by_new_claims_are_rebuilt(ada) -> None:
    bank, ada_entity, _, _ = ada
    narrative.run(bank, _cycle())
    other = _entity("src-c", "Bob Other")
    claims = [_claim("src-c", "Bob Other was born in 1900."), _claim("src-c", "Bob Other retired in 1965.")]
    bank.write([other, *claims], _refs(claims, other.id), run_id="ingest")
    result = narrative.run(bank, _cycle("cycle-00002", "run-2", ("src-c",), 2))
    objects = _layer5(bank)
    assert result.counts["subjects_touched"] == 1 and result.counts["timelines"] == 1
    assert objects[stable_id("tml", other.id)].run_id == "run-2"
    assert objects[stable_id("tml", ada_entity.id)].run_id == "run-1"  # untouched, not rewritten
    assert objects[stable_id("evo", "cycle-00002")].changes["timelines"] == 1


def test_a_touched_subject_whose_events_did_not_change_keeps_its_timeline(ada) -> None:
    bank, ada_entity, _, _ = ada
    narrative.run(bank, _cycle())
    undated = [_claim("src-e", "Ada Example enjoyed poetry.")]
    bank.write(undated, _refs(undated, ada_entity.id), run_id="ingest")

    result = narrative.run(bank, _cycle("cycle-00002", "run-2", ("src-e",), 2))
    objects = _layer5(bank)
    assert result.counts["subjects_touched"] == 1 and result.counts["timelines"] == 1
    assert objects[stable_id("tml", ada_entity.id)].run_id == "run-1"  # same events: not rewritten
    assert objects[stable_id("nar", ada_entity.id)].run_id == "run-1"
    assert any("not rewritten" in line for line in result.summary)

    dated = [_claim("src-f", "Ada Example married William King in 1835.")]
    bank.write(dated, _refs(dated, ada_entity.id), run_id="ingest")
    narrative.run(bank, _cycle("cycle-00003", "run-3", ("src-f",), 3))
    timeline = _layer5(bank)[stable_id("tml", ada_entity.id)]
    assert timeline.run_id == "run-3" and dated[0].id in timeline.derived_from
    assert bank.check_consistency()["consistent"]


def test_timeline_of_a_merged_entity_is_superseded_by_its_canonical_one(ada) -> None:
    bank, ada_entity, _, claims = ada
    narrative.run(bank, _cycle())
    canonical = CanonicalEntity(id="cen-ada", title="Ada Example", members=[ada_entity.id],
                                derived_from=[ada_entity.id], source_ids=["src-a", "src-b", "src-d"])
    ada_entity.status, ada_entity.merged_into = Status.MERGED, canonical.id
    new = _claim("src-d", "Ada Example died in 1852.")
    bank.write([canonical, new], [*_refs([*claims, new], canonical.id)])
    bank.update_objects([ada_entity])
    narrative.run(bank, _cycle("cycle-00002", "run-2", ("src-d",), 2))
    objects = _layer5(bank)
    old, successor = objects[stable_id("tml", ada_entity.id)], objects[stable_id("tml", canonical.id)]
    assert old.status == Status.SUPERSEDED and "merged" in old.status_reason
    assert successor.status == Status.ACTIVE and successor.events[-1].date == "1852"
    with bank.reading() as db:
        assert db.sql("SELECT count(*) FROM edges WHERE head = ? AND tail = ? AND edge_type = 'evolves_into'",
                      [old.id, successor.id])[0][0] == 1


def _ingest(bank: Bank, corpus: Path) -> None:
    outcomes = ingest_sources(bank, scan(corpus), corpus, run_id="test")
    extract_sources(bank, [o.source_id for o in outcomes if o.source_id], get_extractor(bank.settings), "test")


DOCS = {
    "okafor-early.md": "# Mara Okafor\n\nMara Okafor was born in Lagos in 1984. Mara Okafor moved to Lisbon "
    "in June 2012. Mara Okafor studied physics at the University of Lisbon.\n",
    "lumen-founding.md": "# Lumen Labs\n\nDr. Mara Okafor founded Lumen Labs in Lisbon in 2017. "
    "Lumen Labs released Lumen DB 1.0 on March 14, 2019. Mara Okafor became chief executive around 2019.\n",
}


def test_an_entity_named_in_two_documents_gets_one_timeline_and_the_record_lists_the_merge(bank: Bank,
                                                                                         settings) -> None:
    for name, text in DOCS.items():
        write_doc(settings.kbmd_dir, name, text)
    _ingest(bank, settings.kbmd_dir)
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    semantic.run(bank, cycle)
    result = narrative.run(bank, cycle)
    with bank.reading() as db:
        okafor = next(o for o in db.list_objects(type="canonical_entity", limit=100) if o.title.endswith("Okafor"))
        timeline = db.get_object(stable_id("tml", okafor.id))
        claims = db.get_objects([e.object_id for e in timeline.events])
        record = db.get_object(stable_id("evo", cycle.key))
    dates = [e.date for e in timeline.events]
    assert dates == sorted(dates) and {"1984", "2012-06", "2017"} <= set(dates)
    assert len(set(timeline.source_ids)) == 2 and len(claims) == len(timeline.events)
    assert all(c.type.value == "claim" for c in claims.values())
    _assert_links_resolve(bank, timeline)
    assert record.cycle == cycle.key and record.changes["merge_groups"] >= 1
    with bank.reading() as db:
        assert record.changes["claims_extracted"] == db.count_by_type()["claim"] > 0  # what the documents gave
    assert f"(../../{okafor.path()})" in record.body and "## Merges" in record.body
    assert result.counts["merge_groups"] == record.changes["merge_groups"]
    _assert_links_resolve(bank, record)


@pytest.fixture(params=["scan", "probes"])
def lookup_path(request, monkeypatch) -> str:
    """`metadata.lookups` both ways: a test bank is small enough that it would always scan."""
    from smb_core.stores import metadata

    if request.param == "probes":
        monkeypatch.setattr(metadata, "ROWS_PER_PROBE", 0)
        monkeypatch.setattr(metadata, "INDEX_LOOKUP_MAX", 2)  # several chunks of constants
    return request.param


def test_a_community_counts_the_claims_of_a_member_merged_since_it_was_drawn(bank: Bank, lookup_path) -> None:
    member = _entity("src-a", "Ada Example")
    canonical = CanonicalEntity(id="cen-ada", title="Ada Example", members=[member.id], derived_from=[member.id])
    member.status, member.merged_into = Status.MERGED, canonical.id
    claims = [_claim("src-a", "Ada Example was born in 1815."), _claim("src-b", "Ada Example died in 1852.")]
    community = Community(id="com-ada", title="Community of Ada Example", members=[member.id])
    # as after a merge: the claims' references were moved to the canonical object
    bank.write([member, canonical, community, *claims], _refs(claims, canonical.id))
    events = narrative.dated_events(bank, {community.id: community})
    assert sorted(e.claim_id for e in events[community.id]) == sorted(c.id for c in claims)


def test_a_community_is_told_through_its_most_central_members(bank: Bank, monkeypatch) -> None:
    """A hub community grows with the bank; its timeline reads the members it links, not every member."""
    central, outer = _entity("src-a", "Ada Example"), _entity("src-a", "Bo Outer")
    told = [_claim("src-a", "Ada Example was born in 1815."), _claim("src-b", "Ada Example died in 1852.")]
    untold = [_claim("src-a", "Bo Outer was born in 1901."), _claim("src-b", "Bo Outer died in 1960.")]
    community = Community(id="com-ada", title="Community of Ada Example", members=[central.id, outer.id])
    bank.write([central, outer, community, *told, *untold], _refs(told, central.id) + _refs(untold, outer.id))
    monkeypatch.setattr(narrative, "LINKED_MEMBERS", 1)
    events = narrative.dated_events(bank, {community.id: community})
    assert sorted(e.claim_id for e in events[community.id]) == sorted(c.id for c in told)
    monkeypatch.setattr(narrative, "LINKED_MEMBERS", 2)
    events = narrative.dated_events(bank, {community.id: community})
    assert len(events[community.id]) == 4


def test_a_hub_subject_is_dated_from_a_bounded_sample_of_the_claims_naming_it(bank: Bank, monkeypatch,
                                                                             lookup_path) -> None:
    hub = _entity("src-a", "Hub Town")
    claims = [_claim("src-a", f"Hub Town held fair number {i} in {1900 + i}.") for i in range(6)]
    bank.write([hub, *claims], _refs(claims, hub.id))
    monkeypatch.setattr(narrative, "HEADS_PER_SUBJECT", 3)
    events = narrative.dated_events(bank, {hub.id: hub})
    assert sorted(e.claim_id for e in events[hub.id]) == sorted(c.id for c in claims)[:3]  # the first by id


def test_subjects_are_rebuilt_in_batches_bounded_by_the_claim_rows_they_may_read(monkeypatch) -> None:
    monkeypatch.setattr(narrative, "ROWS_PER_BATCH", 5000)
    plain = {f"ent-{i:02d}": Entity(id=f"ent-{i:02d}", title=f"Person {i}", entity_kind=EntityKind.PERSON)
             for i in range(10)}
    hub = CanonicalEntity(id="cen-hub", title="Hub", members=[f"ent-m{i}" for i in range(3000)])
    communities = {f"com-{i}": Community(id=f"com-{i}", title=f"Community {i}", members=["cen-hub"]) for i in range(4)}
    subjects = {**plain, "cen-hub": hub, **communities}
    batches = list(narrative.batches_by_rows(subjects))
    assert [list(b) for b in batches] == [["cen-hub", "com-0"], ["com-1", "com-2"], ["com-3", *plain]]


@pytest.mark.slow
def test_a_whole_cycle_on_the_sample_corpus_writes_readable_layer_5(bank: Bank, settings, sample_corpus,
                                                                   monkeypatch) -> None:
    monkeypatch.setattr(narrative, "MAX_LISTED", 3)  # the record lists a few entries per section, counts the rest
    monkeypatch.setattr(narrative, "SUBJECTS_PER_BATCH", 7)  # and subjects are rebuilt in many batches
    monkeypatch.setattr(narrative, "ROWS_PER_BATCH", 3000)  # communities in batches of their own
    _ingest(bank, sample_corpus)
    cycle = open_cycle(bank, "cycle-00001", "run-1")
    semantic.run(bank, cycle)
    reflective.run(bank, cycle)
    result = narrative.run(bank, cycle)
    objects = _layer5(bank)
    assert result.counts["timelines"] >= 10 and result.counts["narratives"] >= 5
    kinds = [o.type.value for o in objects.values()]
    assert (result.counts["timelines"], result.counts["narratives"]) == (kinds.count("timeline"), kinds.count("narrative"))
    record = objects[stable_id("evo", cycle.key)]
    assert record.changes["documents"] == len(scan(sample_corpus)) and record.changes["merge_groups"] > 0
    with bank.reading() as db:
        groups = db.sql("SELECT survivor, count(*) FROM merges WHERE cycle = ? AND NOT undone GROUP BY survivor "
                        "ORDER BY count(*) DESC, survivor", [cycle.key])
        largest = db.get_object(groups[0][0])
    assert (record.changes["merge_groups"], record.changes["merged_members"]) == (len(groups), sum(n for _, n in groups))
    merges = record.body.split("## Merges")[1].split("\n## ")[0]
    listed = [line for line in merges.splitlines() if line.startswith("- [")]
    assert len(listed) == 3 and f"- … and {len(groups) - 3} more" in merges
    assert largest.type.value == "canonical_entity" and listed[0].startswith(f"- [{largest.title}](../../{largest.path()})")
    rebuilt = record.body.split("## Timelines and narratives")[1]
    assert f"- … and {kinds.count('timeline') + kinds.count('narrative') - 3} more" in rebuilt
    for obj in objects.values():
        assert obj.derived_from and obj.source_ids and obj.run_id == "run-1" and obj.tags == [cycle.tag]
        _assert_links_resolve(bank, obj)
    timelines = {o.title.split(",")[0]: o for o in objects.values() if o.type.value == "timeline"}
    okafor = timelines["Timeline of Mara Okafor"]
    assert any(e.text == "Mara Okafor founded Lumen Labs in Lisbon in 2017." for e in okafor.events)
    lumen = timelines["Timeline of Lumen Labs"]
    story = next(o for o in objects.values() if o.type.value == "narrative" and o.subject == lumen.subject)
    assert "In June 2018, Lumen Labs published the source code of Lumen DB" in story.body
    assert bank.check_consistency()["consistent"] and dangling_references(bank) == []
