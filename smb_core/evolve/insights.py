"""Layer-3 insights, each citing the claims (and through them the documents) it rests on:

- bridges: a named thing that is the only link between two communities otherwise apart;
- knowledge gaps: a named thing that many documents mention and none describes;
- well-supported claims: a statement that several independent documents make.

They are recomputed in the global passes (they read the whole bank, in SQL and over the small
community graph), and an insight not found again is superseded, never deleted.
"""

from __future__ import annotations

from collections import defaultdict

import networkx as nx

from smb_core.bank import Bank
from smb_core.evolve import communities
from smb_core.evolve.cycle import Cycle
from smb_core.model import Community, Edge, EdgeType, Insight, MemoryObject, stable_id
from smb_core.recall.names import name_key

#: Kinds of named things an insight can be about: a date ("the 1930s") or an unnamed kind is not one.
NAMED_KINDS = ("person", "organization", "place", "work")
MAX_BRIDGES = 10
#: A bridge joins two topics; a name whose links mostly lie elsewhere is a hub (a country, a nationality)
#: named with everything, and joins nothing in particular.
BRIDGE_MIN_SHARE = 0.5
MAX_GAPS = 25
#: A gap is worth reporting once this many documents name the thing.
GAP_MIN_DOCUMENTS = 3
MAX_SUPPORTED = 25
#: Independent documents (distinct paths, not versions of one file) that make a well-supported claim.
SUPPORTED_MIN_DOCUMENTS = 3
KINDS = ("bridge_entity", "knowledge_gap", "well_supported")


def find_insights(bank: Bank, cycle: Cycle) -> tuple[list[Insight], list[Edge]]:
    insights, edges = [], []
    for found in (bridges(bank, cycle), knowledge_gaps(bank, cycle), well_supported(bank, cycle)):
        insights += found[0]
        edges += found[1]
    return insights, edges


def write_insights(bank: Bank, insights: list[Insight], edges: list[Edge], run_id: str | None) -> None:
    """Write the insights with their citations. An insight found again on other evidence is rewritten,
    and the citations it no longer makes are dropped (its front matter and its edges say the same), in
    one write session."""
    vectors = bank.embed_new_texts(insights)  # outside the lock
    with bank.writing() as db:
        stale = db.sql("SELECT head, tail, id FROM edges WHERE edge_type = 'references' "
                       "AND head IN (SELECT unnest(?::VARCHAR[])) AND id NOT IN (SELECT unnest(?::VARCHAR[]))",
                       [[i.id for i in insights], [e.id for e in edges]])
        bank.write(insights, edges, run_id=run_id, vectors=vectors)
        bank.remove_edges([tuple(row) for row in stale])


def _claims(bank: Bank, claim_ids: list[str]) -> dict[str, MemoryObject]:
    """The claims a pass's insights cite, read in one go."""
    with bank.reading() as db:
        return db.get_objects(sorted(set(claim_ids)))


def _cited(insight: Insight, claim_ids: list[str], claims: dict[str, MemoryObject]) -> tuple[Insight, list[Edge]]:
    """Cite the claims: evidence, derived_from and source documents, and a `references` edge to each."""
    claims = {c: claims[c] for c in claim_ids if c in claims}
    insight.evidence = [c for c in claim_ids if c in claims]
    insight.derived_from = list(dict.fromkeys([*insight.about, *insight.derived_from, *insight.evidence]))
    insight.source_ids = sorted({s for c in claims.values() for s in c.source_ids})
    edges = [Edge.between(insight.id, c, EdgeType.REFERENCES) for c in insight.evidence]
    edges += [Edge.between(insight.id, a, EdgeType.REFERENCES) for a in insight.about]
    return insight, edges


# ---- bridges -----------------------------------------------------------------------------------


def bridges(bank: Bank, cycle: Cycle) -> tuple[list[Insight], list[Edge]]:
    graph = communities.cooccurrence_graph(bank, cycle=cycle.key)  # the graph the communities were found in
    with bank.reading() as db:
        found = db.list_objects(type="community", status="active", limit=None)
        named = _named(db, list(graph.nodes))
    best = bridge_pairs(graph, [c for c in found if isinstance(c, Community)], named)[:MAX_BRIDGES]
    cited = {node: [c for c in (_strongest_claim(graph, node, side) for side in pair) if c] for _, node, pair in best}
    claims = _claims(bank, [c for ids in cited.values() for c in ids])
    out = []
    for score, node, pair in best:
        first, second = pair
        title = graph.nodes[node]["title"]
        insight = Insight(
            id=stable_id("ins", "bridge", node), kind="bridge_entity", about=[node],
            title=f'{title} alone links "{_topic(first)}" and "{_topic(second)}"',
            description=f'{title} is named with members of two communities, "{_topic(first)}" and '
                        f'"{_topic(second)}", and no claim names members of both without it: what joins the '
                        f'two topics runs through it.',
            derived_from=[first.id, second.id], run_id=cycle.run_id, confidence=0.6, tags=[cycle.tag],
            weight=score,
        )
        insight, edges = _cited(insight, cited[node], claims)
        edges += [Edge.between(insight.id, c.id, EdgeType.REFERENCES) for c in pair]
        out.append((insight, edges))
    return [i for i, _ in out], [e for _, es in out for e in es]


def bridge_pairs(graph: nx.Graph, found: list[Community],
                 named: set[str]) -> list[tuple[float, str, tuple[Community, Community]]]:
    """Named nodes that are the only link between two communities, best first: for each node its
    strongest such pair, scored by its weaker side (claims that tie it to that community). The only
    direct link: no claim without it names members of both; a path through a third community may exist."""
    member_of = {m: c for c in found for m in c.members}
    by_id = {c.id: c for c in found}
    between = links_between_communities(graph, member_of)
    out = []
    for node in sorted(named & set(graph.nodes)):
        reach: dict[str, float] = defaultdict(float)
        for neighbour, weight in graph[node].items():
            if neighbour in member_of:
                reach[member_of[neighbour].id] += weight["weight"]
        own = member_of[node].id if node in member_of else None
        total, best = sum(reach.values()), None
        # a pair must reach BRIDGE_MIN_SHARE of the node's weight together, so one side reaches half of
        # that: pairs with one of those few (at most 4) sides only, in the order of all pairs. A hub
        # named with thousands of communities made millions of pairs.
        wide = [c for c in reach if 2 * reach[c] >= BRIDGE_MIN_SHARE * total * (1 - 1e-9)]
        for x, y in sorted({(min(a, b), max(a, b)) for a in wide for b in reach if b != a}):
            # links between x and y that do not go through this node (its own links count when it is a member)
            others = between.get(frozenset((x, y)), 0.0) - (reach[y] if own == x else 0) - (reach[x] if own == y else 0)
            if others > 0 or reach[x] + reach[y] < BRIDGE_MIN_SHARE * total:
                continue
            score = min(reach[x], reach[y])
            if best is None or score > best[0]:
                best = (score, x, y)
        if best:
            out.append((best[0], node, (by_id[best[1]], by_id[best[2]])))
    out.sort(key=lambda item: (-item[0], item[1]))
    return out


def links_between_communities(graph: nx.Graph, member_of: dict[str, Community]) -> dict[frozenset, float]:
    """The summed weight of the graph's links between members of each pair of communities."""
    between: dict[frozenset, float] = defaultdict(float)
    for a, b, weight in graph.edges(data="weight"):
        ca, cb = member_of.get(a), member_of.get(b)
        if ca and cb and ca.id != cb.id:
            between[frozenset((ca.id, cb.id))] += weight
    return between


def _topic(community: Community) -> str:
    return community.title.removeprefix("Community: ")


def _strongest_claim(graph: nx.Graph, node: str, community: Community) -> str | None:
    members = set(community.members)
    links = [(d["weight"], d.get("claim", "")) for n, d in graph[node].items() if n in members]
    return max(links)[1] if links else None


def _named(db, ids: list[str]) -> set[str]:
    rows = db.sql("SELECT id FROM objects WHERE type IN ('entity', 'canonical_entity') AND status = 'active' "
                  "AND json_extract_string(data, '$.entity_kind') IN (SELECT unnest(?::VARCHAR[])) "
                  "AND id IN (SELECT unnest(?::VARCHAR[]))", [list(NAMED_KINDS), ids])
    return {r[0] for r in rows}


# ---- knowledge gaps ----------------------------------------------------------------------------

_GAPS = """
WITH canon AS (
    SELECT o.id AS member, lower(o.title) AS name, coalesce(json_extract_string(o.data, '$.merged_into'), o.id) AS node
    FROM objects o WHERE o.status IN ('active', 'merged') AND o.type IN ('entity', 'canonical_entity')
),
mentions AS (
    SELECT c.node, c.name, e.head AS claim FROM edges e JOIN canon c ON c.member = e.tail
    WHERE e.edge_type = 'references'
),
per_node AS (
    SELECT m.node, count(DISTINCT s.path) AS documents,
           -- named in a claim's subject as words: "Bradford" does not describe Ford
           bool_or(strpos(' ' || regexp_replace(lower(json_extract_string(cl.data, '$.subject')), '[^\\pL\\pN]+', ' ', 'g')
                          || ' ', ' ' || regexp_replace(m.name, '[^\\pL\\pN]+', ' ', 'g') || ' ') > 0) AS described,
           list(DISTINCT m.claim ORDER BY m.claim)[1:5] AS claims
    FROM mentions m JOIN objects cl ON cl.id = m.claim AND cl.status = 'active' AND cl.type = 'claim'
    CROSS JOIN unnest(cl.source_ids) AS u(source_id) JOIN sources s ON s.id = u.source_id
    GROUP BY m.node
)
SELECT p.node, o.title, p.documents, p.claims, (SELECT list(DISTINCT c.name) FROM canon c WHERE c.node = p.node)
FROM per_node p JOIN objects o ON o.id = p.node
WHERE o.status = 'active' AND p.documents >= ? AND NOT p.described
  AND json_extract_string(o.data, '$.entity_kind') IN (SELECT unnest(?::VARCHAR[]))
  AND NOT EXISTS (SELECT 1 FROM doc_names d JOIN canon c ON c.name = d.name WHERE c.node = p.node)
ORDER BY p.documents DESC, p.node
LIMIT ?
"""


def knowledge_gaps(bank: Bank, cycle: Cycle) -> tuple[list[Insight], list[Edge]]:
    """Named things many documents mention but none describes: no document is about them (by its
    name) and no claim has them as its subject. Each is a lead for what to read or write next."""
    with bank.reading() as db:
        # SQL drops the names a document has as they are; the documents' name keys also fold accents
        # and punctuation ("St. Louis" is "st louis"), so a few more are read and those drop out here
        candidates = db.sql(_GAPS, [GAP_MIN_DOCUMENTS, list(NAMED_KINDS), 4 * MAX_GAPS])
        keys = {row[0]: {name_key(n) for n in row[4]} for row in candidates}
        described = {r[0] for r in db.sql("SELECT DISTINCT name FROM doc_names WHERE name IN (SELECT unnest(?))",
                                          [sorted({k for ks in keys.values() for k in ks})])}
    rows = [row[:4] for row in candidates if not keys[row[0]] & described][:MAX_GAPS]
    claims = _claims(bank, [c for row in rows for c in row[3]])
    out = []
    for node, title, documents, cited in rows:
        insight = Insight(
            id=stable_id("ins", "gap", node), kind="knowledge_gap", about=[node],
            title=f"Nothing here describes {title}",
            description=f"{title} is named in {documents} documents, but no document is about it and no claim "
                        f"says what it is.",
            run_id=cycle.run_id, confidence=0.6, tags=[cycle.tag], weight=documents,
        )
        out.append(_cited(insight, list(cited), claims))
    return [i for i, _ in out], [e for _, es in out for e in es]


# ---- well-supported claims ---------------------------------------------------------------------

_SUPPORTED = """
WITH backing AS (
    SELECT DISTINCT tail AS claim, tail AS backer FROM edges WHERE edge_type = 'supports'
    UNION ALL
    SELECT tail, head FROM edges WHERE edge_type = 'supports'
)
SELECT b.claim, count(DISTINCT s.path) AS documents, list(DISTINCT b.backer ORDER BY b.backer) AS claims,
       lower(trim(t.text)) AS statement
FROM backing b JOIN objects cl ON cl.id = b.backer AND cl.status = 'active' AND cl.type = 'claim'
JOIN objects t ON t.id = b.claim
CROSS JOIN unnest(cl.source_ids) AS u(source_id) JOIN sources s ON s.id = u.source_id
GROUP BY b.claim, t.text HAVING count(DISTINCT s.path) >= ?
ORDER BY documents DESC, b.claim
"""


def well_supported(bank: Bank, cycle: Cycle) -> tuple[list[Insight], list[Edge]]:
    """Claims that several independent documents restate (`supports` edges from reinforcement), one
    insight per statement: a restatement supports every older one, so the second of four copies is
    backed by three documents too, and it is the same statement as the first."""
    with bank.reading() as db:
        candidates = db.sql(_SUPPORTED, [SUPPORTED_MIN_DOCUMENTS])
    rows, cited_already, stated = [], set(), set()
    for claim_id, documents, backers, statement in candidates:  # best backed first
        if cited_already.isdisjoint(backers) and statement not in stated:  # another copy: the same statement
            rows.append((claim_id, documents, backers))
            if len(rows) == MAX_SUPPORTED:
                break
        cited_already.update(backers)
        stated.add(statement)
    claims = _claims(bank, [c for row in rows for c in (row[0], *row[2])])
    out = []
    for claim_id, documents, cited in rows:
        claim = claims.get(claim_id)
        if claim is None:
            continue
        insight = Insight(
            id=stable_id("ins", "supported", claim_id), kind="well_supported",
            title=f"{documents} documents agree: {claim.title}",
            description=f"{documents} independent documents state this: {claim.text()}",
            run_id=cycle.run_id, confidence=0.6, tags=[cycle.tag], weight=documents,
        )
        out.append(_cited(insight, list(cited), claims))
    return [i for i, _ in out], [e for _, es in out for e in es]
