"""Layer-3 insights on real stores: bridges between communities, knowledge gaps and well-supported
claims, each citing the claims and documents it rests on."""

from __future__ import annotations

import networkx as nx

from smb_core.bank import Bank
from smb_core.corpus import scan
from smb_core.evolve import confidence, insights, merge
from smb_core.evolve.cycle import finish_cycle, new_object_ids, open_cycle
from smb_core.ingest import extract_sources, get_extractor, ingest_sources
from smb_core.model import Community
from tests.conftest import write_doc


def _community(name: str, members: list[str]) -> Community:
    return Community(id=f"com-{name}", title=f"Community: {name}", members=members)


def test_a_bridge_is_the_only_link_between_two_communities_and_a_hub_is_not_one() -> None:
    graph = nx.Graph()
    topics = {name: [f"{name}{i}" for i in range(3)] for name in "abcdef"}
    for members in topics.values():
        graph.add_edges_from(((m, n) for m in members for n in members if m < n), weight=3)
    graph.add_edge("a0", "b0", weight=2)  # a0 alone links a and b
    graph.add_edge("a0", "b1", weight=1)
    graph.add_edge("c0", "d0", weight=2)  # c and d are linked twice, by c0 and by c1: no bridge
    graph.add_edge("c1", "d1", weight=2)
    for name in "abcdef":  # the hub is named with every community, a little
        graph.add_edge("hub", f"{name}2", weight=1)
    found = [_community(name, members) for name, members in topics.items()]
    pairs = insights.bridge_pairs(graph, found, named=set(graph.nodes))
    assert [(score, node, {c.id for c in pair}) for score, node, pair in pairs] == [(3.0, "a0", {"com-a", "com-b"})]
    assert insights.bridge_pairs(graph, found, named=set(graph.nodes) - {"a0"}) == []  # only named things bridge


def _bridge_pairs_over_all_pairs(graph: nx.Graph, found: list[Community], named: set[str]) -> list:
    """bridge_pairs as it was, trying every pair of communities a node reaches: the reference."""
    import itertools
    from collections import defaultdict

    member_of = {m: c for c in found for m in c.members}
    by_id = {c.id: c for c in found}
    between = insights.links_between_communities(graph, member_of)
    out = []
    for node in sorted(named & set(graph.nodes)):
        reach = defaultdict(float)
        for neighbour, weight in graph[node].items():
            if neighbour in member_of:
                reach[member_of[neighbour].id] += weight["weight"]
        own = member_of[node].id if node in member_of else None
        total, best = sum(reach.values()), None
        for x, y in itertools.combinations(sorted(reach), 2):
            others = between.get(frozenset((x, y)), 0.0) - (reach[y] if own == x else 0) - (reach[x] if own == y else 0)
            if others > 0 or reach[x] + reach[y] < insights.BRIDGE_MIN_SHARE * total:
                continue
            if best is None or min(reach[x], reach[y]) > best[0]:
                best = (min(reach[x], reach[y]), x, y)
        if best:
            out.append((best[0], node, (by_id[best[1]], by_id[best[2]])))
    out.sort(key=lambda item: (-item[0], item[1]))
    return out


def test_bridges_found_from_the_widest_sides_equal_those_over_every_pair() -> None:
    import random

    for seed in range(30):
        rng = random.Random(seed)
        nodes = [f"n{i:02d}" for i in range(40)]
        graph = nx.Graph()
        for _ in range(rng.randrange(30, 160)):
            a, b = rng.sample(nodes, 2)
            graph.add_edge(a, b, weight=rng.choice([1, 1, 2, 3]))
        members = [n for n in nodes if rng.random() < 0.8]
        found = [_community(f"c{i}", members[i::8]) for i in range(8)]
        named = {n for n in nodes if rng.random() < 0.7}
        assert insights.bridge_pairs(graph, found, named) == _bridge_pairs_over_all_pairs(graph, found, named), seed


def _ingest(bank: Bank, docs: dict[str, str]) -> None:
    for name, text in docs.items():
        write_doc(bank.settings.kbmd_dir, name, text)
    outcomes = ingest_sources(bank, scan(bank.settings.kbmd_dir), bank.settings.kbmd_dir, run_id="test")
    extract_sources(bank, [o.source_id for o in outcomes if o.source_id], get_extractor(bank.settings), "test")


def _merged_cycle(bank: Bank, key: str):
    cycle = open_cycle(bank, key, f"run-{key}")
    merge.merge(bank, cycle, new_object_ids(bank, cycle, ("entity", "concept")))
    return cycle


FUNDED = {
    "aurora.md": "# The Aurora index\n\nThe Aurora index was funded by Northwind Capital.\n",
    "lumen.md": "# Lumen Labs\n\nLumen Labs raised a seed round from Northwind Capital.\n",
    "tessellate.md": "# Tessellate\n\nTessellate received a grant from Northwind Capital.\n",
}


def test_a_thing_named_by_many_documents_and_described_by_none_is_a_knowledge_gap(bank: Bank) -> None:
    _ingest(bank, FUNDED)
    cycle = _merged_cycle(bank, "cycle-00001")
    found, edges = insights.knowledge_gaps(bank, cycle)
    gap = next(i for i in found if "Northwind Capital" in i.title)
    assert gap.kind == "knowledge_gap" and "3 documents" in gap.description
    with bank.reading() as db:
        cited = db.get_objects(gap.evidence)
        paths = {d.id: d.path for d in db.sources()}
    assert len(cited) == 3 and all(c.type.value == "claim" and "Northwind Capital" in c.text() for c in cited.values())
    assert sorted(paths[s] for s in gap.source_ids) == sorted(FUNDED)
    assert set(gap.derived_from) >= set(gap.about) | set(gap.evidence)
    assert {(e.head, e.tail) for e in edges} >= {(gap.id, c) for c in gap.evidence}
    finish_cycle(bank, cycle)

    _ingest(bank, {"northwind.md": "# Northwind Capital\n\nNorthwind Capital is a venture fund in Dublin.\n"})
    found, _ = insights.knowledge_gaps(bank, _merged_cycle(bank, "cycle-00002"))
    assert not any("Northwind Capital" in i.title for i in found)  # now a document describes it


def test_a_claim_restated_by_three_independent_documents_is_well_supported(bank: Bank) -> None:
    _ingest(bank, {"first.md": "# Release notes\n\nThe Aurora index was released in 2019.\n"})
    finish_cycle(bank, _merged_cycle(bank, "cycle-00001"))
    assert insights.well_supported(bank, _merged_cycle(bank, "cycle-00001"))[0] == []
    _ingest(bank, {"second.md": "# A history\n\nThe Aurora index was released in 2019.\n",
                   "third.md": "# Press\n\nThe Aurora index was released in 2019.\n",
                   "other.md": "# Rival\n\nThe Aurora index was released in 2021.\n"})  # other facts: no support
    cycle = _merged_cycle(bank, "cycle-00002")
    confidence.reinforce(bank, cycle)
    found, _ = insights.well_supported(bank, cycle)
    assert [i.title for i in found] == ["3 documents agree: The Aurora index was released in 2019."]
    with bank.reading() as db:
        paths = {d.id: d.path for d in db.sources()}
    assert sorted(paths[s] for s in found[0].source_ids) == ["first.md", "second.md", "third.md"]
    assert len(found[0].evidence) == 3


def test_a_statement_restated_again_and_again_is_one_well_supported_insight(bank: Bank) -> None:
    """Eight copies, one new document per cycle: each copy supports its nearest older copies, so the copies'
    backers differ and each copy is backed by three documents or more; they are still one statement."""
    statement, other = "The Aurora index was released in 2019.", "Lumen Labs moved its office to Porto in 2021."
    for n in range(1, 9):
        text = f"{statement} {other}" if n <= 3 else statement
        _ingest(bank, {f"notes-{n}.md": f"# Notes {n}\n\n{text}\n"})
        cycle = _merged_cycle(bank, f"cycle-{n:05d}")
        confidence.reinforce(bank, cycle)
        finish_cycle(bank, cycle)
    found, _ = insights.well_supported(bank, cycle)
    assert sorted(i.title for i in found) == [f"3 documents agree: {other}", f"8 documents agree: {statement}"]
    assert [len(i.evidence) for i in sorted(found, key=lambda i: -i.weight)] == [8, 3]


def test_a_longer_name_that_contains_a_gap_does_not_describe_it(bank: Bank) -> None:
    """A claim about "Northwind Capitalists" says nothing about Northwind Capital: names match as words."""
    _ingest(bank, {**FUNDED, "club.md": "# Spring meetings\n\nThe Northwind Capitalists club was founded by Northwind Capital.\n"})
    found, _ = insights.knowledge_gaps(bank, _merged_cycle(bank, "cycle-00001"))
    assert any("Northwind Capital" == i.title.removeprefix("Nothing here describes ") for i in found)


def test_an_insight_found_again_on_other_evidence_cites_only_that(bank: Bank) -> None:
    _ingest(bank, FUNDED)
    cycle = _merged_cycle(bank, "cycle-00001")
    found, edges = insights.knowledge_gaps(bank, cycle)
    gap = next(i for i in found if "Northwind Capital" in i.title)
    insights.write_insights(bank, [gap], [e for e in edges if e.head == gap.id], cycle.run_id)
    dropped, kept = gap.evidence[0], gap.evidence[1:]
    fresh = gap.model_copy(update={"evidence": [], "derived_from": [], "source_ids": []})  # found again
    again, again_edges = insights._cited(fresh, kept, insights._claims(bank, kept))
    insights.write_insights(bank, [again], again_edges, cycle.run_id)
    with bank.reading() as db:
        cited = {r[0] for r in db.sql("SELECT tail FROM edges WHERE head = ?", [gap.id])}
        stored = db.get_object(gap.id)
    assert cited == set(kept) | set(gap.about)
    assert dropped not in stored.evidence and dropped not in stored.derived_from
    assert bank.check_consistency()["consistent"]


def test_only_active_claims_link_things_in_the_community_graph(bank: Bank) -> None:
    """A plan or an insight citing two things, or a superseded claim, says nothing about them together."""
    from smb_core.evolve import communities
    from smb_core.model import Claim, Edge, EdgeType, Entity, Insight, Status, stable_id

    a, b, c = (Entity(id=stable_id("ent", n), title=n, entity_kind="organization") for n in ("Aa", "Bb", "Cc"))
    live = Claim(id=stable_id("clm", "live"), title="Aa funds Bb.", statement="Aa funds Bb.")
    old = Claim(id=stable_id("clm", "old"), title="Aa funds Cc.", statement="Aa funds Cc.", status=Status.SUPERSEDED)
    note = Insight(id=stable_id("ins", "note"), title="Bb and Cc", about=[b.id, c.id])
    bank.write([a, b, c, live, old, note], [Edge.between(x.id, y.id, EdgeType.REFERENCES)
                                              for x, y in ((live, a), (live, b), (old, a), (old, c), (note, b), (note, c))])
    graph = communities.cooccurrence_graph(bank)
    assert {frozenset(e) for e in graph.edges} == {frozenset((a.id, b.id))}


def test_a_capped_community_graph_keeps_the_links_most_claims_make(bank: Bank) -> None:
    """A large bank's graph is bounded: the pairs named together by the most claims stay, ties by id."""
    from smb_core.evolve import communities
    from smb_core.model import Claim, Edge, EdgeType, Entity, stable_id

    things = {n: Entity(id=stable_id("ent", n), title=n, entity_kind="organization") for n in ("Aa", "Bb", "Cc", "Dd")}
    named = [("Aa", "Bb"), ("Aa", "Bb"), ("Cc", "Dd"), ("Aa", "Cc"), ("Bb", "Dd"), ("Bb", "Dd"), ("Bb", "Dd")]
    claims = [Claim(id=stable_id("clm", str(i)), title=f"{x} and {y}.", statement=f"{x} meets {y}.")
              for i, (x, y) in enumerate(named)]
    bank.write([*things.values(), *claims], [Edge.between(c.id, things[n].id, EdgeType.REFERENCES)
                                             for c, pair in zip(claims, named) for n in pair])
    ends = {"Aa-Bb": (things["Aa"].id, things["Bb"].id), "Bb-Dd": (things["Bb"].id, things["Dd"].id)}
    single = sorted(tuple(sorted((things[x].id, things[y].id))) for x, y in (("Cc", "Dd"), ("Aa", "Cc")))

    whole = communities.cooccurrence_graph(bank)
    assert whole.number_of_edges() == 4 and whole.edges[ends["Bb-Dd"]]["weight"] == 3
    capped = communities.cooccurrence_graph(bank, max_links=3)
    assert {frozenset(e) for e in capped.edges} == {frozenset(ends["Aa-Bb"]), frozenset(ends["Bb-Dd"]),
                                                   frozenset(single[0])}
    assert capped.edges[ends["Aa-Bb"]]["weight"] == 2 and capped.nodes[things["Aa"].id]["title"] == "Aa"


def test_the_layers_of_one_cycle_read_the_community_graph_it_computed_once(bank: Bank) -> None:
    """Communities, bridges, abstractions and discoveries of a cycle share one graph (each build took
    40-50 s at 2.6 million objects): kept per cycle, recomputed for the next cycle or another cap."""
    from smb_core.evolve import communities
    from smb_core.model import Claim, Edge, EdgeType, Entity, stable_id

    aa, bb, cc = (Entity(id=stable_id("ent", n), title=n, entity_kind="organization") for n in ("Aa", "Bb", "Cc"))
    first = Claim(id=stable_id("clm", "1"), title="Aa funds Bb.", statement="Aa funds Bb.")
    bank.write([aa, bb, cc, first], [Edge.between(first.id, x.id, EdgeType.REFERENCES) for x in (aa, bb)])
    links = lambda graph: {(*sorted(e), graph.edges[e]["weight"]) for e in graph.edges}  # noqa: E731
    assert links(communities.cooccurrence_graph(bank, cycle="cycle-00001")) == {(*sorted((aa.id, bb.id)), 1)}
    later = Claim(id=stable_id("clm", "2"), title="Bb hires Cc.", statement="Bb hires Cc.")
    bank.write([later], [Edge.between(later.id, x.id, EdgeType.REFERENCES) for x in (bb, cc)])
    assert links(communities.cooccurrence_graph(bank, cycle="cycle-00001")) == {(*sorted((aa.id, bb.id)), 1)}
    both = {(*sorted((aa.id, bb.id)), 1), (*sorted((bb.id, cc.id)), 1)}
    assert links(communities.cooccurrence_graph(bank, cycle="cycle-00001", max_links=5)) == both
    assert links(communities.cooccurrence_graph(bank, cycle="cycle-00002")) == both
    with bank.reading() as db:  # only the latest cycle's links are kept
        assert db.sql("SELECT DISTINCT cycle FROM cooccurrence") == [("cycle-00002",)]
