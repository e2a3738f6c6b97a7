"""Split overloaded canonical concepts: one name used in clearly different senses.

The vectors of the words around each mention (a window of the sentence it was found in) are clustered
(agglomerative, average link), for the concepts whose whole sentences already fall apart. When the
windows fall into two or more well separated groups, each group becomes a focused sub-concept, linked
from the original with `evolves_into`; the original is kept with status `split`, and every one of its
mentions moves to a sense, so that each still resolves to an active object.

A window, not the whole sentence: the words around a name tell its sense ("in the face of the enemy",
"A Face in the Fog"), while a whole sentence tells its topic, and the topics of any two documents differ
("actor" in a sentence about a film and in one about a politician is one sense).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
from spacy.lang.en.stop_words import STOP_WORDS

from smb_core.bank import Bank
from smb_core.evolve.contexts import context_vectors
from smb_core.evolve.cycle import Cycle, batches_by_weight
from smb_core.model import CanonicalConcept, Edge, EdgeType, Status, stable_id
from smb_core.recall.lexical import tokenize
from smb_core.stores.metadata import id_filter

MIN_MEMBERS = 4
#: Words either side of a mention that its sense is read from.
WINDOW_WORDS = 4
MIN_GROUP = 2
#: Two senses are separate when the average similarity between their contexts is below this...
SEPARATION = 0.3
#: ...and each sense is coherent: its contexts are on average at least this similar to each other.
COHESION = 0.45
#: Contexts clustered at most per concept (a name used a thousand times is sampled evenly).
MAX_CONTEXTS = 400
#: Between global passes, a touched concept is examined again only when the documents since the last
#: global passes brought at least this share of its mentions: re-embedding a thousand contexts for
#: one new mention changes nothing. A cycle with global passes examines every concept that grew.
RESPLIT_SHARE = 0.1
_PUNCTUATION = "\"'.,;:!?()[]“”‘’«»"


def sense_groups(vectors: np.ndarray, threshold: float = SEPARATION) -> list[list[int]]:
    """Average-link agglomerative clustering: merge groups while their mean cosine is >= threshold.
    One similarity matrix updated in place (Lance-Williams), so n contexts cost O(n^2) memory and
    n argmax passes; beyond MAX_CONTEXTS an even sample is clustered and the rest join the group
    they are most similar to on average."""
    n = len(vectors)
    if n > MAX_CONTEXTS:
        sample = np.linspace(0, n - 1, MAX_CONTEXTS).astype(int)
        groups = [[int(sample[i]) for i in g] for g in sense_groups(vectors[sample], threshold)]
        means = np.stack([vectors[g].mean(axis=0) for g in groups])
        chosen = set(sample.tolist())
        for i in range(n):
            if i not in chosen:
                groups[int(np.argmax(means @ vectors[i]))].append(i)
        return [sorted(g) for g in groups]
    sims = (vectors @ vectors.T).astype(np.float64)
    np.fill_diagonal(sims, -np.inf)
    sizes = np.ones(n)
    members = [[i] for i in range(n)]
    alive = n
    while alive > 1:
        i, j = sorted(divmod(int(np.argmax(sims)), n))
        if sims[i, j] < threshold:
            break
        merged = (sizes[i] * sims[i] + sizes[j] * sims[j]) / (sizes[i] + sizes[j])
        sims[i, :], sims[:, i] = merged, merged
        sims[j, :], sims[:, j] = -np.inf, -np.inf
        sims[i, i] = -np.inf
        sizes[i] += sizes[j]
        members[i] += members[j]
        members[j] = []
        alive -= 1
    return [m for m in members if m]


def mention_window(sentence: str, name: str, words: int = WINDOW_WORDS) -> str | None:
    """The mention of `name` in `sentence` with `words` words either side, or None when the name is
    not found (a word of the sentence may inflect a word of the name: "films", "compaction's", "companies";
    "Warner" is not "war").
    Other names in the window become "someone": "son of Alfonso" and "son of Wingfield" are one sense,
    and the names would otherwise group the mentions by family."""
    tokens = sentence.split()
    plain = [t.lower().strip(_PUNCTUATION) for t in tokens]
    wanted = [w.lower() for w in name.split()]
    for i in range(len(plain) - len(wanted) + 1):
        if all(_inflects(plain[i + k], w) for k, w in enumerate(wanted)):
            start, end = max(0, i - words), i + len(wanted) + words
            return " ".join(t if i <= n < i + len(wanted) or not _is_name(t) else "someone"
                            for n, t in enumerate(tokens[start:end], start))
    return None


_ENDINGS = ("", "s", "es", "'s", "’s", "'", "’")


def _inflects(word: str, stem: str) -> bool:
    """`word` is `stem`, its plural or possessive, or begins a compound with it ("Paris-based", "Lumen/Acme")."""
    rest = word[len(stem):] if word.startswith(stem) else None
    if rest is not None and (rest in _ENDINGS or rest[0] in "-–—/"):
        return True
    return stem.endswith("y") and word[: len(stem) - 1] == stem[:-1] and word[len(stem) - 1:] in ("ies", "ies'", "ies’")


def _is_name(token: str) -> bool:
    word = token.strip(_PUNCTUATION)
    return word[:1].isupper() and word.lower() not in STOP_WORDS


def _senses(vectors: np.ndarray) -> list[list[int]]:
    """The groups of contexts that stand as senses: large and coherent enough."""
    return [g for g in sense_groups(vectors) if len(g) >= MIN_GROUP and _cohesion(vectors, g) >= COHESION]


def _cohesion(vectors: np.ndarray, group: list[int]) -> float:
    sims = vectors[group] @ vectors[group].T
    n = len(group)
    return float((sims.sum() - n) / (n * (n - 1))) if n > 1 else 1.0


def _sense_label(contexts: list[str], others: list[str], name: str) -> str:
    """The word most typical of this group's contexts compared with the other groups'."""
    own = Counter(w for c in contexts for w in set(tokenize(c)))
    rest = Counter(w for c in others for w in set(tokenize(c)))
    skip = set(tokenize(name))
    scored = sorted(((own[w] / len(contexts)) - (rest[w] / max(1, len(others))), w) for w in own if w not in skip)
    return scored[-1][1] if scored else "sense"


def _assign(concept: CanonicalConcept, members: dict, group_members: list, vectors: np.ndarray,
            groups: list[list[int]]) -> list[list]:
    """Every member of a split concept goes to one sense, so that each still resolves to an active
    canonical object: the clustered groups keep theirs; a mention outside them (a sense too small or
    loose to stand alone) joins the sense its context is closest to on average; a mention without a
    context sentence (or whose name its sentence does not spell out) joins the largest sense."""
    senses = [[group_members[i] for i in g] for g in groups]
    placed = {group_members[i].id for g in groups for i in g}
    position = {m.id: i for i, m in enumerate(group_members)}
    means = np.stack([vectors[g].mean(axis=0) for g in groups])
    largest = max(range(len(groups)), key=lambda n: (len(groups[n]), -n))
    for member_id in concept.members:
        member = members.get(member_id)
        if member is None or member_id in placed or getattr(member, "merged_into", None) != concept.id:
            continue
        i = position.get(member_id)
        senses[largest if i is None else int(np.argmax(means @ vectors[i]))].append(member)
        placed.add(member_id)
    return senses


def concepts_grown_by(bank: Bank, source_ids: list[str]) -> list[str]:
    """Canonical concepts with a member mention from the given documents."""
    if not source_ids:
        return []
    with bank.reading() as db:
        return [r[0] for r in db.sql(
            "SELECT DISTINCT json_extract_string(data, '$.merged_into') AS concept FROM objects "
            "WHERE type = 'concept' AND status = 'merged' AND source IN (SELECT unnest(?::VARCHAR[])) "
            "AND concept IS NOT NULL ORDER BY concept", [source_ids])]


def split_overloaded(bank: Bank, cycle: Cycle, candidate_ids: list[str] | None = None,
                     grown_since: list[str] | None = None) -> tuple[list, list, list]:
    """Returns (new sub-concepts, updated objects, edges) of all the batches of `split_batches`."""
    subs, updated, edges = [], [], []
    for found in split_batches(bank, cycle, candidate_ids, grown_since):
        subs += found[0]
        updated += found[1]
        edges += found[2]
    return subs, updated, edges


def split_batches(bank: Bank, cycle: Cycle, candidate_ids: list[str] | None = None,
                  grown_since: list[str] | None = None) -> Iterator[tuple[list, list, list]]:
    """Yields (new sub-concepts, updated objects, edges) a batch of concepts at a time, for the caller
    to write before the next: a first cycle examines every canonical concept, and a run stopped half-way
    then keeps the senses it found (a split concept is not examined again). With `grown_since` (source
    ids), concepts that those documents added few mentions to (see RESPLIT_SHARE) are left as they are.

    Two readings: first the whole sentences, whose vectors the bank already holds (a concept whose
    sentences fall in one group has one sense); then, only for the concepts whose sentences separate,
    the windows around the mentions, which are embedded here and decide."""
    with bank.reading() as db:
        if candidate_ids is None:
            rows = db.sql("SELECT id FROM objects WHERE type = 'canonical_concept' AND status = 'active' "
                          "AND len(derived_from) >= ?", [MIN_MEMBERS])
            candidate_ids = [r[0] for r in rows]
        fresh: set[str] | None = None  # the mentions the documents `grown_since` added
        if grown_since is not None:
            fresh = {r[0] for r in db.sql("SELECT id FROM objects WHERE type = 'concept' AND source IN "
                                          "(SELECT unnest(?::VARCHAR[]))", [list(grown_since)])}
        where, params = id_filter("id", sorted(set(candidate_ids)))
        sizes = db.sql(f"SELECT id, len(derived_from) FROM objects WHERE {where} ORDER BY id", params)
    for batch in batches_by_weight(sizes, BATCH_MEMBERS):  # each concept is decided on its own members alone
        yield _split_batch(bank, cycle, batch, fresh)


#: Members read at once (about): a first cycle examines every canonical concept, and at 50,000 documents
#: their members, with their sentences' vectors, would otherwise all be held together.
BATCH_MEMBERS = 20_000


def _split_batch(bank: Bank, cycle: Cycle, concept_ids: list[str],
                 fresh: set[str] | None) -> tuple[list, list, list]:
    """`split_overloaded` for some of the concepts (`fresh`: the new mentions, None in a global pass)."""
    with bank.reading() as db:
        concepts = db.get_objects(concept_ids)
        if fresh is not None:  # too few new mentions to re-split: its members are not even read
            concepts = {i: c for i, c in concepts.items() if len(fresh.intersection(c.members)) >= MIN_GROUP}
        # Which concepts to examine is decided on the members' sentences alone: a concept with thousands
        # of members that few new mentions reached is not worth parsing every member's JSON.
        where, params = id_filter("id", sorted({m for c in concepts.values() for m in c.members}))
        sentences = {r[0]: r[1:] for r in db.sql(
            f"SELECT id, title, json_extract_string(data, '$.description') FROM objects WHERE {where}",
            params)}
        chosen = []
        for concept in concepts.values():
            located = [(m, mention_window(sentences[m][1], sentences[m][0]))
                       for m in concept.members if m in sentences and sentences[m][1]]
            located = [(m, window) for m, window in located if window]
            if len(located) < MIN_MEMBERS or concept.status != Status.ACTIVE:
                continue
            if fresh is not None:
                added = sum(1 for m, _ in located if m in fresh)
                if added < max(MIN_GROUP, RESPLIT_SHARE * len(located)):
                    continue
            chosen.append((concept, located))
        members = db.get_objects(sorted({m for concept, _ in chosen for m in concept.members}))
    subs, updated, edges = [], [], []
    examined = [(concept, [(members[m], window) for m, window in located]) for concept, located in chosen]
    sentence_of = context_vectors(bank, [m for _, located in examined for m, _ in located])
    examined = [(concept, [m for m, _ in located], [w for _, w in located]) for concept, located in examined
                if len(_senses(np.stack([sentence_of[m.id] for m, _ in located]))) >= 2]
    distinct = sorted({w for _, _, windows in examined for w in windows})
    window_vectors = dict(zip(distinct, bank.embedder.embed(distinct))) if distinct else {}
    for concept, group_members, contexts in examined:
        vectors = np.stack([window_vectors[w] for w in contexts])
        groups = _senses(vectors)
        if len(groups) < 2:
            continue
        senses = _assign(concept, members, group_members, vectors, groups)
        for index, group in enumerate(groups):
            own = [contexts[i] for i in group]
            rest = [contexts[i] for g in groups if g is not group for i in g]
            label = _sense_label(own, rest, concept.title)
            core = sorted(group_members[i].id for i in group)
            ids = sorted(m.id for m in senses[index])
            sub = CanonicalConcept(
                id=stable_id("ccn", concept.id, *core[:3]), title=f"{concept.title} ({label})",
                description=f"'{concept.title}' in the sense of {label}: {group_members[group[0]].description}",
                sense=label,
                aliases=[concept.title], members=ids, derived_from=[concept.id, *ids],
                source_ids=sorted({s for m in senses[index] for s in m.source_ids}),
                confidence=concept.confidence, mentions=len(ids), run_id=cycle.run_id, tags=[cycle.tag, "split"],
            )
            subs.append(sub)
            edges.append(Edge.between(concept.id, sub.id, EdgeType.EVOLVES_INTO))
            for member in senses[index]:
                member.merged_into = sub.id
                updated.append(member)
        concept.status, concept.status_reason = Status.SPLIT, f"split into {len(groups)} senses in {cycle.key}"
        updated.append(concept)
    return subs, updated, edges
