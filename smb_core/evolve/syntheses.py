"""Layer-4 syntheses: claims from at least three documents about one canonical entity or concept,
integrated. Without an LLM: representative, non-redundant claims (MMR over claim vectors), grouped by
sub-topic, each quoted with its citation. With an LLM the statements are rewritten, and every citation
is checked to exist and to support its statement before the synthesis is stored. Rebuilt for the
themes this cycle's documents touched (at most `MAX_SYNTHESES`; a cycle with global passes fills up
with the best-covered themes); ids are stable.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from smb_core.bank import Bank
from smb_core.evolve.abstractions import MIN_DOCUMENTS, Thing
from smb_core.evolve.cycle import Cycle
from smb_core.llm import LLMError, OllamaClient
from smb_core.model import CitedStatement, Claim, Edge, EdgeType, Synthesis, stable_id
from smb_core.stores.metadata import id_filter, naming_any_source

log = logging.getLogger(__name__)

MAX_SYNTHESES = 50
MAX_STATEMENTS = 10
CANDIDATE_CLAIMS = 200  # per theme, before MMR
MMR_LAMBDA = 0.7
NEAR_DUPLICATE = 0.92
#: A cited claim supports an LLM statement when their vectors or their content words are this close.
SUPPORT_COSINE = 0.6
SUPPORT_OVERLAP = 0.5
_BAD_START = re.compile(r"^(it|he|she|they|this|these|that|those|its|his|her|their|we|there|then|such|both)\b",
                        re.IGNORECASE)
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = {"the", "a", "an", "of", "in", "on", "at", "to", "and", "or", "for", "by", "with", "from", "as", "is",
              "was", "are", "were", "be", "been", "it", "its", "that", "this", "which", "who"}


#: The objects a theme can be: active canonical entities and concepts.
_CANONICAL = "status = 'active' AND type IN ('canonical_entity', 'canonical_concept')"
#: Claims referencing the canonical objects in a `nodes(id, members)` CTE. A canonical object's `members`
#: are the layer-1 objects whose `merged_into` points to it, so reading them replaces
#: `abstractions.REFS`, which scans every entity and concept in the bank to build that mapping.
_NODE_REFS = """
    canon AS (SELECT id AS node, unnest(members) AS member FROM nodes UNION ALL SELECT id, id FROM nodes),
    refs AS (
        SELECT DISTINCT e.head AS claim, c.node FROM edges e JOIN canon c ON c.member = e.tail
        WHERE e.edge_type = 'references'
    )
"""


# ---- syntheses --------------------------------------------------------------------------------


@dataclass
class Candidate:
    id: str
    text: str
    subject: str
    source: str


class LLMStatement(BaseModel):
    text: str
    cites: list[str] = Field(default_factory=list)


class LLMSynthesis(BaseModel):
    """What the LLM is asked for: integrated statements, each citing the claim ids it rests on."""

    statements: list[LLMStatement] = Field(default_factory=list)


SYSTEM_PROMPT = """You integrate claims from several documents about one theme into a short synthesis.
Use only the numbered claims given. Write 3 to 8 statements; each may combine claims that agree, and
must list in "cites" the ids (like clm-1a2b) of every claim it rests on. Do not add facts. Answer with JSON."""


def build_syntheses(bank: Bank, cycle: Cycle) -> tuple[list[Synthesis], list[Edge]]:
    """Syntheses for the themes this cycle touched first, then (with global passes) the best-covered
    ones, at most MAX_SYNTHESES."""
    themes = _themes(bank, cycle)
    candidates = _theme_claims(bank, [t[0] for t in themes])
    vectors = bank.vectors_of(sorted({c.id for cs in candidates.values() for c in cs}))
    client = OllamaClient(bank.settings) if bank.settings.llm == "ollama" else None
    return _synthesise(bank, cycle, themes, candidates, vectors, client)


@dataclass
class _Evidence:
    """What a cycle's syntheses cite, read in one pass: a read per theme scanned the edges once per
    theme, a cost that grew with the bank."""

    claims: dict[str, Claim]
    paths: dict[str, str]  # layer-0 id -> corpus path
    references: dict[str, list[tuple[str, str, str, str]]]  # claim -> (node, title, type, entity kind)


def _evidence(bank: Bank, claim_ids: list[str]) -> _Evidence:
    with bank.reading() as db:
        claims = {i: c for i, c in db.get_objects(claim_ids).items() if isinstance(c, Claim)}
        paths = {d.id: d.path for d in db.sources_by_ids(sorted({s for c in claims.values() for s in c.source_ids}))}
        references = defaultdict(list)
        for claim, *node in _references(db, sorted(claims)):
            references[claim].append(tuple(node))
    return _Evidence(claims, paths, references)


def _synthesise(bank: Bank, cycle: Cycle, themes: list[tuple[str, str, list[str]]],
                candidates: dict[str, list[Candidate]], vectors: dict[str, np.ndarray],
                client: OllamaClient | None) -> tuple[list[Synthesis], list[Edge]]:
    """One synthesis per theme, up to MAX_SYNTHESES (LLM-written where the LLM answers well)."""
    planned, used = [], set()
    for theme, title, aliases in themes:
        if len(planned) >= MAX_SYNTHESES:
            break
        chosen = _select(candidates.get(theme, []), vectors, [title, *aliases])
        if len({c.source for c in chosen}) < MIN_DOCUMENTS:
            continue
        if sum(c.id in used for c in chosen) > len(chosen) / 2:
            continue  # mostly the claims of a synthesis already written (e.g. an alias of its theme)
        used.update(c.id for c in chosen)
        planned.append((theme, title, chosen))
    evidence = _evidence(bank, sorted(used))
    out, edges = [], []
    try:
        for theme, title, chosen in planned:
            synthesis = None
            if client is not None:
                synthesis, client = _llm_synthesis(bank, cycle, client, theme, title, chosen, vectors, evidence)
            synthesis = synthesis or _extractive(cycle, theme, title, chosen, evidence)
            out.append(synthesis)
            edges.append(Edge.between(synthesis.id, theme, EdgeType.DERIVES_FROM))
            edges += [Edge.between(synthesis.id, c, EdgeType.REFERENCES) for c in synthesis.derived_from[1:]]
    finally:
        if client is not None:
            client.close()
    return out, edges


def _themes(bank: Bank, cycle: Cycle) -> list[tuple[str, str, list[str]]]:
    """Canonical entities and concepts that claims from at least three documents reference (no dates,
    numbers or single common nouns), touched by this cycle first, then (in a cycle with global passes)
    the others by how many documents.

    Only the touched canonical objects are read (all of them with global passes), and their fields are
    taken out of the JSON once per object: a hub's data holds thousands of member ids, and extracting
    them once per joined claim made this query grow with the bank (1.5 s at 6,000 documents)."""
    with bank.reading() as db:
        rows = db.sql(f"""
            WITH touched AS (
                SELECT id FROM objects WHERE {naming_any_source(_CANONICAL, "$sources")}
            ), nodes AS (
                SELECT id, title, type, coalesce(json_extract_string(data, '$.entity_kind'), '') AS kind,
                       coalesce(CAST(json_extract(data, '$.aliases') AS VARCHAR[]), []) AS aliases,
                       coalesce(CAST(json_extract(data, '$.members') AS VARCHAR[]), []) AS members,
                       id IN (SELECT id FROM touched) AS touched
                FROM objects WHERE {_CANONICAL} AND ($all OR id IN (SELECT id FROM touched))
            ), {_NODE_REFS}
            SELECT n.id, n.title, n.type, n.kind, n.aliases, count(DISTINCT cl.source_ids[1]) AS docs, n.touched
            FROM refs r JOIN objects cl ON cl.id = r.claim AND cl.type = 'claim' AND cl.status = 'active'
            JOIN nodes n ON n.id = r.node
            GROUP BY ALL HAVING docs >= $min ORDER BY n.touched DESC, docs DESC, n.id
        """, {"sources": cycle.source_ids, "all": cycle.global_passes, "min": MIN_DOCUMENTS})
    themes = [(i, t, list(a)) for i, t, ty, kind, a, _, _ in rows if Thing(i, t, ty, kind, []).named]
    return themes[: MAX_SYNTHESES * 3]


def _theme_claims(bank: Bank, themes: list[str]) -> dict[str, list[Candidate]]:
    """Up to CANDIDATE_CLAIMS claims per theme that read on their own (no leading pronoun, no list intro)."""
    if not themes:
        return {}
    where, params = id_filter("id", themes)
    with bank.reading() as db:
        rows = db.sql(f"""
            WITH nodes AS (
                SELECT id, coalesce(CAST(json_extract(data, '$.members') AS VARCHAR[]), []) AS members
                FROM objects WHERE {where}
            ), {_NODE_REFS}, ranked AS (
                SELECT r.node, cl.id, cl.text, coalesce(json_extract_string(cl.data, '$.subject'), '') AS subject,
                       cl.source_ids[1] AS source,
                       row_number() OVER (PARTITION BY r.node ORDER BY cl.confidence DESC, cl.id) AS rank
                FROM refs r JOIN objects cl ON cl.id = r.claim AND cl.type = 'claim' AND cl.status = 'active'
                WHERE length(cl.text) BETWEEN 25 AND 400
                  AND NOT regexp_matches(cl.text, ':\\s*$')
                  AND NOT regexp_matches(cl.text, ?, 'i')
            )
            SELECT node, id, text, subject, source FROM ranked WHERE rank <= ? ORDER BY node, id
        """, [*params, _BAD_START.pattern, CANDIDATE_CLAIMS])
    out: dict[str, list[Candidate]] = defaultdict(list)
    for node, *fields in rows:
        out[node].append(Candidate(*fields))
    return out


def _select(candidates: list[Candidate], vectors: dict[str, np.ndarray], names: list[str]) -> list[Candidate]:
    """Maximal marginal relevance: central to the theme, unlike each other, spread over documents."""
    candidates = [c for c in candidates if c.id in vectors]
    if not candidates:
        return []
    matrix = np.stack([vectors[c.id] for c in candidates])
    matrix = matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
    centroid = matrix.mean(axis=0)
    relevance = matrix @ (centroid / max(np.linalg.norm(centroid), 1e-12))
    lowered = [n.lower() for n in names if n]
    relevance += np.array([0.1 if any(n in c.subject.lower() for n in lowered) else 0.0 for c in candidates])
    # each candidate's similarity to the closest one chosen so far, updated a column at a time: a pair
    # loop in Python took 0.6 s a cycle once themes had their 200 candidates
    closest = np.zeros(len(candidates))
    penalty = np.zeros(len(candidates))  # 0.05 for each claim already chosen from the same document
    sources = np.array([c.source for c in candidates], dtype=object)
    chosen: list[int] = []
    while len(chosen) < min(MAX_STATEMENTS, len(candidates)):
        score = MMR_LAMBDA * relevance - (1 - MMR_LAMBDA) * closest - penalty
        score[chosen] = -np.inf
        if chosen:
            score[closest >= NEAR_DUPLICATE] = -np.inf
        best = int(np.argmax(score))
        if score[best] == -np.inf:
            break
        column = matrix @ matrix[best]
        closest = column if not chosen else np.maximum(closest, column)
        chosen.append(best)
        penalty[sources == sources[best]] += 0.05
    return [candidates[i] for i in chosen]


def _extractive(cycle: Cycle, theme: str, title: str, chosen: list[Candidate], evidence: _Evidence) -> Synthesis:
    claims = evidence.claims
    items = [(CitedStatement(text=claims[c.id].statement, object_id=c.id,
                             span=claims[c.id].source_spans[0] if claims[c.id].source_spans else None), [c.id])
             for c in chosen if c.id in claims]
    return _synthesis(cycle, theme, title, items, "extractive", evidence)


def _synthesis(cycle: Cycle, theme: str, title: str, items: list[tuple[CitedStatement, list[str]]], method: str,
               evidence: _Evidence) -> Synthesis:
    """The synthesis object: (statement, cited claim ids) grouped by the other thing they share
    (a sub-topic), every statement followed by its citations and where in which document it comes from."""
    cited = sorted({c for _, cites in items for c in cites})
    sources = {i: evidence.claims[i].source_ids for i in cited if i in evidence.claims}
    paths = evidence.paths
    related = [(claim, *node) for claim in cited for node in evidence.references.get(claim, []) if node[0] != theme]
    named = {node: t for _, node, t, ty, kind in related if Thing(node, t, ty, kind, []).named}
    topics_of: dict[str, set[str]] = defaultdict(set)
    for claim, node, *_ in related:
        if node in named:
            topics_of[claim].add(node)
    groups = _sub_topics(items, topics_of)
    documents = sorted({src for ss in sources.values() for src in ss})
    how = (", rewritten by an LLM; every citation was checked against the claim it names." if method == "llm"
           else ", each quoted from the claim it cites.")
    lines = [f"What {len(documents)} documents say about **{title}**: {len(items)} statements chosen to be "
             f"central to the theme and not to repeat one another{how}"]
    for topic, members in groups:
        lines += ["", f"## {title} and {named[topic]}" if topic else f"## More on {title}", ""]
        for statement, cites in members:
            refs = " ".join(f"[{c}](../../layer-1/claims/{c}.md)" for c in cites)
            span = statement.span
            where = f" ({paths.get(span.source_id, span.source_id)}, line {span.line_start})" if span else ""
            lines.append(f"- {statement.text} {refs}{where}")
    lines += ["", "## Sources", ""] + sorted(f"- {paths.get(d, d)} (`{d}`)" for d in documents)
    ordered = [statement for _, members in groups for statement, _ in members]
    preview = " ".join(s.text for s in ordered[:2])
    return Synthesis(
        id=stable_id("syn", theme), title=f"Synthesis: {title}", theme=theme, method=method, statements=ordered,
        description=f"What {len(documents)} documents say about {title}. {preview}"[:600],
        derived_from=[theme, *cited], source_ids=documents, confidence=0.6 if method == "extractive" else 0.55,
        run_id=cycle.run_id, tags=[cycle.tag], body="\n".join(lines) + "\n",
    )


def _references(db, claims: list[str]) -> list[tuple[str, str, str, str, str]]:
    """(claim, node, title, type, entity kind) for what each claim references, merged members mapped to
    their canonical object. `claims` are active claim ids (REFS checks that; callers pass only those).
    Index lookups by id: the bank-wide REFS join cost a quarter second per call."""
    if not claims:
        return []
    where, params = id_filter("head", claims)
    # the type is filtered here: with it in SQL, DuckDB scans the edges instead of using their index
    refs = sorted({(head, tail) for head, tail, kind in db.sql(f"SELECT head, tail, edge_type FROM edges WHERE {where}",
                                                               params) if kind == "references"})
    where, params = id_filter("id", sorted({tail for _, tail in refs}))
    node_of = dict(db.sql(
        f"SELECT id, coalesce(json_extract_string(data, '$.merged_into'), id) FROM objects WHERE {where} "
        "AND status IN ('active', 'merged') AND type IN ('entity', 'concept', 'canonical_entity', 'canonical_concept')",
        params)) if refs else {}
    where, params = id_filter("id", sorted(set(node_of.values())))
    nodes = {r[0]: r[1:] for r in db.sql(
        f"SELECT id, title, type, coalesce(json_extract_string(data, '$.entity_kind'), '') FROM objects WHERE {where}",
        params)} if node_of else {}
    pairs = sorted({(claim, node_of[tail]) for claim, tail in refs if tail in node_of})
    return [(claim, node, *nodes[node]) for claim, node in pairs if node in nodes]


def _sub_topics(items: list[tuple[CitedStatement, list[str]]], topics_of: dict[str, set[str]]):
    """Greedy grouping: the thing named by the most remaining statements heads the next group (two at
    least); what is left goes under 'More on'. Within a group, dated statements come in date order."""
    def year(item: tuple[CitedStatement, list[str]]) -> str:
        match = _YEAR.search(item[0].text)
        return match.group(0) if match else "9999"

    topics = [set().union(*(topics_of.get(c, set()) for c in cites)) for _, cites in items]
    remaining, groups = list(range(len(items))), []
    while True:
        counts = Counter(t for i in remaining for t in topics[i])
        top = sorted(counts.items(), key=lambda x: (-x[1], x[0]))
        if not top or top[0][1] < 2:
            break
        members = [i for i in remaining if top[0][0] in topics[i]]
        groups.append((top[0][0], sorted((items[i] for i in members), key=year)))
        remaining = [i for i in remaining if i not in members]
    if remaining:
        groups.append((None, sorted((items[i] for i in remaining), key=year)))
    return groups


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def _supports(statement: np.ndarray, claim: np.ndarray, statement_text: str, claim_text: str) -> bool:
    """A cited claim backs a statement when their meanings are close or they share most content words."""
    cosine = float(statement @ claim / max(np.linalg.norm(statement) * np.linalg.norm(claim), 1e-12))
    s, c = _words(statement_text), _words(claim_text)
    overlap = len(s & c) / max(min(len(s), len(c)), 1)
    return cosine >= SUPPORT_COSINE or overlap >= SUPPORT_OVERLAP


def _llm_synthesis(bank: Bank, cycle: Cycle, client: OllamaClient, theme: str, title: str,
                   chosen: list[Candidate], vectors: dict[str, np.ndarray], evidence: _Evidence
                   ) -> tuple[Synthesis | None, OllamaClient | None]:
    """An abstractive synthesis whose every statement cites input claims that support it, or None (the
    caller falls back to extractive). A failing server is not asked again this cycle (client None)."""
    by_id = {c.id: c for c in chosen}
    listing = "\n".join(f"[{c.id}] {c.text}" for c in chosen)
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"Theme: {title}\n\nClaims:\n{listing}"}]
    try:
        answer = client.chat_json(messages, LLMSynthesis)
    except LLMError as exc:
        log.warning("LLM synthesis failed for %s; using extractive syntheses this cycle: %s", theme, exc)
        client.close()
        return None, None
    drafts = [s for s in answer.statements if s.text.strip()]
    embedded = bank.embedder.embed([s.text for s in drafts]) if drafts else []
    claims = evidence.claims
    items = []
    for draft, vector in zip(drafts, embedded):
        backing = [c for c in dict.fromkeys(draft.cites) if c in by_id and c in vectors
                   and _supports(vector, vectors[c], draft.text, by_id[c].text)]
        if len(backing) < len(draft.cites):
            log.info("synthesis of %s: dropped citations %s of %r", theme,
                     sorted(set(draft.cites) - set(backing)), draft.text[:80])
        if backing:
            spans = claims[backing[0]].source_spans if backing[0] in claims else []
            items.append((CitedStatement(text=" ".join(draft.text.split()), object_id=backing[0],
                                         span=spans[0] if spans else None), backing))
    if len(items) < 2 or len({by_id[c].source for _, cites in items for c in cites}) < MIN_DOCUMENTS:
        return None, client
    return _synthesis(cycle, theme, title, items, "llm", evidence), client


def still_valid(bank: Bank) -> list[str]:
    """Ids of active syntheses whose theme is still an active object (kept although not rebuilt this cycle)."""
    with bank.reading() as db:
        return [r[0] for r in db.sql(
            "SELECT s.id FROM objects s JOIN objects t ON t.id = json_extract_string(s.data, '$.theme') "
            "AND t.status = 'active' WHERE s.type = 'synthesis' AND s.status = 'active'")]
