"""Layer-4 abstractions: generalisations over the layer-2 groupings, and meta-concepts over those.

- Level 1 generalises a community or a taxonomy group: what its members are, what links them (the
  relations most often stated between them) and which kinds occur among them.
- Level 2 and up join lower abstractions whose members overlap or are often named together.
- Meta-concepts are patterns over communities: a kind, or a relation, that recurs in several of them.

Both are recomputed from the whole bank whenever the layer-2 groupings are (the cycle's global
passes); ids are stable, so re-running a cycle upserts the same objects.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import networkx as nx
import numpy as np

from smb_core.bank import Bank
from smb_core.evolve.cycle import Cycle
from smb_core.model import Abstraction, Edge, EdgeType, stable_id
from smb_core.stores.metadata import id_filter

#: Documents a generalisation (or a synthesis) must rest on.
MIN_DOCUMENTS = 3
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
#: Relations too general to say anything about a group.
STOP_PREDICATES = {"be", "have", "do", "say", "call", "make", "use", "get", "include", "become", "take", "go",
                   "come", "give", "see", "keep", "show", "remain", "contain", "know", ""}
_NUMERIC = re.compile(r"^[\d\s.,:/-]+$")

#: Claims referencing canonical things: merged members map to the canonical object they were merged into.
REFS = """
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
    where, params = id_filter("id", sorted(set(ids)))
    with bank.reading() as db:
        rows = db.sql("SELECT id, title, type, coalesce(json_extract_string(data, '$.entity_kind'), ''), source_ids "
                      f"FROM objects WHERE {where}", params)
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
            WITH {_GROUPS}, {REFS}
            SELECT g.grp, r.claim, json_extract_string(cl.data, '$.predicate'), cl.source_ids[1]
            FROM refs r JOIN groups g ON g.node = r.node JOIN objects cl ON cl.id = r.claim
            GROUP BY ALL HAVING count(DISTINCT r.node) >= 2 ORDER BY 1, 2
        """, [[p[0] for p in pairs], [p[1] for p in pairs]])
    out: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for group, claim, predicate, source in rows:
        out[group].append((claim, _verb(predicate), source))
    return out


# ---- abstractions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """A taxonomy group as layer 4 reads it: its id, broader concept and narrower members (the whole
    objects, with their bodies listing every member, were tens of thousands at 50,000 documents)."""

    id: str
    broader: str | None
    members: list[str]


@dataclass
class Groupings:
    """The layer-2 groupings layer 4 generalises, and the claims inside each community (referencing
    two or more of its members): read once per cycle for both abstractions and meta-concepts."""

    communities: list
    kinds: list[Kind]
    community_claims: dict[str, list[tuple[str, str, str]]]


def load_groupings(bank: Bank) -> Groupings:
    with bank.reading() as db:
        found = db.list_objects(type="community", status="active", limit=None)
        kinds = [Kind(i, broader, json.loads(members) if members else []) for i, broader, members in db.sql(
            "SELECT id, json_extract_string(data, '$.broader'), json_extract(data, '$.members') FROM objects "
            "WHERE type = 'taxonomy' AND status = 'active' ORDER BY created, id")]
    return Groupings(found, kinds, _group_claims(bank, {c.id: c.members for c in found}))


def build_abstractions(bank: Bank, cycle: Cycle, graph: nx.Graph,
                       groupings: Groupings) -> tuple[list[Abstraction], list[Edge]]:
    """Level-1 abstractions from communities and taxonomy groups, then higher levels while they link."""
    found, kinds = groupings.communities, groupings.kinds
    things = _things(bank, [m for g in found for m in g.members]
                     + [m for k in kinds for m in [*k.members, k.broader] if m])
    level1, edges = [], []
    for abstraction in [*_from_communities(cycle, found, kinds, groupings.community_claims, things),
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


def _from_communities(cycle: Cycle, found, kinds, inner: dict[str, list[tuple[str, str, str]]],
                      things: dict[str, Thing]) -> list[Abstraction]:
    cores = {c.id: [m for m in c.members if m in things and things[m].named][:12] for c in found}
    kinds = [k for k in kinds if k.broader in things]
    kinds_of: dict[str, list[int]] = defaultdict(list)  # member -> the kinds listing it, by position
    for index, kind in enumerate(kinds):
        for m in set(kind.members):
            kinds_of[m].append(index)
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
        # the kinds with two or more of its members, found through its members: every community
        # against every kind was thousands by tens of thousands at 50,000 documents
        shared = Counter(i for m in members for i in kinds_of.get(m, ()))
        present = [(things[kinds[i].broader].title, [things[m].title for m in kinds[i].members if m in members])
                   for i in sorted(shared) if shared[i] >= 2]
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
    vectors = bank.vectors_of(sorted({m for k in big for m in k.members}))
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
            WITH {_GROUPS}, {REFS}
            SELECT DISTINCT g.grp, g.node, json_extract_string(cl.data, '$.predicate')
            FROM refs r JOIN groups g ON g.node = r.node JOIN objects cl ON cl.id = r.claim
        """, [[p[0] for p in pairs], [p[1] for p in pairs]])
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for group, node, predicate in rows:
        if _verb(predicate):
            out[group][_verb(predicate)].add(node)
    return out


def _coherence(vectors: list[np.ndarray]) -> float:
    """The mean cosine between two distinct members: with unit vectors, the sum of all their pairwise
    products is the squared length of their sum, so no n x n matrix is made (a kind of 30,000 members
    would need 3.6 GB for it)."""
    n = len(vectors)
    if n <= 1:
        return 1.0
    matrix = np.stack(vectors)
    matrix = matrix / np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
    total = matrix.sum(axis=0, dtype=np.float64)
    return float((total @ total - n) / (n * (n - 1)))


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


def build_meta_concepts(bank: Bank, cycle: Cycle, groupings: Groupings) -> tuple[list[Abstraction], list[Edge]]:
    """Kinds and relations that recur across several communities: concepts about the concepts."""
    found, kinds = groupings.communities, groupings.kinds
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
    metas += _recurring_relations(bank, cycle, found, groupings.community_claims, titles, things)
    for meta in metas:
        edges += [Edge.between(meta.id, c, EdgeType.CONTAINS) for c in meta.members]
        edges += [Edge.between(meta.id, d, EdgeType.DERIVES_FROM) for d in meta.derived_from if d not in meta.members]
    return metas, edges


def _recurring_relations(bank: Bank, cycle: Cycle, found, community_claims: dict[str, list[tuple[str, str, str]]],
                         titles: dict[str, str],
                         things: dict[str, Thing]) -> list[Abstraction]:
    """Relations (claim verbs) stated inside several communities, in one sense: the typical claim of
    each community must resemble the others' ("studied at" everywhere), not just share a word."""
    examples: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for community, rows in community_claims.items():
        for claim, verb, _ in rows:
            if verb and len(examples[verb][community]) < 5:
                examples[verb][community].append(claim)
    recurring = sorted(((v, cs) for v, cs in examples.items() if META_MIN_COMMUNITIES <= len(cs) < len(found)),
                       key=lambda x: (-len(x[1]), x[0]))[: MAX_META * 3]
    ids = sorted({c for _, cs in recurring for claims in cs.values() for c in claims})
    vectors = bank.vectors_of(ids)
    where, params = id_filter("id", ids)
    with bank.reading() as db:
        statements = dict(db.sql(f"SELECT id, text FROM objects WHERE {where}", params))
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
    where, params = id_filter("id", sorted(set(ids)))
    with bank.reading() as db:
        return {i: list(s or []) for i, s in db.sql(f"SELECT id, source_ids FROM objects WHERE {where}", params)}
