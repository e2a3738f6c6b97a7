"""Layer 4 for one cycle: abstractions, meta-concepts, syntheses and discovered relationships.

- Abstractions (level 1) generalise a community or a taxonomy group: what its members are, what
  links them (the relations most often stated between them) and which kinds occur among them.
  Level 2 and up join lower abstractions whose members overlap or are often named together.
- Meta-concepts are patterns over communities: a kind, or a relation, that recurs in several of them.
- Syntheses integrate claims from at least three documents about one canonical entity or concept:
  representative, non-redundant claims (MMR over claim vectors), grouped by sub-topic, each cited.
  With an LLM the statements are rewritten, and every citation is checked before it is stored.
- Discovered relationships: see `smb_core.evolve.discovery`.

Abstractions and meta-concepts are recomputed from the whole bank each cycle (they follow the
layer-2 groupings, themselves global); syntheses are rebuilt for themes this cycle's documents
touched (at most `MAX_SYNTHESES`). Ids are stable, so re-running a cycle upserts the same objects.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import networkx as nx
import numpy as np
from pydantic import BaseModel, Field

from smb_core.bank import Bank
from smb_core.evolve import communities, discovery
from smb_core.evolve.cycle import Cycle, PhaseResult, digest_line, retire_stale
from smb_core.llm import LLMError, OllamaClient
from smb_core.model import Abstraction, CitedStatement, Claim, Edge, EdgeType, Synthesis, stable_id

log = logging.getLogger(__name__)

MAX_SYNTHESES = 50
MAX_STATEMENTS = 10
MIN_DOCUMENTS = 3
CANDIDATE_CLAIMS = 200  # per theme, before MMR
MMR_LAMBDA = 0.7
NEAR_DUPLICATE = 0.92
MIN_KIND_MEMBERS = 3
#: Mean pairwise cosine of a taxonomy group's members: below it the shared head noun is a coincidence
#: of wording ("short history", "conversation history"), not a family.
MIN_KIND_COHERENCE = 0.45
MIN_CORE = 3
MAX_LEVEL = 3
LINK_SCORE = 0.3
META_MIN_COMMUNITIES = 3
#: Mean cosine between the typical claims of a recurring relation: below it the verb has several senses.
META_COHERENCE = 0.3
MAX_META = 10
#: A cited claim supports an LLM statement when their vectors or their content words are this close.
SUPPORT_COSINE = 0.6
SUPPORT_OVERLAP = 0.5
#: Relations too general to say anything about a group.
STOP_PREDICATES = {"be", "have", "do", "say", "call", "make", "use", "get", "include", "become", "take", "go",
                   "come", "give", "see", "keep", "show", "remain", "contain", "know", ""}
_BAD_START = re.compile(r"^(it|he|she|they|this|these|that|those|its|his|her|their|we|there|then|such|both)\b",
                        re.IGNORECASE)
_NUMERIC = re.compile(r"^[\d\s.,:/-]+$")
_YEAR = re.compile(r"\b(1[5-9]\d\d|20\d\d)\b")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = {"the", "a", "an", "of", "in", "on", "at", "to", "and", "or", "for", "by", "with", "from", "as", "is",
              "was", "are", "were", "be", "been", "it", "its", "that", "this", "which", "who"}

#: Claims referencing canonical things: merged members map to the canonical object they were merged into.
_REFS = """
    canon AS (
        SELECT id AS member, coalesce(json_extract_string(data, '$.merged_into'), id) AS node FROM objects
        WHERE status IN ('active', 'merged') AND type IN ('entity', 'concept', 'canonical_entity', 'canonical_concept')
    ),
    refs AS (
        SELECT DISTINCT e.head AS claim, c.node FROM edges e JOIN canon c ON c.member = e.tail
        JOIN objects cl ON cl.id = e.head AND cl.type = 'claim' AND cl.status = 'active'
        WHERE e.edge_type = 'references'
    )
"""
#: (group, member) pairs passed as two parallel lists (DuckDB unnests them side by side).
_GROUPS = "groups AS (SELECT unnest(?::VARCHAR[]) AS grp, unnest(?::VARCHAR[]) AS node)"


def run(bank: Bank, cycle: Cycle) -> PhaseResult:
    result = PhaseResult()
    graph = communities.cooccurrence_graph(bank)
    abstractions, edges = build_abstractions(bank, cycle, graph)
    metas, meta_edges = build_meta_concepts(bank, cycle)
    bank.write([*abstractions, *metas], [*edges, *meta_edges], run_id=cycle.run_id)
    retired = (retire_stale(bank, cycle, "abstraction", abstractions, kind="abstraction")
               + retire_stale(bank, cycle, "abstraction", metas, kind="meta_concept"))
    syntheses, syn_edges = build_syntheses(bank, cycle)
    bank.write(syntheses, syn_edges, run_id=cycle.run_id)
    retired += retire_stale(bank, cycle, "synthesis", [*syntheses, *_syntheses_still_valid(bank)])
    found = discovery.discover(bank, cycle, graph)
    bank.write(found, run_id=cycle.run_id)
    kept = {r.id for r in found}
    retired += retire_stale(bank, cycle, "discovered_relationship",
                            [*found, *(r for r in discovery.still_valid(bank) if r.id not in kept)])
    levels = Counter(a.level for a in abstractions)
    result.counts = {
        "abstractions": len(abstractions),
        **{f"abstractions_level_{level}": n for level, n in sorted(levels.items())},
        "meta_concepts": len(metas),
        "syntheses": len(syntheses),
        "syntheses_llm": sum(s.method == "llm" for s in syntheses),
        "synthesis_statements": sum(len(s.statements) for s in syntheses),
        "discovered_relationships": len(found),
        "layer4_superseded": retired,
    }
    result.summary += [digest_line(bank, f"abstraction (level {a.level})", a) for a in abstractions[:8]]
    result.summary += [digest_line(bank, "meta-concept", m) for m in metas[:5]]
    result.summary += [digest_line(bank, "synthesis", s) for s in syntheses[:10]]
    result.summary += [digest_line(bank, "discovered", r) for r in found[:10]]
    return result


# ---- shared helpers ---------------------------------------------------------------------------


@dataclass
class Thing:
    """An entity or concept as layer 4 needs it: a display name, its kind and where it is named."""

    id: str
    title: str
    type: str
    kind: str
    sources: list[str]

    @property
    def named(self) -> bool:
        """Worth naming in a generalisation: entities that are not dates or numbers, multi-word concepts."""
        if self.kind == "date" or _NUMERIC.match(self.title):
            return False
        return self.type in ("entity", "canonical_entity") or len(self.title.split()) > 1


def _things(bank: Bank, ids: list[str]) -> dict[str, Thing]:
    with bank.reading() as db:
        rows = db.sql("SELECT id, title, type, coalesce(json_extract_string(data, '$.entity_kind'), ''), source_ids "
                      "FROM objects WHERE id IN (SELECT unnest(?))", [sorted(set(ids))])
    return {r[0]: Thing(r[0], r[1], r[2], r[3], list(r[4] or [])) for r in rows}


def _join(names: list[str]) -> str:
    names = [n for n in names if n]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _relations(counter: Counter, top: int = 3) -> str:
    return _join([f"'{p}' ({n})" for p, n in counter.most_common(top)])


def _verb(predicate: str | None) -> str:
    """The head verb of an extracted predicate ("open in" -> "open"), or '' for a general one."""
    verb = (predicate or "").split()[0].lower() if (predicate or "").strip() else ""
    return "" if verb in STOP_PREDICATES else verb


def _sources_of(things: dict[str, Thing], ids) -> list[str]:
    return sorted({s for i in ids if i in things for s in things[i].sources})


def _group_claims(bank: Bank, groups: dict[str, list[str]]) -> dict[str, list[tuple[str, str, str]]]:
    """Claims referencing at least two members of each group: group id -> [(claim, verb, source)]."""
    pairs = [(g, m) for g, members in groups.items() for m in members]
    if not pairs:
        return {}
    with bank.reading() as db:
        rows = db.sql(f"""
            WITH {_GROUPS}, {_REFS}
            SELECT g.grp, r.claim, json_extract_string(cl.data, '$.predicate'), cl.source_ids[1]
            FROM refs r JOIN groups g ON g.node = r.node JOIN objects cl ON cl.id = r.claim
            GROUP BY ALL HAVING count(DISTINCT r.node) >= 2 ORDER BY 1, 2
        """, [[p[0] for p in pairs], [p[1] for p in pairs]])
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for group, claim, predicate, source in rows:
        out[group].append((claim, _verb(predicate), source))
    return out


# ---- abstractions -----------------------------------------------------------------------------


def build_abstractions(bank: Bank, cycle: Cycle, graph: nx.Graph) -> tuple[list[Abstraction], list[Edge]]:
    """Level-1 abstractions from communities and taxonomy groups, then higher levels while they link."""
    with bank.reading() as db:
        found = db.list_objects(type="community", status="active", limit=100_000)
        kinds = db.list_objects(type="taxonomy", status="active", limit=100_000)
    things = _things(bank, [m for g in found for m in g.members]
                     + [m for k in kinds for m in [*k.members, k.broader] if m])
    level1, edges = [], []
    for abstraction in [*_from_communities(bank, cycle, found, kinds, things),
                        *_from_taxonomy(bank, cycle, kinds, things)]:
        level1.append(abstraction)
        edges += [Edge.between(abstraction.id, m, EdgeType.CONTAINS) for m in abstraction.members]
        edges.append(Edge.between(abstraction.id, abstraction.derived_from[0], EdgeType.DERIVES_FROM))
    out, current = list(level1), level1
    leaves = {a.id: set(a.members) for a in level1}
    for level in range(2, MAX_LEVEL + 1):
        higher = _lift(cycle, current, leaves, graph, things, level)
        if not higher:
            break
        for abstraction in higher:
            leaves[abstraction.id] = set().union(*(leaves[c] for c in abstraction.members))
            edges += [Edge.between(abstraction.id, c, EdgeType.CONTAINS) for c in abstraction.members]
            edges += [Edge.between(abstraction.id, c, EdgeType.DERIVES_FROM) for c in abstraction.members]
        out += higher
        current = higher
    return out, edges


def _from_communities(bank: Bank, cycle: Cycle, found, kinds, things: dict[str, Thing]) -> list[Abstraction]:
    cores = {c.id: [m for m in c.members if m in things and things[m].named][:12] for c in found}
    inner = _group_claims(bank, {c.id: c.members for c in found})
    out = []
    for community in found:
        core = cores[community.id]
        claims = inner.get(community.id, [])
        documents = {s for _, _, s in claims}
        if len(core) < MIN_CORE or len(documents) < MIN_DOCUMENTS:
            continue
        lead = _distinct([things[m].title for m in core])[:4]
        verbs = Counter(v for _, v, _ in claims if v)
        verbs = Counter({v: n for v, n in verbs.items() if n >= 2})
        members = set(community.members)
        present = [(things[k.broader].title, [things[m].title for m in k.members if m in members])
                   for k in kinds if k.broader in things]
        present = sorted(((head, names) for head, names in present if len(names) >= 2), key=lambda x: -len(x[1]))
        description = (f"{_join(lead)} are named together in {len(documents)} documents, with "
                       f"{len(community.members) - len(lead)} other entities and concepts.")
        if verbs:
            description += f" The statements linking them are mostly about {_relations(verbs)}."
        if present:
            description += " Kinds among them: " + "; ".join(f"{head} ({_join(names[:4])})"
                                                            for head, names in present[:3]) + "."
        linked = f", linked mostly by {_join([repr(v) for v, _ in verbs.most_common(2)])}" if verbs else ""
        out.append(Abstraction(
            id=stable_id("abs", "community", *sorted(core)), title=f"Topic of {_join(lead)}{linked}",
            description=description, kind="abstraction", level=1, members=core,
            derived_from=[community.id, *core], source_ids=_sources_of(things, community.members),
            confidence=0.55, run_id=cycle.run_id, tags=[cycle.tag],
            body=_abstraction_body(description, core, things, community.id, "community"),
        ))
    return out


def _distinct(names: list[str]) -> list[str]:
    """Names that are not part of an earlier one ("Varga" after "Tomas Varga")."""
    out: list[str] = []
    for name in names:
        if not any(name.lower() in o.lower() or o.lower() in name.lower() for o in out):
            out.append(name)
    return out


def _from_taxonomy(bank: Bank, cycle: Cycle, kinds, things: dict[str, Thing]) -> list[Abstraction]:
    big = [k for k in kinds if len(k.members) >= MIN_KIND_MEMBERS and k.broader in things]
    vectors = bank.vectors.get_embeddings(sorted({m for k in big for m in k.members}))
    inner = _member_claims(bank, {k.id: k.members for k in big})
    out = []
    for kind in big:
        members = [m for m in kind.members if m in things and m in vectors]
        if len(members) < MIN_KIND_MEMBERS or _coherence([vectors[m] for m in members]) < MIN_KIND_COHERENCE:
            continue
        head, names = things[kind.broader].title, [things[m].title for m in members]
        # a relation counts as shared when claims about at least two different members state it
        verbs = Counter({v: len(ms) for v, ms in inner.get(kind.id, {}).items() if len(ms) >= 2})
        documents = _sources_of(things, members)
        description = f"{_cap(_join(names[:6]))} are all kinds of {head}, named in {len(documents)} documents."
        if verbs:
            description += f" Several of them are said to {_join([repr(v) for v, _ in verbs.most_common(3)])}."
        out.append(Abstraction(
            id=stable_id("abs", "taxonomy", *sorted(members)), title=f"{_cap(head)} family: {_join(names[:5])}",
            description=description, kind="abstraction", level=1, members=members,
            derived_from=[kind.id, kind.broader, *members], source_ids=documents, confidence=0.6,
            run_id=cycle.run_id, tags=[cycle.tag],
            body=_abstraction_body(description, members, things, kind.id, "taxonomy group"),
        ))
    return out


def _member_claims(bank: Bank, groups: dict[str, list[str]]) -> dict[str, dict[str, set[str]]]:
    """For each group, verb -> the members that claims with that verb reference."""
    pairs = [(g, m) for g, members in groups.items() for m in members]
    if not pairs:
        return {}
    with bank.reading() as db:
        rows = db.sql(f"""
            WITH {_GROUPS}, {_REFS}
            SELECT DISTINCT g.grp, g.node, json_extract_string(cl.data, '$.predicate')
            FROM refs r JOIN groups g ON g.node = r.node JOIN objects cl ON cl.id = r.claim
        """, [[p[0] for p in pairs], [p[1] for p in pairs]])
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for group, node, predicate in rows:
        if _verb(predicate):
            out[group][_verb(predicate)].add(node)
    return out


def _coherence(vectors: list[np.ndarray]) -> float:
    matrix = np.stack(vectors)
    matrix = matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
    sims = matrix @ matrix.T
    n = len(vectors)
    return float((sims.sum() - n) / (n * (n - 1))) if n > 1 else 1.0


def _abstraction_body(description: str, members: list[str], things: dict[str, Thing], source: str,
                      what: str) -> str:
    lines = [description, "", "## Members", ""]
    lines += [f"- {things[m].title} (`{m}`, named in {len(things[m].sources)} documents)" for m in members]
    lines += ["", f"Generalised from the {what} `{source}`."]
    return "\n".join(lines) + "\n"


def _label(abstraction: Abstraction) -> str:
    """A short name: the family ("Office family") or the topic's lead names."""
    return abstraction.title.split(":")[0].removeprefix("Topic of ").split(", linked")[0]


def _lift(cycle: Cycle, lower: list[Abstraction], leaves: dict[str, set[str]], graph: nx.Graph,
          things: dict[str, Thing], level: int) -> list[Abstraction]:
    """Join abstractions that share members or whose members are often named together (Louvain over
    the abstractions, linked by overlap and co-occurrence weight, never all pairs of members)."""
    if len(lower) < 2:
        return []
    owners: dict[str, list[str]] = defaultdict(list)
    for a in lower:
        for m in leaves[a.id]:
            owners[m].append(a.id)
    shared: Counter = Counter()
    for ids in owners.values():
        for i, x in enumerate(ids):
            for y in ids[i + 1:]:
                shared[tuple(sorted((x, y)))] += 1
    cross: Counter = Counter()
    volume: Counter = Counter()
    for u, v, w in graph.edges(data="weight"):
        for x in owners.get(u, ()):
            volume[x] += w
        for x in owners.get(v, ()):
            volume[x] += w
        for x in owners.get(u, ()):
            for y in owners.get(v, ()):
                if x != y:
                    cross[tuple(sorted((x, y)))] += w
    links = nx.Graph()
    for pair in set(shared) | set(cross):
        x, y = pair
        overlap = shared[pair] / min(len(leaves[x]), len(leaves[y]))
        tie = cross[pair] / max(np.sqrt(volume[x] * volume[y]), 1.0)
        if overlap + tie >= LINK_SCORE:
            links.add_edge(x, y, weight=overlap + tie)
    if links.number_of_edges() == 0:
        return []
    by_id = {a.id: a for a in lower}
    out = []
    for group in nx.community.louvain_communities(links, weight="weight", seed=7):
        if len(group) < 2 or len(group) == len(lower) and level > 2:
            continue
        children = sorted(group, key=lambda i: (-len(leaves[i]), i))
        labels = [_label(by_id[c]) for c in children]
        common = Counter(m for c in children for m in leaves[c])
        overlap = [things[m].title for m, n in common.most_common(5) if n > 1 and m in things]
        description = (f"A broader theme joining {len(children)} level-{level - 1} abstractions whose members "
                       f"overlap or are often named together: {'; '.join(labels[:6])}.")
        if overlap:
            description += f" Shared by several of them: {_join(overlap)}."
        leaf_ids = set().union(*(leaves[c] for c in children))
        out.append(Abstraction(
            id=stable_id("abs", f"level{level}", *sorted(children)),
            title=f"Broader theme (level {level}): {' + '.join(labels[:3])}" + (" + …" if len(labels) > 3 else ""),
            description=description, kind="abstraction", level=level, members=children,
            derived_from=children, source_ids=_sources_of(things, leaf_ids), confidence=0.5,
            run_id=cycle.run_id, tags=[cycle.tag],
            body=description + "\n\n## Joins\n\n" + "\n".join(f"- {by_id[c].title} (`{c}`)" for c in children) + "\n",
        ))
    return out


# ---- meta-concepts ----------------------------------------------------------------------------


def build_meta_concepts(bank: Bank, cycle: Cycle) -> tuple[list[Abstraction], list[Edge]]:
    """Kinds and relations that recur across several communities: concepts about the concepts."""
    with bank.reading() as db:
        found = db.list_objects(type="community", status="active", limit=100_000)
        kinds = db.list_objects(type="taxonomy", status="active", limit=100_000)
    if len(found) < META_MIN_COMMUNITIES:
        return [], []
    member_of = {m: c.id for c in found for m in c.members}
    titles = {c.id: c.title.removeprefix("Community: ") for c in found}
    things = _things(bank, [k.broader for k in kinds if k.broader] + [m for k in kinds for m in k.members])
    metas, edges = [], []
    for kind in kinds:
        spread: dict[str, list[str]] = defaultdict(list)
        for m in kind.members:
            if m in member_of and m in things:
                spread[member_of[m]].append(things[m].title)
        if len(spread) < META_MIN_COMMUNITIES or kind.broader not in things:
            continue
        head = things[kind.broader].title
        ids = sorted(spread, key=lambda c: (-len(spread[c]), c))
        description = (f"'{head}' recurs as a kind across {len(ids)} communities: "
                       + "; ".join(f"{_join(spread[c][:3])} (in {titles[c]})" for c in ids[:6]) + ".")
        metas.append(_meta(cycle, f"'{head}' recurs as a kind across {len(ids)} communities", description,
                           ids, [kind.id, *ids], things, kind.members))
    metas += _recurring_relations(bank, cycle, found, titles, things)
    for meta in metas:
        edges += [Edge.between(meta.id, c, EdgeType.CONTAINS) for c in meta.members]
        edges += [Edge.between(meta.id, d, EdgeType.DERIVES_FROM) for d in meta.derived_from if d not in meta.members]
    return metas, edges


def _recurring_relations(bank: Bank, cycle: Cycle, found, titles: dict[str, str],
                         things: dict[str, Thing]) -> list[Abstraction]:
    """Relations (claim verbs) stated inside several communities, in one sense: the typical claim of
    each community must resemble the others' ("studied at" everywhere), not just share a word."""
    examples: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for community, rows in _group_claims(bank, {c.id: c.members for c in found}).items():
        for claim, verb, _ in rows:
            if verb and len(examples[verb][community]) < 5:
                examples[verb][community].append(claim)
    recurring = sorted(((v, cs) for v, cs in examples.items() if META_MIN_COMMUNITIES <= len(cs) < len(found)),
                       key=lambda x: (-len(x[1]), x[0]))[: MAX_META * 3]
    ids = sorted({c for _, cs in recurring for claims in cs.values() for c in claims})
    vectors = bank.vectors.get_embeddings(ids)
    with bank.reading() as db:
        statements = dict(db.sql("SELECT id, text FROM objects WHERE id IN (SELECT unnest(?))", [ids]))
    sources = _claim_sources(bank, ids)
    out = []
    for verb, by_community in recurring:
        if len(out) >= MAX_META:
            break
        typical = _typical({c: [i for i in claims if i in vectors] for c, claims in by_community.items()}, vectors)
        if len(typical) < META_MIN_COMMUNITIES or _coherence([vectors[i] for i in typical.values()]) < META_COHERENCE:
            continue
        order = sorted(typical, key=lambda c: (typical[c], c))
        description = (f"The relation '{verb}' links members of {len(order)} separate communities: "
                       + "; ".join(f"{titles[c]}" for c in order[:4]) + ". " + f"E.g. “{statements[typical[order[0]]]}”")
        meta = _meta(cycle, f"'{verb}' recurs as a relation across {len(order)} communities", description, order,
                     [typical[c] for c in order], things, [])
        meta.source_ids = sorted({s for c in order for s in sources.get(typical[c], [])})
        meta.body += "\n## A typical statement in each community\n\n" + "\n".join(
            f"- {statements[typical[c]]} [{typical[c]}](../../layer-1/claims/{typical[c]}.md) (in {titles[c]})"
            for c in order) + "\n"
        out.append(meta)
    return out


def _typical(claims_of: dict[str, list[str]], vectors: dict[str, np.ndarray]) -> dict[str, str]:
    """For each group, its claim closest to the centroid of all the groups' claims."""
    every = [i for claims in claims_of.values() for i in claims]
    if not every:
        return {}
    centroid = np.mean([vectors[i] for i in every], axis=0)
    return {c: max(claims, key=lambda i: (float(vectors[i] @ centroid), i)) for c, claims in claims_of.items() if claims}


def _meta(cycle: Cycle, title: str, description: str, community_ids: list[str], derived: list[str],
          things: dict[str, Thing], members: list[str]) -> Abstraction:
    return Abstraction(
        id=stable_id("abs", "meta", title.split(" recurs")[0], title.split(" as a ")[1].split()[0]),
        title=title, description=description, kind="meta_concept", level=2, members=community_ids,
        derived_from=derived, source_ids=_sources_of(things, members), confidence=0.5, run_id=cycle.run_id,
        tags=[cycle.tag], body=description + "\n\n## Communities\n\n"
        + "\n".join(f"- `{c}`" for c in community_ids) + "\n",
    )


def _claim_sources(bank: Bank, ids: list[str]) -> dict[str, list[str]]:
    with bank.reading() as db:
        return {i: list(s or []) for i, s in db.sql("SELECT id, source_ids FROM objects WHERE id IN (SELECT unnest(?))",
                                                    [sorted(set(ids))])}


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
    """Syntheses for the themes this cycle touched first, then the best-covered ones, at most MAX_SYNTHESES."""
    themes = _themes(bank, cycle)
    candidates = _theme_claims(bank, [t[0] for t in themes])
    vectors = bank.vectors.get_embeddings(sorted({c.id for cs in candidates.values() for c in cs}))
    client = OllamaClient(bank.settings) if bank.settings.llm == "ollama" else None
    out, edges, used = [], [], set()
    try:
        for theme, title, aliases in themes:
            if len(out) >= MAX_SYNTHESES:
                break
            chosen = _select(candidates.get(theme, []), vectors, [title, *aliases])
            if len({c.source for c in chosen}) < MIN_DOCUMENTS:
                continue
            if sum(c.id in used for c in chosen) > len(chosen) / 2:
                continue  # mostly the claims of a synthesis already written (e.g. an alias of its theme)
            used.update(c.id for c in chosen)
            synthesis = None
            if client is not None:
                synthesis, client = _llm_synthesis(bank, cycle, client, theme, title, chosen, vectors)
            synthesis = synthesis or _extractive(bank, cycle, theme, title, chosen)
            out.append(synthesis)
            edges.append(Edge.between(synthesis.id, theme, EdgeType.DERIVES_FROM))
            edges += [Edge.between(synthesis.id, c, EdgeType.REFERENCES) for c in synthesis.derived_from[1:]]
    finally:
        if client is not None:
            client.close()
    return out, edges


def _themes(bank: Bank, cycle: Cycle) -> list[tuple[str, str, list[str]]]:
    """Canonical entities and concepts that claims from at least three documents reference (no dates,
    numbers or single common nouns), touched by this cycle first, then by how many documents."""
    with bank.reading() as db:
        rows = db.sql(f"""
            WITH {_REFS}
            SELECT n.id, n.title, n.type, coalesce(json_extract_string(n.data, '$.entity_kind'), ''),
                   coalesce(CAST(json_extract(n.data, '$.aliases') AS VARCHAR[]), []),
                   count(DISTINCT cl.source_ids[1]) AS docs, list_has_any(n.source_ids, ?::VARCHAR[]) AS touched
            FROM refs r JOIN objects cl ON cl.id = r.claim
            JOIN objects n ON n.id = r.node AND n.status = 'active'
                 AND n.type IN ('canonical_entity', 'canonical_concept')
            GROUP BY ALL HAVING docs >= ? ORDER BY touched DESC, docs DESC, n.id
        """, [cycle.source_ids, MIN_DOCUMENTS])
    themes = [(i, t, list(a)) for i, t, ty, kind, a, _, _ in rows if Thing(i, t, ty, kind, []).named]
    return themes[: MAX_SYNTHESES * 3]


def _theme_claims(bank: Bank, themes: list[str]) -> dict[str, list[Candidate]]:
    """Up to CANDIDATE_CLAIMS claims per theme that read on their own (no leading pronoun, no list intro)."""
    if not themes:
        return {}
    with bank.reading() as db:
        rows = db.sql(f"""
            WITH {_REFS}, ranked AS (
                SELECT r.node, cl.id, cl.text, coalesce(json_extract_string(cl.data, '$.subject'), '') AS subject,
                       cl.source_ids[1] AS source,
                       row_number() OVER (PARTITION BY r.node ORDER BY cl.confidence DESC, cl.id) AS rank
                FROM refs r JOIN objects cl ON cl.id = r.claim
                WHERE r.node IN (SELECT unnest(?)) AND length(cl.text) BETWEEN 25 AND 400
                  AND NOT regexp_matches(cl.text, ':\\s*$')
                  AND NOT regexp_matches(cl.text, ?, 'i')
            )
            SELECT node, id, text, subject, source FROM ranked WHERE rank <= ? ORDER BY node, id
        """, [themes, _BAD_START.pattern, CANDIDATE_CLAIMS])
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
    chosen: list[int] = []
    per_source: Counter = Counter()
    while len(chosen) < min(MAX_STATEMENTS, len(candidates)):
        best, best_score = None, -np.inf
        for i, c in enumerate(candidates):
            if i in chosen:
                continue
            similarity = float(max((matrix[i] @ matrix[j] for j in chosen), default=0.0))
            if similarity >= NEAR_DUPLICATE:
                continue
            score = MMR_LAMBDA * relevance[i] - (1 - MMR_LAMBDA) * similarity - 0.05 * per_source[c.source]
            if score > best_score:
                best, best_score = i, score
        if best is None:
            break
        chosen.append(best)
        per_source[candidates[best].source] += 1
    return [candidates[i] for i in chosen]


def _extractive(bank: Bank, cycle: Cycle, theme: str, title: str, chosen: list[Candidate]) -> Synthesis:
    with bank.reading() as db:
        claims = db.get_objects([c.id for c in chosen])
    items = [(CitedStatement(text=claims[c.id].statement, object_id=c.id,
                             span=claims[c.id].source_spans[0] if claims[c.id].source_spans else None), [c.id])
             for c in chosen if isinstance(claims.get(c.id), Claim)]
    return _synthesis(bank, cycle, theme, title, items, "extractive")


def _synthesis(bank: Bank, cycle: Cycle, theme: str, title: str,
               items: list[tuple[CitedStatement, list[str]]], method: str) -> Synthesis:
    """The synthesis object: (statement, cited claim ids) grouped by the other thing they share
    (a sub-topic), every statement followed by its citations and where in which document it comes from."""
    cited = sorted({c for _, cites in items for c in cites})
    with bank.reading() as db:
        sources = {i: list(s or []) for i, s in db.sql(
            "SELECT id, source_ids FROM objects WHERE id IN (SELECT unnest(?))", [cited])}
        paths = dict(db.sql("SELECT id, path FROM sources WHERE id IN (SELECT unnest(?))",
                            [sorted({s for ss in sources.values() for s in ss})]))
        related = db.sql(f"""
            WITH {_REFS}
            SELECT r.claim, r.node, n.title, n.type, coalesce(json_extract_string(n.data, '$.entity_kind'), '')
            FROM refs r JOIN objects n ON n.id = r.node
            WHERE r.claim IN (SELECT unnest(?)) AND r.node <> ? ORDER BY r.claim, r.node
        """, [cited, theme])
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
                   chosen: list[Candidate], vectors: dict[str, np.ndarray]
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
    with bank.reading() as db:
        claims = db.get_objects(list(by_id))
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
    return _synthesis(bank, cycle, theme, title, items, "llm"), client


def _syntheses_still_valid(bank: Bank) -> list[Synthesis]:
    """Active syntheses whose theme is still an active object (kept although not rebuilt this cycle)."""
    with bank.reading() as db:
        rows = db.sql("SELECT s.id FROM objects s JOIN objects t ON t.id = json_extract_string(s.data, '$.theme') "
                      "AND t.status = 'active' WHERE s.type = 'synthesis' AND s.status = 'active'")
        return list(db.get_objects([r[0] for r in rows]).values())
