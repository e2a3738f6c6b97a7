"""Seeded generator of fictional encyclopedia-style markdown documents for the scale benchmark.

A "world" of people, organisations, places, products and events is derived from the seed: entity
`j` (kind `KINDS[j % 5]`) has a unique name and facts (birth year, employer, founder, headquarters,
maker, venue, ...) that point at other entities, so the same facts recur in several documents.
Document `i` is about entity `i` and mentions a dozen or more others, with markdown links to their
documents. Everything is a pure function of (seed, index): the same N always gives the same files,
and the first N documents of a larger corpus are the N documents of a smaller one.

    from generate import generate_document, generated_questions
    doc = generate_document(12)        # GeneratedDocument(relative, title, text, subject, mentions)
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from functools import lru_cache

KINDS = ("person", "organization", "place", "product", "event")
FOLDER = "generated"

FIRST = ("Ilse", "Marek", "Amara", "Tobias", "Lena", "Rafael", "Ingrid", "Dmitri", "Sofia", "Kwame", "Helena",
         "Anton", "Priya", "Jonas", "Mireille", "Oskar", "Yuki", "Farah", "Henrik", "Clara", "Mateo", "Astrid",
         "Emeka", "Nadia", "Pieter", "Leila", "Viktor", "Rosa", "Samuel", "Greta", "Idris", "Maren", "Lucian",
         "Beatriz", "Tomasz", "Elif", "Caspar", "Wanjiru", "Felix", "Ottilie", "Hugo", "Noor", "Bruno", "Signe",
         "Ravi", "Agnes", "Stellan", "Camille", "Desmond", "Freya", "Gideon", "Hanna", "Ivo", "Judith", "Kasimir",
         "Linnea", "Moritz", "Nina", "Orlando", "Paula", "Quentin", "Ruth", "Sven", "Thea", "Ulrich", "Vera",
         "Walter", "Ximena", "Yusuf", "Zofia", "Adrian", "Bettina", "Cyrus", "Dagny", "Elias", "Fatima", "Gustav",
         "Hedda", "Ismail", "Johanna", "Konrad", "Liv", "Magnus", "Nora", "Olga", "Per", "Rahel", "Stefan",
         "Tilde", "Umar", "Valentina", "Wilhelm", "Yara", "Zeno", "Alma", "Bastian", "Cordelia", "Dario", "Edith",
         "Florian")
_ONSET = ("Var", "Kor", "Bel", "Mar", "Hal", "Dun", "Fen", "Lor", "Ost", "Tam", "Wes", "Ash", "Bran", "Cal",
          "Dre", "Eld", "Gar", "Har", "Iv", "Jor", "Kes", "Lin", "Mor", "Nor", "Pel", "Quen", "Ros", "Sel", "Tor",
          "Ul", "Val", "Wyn")
_MIDDLE = ("", "a", "e", "i", "o", "en", "ar", "el", "in", "or")
_ENDING = ("ga", "ski", "son", "berg", "wick", "ley", "more", "ton", "ford", "dal", "ric", "vik", "man", "ard",
           "ell", "ins")
_COMPOUND_A = ("North", "Blue", "Silver", "Iron", "Red", "Green", "Stone", "Bright", "Clear", "High", "Oak",
               "Star", "Sun", "Frost", "Gold", "Deep")
_COMPOUND_B = ("wind", "field", "bridge", "water", "gate", "stone", "light", "wood", "point", "crest", "haven",
               "ridge", "brook", "vale", "line", "peak")
_ORG_SUFFIX = ("Labs", "Dynamics", "Institute", "Systems", "Foundation", "Group", "Works", "Analytics", "Robotics",
               "Press", "University", "Holdings", "Bank", "Energy", "Pharmaceuticals", "Logistics")
_PLACE_PATTERN = ("{}", "Port {}", "Lake {}", "New {}", "{} Falls", "{} Bay", "{} Heights", "Upper {}")
_BRAND = ("Aurora", "Helix", "Nimbus", "Quasar", "Vertex", "Zephyr", "Orion", "Atlas", "Lumen", "Pulse", "Echo",
          "Nova", "Titan", "Cobalt", "Sierra", "Delta", "Kestrel", "Meridian", "Halcyon", "Solace", "Tundra",
          "Cascade", "Ember", "Falcon", "Glacier", "Harbor", "Indigo", "Juniper", "Kite", "Lattice", "Mosaic",
          "Onyx")
_SERIES = ("One", "Pro", "Max", "Air", "Mini", "Edge", "Core", "Flow", "Link", "Vision")
_EVENT_TYPE = ("Summit", "Conference", "Expo", "Symposium", "Festival", "Forum", "Trade Fair", "Congress",
               "Workshop", "Accord")
COUNTRIES = ("Norway", "Portugal", "Canada", "Kenya", "Chile", "Japan", "Poland", "Ireland", "Estonia", "Ghana",
             "New Zealand", "Austria", "Uruguay", "Finland", "Morocco", "Vietnam", "Iceland", "Croatia", "Peru",
             "Denmark")
TOPICS = ("quantum sensing", "battery chemistry", "coastal ecology", "machine translation", "urban planning",
          "protein folding", "wind energy", "medieval history", "supply chain software", "glacier monitoring",
          "soil microbiology", "satellite imaging", "public health", "speech recognition", "water purification",
          "materials science", "behavioural economics", "robotic surgery", "seismology", "textile design",
          "cryptography", "crop genetics", "marine navigation", "climate modelling", "children's literature",
          "railway engineering", "antibiotic resistance", "graph databases", "solar cells", "archival science")
ROLES = ("head of research", "chief engineer", "a data analyst", "chief executive", "a senior scientist",
         "director of operations", "a product designer", "head of the legal department", "a field researcher",
         "chief financial officer", "an editor", "a lead developer")
CATEGORIES = ("handheld scanner", "electric bicycle", "water filter", "weather station", "drone",
              "hearing aid", "solar inverter", "database engine", "lab centrifuge", "e-reader", "heat pump",
              "navigation app")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
ADJECTIVES = ("influential", "controversial", "widely cited", "short-lived", "ambitious", "modest", "pioneering",
              "well-funded", "unusual", "careful")

#: Distinct names per kind (enough for a million documents).
_SURNAMES = len(_ONSET) * len(_MIDDLE) * len(_ENDING)


def _surname(k: int) -> str:
    a, k = k % len(_ONSET), k // len(_ONSET)
    b, k = k % len(_MIDDLE), k // len(_MIDDLE)
    return _ONSET[a] + _MIDDLE[b] + _ENDING[k % len(_ENDING)]


def _scramble(m: int, size: int) -> int:
    """A bijection of range(size) (m * an odd prime coprime to size), so neighbours get unrelated names."""
    return (m * 7919) % size


def _stem(k: int) -> str:
    """A place-like word: the 256 compounds first, then surnames."""
    compounds = len(_COMPOUND_A) * len(_COMPOUND_B)
    if k < compounds:
        return _COMPOUND_A[k % len(_COMPOUND_A)] + _COMPOUND_B[k // len(_COMPOUND_A)]
    return _surname(k - compounds)


def entity_name(j: int) -> str:
    kind, m = KINDS[j % len(KINDS)], j // len(KINDS)
    if kind == "person":
        size = len(FIRST) * _SURNAMES
        k = _scramble(m, size)
        return f"{FIRST[k % len(FIRST)]} {_surname(k // len(FIRST))}"
    stems = len(_COMPOUND_A) * len(_COMPOUND_B) + _SURNAMES
    if kind == "organization":
        k = _scramble(m, stems * len(_ORG_SUFFIX))
        return f"{_stem(k // len(_ORG_SUFFIX))} {_ORG_SUFFIX[k % len(_ORG_SUFFIX)]}"
    if kind == "place":
        k = _scramble(m, stems * len(_PLACE_PATTERN))
        return _PLACE_PATTERN[k % len(_PLACE_PATTERN)].format(_stem(k // len(_PLACE_PATTERN)))
    if kind == "product":  # "Brand Series N": unique for any m, the number grows past 12,800 products
        size = len(_BRAND) * len(_SERIES) * 40
        k = _scramble(m % size, size) + (m // size) * size
        return f"{_BRAND[k % len(_BRAND)]} {_SERIES[(k // len(_BRAND)) % len(_SERIES)]} {k // (size // 40) + 2}"
    k = _scramble(m, stems * len(_EVENT_TYPE))
    return f"{_stem(k // len(_EVENT_TYPE))} {_EVENT_TYPE[k % len(_EVENT_TYPE)]}"


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def relative_path(j: int) -> str:
    return f"{FOLDER}/{j:05d}-{slugify(entity_name(j))[:50]}.md"


@dataclass(frozen=True)
class Entity:
    id: int
    kind: str
    name: str
    facts: dict = field(hash=False, compare=False)


def _ref(rng: random.Random, j: int, kind: str) -> int:
    """Another entity of `kind`: a third of the time one of the first 250 (hubs that many documents
    mention), else any entity up to a little past `j`, skewed towards low ids."""
    span = 250 if rng.random() < 0.25 else j + 60
    candidate = int(span * rng.random() ** 1.2)
    target = candidate - candidate % len(KINDS) + KINDS.index(kind)
    return target + len(KINDS) if target == j else target


@lru_cache(maxsize=200_000)
def entity(j: int, seed: int = 0) -> Entity:
    rng = random.Random(f"{seed}/entity/{j}")
    kind = KINDS[j % len(KINDS)]
    f: dict = {"topic": rng.choice(TOPICS), "month": rng.choice(MONTHS), "day": rng.randint(1, 28)}
    if kind == "person":
        born = rng.randint(1935, 1994)
        f.update(born=born, birthplace=_ref(rng, j, "place"), employer=_ref(rng, j, "organization"),
                 joined=born + rng.randint(23, 40), role=rng.choice(ROLES), school=_ref(rng, j, "organization"),
                 graduated=born + rng.randint(21, 26), mentor=_ref(rng, j, "person"),
                 product=_ref(rng, j, "product"), award=_ref(rng, j, "event"), award_year=born + rng.randint(30, 45))
        f["he"] = rng.choice(("He", "She"))
    elif kind == "organization":
        founded = rng.randint(1890, 2016)
        f.update(founded=founded, founder=_ref(rng, j, "person"), hq=_ref(rng, j, "place"),
                 product=_ref(rng, j, "product"), partner=_ref(rng, j, "organization"),
                 employees=rng.choice((40, 120, 350, 900, 2400, 6000, 15000)), ceo=_ref(rng, j, "person"),
                 ceo_year=max(founded + 3, rng.randint(1995, 2022)))
    elif kind == "place":
        f.update(country=rng.choice(COUNTRIES), population=rng.randint(2, 900) * 1000,
                 founded=rng.randint(1150, 1890), mayor=_ref(rng, j, "person"), twin=_ref(rng, j, "place"),
                 employer=_ref(rng, j, "organization"), mayor_year=rng.randint(2004, 2022))
    elif kind == "product":
        released = rng.randint(1998, 2023)
        f.update(released=released, maker=_ref(rng, j, "organization"), designer=_ref(rng, j, "person"),
                 category=rng.choice(CATEGORIES), predecessor=_ref(rng, j, "product"),
                 price=rng.choice((49, 99, 199, 349, 799, 1299, 2499)), launch=_ref(rng, j, "event"))
    else:
        year = rng.randint(1975, 2023)
        f.update(year=year, venue=_ref(rng, j, "place"), organiser=_ref(rng, j, "organization"),
                 keynote=_ref(rng, j, "person"), attendees=rng.choice((150, 400, 1200, 3500, 9000, 25000)),
                 next_venue=_ref(rng, j, "place"))
    return Entity(j, kind, entity_name(j), f)


@dataclass(frozen=True)
class GeneratedDocument:
    relative: str  # path inside the corpus folder
    title: str
    text: str
    subject: int  # the entity the document is about
    mentions: tuple[int, ...]  # other entities it names

    @property
    def words(self) -> int:
        return len(self.text.split())


class _Writer:
    """Builds one document: sentences from varied templates, every named entity recorded."""

    def __init__(self, i: int, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(f"{seed}/doc/{i}")
        self.subject = entity(i, seed)
        self.mentions: dict[int, None] = {}

    def n(self, j: int) -> str:
        if j != self.subject.id:
            self.mentions[j] = None
        return entity(j, self.seed).name

    def e(self, j: int) -> Entity:
        return entity(j, self.seed)

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)

    def when(self, year: int) -> str:
        """"in March 2014", "on 3 March 2014" or "in 2014"."""
        r = self.rng
        return r.choice((f"in {r.choice(MONTHS)} {year}", f"on {r.randint(1, 28)} {r.choice(MONTHS)} {year}",
                         f"in {year}"))

    # ---- facts of the subject (stable across documents) ---------------------------------
    def core(self) -> list[str]:
        s, f, k = self.subject.name, self.subject.facts, self.subject.kind
        he = f.get("he", "It")
        if k == "person":
            return [
                self.pick(f"{s} was born on {f['day']} {f['month']} {f['born']} in {self.n(f['birthplace'])}.",
                          f"{s} (born {f['month']} {f['born']}, {self.n(f['birthplace'])}) is a specialist "
                          f"in {f['topic']}."),
                self.pick(f"{he} studied {f['topic']} at {self.n(f['school'])} and graduated in {f['graduated']}.",
                          f"After graduating from {self.n(f['school'])} in {f['graduated']}, {he.lower()} worked "
                          f"on {f['topic']}."),
                self.pick(f"{s} joined {self.n(f['employer'])} in {f['month']} {f['joined']} as {f['role']}.",
                          f"In {f['month']} {f['joined']}, {s} joined {self.n(f['employer'])} as {f['role']}.",
                          f"{self.n(f['employer'])} hired {s} as {f['role']} in {f['joined']}."),
                self.pick(f"{he} was mentored by {self.n(f['mentor'])}.",
                          f"{self.n(f['mentor'])} supervised {s}'s early work."),
                f"{s} led the design of the {self.n(f['product'])}.",
                self.pick(f"{s} received an award at the {self.n(f['award'])} in {f['award_year']}.",
                          f"In {f['award_year']} the {self.n(f['award'])} honoured {s} for work on {f['topic']}."),
            ]
        if k == "organization":
            return [
                self.pick(f"{s} was founded in {f['founded']} by {self.n(f['founder'])}.",
                          f"{self.n(f['founder'])} founded {s} in {f['month']} {f['founded']}."),
                self.pick(f"{s} is headquartered in {self.n(f['hq'])} and employs about {f['employees']:,} people.",
                          f"The company has its headquarters in {self.n(f['hq'])}; it employs roughly "
                          f"{f['employees']:,} staff."),
                f"{s} works mainly on {f['topic']}.",
                self.pick(f"Its best-known product is the {self.n(f['product'])}.",
                          f"{s} makes the {self.n(f['product'])}."),
                f"{self.n(f['ceo'])} became chief executive of {s} in {f['ceo_year']}.",
                f"{s} has a long-standing partnership with {self.n(f['partner'])}.",
            ]
        if k == "place":
            return [
                f"{s} is a town in {f['country']} with a population of about {f['population']:,}.",
                self.pick(f"{s} was first mentioned in records from {f['founded']}.",
                          f"The settlement of {s} dates back to {f['founded']}."),
                f"{self.n(f['mayor'])} was elected mayor of {s} in {f['mayor_year']}.",
                f"The largest employer in {s} is {self.n(f['employer'])}.",
                f"{s} is twinned with {self.n(f['twin'])}.",
                f"The town is known for research in {f['topic']}.",
            ]
        if k == "product":
            return [
                self.pick(f"The {s} is a {f['category']} made by {self.n(f['maker'])}.",
                          f"{self.n(f['maker'])} makes the {s}, a {f['category']}."),
                f"{self.n(f['maker'])} released the {s} in {f['month']} {f['released']}.",
                f"{self.n(f['designer'])} designed the {s}.",
                f"The {s} replaced the {self.n(f['predecessor'])} and sold for {f['price']} euros at launch.",
                f"It was first shown at the {self.n(f['launch'])}.",
                f"Reviewers praised its use of {f['topic']}.",
            ]
        return [
            f"The {s} took place in {self.n(f['venue'])} in {f['month']} {f['year']}.",
            f"{self.n(f['organiser'])} organised the {s}, which drew about {f['attendees']:,} visitors.",
            f"{self.n(f['keynote'])} gave the opening keynote on {f['topic']}.",
            f"The next edition moved to {self.n(f['next_venue'])}.",
        ]

    # ---- narrative filler: dated sentences naming other entities -------------------------
    def sentence(self, year: int) -> str:
        r, s, k = self.rng, self.subject.name, self.subject.kind
        person, org = self.n(_ref(r, self.subject.id, "person")), self.n(_ref(r, self.subject.id, "organization"))
        place, event = self.n(_ref(r, self.subject.id, "place")), self.n(_ref(r, self.subject.id, "event"))
        product, topic, when = self.n(_ref(r, self.subject.id, "product")), r.choice(TOPICS), self.when(year)
        When = when[0].upper() + when[1:]  # noqa: N806
        adj = r.choice(ADJECTIVES)
        a_adj = ("an " if adj[0] in "aeiou" else "a ") + adj
        name = f"the {s}" if k in ("product", "event") else s
        common = [
            f"{When}, {person} described {name} as {adj} in an interview with {org}.",
            f"{person} wrote {a_adj} essay about {name} in {year}.",
            f"A report by {org} in {year} compared {name} with the {product}.",
            f"{When}, a delegation from {place} visited {org} to learn about {topic}.",
            f"{org} cited {name} in its annual review for {year}.",
            f"During {year}, {person} and colleagues from {org} studied {topic} in {place}.",
            f"The {event} of {year} included a session on {name}.",
        ]
        specific = {
            "person": [
                f"{When}, {s} moved to {place} to work with {person} on {topic}.",
                f"{s} published {a_adj} paper on {topic} with {person} in {year}.",
                f"{s} presented the {product} at the {event} in {year}.",
                f"In {year}, {s} advised {org} on {topic}.",
                f"{s} left {org} {when} after a dispute about funding.",
                f"{s} taught a course on {topic} at {org} from {year} to {year + r.randint(1, 6)}.",
            ],
            "organization": [
                f"{When}, {s} opened an office in {place}.",
                f"{s} acquired a stake in {org} in {year}.",
                f"{s} hired {person} as {r.choice(ROLES)} {when}.",
                f"{s} sponsored the {event} in {year}.",
                f"In {year}, {s} launched a programme on {topic} together with {org}.",
                f"{s} signed a supply agreement with {org} {when}.",
            ],
            "place": [
                f"In {year}, {org} built a research centre in {s}.",
                f"{s} hosted the {event} {when}.",
                f"{person} opened a museum of {topic} in {s} in {year}.",
                f"A flood damaged the harbour of {s} {when}.",
                f"In {year}, {s} signed a cooperation agreement with {place}.",
                f"{org} moved its regional office to {s} in {year}.",
            ],
            "product": [
                f"{When}, {org} ordered several thousand units of the {s}.",
                f"{person} reviewed the {s} for a trade magazine in {year}.",
                f"A new version of the {s} was shown at the {event} in {year}.",
                f"The {s} was recalled in {place} {when} after a fault in its {topic} module.",
                f"{org} built a competitor to the {s} in {year}.",
            ],
            "event": [
                f"At the {s} in {year}, {person} announced the {product}.",
                f"{org} withdrew from the {s} in {year}.",
                f"In {year}, the {s} added a track on {topic} chaired by {person}.",
                f"Delegates from {place} attended the {s} for the first time in {year}.",
                f"{person} chaired the programme committee of the {s} in {year}.",
            ],
        }[k]
        return r.choice(specific + specific + common)

    def start_year(self) -> int:
        f = self.subject.facts
        return {"person": f.get("joined", 2000) - 5, "organization": f.get("founded", 1990),
                "place": 1950, "product": f.get("released", 2005), "event": f.get("year", 1990)}[self.subject.kind]

    def build(self, target_words: int) -> str:
        r, s, k, f = self.rng, self.subject, self.subject.kind, self.subject.facts
        core = self.core()
        lead = " ".join(core[:3])
        rest = " ".join(core[3:])
        sections = {"person": ("Early life", "Career", "Research", "Later work", "Public life", "Legacy"),
                    "organization": ("History", "Operations", "Products", "Partnerships", "Controversies",
                                     "Recent years"),
                    "place": ("History", "Economy", "Culture", "Infrastructure", "Recent developments",
                              "Notable people"),
                    "product": ("Development", "Design", "Reception", "Sales", "Later versions", "Legacy"),
                    "event": ("Background", "Programme", "Attendance", "Outcomes", "Later editions", "Reception")}[k]
        year = max(1900, min(2015, self.start_year()))
        parts = [f"# {s.name}\n", lead + "\n", f"## {sections[0]}\n", rest + "\n"]
        timeline: list[str] = []
        words = sum(len(p.split()) for p in parts)
        section = 1
        while words < target_words:
            if section < len(sections) and r.random() < 0.45:
                parts.append(f"## {sections[section]}\n")
                section += 1
            paragraph = []
            for _ in range(r.randint(3, 6)):
                year = min(2024, year + r.randint(0, 2))
                sentence = self.sentence(year)
                paragraph.append(sentence)
                if r.random() < 0.2:
                    timeline.append(f"- **{year}**: {sentence}")
            if r.random() < 0.25:  # a list inside the prose
                items = [f"- {self.sentence(min(2024, year + r.randint(0, 3)))}" for _ in range(r.randint(2, 4))]
                text = " ".join(paragraph) + "\n\n" + r.choice(("Notable moments include:", "Among the highlights:",
                                                                 "Other developments:")) + "\n\n" + "\n".join(items)
            else:
                text = " ".join(paragraph)
            parts.append(text + "\n")
            words += len(text.split())
        parts.append("## Key facts\n")
        parts.append("\n".join(self.facts_list()) + "\n")
        if timeline:
            parts.append("## Timeline\n")
            parts.append("\n".join(timeline[:12]) + "\n")
        parts.append("## See also\n")
        written = "\n".join(parts)
        self.mentions = {j: None for j in self.mentions if _named(entity(j, self.seed).name, written)}
        links = list(self.mentions)[:10]
        parts.append("\n".join(f"- [{entity(j, self.seed).name}]({relative_path(j).split('/', 1)[1]})"
                               for j in links) + "\n")
        return "\n".join(parts)

    def facts_list(self) -> list[str]:
        f, k = self.subject.facts, self.subject.kind
        if k == "person":
            return [f"- Born: {f['day']} {f['month']} {f['born']}, {self.n(f['birthplace'])}",
                    f"- Field: {f['topic']}", f"- Employer: {self.n(f['employer'])} (since {f['joined']})",
                    f"- Alma mater: {self.n(f['school'])}"]
        if k == "organization":
            return [f"- Founded: {f['founded']}", f"- Founder: {self.n(f['founder'])}",
                    f"- Headquarters: {self.n(f['hq'])}", f"- Employees: {f['employees']:,}"]
        if k == "place":
            return [f"- Country: {f['country']}", f"- Population: {f['population']:,}",
                    f"- Mayor: {self.n(f['mayor'])}"]
        if k == "product":
            return [f"- Maker: {self.n(f['maker'])}", f"- Released: {f['month']} {f['released']}",
                    f"- Category: {f['category']}", f"- Launch price: {f['price']} euros"]
        return [f"- Date: {f['month']} {f['year']}", f"- Venue: {self.n(f['venue'])}",
                f"- Organiser: {self.n(f['organiser'])}", f"- Attendance: {f['attendees']:,}"]


def target_words(i: int, seed: int = 0) -> int:
    """Words of narrative: 200 to 2,400, skewed short (the whole document: about 350 to 2,700, median ~550)."""
    return int(200 * 12 ** (random.Random(f"{seed}/length/{i}").random() ** 2.5))


def _named(name: str, text: str) -> bool:
    """`name` appears as a whole name ("Northwind" is not named by "Northwind Labs")."""
    start = text.find(name)
    while start != -1:
        end = start + len(name)
        before = text[start - 1] if start else " "
        after = text[end:end + 2]
        if not before.isalnum() and not (after[:1].isalnum() or (after[:1] == " " and after[1:2].isupper())
                                         or after[1:2].isdigit()):
            return True
        start = text.find(name, start + 1)
    return False


def generate_document(i: int, seed: int = 0) -> GeneratedDocument:
    """Document `i` (about entity `i`), the same for the same (i, seed)."""
    writer = _Writer(i, seed)
    body = writer.build(target_words(i, seed))
    subject = writer.subject
    tags = [subject.kind, slugify(subject.facts["topic"])]
    created = f"{2019 + i % 6}-{1 + i % 12:02d}-{1 + i % 28:02d}"
    front = (f"---\ntitle: \"{subject.name}\"\ntype: {subject.kind}\ntags: [{', '.join(tags)}]\n"
             f"created: {created}\nid: gen-{i:05d}\n---\n\n")
    return GeneratedDocument(relative_path(i), subject.name, front + body, i, tuple(writer.mentions))


def generate_documents(n: int, seed: int = 0, start: int = 0):
    """Documents start .. start+n-1, lazily (a large corpus never sits in memory at once)."""
    for i in range(start, start + n):
        yield generate_document(i, seed)


def generated_questions(n: int = 100, seed: int = 0) -> list[dict]:
    """`n` questions about entities 0..n-1, each answered by that entity's document (`gold_titles`)."""
    questions = []
    for j in range(n):
        e = entity(j, seed)
        f = e.facts
        name = lambda k: entity(k, seed).name  # noqa: E731
        question = {
            "person": lambda: random.Random(f"{seed}/q/{j}").choice((
                f"When did {e.name} join {name(f['employer'])}?", f"Where was {e.name} born?",
                f"Who mentored {e.name}?", f"What did {e.name} study at {name(f['school'])}?")),
            "organization": lambda: random.Random(f"{seed}/q/{j}").choice((
                f"Who founded {e.name}?", f"Where is {e.name} headquartered?",
                f"Which product is {e.name} best known for?")),
            "place": lambda: random.Random(f"{seed}/q/{j}").choice((
                f"In which country is {e.name}?", f"Who became mayor of {e.name} in {f['mayor_year']}?")),
            "product": lambda: random.Random(f"{seed}/q/{j}").choice((
                f"Which company makes the {e.name}?", f"Who designed the {e.name}?",
                f"When was the {e.name} released?")),
            "event": lambda: random.Random(f"{seed}/q/{j}").choice((
                f"Where was the {e.name} held?", f"Who organised the {e.name}?",
                f"Who gave the keynote at the {e.name}?")),
        }[e.kind]()
        questions.append({"question": question, "gold_titles": [e.name], "multihop": False})
    return questions


if __name__ == "__main__":  # python bench/generate.py 3  -> print the first documents
    import sys

    for doc in generate_documents(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
        print(f"===== {doc.relative} ({doc.words} words, {len(doc.mentions)} mentions)\n{doc.text}")
