"""Layer 5 for one cycle: timelines, narratives, and the record of what the cycle changed.

- Timelines: the dated claims about one entity (canonical or plain) or one community, in date order,
  with dates normalised by `smb_core.evolve.dates` (ranges and vague dates included, marked approximate).
- Narratives: the same dated claims told as short prose, paragraph by year, every sentence cited.
- Evolution record: one per cycle, a changelog of merges, splits, contradictions, new layer-4 objects,
  superseded groupings, confidence changes and the timelines brought up to date.

Only subjects named by this cycle's new claims (and the communities holding them) are rebuilt, so the
work is proportional to what changed; each rebuilt timeline still covers all of its subject's dated
claims, up to `MAX_EVENTS`, and is written only if it differs from the stored one. Ids are derived
from the subject (and the cycle), so a re-run rewrites the same objects instead of adding new ones.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from smb_core.bank import Bank
from smb_core.evolve import dates
from smb_core.evolve.communities import LINKED_MEMBERS
from smb_core.evolve.cycle import (
    Cycle, PhaseResult, batches_by_weight, digest_line, new_object_ids, unchanged_ids,
)
from smb_core.evolve.event_dates import event_dates
from smb_core.model import (
    CitedStatement, Claim, Contradiction, Edge, EdgeType, Evolution, MemoryObject, Narrative, SourceSpan, Status,
    Timeline, TimelineEvent, stable_id,
)
from smb_core.stores.metadata import id_filter, looked_up_rows

MIN_EVENTS = 2  # a timeline needs at least two dated events
MIN_STATEMENTS = 3  # a narrative needs a few dated steps to tell a development
MAX_EVENTS = 200  # per timeline: a hub entity can be named by thousands of claims
MAX_STATEMENTS = 40  # per narrative, so that it stays readable
MAX_CANDIDATES = 2000  # dated claims read per subject before thinning to MAX_EVENTS
HEADS_PER_SUBJECT = 4 * MAX_CANDIDATES  # claims naming a subject looked at for a date (half of 2wiki's have one)
MAX_EDGES = 50  # derives_from edges per object (derived_from keeps every id)
MAX_LISTED = 40  # entries per section of the evolution record
#: Subjects loaded together; they are rebuilt and written in batches of at most ROWS_PER_BATCH claim
#: rows: a first cycle at 50,000 documents touches hundreds of thousands of subjects. At 10,000
#: documents (when each batch's query still scanned every claim), 5,000 subjects a batch took the
#: layer 77 s and 2.75 GB, 2,000 took 93 s and 2.5 GB.
SUBJECTS_PER_BATCH = 5_000
#: Claim rows a batch may read (about 600 bytes each), counting a subject as at most MAX_CANDIDATES (a
#: community, whose members' claims count, as that many). Community ids sort together, so a batch of
#: SUBJECTS_PER_BATCH alone could be thousands of communities with millions of dated claims.
ROWS_PER_BATCH = 200_000
SAME_EVENT = 0.6  # two claims of one date sharing this much of their words report one event

#: Entities a story can be about (an `objects` condition): plain or canonical, not dates.
_STORY_ENTITY = ("type IN ('entity', 'canonical_entity') "
                 "AND coalesce(json_extract_string(data, '$.entity_kind'), '') <> 'date'")

#: A claim can only be dated if its text has a year-like number or a century: filters in SQL first.
_DATE_HINT = r"(1[0-9]{3}|20[0-9]{2}|centur)"


@dataclass
class _Event:
    """A dated claim, with what a reader needs to cite it."""

    claim_id: str
    text: str
    when: dates.DateMention
    source_ids: list[str]
    span: SourceSpan | None
    confidence: float
    disputed_by: str | None = None
    also: list[str] = field(default_factory=list)  # the same statement in other documents

    def key(self) -> tuple:
        return (*self.when.sort_key(), self.text.lower(), self.claim_id)


@dataclass
class _Rebuilt:
    """The timelines and narratives this cycle built, kept small for the record: every id, and the
    first MAX_LISTED objects of each kind (the ones a digest or the record links to)."""

    timeline_ids: list[str] = field(default_factory=list)
    narrative_ids: list[str] = field(default_factory=list)
    timelines: list[Timeline] = field(default_factory=list)
    narratives: list[Narrative] = field(default_factory=list)
    events: int = 0

    def add(self, timelines: list[Timeline], narratives: list[Narrative]) -> None:
        self.timeline_ids += [t.id for t in timelines]
        self.narrative_ids += [n.id for n in narratives]
        self.timelines += timelines[:MAX_LISTED - len(self.timelines)]
        self.narratives += narratives[:MAX_LISTED - len(self.narratives)]
        self.events += sum(len(t.events) for t in timelines)


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    subject_ids = touched_subjects(bank, cycle)
    rebuilt, unchanged = _Rebuilt(), 0
    # a first cycle over a large bank touches tens of thousands of subjects: a batch at a time keeps
    # the claims and bodies in memory bounded; each batch is written whole, so a re-run redoes the rest
    for start in range(0, len(subject_ids), SUBJECTS_PER_BATCH):
        with bank.reading() as db:
            loaded = db.get_objects(subject_ids[start:start + SUBJECTS_PER_BATCH])
        for subjects in batches_by_rows(loaded):
            timelines, narratives, same = _rebuild(bank, cycle, subjects)
            rebuilt.add(timelines, narratives)
            unchanged += same
    retired = retire_stale(bank, cycle, set(subject_ids), {*rebuilt.timeline_ids, *rebuilt.narrative_ids})
    record, changes = evolution_record(bank, cycle, rebuilt, retired)
    if record is not None:
        record_edges = _edges(record, None)
        _keep_created(bank, [record])
        _drop_stale_edges(bank, [record], record_edges)
        bank.write([record], record_edges, run_id=cycle.run_id)
    result.counts = {"subjects_touched": len(subject_ids), "timelines": len(rebuilt.timeline_ids),
                     "narratives": len(rebuilt.narrative_ids), "events": rebuilt.events,
                     "timelines_superseded": retired,
                     **{k: v for k, v in changes.items() if k not in ("timelines", "narratives")}}
    if unchanged:
        result.summary.append(f"{unchanged} timelines and narratives of touched subjects already said the same; "
                              "not rewritten.")
    result.summary += [digest_line(bank, "timeline", t) for t in rebuilt.timelines[:10]]
    result.summary += [digest_line(bank, "narrative", n) for n in rebuilt.narratives[:10]]
    if record is not None:
        result.summary.append(digest_line(bank, "evolution", record))
    return result


def batches_by_rows(subjects: dict[str, MemoryObject]) -> Iterator[dict[str, MemoryObject]]:
    """The subjects in id order, in batches of at most ROWS_PER_BATCH claim rows by their weight (a
    community MAX_CANDIDATES, any other subject itself and its members, up to MAX_CANDIDATES)."""
    def weight(subject: MemoryObject) -> int:
        if subject.type.value == "community":
            return MAX_CANDIDATES
        return min(MAX_CANDIDATES, 1 + len(getattr(subject, "members", [])))

    for ids in batches_by_weight(((sid, weight(subjects[sid])) for sid in sorted(subjects)), ROWS_PER_BATCH):
        yield {sid: subjects[sid] for sid in ids}


def _rebuild(bank: Bank, cycle: Cycle, subjects: dict[str, MemoryObject]) -> tuple[list[Timeline], list[Narrative], int]:
    """Timelines and narratives of these subjects, written where they changed; also how many had not."""
    events = dated_events(bank, subjects)
    paths = _source_paths(bank, {s for evs in events.values() for e in evs for s in e.source_ids})
    timelines, narratives, edges = [], [], []
    names = _entity_names(bank, [m for s in subjects.values() for m in _told_members(s)])
    for subject_id in sorted(subjects):
        subject_events = events.get(subject_id, [])
        if len(subject_events) < MIN_EVENTS:
            continue
        name = _name(subjects[subject_id], names)
        timeline = build_timeline(subjects[subject_id], name, subject_events, cycle, paths)
        timelines.append(timeline)
        edges += _edges(timeline, subject_id)
        if len(subject_events) >= MIN_STATEMENTS:
            story = build_narrative(subjects[subject_id], name, subject_events, cycle, paths)
            narratives.append(story)
            edges += _edges(story, subject_id)
    built = [*timelines, *narratives]
    unchanged = unchanged_ids(bank, built)
    changed = [o for o in built if o.id not in unchanged]
    edges = [e for e in edges if e.head not in unchanged]
    _keep_created(bank, changed)
    _drop_stale_edges(bank, changed, edges)
    bank.write(changed, edges, run_id=cycle.run_id)
    return timelines, narratives, len(unchanged)


# ---- which subjects this cycle touched ----------------------------------------------------------

def touched_subjects(bank: Bank, cycle: Cycle) -> list[str]:
    """Ids of the active entities (canonical or plain, not dates) referenced by this cycle's new claims, with
    merged members replaced by their canonical object, and the active communities that contain them."""
    claims = new_object_ids(bank, cycle, ("claim",))
    if not claims:
        return []
    # a step at a time, each looked up by id (`lookups`): one query joining edges and objects scanned both
    # tables, a cost that grew with the bank however few claims were new
    with bank.reading() as db:
        named = {r[0] for r in looked_up_rows(db, "edges", "head", claims, "head, tail, edge_type", "tail",
                                              "edge_type = 'references'")}
        canonical = {r[0] for r in looked_up_rows(db, "objects", "id", sorted(named), "id, type, data",
                                                  "coalesce(json_extract_string(data, '$.merged_into'), id)",
                                                  "type IN ('entity', 'canonical_entity')")}
        entities = looked_up_rows(db, "objects", "id", sorted(canonical), "id, type, status, title, data",
                                  "id, type, title", f"status = 'active' AND {_STORY_ENTITY}")
        containing = {r[0] for r in looked_up_rows(db, "edges", "tail", sorted(r[0] for r in entities),
                                                   "tail, head, edge_type", "head", "edge_type = 'contains'")}
        rows = entities + looked_up_rows(db, "objects", "id", sorted(containing), "id, type, status, title",
                                         "id, type, title", "type = 'community' AND status = 'active'")
    # names without a word ("2.0", "3.0") are versions or numbers the NER took for entities: no story
    return sorted(i for i, kind, title in rows if kind == "community" or re.search(r"[^\W\d_]{2}", title))


def _targets(bank: Bank, subjects: dict[str, MemoryObject]) -> dict[str, set[str]]:
    """The ids whose claims count for each subject: itself, and for a community its told members. A merge
    moves its members' edges to the canonical object, so claims reference canonical objects, never a
    merged member; a community member merged since the community was drawn counts as its canonical."""
    targets = {sid: {sid} for sid in subjects}
    community_members = sorted({m for s in subjects.values() for m in _told_members(s)})
    with bank.reading() as db:
        canonical = dict(looked_up_rows(db, "objects", "id", community_members, "id, data",
                                        "id, coalesce(json_extract_string(data, '$.merged_into'), id)"))
    for sid, subject in subjects.items():
        if subject.type.value == "community":
            targets[sid] |= {canonical.get(m, m) for m in _told_members(subject)}
    return targets


def _told_members(subject: MemoryObject) -> list[str]:
    """The members of a community whose claims its timeline tells: its LINKED_MEMBERS most central, the
    ones it links with `contains` (through which a cycle finds it touched). A hub community grows with the
    bank (9,399 members at 6,119 documents): reading every member made each cycle touching it cost more."""
    return list(subject.members[:LINKED_MEMBERS]) if subject.type.value == "community" else []


# ---- dated claims -------------------------------------------------------------------------------

def _dated_claims_naming(db, subject_targets: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(subject, claim) for the active claims that reference a subject's targets and have a year-like
    number or a century, at most MAX_CANDIDATES per subject (the lowest ids), ordered. Edges, then
    claims, are looked up by id (`lookups`: in their indexes unless a scan is cheaper): joining them in
    one query scanned every claim of the bank (a regular expression over each text) for each batch of
    subjects, a cost that grew with the bank in every cycle however few subjects it touched."""
    targets = sorted({t for ts in subject_targets.values() for t in ts})
    named_by: dict[str, set[str]] = defaultdict(set)  # target -> claims referencing it
    for tail, head in looked_up_rows(db, "edges", "tail", targets, "tail, head, edge_type", "tail, head",
                                     "edge_type = 'references'"):
        named_by[tail].add(head)
    # a subject's first claims by id, at most HEADS_PER_SUBJECT: ids are hashes, so for a hub named by
    # tens of thousands of claims this is a sample of them, and a subject's cost stays bounded
    heads_of = {sid: sorted({c for t in ts for c in named_by.get(t, ())})[:HEADS_PER_SUBJECT]
                for sid, ts in subject_targets.items()}
    heads = sorted({c for cs in heads_of.values() for c in cs})
    dated = {r[0] for r in looked_up_rows(db, "objects", "id", heads, "id, type, status, text", "id",
                                          "type = 'claim' AND status = 'active' "
                                          f"AND regexp_matches(text, '{_DATE_HINT}')")}
    return [(sid, c) for sid in sorted(heads_of) for c in [c for c in heads_of[sid] if c in dated][:MAX_CANDIDATES]]


def dated_events(bank: Bank, subjects: dict[str, MemoryObject]) -> dict[str, list[_Event]]:
    """Each subject's dated claims as events in date order (one per statement, at most MAX_EVENTS)."""
    if not subjects:
        return {}
    subject_targets = _targets(bank, subjects)
    with bank.reading() as db:
        capped = _dated_claims_naming(db, subject_targets)
        claim_ids = sorted({c for _, c in capped})
        # looked up by id (`lookups`): joining them scanned every object's JSON
        claims = {r[0]: r[1:] for r in looked_up_rows(
            db, "objects", "id", claim_ids, "id, text, source_ids, confidence, data",
            "id, text, source_ids, confidence, CAST(json_extract(data, '$.source_spans[0]') AS VARCHAR), "
            "json_extract_string(data, '$.subject')")}
        disputes = _open_disputes(db, claim_ids)
    # (subject, claim, text, source ids, confidence, first span, open contradiction, claim's subject)
    rows = [(subject, c, *claims[c][:4], disputes.get(c), claims[c][4]) for subject, c in capped if c in claims]
    texts = {r[1]: _resolve_pronoun(r[2], r[7]) for r in rows}
    when_of = event_dates(bank, (t for t in texts.values() if not _ABOUT_DOCUMENT.match(t)))
    parsed: dict[str, _Event | None] = {}
    out: dict[str, list[_Event]] = defaultdict(list)
    for subject, claim_id, _, source_ids, confidence, span, disputed, _ in rows:
        if claim_id not in parsed:
            text = texts[claim_id]
            when = when_of.get(text)
            parsed[claim_id] = None if when is None else _Event(
                claim_id, text, when, list(source_ids or []),
                SourceSpan.model_validate_json(span) if span and span != "null" else None,
                confidence, disputed)
        if parsed[claim_id] is not None:
            out[subject].append(parsed[claim_id])
    return {subject: _ordered(evs) for subject, evs in out.items()}


def _open_disputes(db, claim_ids: list[str]) -> dict[str, str]:
    """Claim -> the first open contradiction naming it, looked up by id (`lookups`; a join scanned every edge)."""
    contradicts: dict[str, set[str]] = defaultdict(set)
    for tail, head in looked_up_rows(db, "edges", "tail", claim_ids, "tail, head, edge_type", "tail, head",
                                     "edge_type = 'contradicts'"):
        contradicts[tail].add(head)
    open_ids = {r[0] for r in looked_up_rows(
        db, "objects", "id", sorted({h for hs in contradicts.values() for h in hs}), "id, type, status, data", "id",
        "type = 'contradiction' AND status = 'active' "
        "AND coalesce(json_extract_string(data, '$.resolution'), 'open') = 'open'")}
    return {claim: min(heads & open_ids) for claim, heads in contradicts.items() if heads & open_ids}


#: 'This page lists the talks since 2019': about the document, not an event.
_ABOUT_DOCUMENT = re.compile(r"(this|the)\s+(page|document|article|section|post|list|table|report|note)\b", re.I)
_PRONOUN = re.compile(r"(He|She|They)\b")


def _resolve_pronoun(text: str, subject: str | None) -> str:
    """'He was the first CTO ...' -> 'Tomas Varga was the first CTO ...': out of its document a
    pronoun names nobody; the extractor resolved it into the claim's subject."""
    m = _PRONOUN.match(text)
    if m and subject and subject[:1].isupper() and not _PRONOUN.fullmatch(subject) and len(subject) < 60:
        return subject + text[m.end():]
    return text


_STOP = {"the", "a", "an", "of", "in", "on", "at", "to", "and", "or", "its", "his", "her", "their", "as", "by",
         "for", "with", "from", "was", "is", "were", "are", "has", "had", "have", "it", "that", "this"}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if w not in _STOP}


def _ordered(events: list[_Event]) -> list[_Event]:
    """Date order; one event for what several documents say about the same date in nearly the same
    words (citing them all); thinned evenly over time to MAX_EVENTS so a long history keeps its span."""
    ordered: list[_Event] = []
    kept: dict[tuple, list[tuple[int, set[str]]]] = defaultdict(list)  # (date, end) -> (index, words)
    for event in sorted(events, key=_Event.key):
        words, when = _words(event.text), (event.when.date, event.when.end)
        same = next((i for i, w in kept[when] if len(words & w) >= SAME_EVENT * len(words | w)), None)
        if same is None:
            kept[when].append((len(ordered), words))
            ordered.append(event)
        else:
            first = ordered[same]
            ordered[same] = _Event(**{**first.__dict__, "also": [*first.also, event.claim_id],
                                      "source_ids": sorted({*first.source_ids, *event.source_ids})})
    if len(ordered) > MAX_EVENTS:
        ordered = [ordered[i * len(ordered) // MAX_EVENTS] for i in range(MAX_EVENTS)]
    return ordered


def _source_paths(bank: Bank, source_ids: set[str]) -> dict[str, str]:
    """Corpus path of each layer-0 version, for citations a person can follow."""
    where, params = id_filter("id", sorted(source_ids))
    with bank.reading() as db:
        return dict(db.sql(f"SELECT id, path FROM sources WHERE {where}", params))


# ---- timelines and narratives -------------------------------------------------------------------

def _name(subject: MemoryObject, names: dict[str, str] | None = None) -> str:
    """How a reader calls the subject: an entity's title; a community by its three most central
    entities (its own title also lists concepts, which read as noise: 'year, university, community')."""
    if subject.type.value == "community":
        people = [names[m] for m in _told_members(subject) if m in (names or {})][:3]
        if people:
            listed = f"{', '.join(people[:-1])} and {people[-1]}" if len(people) > 1 else people[0]
            return f"the community around {listed}"
        return f"the community of {subject.title.removeprefix('Community: ')}"
    title = subject.title
    return title.replace('"', "") if title.count('"') % 2 else title


def _entity_names(bank: Bank, ids: list[str]) -> dict[str, str]:
    """Titles of the entities (not dates) among `ids`."""
    with bank.reading() as db:
        return dict(looked_up_rows(db, "objects", "id", sorted(set(ids)), "id, type, title, data", "id, title",
                                   _STORY_ENTITY))


def _span_text(events: list[_Event]) -> str:
    first, last = events[0].when.date[:4], max((e.when.end or e.when.date)[:4] for e in events)
    return first if first == last else f"{first}–{last}"


def _provenance(events: list[_Event], cycle: Cycle) -> dict:
    ids = [i for e in events for i in (e.claim_id, *e.also)]
    return dict(derived_from=ids, source_ids=sorted({s for e in events for s in e.source_ids}),
                confidence=round(sum(e.confidence for e in events) / len(events), 3),
                run_id=cycle.run_id, tags=[cycle.tag])


def build_timeline(subject: MemoryObject, name: str, events: list[_Event], cycle: Cycle,
                   paths: dict[str, str]) -> Timeline:
    docs = len({s for e in events for s in e.source_ids})
    lines = [f"# Timeline of {name}, {_span_text(events)}", "",
             f"{len(events)} dated events about {_link(subject)} from {docs} "
             f"document{'s' if docs != 1 else ''}, oldest first. Approximate dates are marked *c.* or named "
             f"as a period; each event cites the claim it comes from and where that claim was found.", ""]
    for e in events:
        when = dates.display(e.when.date, e.when.end, e.when.approximate)
        lines.append(f"- **{when}**: {e.text} ({_cite(e, paths)}){_dispute_note(e)}")
    return Timeline(
        id=stable_id("tml", subject.id), title=f"Timeline of {name}, {_span_text(events)}",
        description=f"{len(events)} dated events about {name}, from {_when(events[0])} to {_when(events[-1])}.",
        subject=subject.id, body="\n".join(lines) + "\n",
        events=[TimelineEvent(date=e.when.date, end=e.when.end, approximate=e.when.approximate, text=e.text,
                              object_id=e.claim_id, span=e.span) for e in events],
        **_provenance(events, cycle),
    )


def build_narrative(subject: MemoryObject, name: str, events: list[_Event], cycle: Cycle,
                    paths: dict[str, str]) -> Narrative:
    """Prose, one paragraph per year: 'In 2017, Mara Okafor founded Lumen Labs in Lisbon [1]. ...'."""
    told = events if len(events) <= MAX_STATEMENTS else \
        [events[i * len(events) // MAX_STATEMENTS] for i in range(MAX_STATEMENTS)]
    docs = len({s for e in told for s in e.source_ids})
    paragraphs: dict[str, list[str]] = {}
    sources, previous = [], None
    for number, e in enumerate(told, start=1):
        sentence = _sentence(e, previous)
        cite = f"[[{number}]](../../{_claim_path(e.claim_id)})"
        sentence = sentence[:-1] + f" {cite}{sentence[-1]}" if sentence[-1] in ".!" else f"{sentence} {cite}."
        if e.disputed_by:
            sentence += f" (This is disputed: see {_link_id(e.disputed_by, Contradiction)}.)"
        paragraphs.setdefault(e.when.date[:4], []).append(sentence)
        sources.append(f"{number}. {_cite(e, paths)}")
        previous = e
    intro = (f"The story of {name}, told from {len(told)} dated statements in {docs} "
             f"document{'s' if docs != 1 else ''} ({_when(told[0])} to {_when(told[-1])}). "
             f"Subject: {_link(subject)}; the [timeline](../timelines/{stable_id('tml', subject.id)}.md) "
             f"lists every dated event.")
    title = f"{name[0].upper()}{name[1:]}: a narrative, {_span_text(told)}"
    body = [f"# {title}", "", intro, ""]
    body += [" ".join(sentences) + "\n" for sentences in paragraphs.values()]
    body += ["## Sources", "", *sources]
    return Narrative(
        id=stable_id("nar", subject.id), title=title,
        description=f"How {name} developed from {_when(told[0])} to {_when(told[-1])}, "
                    f"in {len(told)} dated, cited statements.",
        subject=subject.id, body="\n".join(body) + "\n",
        statements=[CitedStatement(text=e.text, object_id=e.claim_id, span=e.span, date=e.when.date) for e in told],
        **_provenance(told, cycle),
    )


#: Function words that start a sentence but not a name: lower-cased when a date phrase goes in front.
_LOWER_FIRST = {"the", "a", "an", "it", "its", "this", "that", "these", "those", "they", "their", "he", "she", "his",
                "her", "we", "our", "there", "each", "every", "all", "most", "some", "one", "two", "three"}


_SUBORDINATE = re.compile(r"\b(after|before|when|while|since|until|because|although|though|which|who|whom|whose|"
                          r"where|that|and|but|or|if|once|as)\b", re.I)


def _sentence(e: _Event, previous: _Event | None) -> str:
    """The claim as a sentence of the story: its date moved to the front ('Lumen DB 1.0 was released on
    March 14, 2019.' -> 'On 14 March 2019, Lumen DB 1.0 was released.') when that can be done safely,
    otherwise the claim as it stands (its date is in it)."""
    text = e.text.strip()
    if not text.endswith((".", "!")):
        text += "."
    start, stop = e.when.start, e.when.stop
    before, after = text[:start], text[stop:]
    if re.fullmatch(r"\s*(?:in|on|during|by|around|from|between|since|until)?\s*", before, re.I) and after.startswith(","):
        return text  # it already opens with its date: "In February 2018, Tagus Ventures led ..."
    lead = re.search(r"(?:,\s*|\s+)(?:in|on|during)\s+(?:the\s+)?$", before, re.I)
    if lead is None or not re.fullmatch(r"\s*[.!]", after) or "," in text[lead.end():start]:
        return text
    core = before[:lead.start()].rstrip()
    if len(core.split()) < 3 or _SUBORDINATE.search(core):
        return text  # 'X proposed it after she joined in 2022': the date belongs to the clause, keep it there
    first, _, rest = core.partition(" ")
    if first.lower() in _LOWER_FIRST:
        core = f"{first.lower()} {rest}"
    same = previous is not None and (previous.when.date, previous.when.end) == (e.when.date, e.when.end)
    opener = ("The same year" if len(e.when.date) == 4 and not e.when.end else f"Also {_on(e)}") if same else _on(e)
    return f"{opener[0].upper()}{opener[1:]}, {core}{after.strip()}"


def _on(e: _Event) -> str:
    """The date as the opening words of a sentence: 'on 14 March 2019', 'in June 2018', 'around 1870'."""
    d = e.when
    shown = dates.display(d.date, d.end, d.approximate)
    if d.end and not d.approximate:
        return f"from {dates.display(d.date)} to {dates.display(d.end)}"
    if d.approximate:
        return f"in {shown}" if not shown.startswith("c. ") else f"around {shown[3:]}"
    return f"on {shown}" if d.date.count("-") == 2 else f"in {shown}"


def _when(e: _Event) -> str:
    return dates.display(e.when.date, e.when.end, e.when.approximate)


def _where(e: _Event, paths: dict[str, str]) -> str:
    path = next((paths[s] for s in e.source_ids if s in paths), "")
    if not path:
        return ""
    line = f", line {e.span.line_start}" if e.span is not None and e.span.source_id in paths else ""
    return f"*{path}*{line}"


def _cite(e: _Event, paths: dict[str, str]) -> str:
    links = ", ".join(f"[{c}](../../{_claim_path(c)})" for c in [e.claim_id, *e.also])
    where = _where(e, paths)
    return f"{links}; {where}" if where else links


def _dispute_note(e: _Event) -> str:
    return f" **Disputed**: {_link_id(e.disputed_by, Contradiction)}" if e.disputed_by else ""


def _claim_path(claim_id: str) -> str:
    return f"layer-{Claim.layer}/{Claim.folder}/{claim_id}.md"


def _link(obj: MemoryObject) -> str:
    """A markdown link to `obj`'s file from a layer-5 file (which sits two folders below the bank root)."""
    return f"[{_md(obj.title)}](../../{obj.path()})"


def _link_id(object_id: str, model: type[MemoryObject]) -> str:
    return f"[{object_id}](../../layer-{model.layer}/{model.folder}/{object_id}.md)"


def _md(text: str) -> str:
    return text.replace("[", "(").replace("]", ")").replace("\n", " ")


def _edges(obj: MemoryObject, subject_id: str | None) -> list[Edge]:
    """`references` to the subject and `derives_from` to what the object is built from (capped)."""
    edges = [Edge.between(obj.id, subject_id, EdgeType.REFERENCES)] if subject_id else []
    tails = [d for d in obj.derived_from if not d.startswith("src-")][:MAX_EDGES]
    return edges + [Edge.between(obj.id, d, EdgeType.DERIVES_FROM) for d in tails]


def _keep_created(bank: Bank, objects: list[MemoryObject]) -> None:
    """A rebuilt object keeps the creation time of the first build (only `modified` moves)."""
    where, params = id_filter("id", [o.id for o in objects])
    with bank.reading() as db:
        created = dict(db.sql(f"SELECT id, created FROM objects WHERE {where}", params))
    for obj in objects:
        if obj.id in created:
            obj.created = created[obj.id]


def _drop_stale_edges(bank: Bank, objects: list[MemoryObject], edges: list[Edge]) -> None:
    """Edges from an earlier build of these objects that this build no longer has (events changed)."""
    keep = {e.id for e in edges}
    with bank.reading() as db:
        rows = looked_up_rows(db, "edges", "head", [o.id for o in objects], "head, tail, id", "head, tail, id")
    bank.remove_edges([tuple(r) for r in rows if r[2] not in keep])


def retire_stale(bank: Bank, cycle: Cycle, touched: set[str], built: set[str]) -> int:
    """Timelines and narratives whose subject is gone (merged, split, superseded) or that a touched
    subject no longer supports are superseded, never deleted; a merged subject's old timeline points
    (`evolves_into`) to its canonical object's."""
    with bank.reading() as db:
        rows = db.sql(
            """
            SELECT t.id, s.status, json_extract_string(s.data, '$.merged_into') FROM objects t
            LEFT JOIN objects s ON s.id = json_extract_string(t.data, '$.subject')
            WHERE t.type IN ('timeline', 'narrative') AND t.status = 'active'
              AND (s.id IS NULL OR s.status <> 'active' OR s.id IN (SELECT unnest(?)))
            """,
            [sorted(touched)],
        )
        stale = {r[0]: r for r in rows if r[0] not in built}
        objects = db.get_objects(sorted(stale))
        where, params = id_filter("id", [stable_id(o.id[:3], r[2]) for o in objects.values()
                                         for r in [stale[o.id]] if r[2]])
        existing = {r[0] for r in db.sql(f"SELECT id FROM objects WHERE {where}", params)}
    edges = []
    for obj in objects.values():
        _, status, merged_into = stale[obj.id]
        if status == "active":
            reason = f"fewer than {MIN_EVENTS if obj.type.value == 'timeline' else MIN_STATEMENTS} dated claims in {cycle.key}"
        else:
            reason = f"its subject is {status or 'gone'} ({cycle.key})"
        obj.status, obj.status_reason = Status.SUPERSEDED, reason
        successor = stable_id(obj.id[:3], merged_into) if merged_into else None
        if successor in existing:
            edges.append(Edge.between(obj.id, successor, EdgeType.EVOLVES_INTO))
    if objects:
        with bank.writing():  # one write session: each costs more the larger the bank
            bank.update_objects(list(objects.values()))
            bank.add_edges(edges, run_id=cycle.run_id)
    return len(objects)


# ---- the evolution record -----------------------------------------------------------------------

def evolution_record(bank: Bank, cycle: Cycle, rebuilt: _Rebuilt, retired: int) -> tuple[Evolution | None, dict[str, int]]:
    """What this cycle changed, as a changelog with links: everything is read back from the bank (the
    merges table, run ids, status reasons), so the record is the same however often it is rebuilt."""
    run, tag = cycle.run_id, cycle.tag
    with bank.reading() as db:
        since = db.sql("SELECT max(finished) FROM cycles WHERE number < ?", [cycle.number])[0][0]
        where, params = id_filter("id", cycle.source_ids)
        documents = db.sql(f"SELECT id, path FROM sources WHERE {where} ORDER BY path", params)
        where, params = id_filter("source", cycle.source_ids)  # a layer-1 object's one source
        extracted = dict(db.sql(f"SELECT type, count(*) FROM objects WHERE layer = 1 AND {where} GROUP BY type",
                                params)) if cycle.source_ids else {}
        # a first cycle over a large bank merges hundreds of thousands of members: the groups are counted
        # in SQL and only the objects the record shows (MAX_LISTED per section) are read
        groups = db.sql("SELECT m.survivor, o.type, o.title, count(*) FROM merges m LEFT JOIN objects o "
                        "ON o.id = m.survivor WHERE m.cycle = ? AND NOT m.undone GROUP BY ALL ORDER BY m.survivor",
                        [cycle.key])
        # entities before concepts, the largest groups first: what a reader most wants to check
        groups.sort(key=lambda g: (g[1] != "canonical_entity", -g[3], (g[2] or g[0]).lower()))
        shown_groups = [g[0] for g in groups[:MAX_LISTED]]
        member_names = db.sql(
            "SELECT m.survivor, coalesce(o.title, m.member), count(*), min(m.member) FROM merges m "
            "LEFT JOIN objects o ON o.id = m.member WHERE m.cycle = ? AND NOT m.undone "
            "AND m.survivor IN (SELECT unnest(?)) GROUP BY ALL", [cycle.key, shown_groups])
        names_of: dict[str, list[tuple[str, int, str]]] = defaultdict(list)
        for survivor, title, n, first in member_names:
            names_of[survivor].append((title, n, first))
        # a split object keeps its evolves_into edges; its status reason names the cycle that split it
        splits = db.sql(
            "SELECT e.head, e.tail FROM edges e JOIN objects o ON o.id = e.head WHERE e.edge_type = 'evolves_into' "
            "AND o.status = 'split' AND json_extract_string(o.data, '$.status_reason') LIKE ? ORDER BY e.head, e.tail",
            [f"% in {cycle.key}"])
        new_contradictions = _ids(db, "type = 'contradiction' AND run_id = ?", [run])
        changed_contradictions = _ids(db, "type = 'contradiction' AND run_id IS DISTINCT FROM ? "
                                      "AND modified > coalesce(?, TIMESTAMPTZ '-infinity') "
                                      "AND json_extract_string(data, '$.resolution') <> 'open'", [run, since])
        layer4 = {t: _ids(db, "type = ? AND status = 'active' AND (run_id = ? OR list_contains(tags, ?))", [t, run, tag])
                  for t in ("abstraction", "synthesis", "discovered_relationship")}
        superseded = _ids(db, "status = 'superseded' AND type IN ('cluster', 'community', 'insight', 'taxonomy') "
                          "AND json_extract_string(data, '$.status_reason') = ?", [f"not found again by {cycle.key}"])
        # reinforcing an object rewrites it (`modified` >= `reinforced_at`): the column filters before the JSON
        reinforced = _ids(db, "modified > coalesce(?, TIMESTAMPTZ '-infinity') AND "
                          "TRY_CAST(json_extract_string(data, '$.reinforced_at') AS TIMESTAMPTZ) "
                          "> coalesce(?, TIMESTAMPTZ '-infinity')", [since, since])
        decayed = _ids(db, "status = 'deprecated' AND json_extract_string(data, '$.status_reason') ILIKE '%confidence%' "
                       "AND modified > coalesce(?, TIMESTAMPTZ '-infinity')", [since])
        split_heads = sorted({h for h, _ in splits})
        shown_heads = set(split_heads[:MAX_LISTED])
        listed = {*shown_groups, *(first for ns in names_of.values() for _, _, first in _most_named(ns)),
                  *shown_heads, *(t for h, t in splits if h in shown_heads)}
        for ids in (new_contradictions, changed_contradictions, *layer4.values(), superseded, reinforced, decayed):
            listed |= set(ids[:MAX_LISTED])
        objects = db.get_objects(sorted(listed))
    changes = {
        "documents": len(documents), "claims_extracted": extracted.get("claim", 0),
        "merge_groups": len(groups), "merged_members": sum(g[3] for g in groups),
        "splits": len(split_heads), "contradictions_new": len(new_contradictions),
        "contradictions_changed": len(changed_contradictions), "abstractions_new": len(layer4["abstraction"]),
        "syntheses_new": len(layer4["synthesis"]), "discovered_relationships_new": len(layer4["discovered_relationship"]),
        "groupings_superseded": len(superseded), "confidence_reinforced": len(reinforced),
        "deprecated_by_decay": len(decayed), "timelines": len(rebuilt.timeline_ids),
        "narratives": len(rebuilt.narrative_ids),
        "timelines_superseded": retired,
    }
    derived = [*sorted(g[0] for g in groups), *split_heads, *new_contradictions, *changed_contradictions,
               *(i for ids in layer4.values() for i in ids), *superseded, *decayed,
               *rebuilt.timeline_ids, *rebuilt.narrative_ids][:500] or [d for d, _ in documents]
    if not derived:
        return None, changes
    get = objects.get
    body = [f"# {cycle.key}: what changed", "",
            _headline(cycle, changes, extracted), "",
            "| change | count |", "|---|---|", *(f"| {k.replace('_', ' ')} | {v} |" for k, v in changes.items()), ""]
    body += _section("Documents consumed", [f"- *{path}* (`{sid}`)" for sid, path in documents])
    body += _section(f"Merges ({changes['merge_groups']} canonical objects, {changes['merged_members']} members)",
                     [f"- {_obj_link(get(s), s)} ← {_member_names(names_of[s], objects)}" for s in shown_groups],
                     total=len(groups))
    split_groups: dict[str, list[str]] = defaultdict(list)
    for head, tail in splits:
        split_groups[head].append(tail)
    body += _section("Splits", [f"- {_obj_link(get(h), h)} → {', '.join(_obj_link(get(t), t) for t in ts)}"
                                for h, ts in split_groups.items()])
    body += _section("New contradictions", [f"- {_obj_link(get(c), c)}: {_resolution(get(c))}"
                                            for c in new_contradictions])
    body += _section("Contradictions that changed", [f"- {_obj_link(get(c), c)}: now {_resolution(get(c))}"
                                                     for c in changed_contradictions])
    for kind, label in (("abstraction", "New abstractions"), ("synthesis", "New syntheses"),
                        ("discovered_relationship", "New discovered relationships")):
        body += _section(label, [f"- {_obj_link(get(i), i)}" for i in layer4[kind]])
    body += _section("Groupings superseded", [f"- {_obj_link(get(i), i)}" for i in superseded])
    body += _section("Confidence", [
        *(f"- reinforced by new evidence: {_obj_link(get(i), i)}" for i in reinforced),
        *(f"- deprecated as its confidence decayed: {_obj_link(get(i), i)}" for i in decayed)])
    body += _section("Timelines and narratives of the touched subjects (rewritten where they changed)",
                     [f"- {_obj_link(o, o.id)}" for o in [*rebuilt.timelines, *rebuilt.narratives]],
                     total=len(rebuilt.timeline_ids) + len(rebuilt.narrative_ids))
    record = Evolution(
        id=stable_id("evo", cycle.key), title=f"What changed in {cycle.key}", cycle=cycle.key, changes=changes,
        description=_headline(cycle, changes, extracted), body="\n".join(body),
        derived_from=derived, source_ids=sorted({*cycle.source_ids, *(s for o in objects.values()
                                                                       for s in o.source_ids)}),
        run_id=run, tags=[tag], confidence=1.0,
    )
    return record, changes


def _most_named(names: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
    """A merge group's member names (title, members so named, first such member), most used first."""
    return sorted(names, key=lambda n: (-n[1], n[0].lower(), n[2]))[:8]


def _member_names(names: list[tuple[str, int, str]], objects: dict[str, MemoryObject]) -> str:
    """'[Lumen Labs](…) ×14, [LL](…), [Lumen Laboratories](…)': each name once, linked to its first member."""
    shown = [f"{_obj_link(objects.get(first), first)}{f' ×{n}' if n > 1 else ''}" for _, n, first in _most_named(names)]
    return ", ".join(shown) + (f" and {len(names) - 8} other names" if len(names) > 8 else "")


def _ids(db, where: str, params: list) -> list[str]:
    return [r[0] for r in db.sql(f"SELECT id FROM objects WHERE {where} ORDER BY id", params)]


_PLURALS = {"entity": "entities", "canonical_entity": "canonical entities", "canonical_concept": "canonical concepts",
            "synthesis": "syntheses"}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun.replace('_', ' ') if n == 1 else _PLURALS.get(noun, noun.replace('_', ' ') + 's')}"


def _and(parts: list[str]) -> str:
    return f"{', '.join(parts[:-1])} and {parts[-1]}" if len(parts) > 1 else "".join(parts)


def _headline(cycle: Cycle, changes: dict[str, int], extracted: dict[str, int]) -> str:
    """One paragraph a person reads first: what came in and what the cycle did with it."""
    found = _and([_count(n, t) for t, n in sorted(extracted.items())])
    text = f"Cycle {cycle.number} consumed {_count(changes['documents'], 'document')}"
    text += f", from which {found} were extracted." if found else "."
    did = [f"merged {changes['merged_members']} objects into {_count(changes['merge_groups'], 'canonical object')}"
           if changes["merge_groups"] else "",
           f"split {_count(changes['splits'], 'concept')} into senses" if changes["splits"] else "",
           f"found {_count(changes['contradictions_new'], 'new contradiction')}" if changes["contradictions_new"] else "",
           f"saw {_count(changes['contradictions_changed'], 'contradiction')} change" if changes["contradictions_changed"]
           else "",
           f"made {_count(changes['syntheses_new'], 'synthesis')} and "
           f"{_count(changes['abstractions_new'], 'abstraction')}"
           if changes["syntheses_new"] or changes["abstractions_new"] else "",
           f"superseded {_count(changes['groupings_superseded'], 'grouping')}" if changes["groupings_superseded"] else "",
           f"brought {_count(changes['timelines'], 'timeline')} and {_count(changes['narratives'], 'narrative')} "
           "up to date"]
    return f"{text} It {_and([d for d in did if d])}."


def _section(title: str, lines: list[str], total: int | None = None) -> list[str]:
    """A heading and at most MAX_LISTED lines; `total` counts entries whose lines were not made."""
    total = len(lines) if total is None else total
    if not total:
        return []
    shown = lines[:MAX_LISTED]
    more = [f"- … and {total - MAX_LISTED} more"] if total > MAX_LISTED else []
    return [f"## {title}", "", *shown, *more, ""]


def _obj_link(obj: MemoryObject | None, object_id: str) -> str:
    return f"[{_md(obj.title)}](../../{obj.path()})" if obj is not None else f"`{object_id}`"


def _resolution(obj: MemoryObject | None) -> str:
    return getattr(obj, "resolution", "open") if obj is not None else "unknown"
