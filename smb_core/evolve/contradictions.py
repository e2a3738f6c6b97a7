"""Layer 3 without an LLM: claims from different documents that cannot both be true.

`judge(a, b)` decides for two claim sentences, with general mechanisms over a spaCy parse:

1. *Same subject.* The sentences must share a name (a proper-noun run, a quoted title or a
   common-noun subject), and the arguments of the aligned predicates must be the same thing: "Halvard
   Berg's elder son" is not "Halvard Berg", "the Ohio plant" is not "the plant in Georgia", "Fennel DB 2.4"
   is not "Fennel DB 3.0".
2. *Same predicate.* Predicates align on the same lemma, a shared derivational stem
   (consecrate/consecration) or a small table of paraphrase classes (found/establish/create, ...).
3. *Different values of a single-valued slot.* Dates (a refinement such as 2019 vs March 2019 is
   compatible), numbers with units and approximation words (about/over/nearly give a tolerance or a
   bound), places (one containing the other is compatible; a country against a city is not decided),
   persons in a unique role (founder, first CEO, director of a film), opposite polarity of the same
   predicate and object, and a small table of mutually exclusive states (alive/died, cancelled/released).
4. *Same time.* Statements dated differently ("CEO from 2015 to 2019" / "CEO since 2020"), scoped by
   since/until, or about different versions, editions or parts are not contradictions.

Precision matters more than recall: whenever a rule cannot tell, it says nothing. A subject that is a
pronoun or an anaphoric description ("He", "the film") is unknown, so such a claim matches nothing.

`find_contradictions` generates candidates sub-quadratically (claims referencing an entity or concept of
the same normalised name, plus ANN over claim embeddings), keeps pairs whose claims share a referenced
name, skips documents about different same-named subjects ("X (footballer)" / "X (politician)"), resolves
a leading he/she/it/they to the document's subject when the extractor did, and turns each verdict into a
Contradiction object (deterministic id, never rewritten once stored), two `contradicts` edges and a Question.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import threading
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from smb_core.evolve import llm_judge, parses
from smb_core.extract.base import normalise_name
from smb_core.model import Claim, Contradiction, Edge, EdgeType, Question, stable_id
from smb_core.stores.metadata import id_filter


@dataclass(frozen=True)
class Verdict:
    """Why two claims contradict: `kind` is date|number|place|person_role|polarity|exclusive_predicate."""

    kind: str
    attribute: str
    explanation: str


# =============================================================================================
# Lexicons: small, general tables (paraphrase classes, exclusive states, units, places).
# =============================================================================================


def _table(spec: dict[str, str]) -> dict[str, frozenset[str]]:
    """{class: "lemma lemma ..."} -> {lemma: classes}."""
    out: dict[str, set[str]] = defaultdict(set)
    for cls, words in spec.items():
        for word in words.split():
            out[word.replace("_", " ")].add(cls)
    return {k: frozenset(v) for k, v in out.items()}


#: Predicate classes: verbs, and the nouns/adjectives that name the same relation or attribute.
_CLASSES = _table({
    "found": "found establish create cofound co-found founder cofounder co-founder creator establishment "
             "foundation incorporate",
    "bear": "bear birth birthplace",
    "die": "die death decease",
    "locate": "locate base headquarter headquarters situate sit hq",
    "direct": "direct director",
    "write": "write author writer pen",
    "compose": "compose composer",
    "design": "design architect designer",
    "release": "release launch publish ship debut premiere publication issue",
    "support": "support",
    "acquire": "acquire buy purchase acquisition",
    "hold_event": "hold host stage occur happen convene",
    "sign": "sign signature",
    "build": "build construct erect construction",
    "open": "open inaugurate opening",
    "win": "win winner",
    "employ": "employ employee staff workforce worker headcount",
    "population": "population resident inhabitant",
    "price": "cost price charge fee",
    "capacity": "seat capacity accommodate",
    "payload": "payload deliver carry lift",
    "score": "score",
    "reduce": "reduce cut decrease lower shrink",
    "increase": "increase raise boost",
    "length": "long length",
    "height": "high height tall elevation altitude stand rise",
    "depth": "deep depth",
    "weight": "weigh weight heavy mass",
    "contain": "contain consist comprise include feature use bundle",
    "require": "require need",
    "accept": "accept",
    "allow": "allow permit",
    "membership": "member fellow elect admit membership",
    "possess": "hold earn obtain receive possess gain",
    "marry": "marry married marriage wed spouse",
    "ceo": "ceo",
    "chair": "chair chairman chairwoman chairperson",
    "captain": "captain skipper",
    "president": "president",
    "coach": "coach manager",
    "editor": "editor",
    "mayor": "mayor",
    "introduce": "introduce sponsor",
    "synthesise": "synthesise synthesize synthesis",
    "discover": "discover discovery discoverer",
    "invent": "invent inventor invention",
    "summit": "summit ascend ascent",
    "consecrate": "consecrate consecration",
    "last": "last",
    "range": "range",
    "speed": "speed fast",
    "produce": "produce generate output",
    "attend": "attend attendance",
    "serve": "serve",
})

#: Multi-word predicates recognised by (lemma, particle/preposition or object lemma).
_PHRASES = {
    ("take", "place"): "hold_event",
    ("come", "out"): "release",
    ("set", "up"): "found",
    ("pass", "away"): "die",
    ("ship", "with"): "contain",
    ("come", "with"): "contain",
    ("go", "to"): "win",  # "the prize went to X"
    ("go", "public"): "ipo",
    ("take", "over"): "acquire",
    ("tear", "down"): "ended",
    ("shut", "down"): "ended",
}

#: Classes whose date (and place) is that of a single event once the subject is fixed.
_SINGLE_EVENT = {"bear", "die", "found", "sign", "consecrate", "build", "release", "acquire", "invent",
                 "discover", "open", "hold_event", "synthesise", "summit", "ipo"}
#: Of those, the ones that recur unless marked first/original or scoped to one specific instance.
_NEEDS_MARK_DATE = {"open", "hold_event", "synthesise", "summit", "discover"}
#: Classes with one place per subject (birthplace, headquarters, the venue of one event).
_SINGLE_PLACE = {"bear", "die", "found", "sign", "consecrate", "build", "locate", "hold_event", "open"}
_NEEDS_MARK_PLACE = {"open", "hold_event", "locate"}
#: Person roles with one holder per subject: always, only when marked (first/lead/...), or at one time.
_ROLE_ALWAYS = {"found", "write", "direct", "compose", "introduce", "invent"}
_ROLE_MARKED = {"design", "synthesise", "summit", "discover", "win"}
_ROLE_AT_TIME = {"ceo", "chair", "captain", "president", "coach", "editor", "mayor"}
#: Classes repeated with different qualifiers (a release per country, a win per year).
_REPEATABLE = {"release", "hold_event", "open", "win", "acquire"}

_UNIQUE_MARKS = {"first", "original", "originally", "maiden", "inaugural", "founding", "initial", "initially",
                 "sole", "only", "main", "principal", "lead", "chief", "primary", "flagship", "current",
                 "currently", "incumbent"}
_FIRST_MARKS = {"first", "original", "originally", "maiden", "inaugural", "founding", "initial", "initially"}

#: Mutually exclusive states; a sentence is in a state when a (non-negated) trigger is its predicate.
_STATES = _table({
    "alive": "alive living",
    "dead": "die dead death decease",
    "cancelled": "cancel abandon scrap shelve",
    "completed": "release complete finish premiere",
    "ended": "discontinue cease terminate defunct dissolve disband demolish raze destroy deprecate "
             "unmaintained",
    "acquired": "acquire buy purchase",
    "independent": "independent",
    "stable": "stable",
    "unstable": "radioactive unstable",
    "open_source": "open-source",
    "proprietary": "proprietary closed-source",
    "settled": "settle",
    "tried": "trial verdict convict acquit",
    "crashed": "crash explode",
    "convicted": "convict",
    "acquitted": "acquit",
    "extinct": "extinct",
    "extant": "extant",
    "mandatory": "mandatory compulsory obligatory",
    "optional": "optional voluntary",
    "legal": "legal lawful",
    "illegal": "illegal unlawful",
    "compatible": "compatible",
    "incompatible": "incompatible",
    "public_company": "publicly-traded",
    "private_company": "privately-held",
})
_EXCLUSIVE = {
    frozenset({"alive", "dead"}), frozenset({"cancelled", "completed"}), frozenset({"acquired", "independent"}),
    frozenset({"stable", "unstable"}), frozenset({"open_source", "proprietary"}), frozenset({"settled", "tried"}),
    frozenset({"convicted", "acquitted"}), frozenset({"extinct", "extant"}), frozenset({"mandatory", "optional"}),
    frozenset({"legal", "illegal"}), frozenset({"compatible", "incompatible"}),
    frozenset({"ended", "ongoing"}), frozenset({"crashed", "uneventful"}),
    frozenset({"public_company", "private_company"}),
}
#: States that hold from an event on ("died in 2019"), so they clash with the other state only later.
_EVENT_STATES = {"dead", "cancelled", "ended", "acquired", "completed", "crashed", "settled", "tried"}
#: States that need a shared object ("crashed during its first flight" / "completed its first flight").
_OBJECT_STATES = {"crashed", "uneventful"}

#: Verbs and prepositions that negate the predicate they govern ("lacks X", "breaks compatibility").
_PRIVATIVE_HEADS = {"lack", "without", "break", "lose", "drop", "remove", "refuse", "fail", "deny", "omit",
                    "exclude", "forbid", "prohibit", "ban", "free"}
#: A predicate that is the negation of a class ("reject" = not accept).
_ANTONYM_VERBS = {"reject": "accept", "refuse": "accept", "forbid": "allow", "prohibit": "allow", "ban": "allow",
                  "exclude": "contain", "omit": "contain", "lack": "contain"}

_DIRECTION = {"north", "south", "east", "west", "northern", "southern", "eastern", "western", "northeast",
              "northwest", "southeast", "southwest", "northeastern", "northwestern", "southeastern",
              "southwestern", "upper", "lower", "inner", "outer", "left", "right", "front", "rear", "central"}
_ORDER = {"elder", "eldest", "older", "oldest", "younger", "youngest", "first", "second", "third", "fourth",
          "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "last", "previous", "next", "earlier",
          "later", "new", "old", "junior", "senior"}
_GENDER = {"men", "women", "man", "woman", "male", "female", "boys", "girls", "boy", "girl", "mens", "womens",
           "ladies", "gentlemen"}
_SCOPE = {"domestic", "international", "national", "regional", "local", "foreign", "indoor", "outdoor",
          "single", "double", "singles", "doubles", "amateur", "professional", "youth", "under-21", "junior"}

_LIGHT_VERBS = {"be", "have", "reach", "get", "make", "do", "become", "remain", "measure", "total", "put",
                "run", "go", "take", "show", "list", "record", "report", "number"}

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
             "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12}
_VERSION_NOUNS = {"generation", "edition", "volume", "series", "season", "model", "version", "release",
                  "instalment", "installment", "part", "gen", "iteration", "revision", "episode", "book"}
#: "The town of X": the noun only says what kind of thing X is.
_CATEGORY_NOUNS = {"edition", "generation", "volume", "instalment", "installment", "town", "city", "village",
                   "island", "county", "province", "state", "region", "country", "district", "municipality",
                   "parish", "hamlet", "port", "version", "release", "compound", "element", "film", "novel",
                   "album", "song", "book", "company", "band", "language", "game", "programme", "program",
                   "series", "sequel"}
_TITLES = {"mr", "mrs", "ms", "dr", "prof", "sir", "dame", "lord", "lady", "senator", "sen", "rep", "st", "jr", "sr",
           "jnr", "snr", "duke", "duchess", "earl", "count", "countess", "baron", "baroness", "archduke",
           "archduchess", "emperor", "empress", "marquess", "viscount", "pope", "sultan", "tsar", "czar",
           "saint", "president", "king", "queen", "prince", "princess", "general", "captain", "judge",
           "the", "a", "an", "of", "and", "for", "in", "on", "at", "de", "la", "le", "von", "van", "der"}
#: Occupations that stand before a name as descriptors: "Composer Ilse Brandauer" is Ilse Brandauer.
_OCCUPATIONS = set("""actor actress architect artist astronomer athlete author banker biochemist biologist bishop
    boxer businessman businesswoman cardinal cellist chef chemist coach comedian composer conductor cricketer
    critic cyclist dancer designer diplomat director drummer economist editor engineer entrepreneur explorer
    farmer filmmaker footballer geographer geologist golfer guitarist historian illustrator inventor journalist
    judge jurist lawyer librarian linguist lyricist manager mathematician merchant minister missionary model
    musician novelist painter philosopher photographer physician physicist pianist pilot playwright poet
    politician priest producer professor psychologist publisher rapper researcher runner sailor scholar
    scientist screenwriter sculptor senator singer skier soldier songwriter sociologist sprinter statesman
    surgeon swimmer teacher theologian translator violinist writer""".split())

_GENERIC_PERSON = {"person", "man", "woman", "one", "individual", "people", "player", "team", "climber"}

_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
                 "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
                 "hundred": 100, "dozen": 12}
_MULTIPLIERS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "k": 1e3, "m": 1e6,
                "bn": 1e9}

#: unit -> (dimension, factor to the base unit) ; temperatures are converted separately.
_UNITS: dict[str, tuple[str, float]] = {
    **dict.fromkeys(["m", "metre", "metres", "meter", "meters"], ("length", 1.0)),
    **dict.fromkeys(["km", "kilometre", "kilometres", "kilometer", "kilometers"], ("length", 1000.0)),
    **dict.fromkeys(["cm", "centimetre", "centimetres", "centimeter", "centimeters"], ("length", 0.01)),
    **dict.fromkeys(["mm", "millimetre", "millimetres", "millimeter", "millimeters"], ("length", 0.001)),
    **dict.fromkeys(["mi", "mile", "miles"], ("length", 1609.344)),
    **dict.fromkeys(["ft", "foot", "feet"], ("length", 0.3048)),
    **dict.fromkeys(["yard", "yards", "yd"], ("length", 0.9144)),
    **dict.fromkeys(["inch", "inches", "in."], ("length", 0.0254)),
    **dict.fromkeys(["kg", "kilogram", "kilograms", "kilo", "kilos"], ("mass", 1.0)),
    **dict.fromkeys(["g", "gram", "grams"], ("mass", 0.001)),
    **dict.fromkeys(["t", "tonne", "tonnes", "ton", "tons"], ("mass", 1000.0)),
    **dict.fromkeys(["lb", "lbs", "pound", "pounds"], ("mass", 0.45359237)),
    **dict.fromkeys(["s", "sec", "second", "seconds"], ("time", 1.0)),
    **dict.fromkeys(["min", "mins", "minute", "minutes"], ("time", 60.0)),
    **dict.fromkeys(["h", "hr", "hrs", "hour", "hours"], ("time", 3600.0)),
    **dict.fromkeys(["day", "days"], ("time", 86400.0)),
    **dict.fromkeys(["week", "weeks"], ("time", 604800.0)),
    **dict.fromkeys(["month", "months"], ("time", 2629800.0)),
    **dict.fromkeys(["year", "years"], ("time", 31557600.0)),
    **dict.fromkeys(["kb", "kilobyte", "kilobytes"], ("data", 1e3)),
    **dict.fromkeys(["mb", "megabyte", "megabytes"], ("data", 1e6)),
    **dict.fromkeys(["gb", "gigabyte", "gigabytes"], ("data", 1e9)),
    **dict.fromkeys(["tb", "terabyte", "terabytes"], ("data", 1e12)),
    **dict.fromkeys(["w", "watt", "watts"], ("power", 1.0)),
    **dict.fromkeys(["kw", "kilowatt", "kilowatts"], ("power", 1e3)),
    **dict.fromkeys(["mw", "megawatt", "megawatts"], ("power", 1e6)),
    **dict.fromkeys(["gw", "gigawatt", "gigawatts"], ("power", 1e9)),
    **dict.fromkeys(["hp", "horsepower"], ("power", 745.7)),
    **dict.fromkeys(["n", "newton", "newtons"], ("force", 1.0)),
    **dict.fromkeys(["kn", "kilonewton", "kilonewtons"], ("force", 1e3)),
    **dict.fromkeys(["mah"], ("charge", 1.0)),
    **dict.fromkeys(["ah"], ("charge", 1000.0)),
    **dict.fromkeys(["kwh"], ("energy", 1.0)),
    **dict.fromkeys(["mwh"], ("energy", 1e3)),
    **dict.fromkeys(["ha", "hectare", "hectares"], ("area", 1e4)),
    **dict.fromkeys(["acre", "acres"], ("area", 4046.86)),
    **dict.fromkeys(["km2", "km²"], ("area", 1e6)),
    **dict.fromkeys(["l", "litre", "litres", "liter", "liters"], ("volume", 1.0)),
    **dict.fromkeys(["ml", "millilitre", "millilitres"], ("volume", 0.001)),
    **dict.fromkeys(["kph", "km/h"], ("speed", 1 / 3.6)),
    **dict.fromkeys(["mph"], ("speed", 0.44704)),
    **dict.fromkeys(["percent", "per cent", "%", "percentage"], ("percent", 1.0)),
    **dict.fromkeys(["ghz"], ("frequency", 1e9)),
    **dict.fromkeys(["mhz"], ("frequency", 1e6)),
    **dict.fromkeys(["pixel", "pixels", "px"], ("pixels", 1.0)),
}
_CURRENCY_SYMBOLS = {"$": "usd", "€": "eur", "£": "gbp", "¥": "jpy", "us$": "usd"}
_CURRENCY_WORDS = {"dollar": "usd", "dollars": "usd", "usd": "usd", "euro": "eur", "euros": "eur", "eur": "eur",
                   "pound sterling": "gbp", "gbp": "gbp", "yen": "jpy", "cent": "usd", "cents": "usd"}
#: Count nouns that measure the same thing ("4,200 people" employed = "4,200 employees").
_COUNT_CLASSES = _table({
    "headcount": "employee staff worker people person",
    "population": "resident inhabitant people citizen person",
    "audience": "fan spectator attendee visitor people person",
})

_MONTHS = {m: i for i, names in enumerate([
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
    ("november", "nov"), ("december", "dec")], start=1) for m in names}
_SEASONS = {"spring": (3, 6), "summer": (6, 9), "autumn": (9, 12), "fall": (9, 12), "winter": (12, 15)}

#: Places that contain cities: countries, continents, regions, US states, and the like. A city is never
#: compared with one of these (we cannot tell whether it lies inside), only places of the same level.
_REGIONS = {
    "country": """afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan
        bahamas bahrain bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia botswana brazil
        brunei bulgaria burkina_faso burundi cambodia cameroon canada chad chile china colombia comoros congo
        costa_rica croatia cuba cyprus czechia czech_republic denmark djibouti dominica dominican_republic
        ecuador egypt el_salvador eritrea estonia eswatini ethiopia fiji finland france gabon gambia georgia
        germany ghana greece grenada guatemala guinea guyana haiti honduras hungary iceland india indonesia iran
        iraq ireland israel italy ivory_coast jamaica japan jordan kazakhstan kenya kiribati kosovo kuwait
        kyrgyzstan laos latvia lebanon lesotho liberia libya liechtenstein lithuania luxembourg madagascar malawi
        malaysia maldives mali malta mauritania mauritius mexico micronesia moldova monaco mongolia montenegro
        morocco mozambique myanmar burma namibia nauru nepal netherlands holland new_zealand nicaragua niger
        nigeria north_korea north_macedonia macedonia norway oman pakistan palau palestine panama
        papua_new_guinea paraguay peru philippines poland portugal qatar romania russia rwanda samoa
        san_marino saudi_arabia senegal serbia seychelles sierra_leone singapore slovakia slovenia
        solomon_islands somalia south_africa south_korea korea south_sudan spain sri_lanka sudan suriname
        sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga trinidad tunisia turkey
        turkmenistan tuvalu uganda ukraine united_arab_emirates uae united_kingdom uk britain great_britain
        united_states usa us america uruguay uzbekistan vanuatu vatican venezuela vietnam yemen zambia zimbabwe
        england scotland wales northern_ireland soviet_union ussr yugoslavia czechoslovakia prussia""",
    "continent": "europe asia africa antarctica oceania north_america south_america latin_america",
    "region": """scandinavia nordic_countries balkans middle_east near_east far_east caribbean iberia
        iberian_peninsula siberia patagonia benelux baltics baltic_states central_asia southeast_asia
        east_asia south_asia western_europe eastern_europe central_europe northern_europe southern_europe
        west_africa east_africa north_africa southern_africa central_america new_england midwest
        the_west_coast west_coast east_coast bavaria catalonia andalusia tuscany lombardy sicily sardinia
        flanders wallonia quebec ontario british_columbia alberta manitoba saskatchewan nova_scotia
        new_south_wales victoria queensland tasmania western_australia south_australia""",
    "us_state": """alabama alaska arizona arkansas california colorado connecticut delaware florida hawaii
        idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan
        minnesota mississippi missouri montana nebraska nevada new_hampshire new_jersey new_mexico
        new_york_state north_carolina north_dakota ohio oklahoma oregon pennsylvania rhode_island
        south_carolina south_dakota tennessee texas utah vermont virginia washington_state west_virginia
        wisconsin wyoming""",
}
_REGION_LEVEL = {name.replace("_", " "): level for level, names in _REGIONS.items() for name in names.split()}
#: Place names ending in one of these name a kind of place below or beside a city.
_PLACE_FEATURES = {"street", "road", "avenue", "square", "district", "quarter", "park", "desert", "valley",
                   "river", "lake", "mountains", "mountain", "mount", "island", "islands", "bay", "coast",
                   "county", "province", "region", "state", "peninsula", "sea", "ocean", "forest", "hills",
                   "borough", "neighbourhood", "neighborhood", "town", "old town", "harbour", "harbor",
                   "airport", "station", "stadium", "hall", "building", "shipyard", "dockyard", "campus"}


@lru_cache(maxsize=200_000)
def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return text


def _stem(word: str) -> str:
    """A crude derivational stem so that consecrate/consecration and conduct/conductor meet."""
    w = word.lower()
    for suffix in ("ibility", "ability", "isation", "ization", "ations", "ation", "ition", "ature", "ments",
                   "ment", "ance", "ence", "ible", "able", "ings", "ing", "ers", "ors", "ees", "ity", "ate",
                   "ise", "ize", "er", "or", "ee", "ed", "es", "e", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            return w[: -len(suffix)]
    return w


# =============================================================================================
# Sentence analysis (one parse per distinct sentence, cached)
# =============================================================================================


@dataclass
class _Date:
    lo: int
    hi: int
    start: int  # character span in the sentence
    end: int
    root: int  # token index of the span's root (where it attaches to the parse)
    prep: str  # governing preposition ('' if none): in, on, since, until, by, from, to, ...
    modifier: bool  # a year used as a noun modifier ("the 2019 season")
    text: str


@dataclass
class _Qty:
    value: float
    lo: float
    hi: float
    dim: str  # length|mass|...|money:usd|percent|count:<class-or-lemma>|'' (bare number)
    count_classes: frozenset[str]
    token: int
    keys: frozenset[str]  # attribute keys (classes, lemmas, stems) of what is measured
    nouns: frozenset[str]  # attribute nouns only (depth, memory, storage, ...)
    text: str


@dataclass(eq=False)
class _Name:
    key: str  # normalised full name
    tokens: frozenset[str]  # significant tokens (versions and titles removed)
    first: str  # the first significant token, in order
    order: tuple[str, ...]  # the significant tokens in order
    droppable: int  # how many leading tokens are descriptors ("Composer Ilse Brandauer" at a sentence start)
    start: int  # token span
    end: int
    person: bool = False  # the name ends in a token the NER calls a person


@dataclass
class _Pred:
    i: int
    lemma: str
    classes: frozenset[str]
    neg: str  # '' | not | never | no longer | no | privative
    antonym: bool  # the predicate negates its class ("reject" = not accept)


class _Sentence:
    """Everything the rules need about one sentence; built once per distinct text."""

    def __init__(self, doc) -> None:
        self.doc = doc
        self.text = doc.text
        self.lower = _fold(doc.text)
        self.names = _names(doc)
        self.name_at = {}
        for n in self.names:
            for i in range(n.start, n.end):
                self.name_at[i] = n
        self.dates = _dates(doc)
        self.date_tokens = {t.i for d in self.dates for t in doc.char_span(d.start, d.end, alignment_mode="expand")}
        self.versions = _versions(doc, self)
        self.quantities = _quantities(doc, self)
        self.preds = _preds(doc)
        self.time_points = [(d.lo, d.hi) for d in self.dates]
        words = {t.lower_ for t in doc}
        self.marks = words & _UNIQUE_MARKS
        self.first = bool(words & _FIRST_MARKS)
        self.temporal = _temporal_markers(doc)
        self.tense = _tense(doc)
        # generic statements about a kind: "Copper conducts ...", "Water freezes ..."
        self.kind_subjects = {t.lemma_.lower() for t in doc if t.dep_ in ("nsubj", "nsubjpass") and t.pos_ == "NOUN"
                              and not any(c.dep_ in ("det", "poss") for c in t.children)}


_cache_lock = threading.Lock()
_CACHE: dict[str, _Sentence] = {}
_CACHE_LIMIT = 200_000
#: From this many texts on, two processes parse them (forked: 1.5x faster on two cores, measured on
#: 4,000 claims); fewer are not worth starting the workers for.
PARALLEL_PARSE = 2000
_NO_TENSOR = np.zeros((0, 0), dtype="float32")


def _analyse_many(texts: Iterable[str]) -> dict:
    """Parse the texts not yet cached, in one batch (spaCy is much faster on batches); returns the new
    parses ({text: Doc})."""
    from smb_core.extract.nlp import load_spacy

    todo = list(dict.fromkeys(t for t in texts if t not in _CACHE))
    if not todo:
        return {}
    nlp = load_spacy()
    workers = 2 if len(todo) >= PARALLEL_PARSE and (os.cpu_count() or 1) >= 2 else 1
    docs = dict(zip(todo, nlp.pipe(todo, batch_size=256, n_process=workers)))
    for doc in docs.values():  # no rule reads the tok2vec tensor: ~10 KB per sentence held for nothing
        doc.tensor = _NO_TENSOR
    _remember(docs)
    return docs


def _analyse_stored(bank, texts: Iterable[str]) -> None:
    """Like `_analyse_many`, reading the parses the bank has stored and storing the new ones."""
    todo = list(dict.fromkeys(t for t in texts if t not in _CACHE))
    stored = parses.load(bank, todo)
    _remember(stored)
    parses.save(bank, _analyse_many(t for t in todo if t not in stored))


def _remember(docs: dict) -> None:
    analysed = [(text, _Sentence(doc)) for text, doc in docs.items()]
    with _cache_lock:
        if len(_CACHE) + len(analysed) > _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE.update(analysed)


def _analyse(text: str) -> _Sentence:
    sent = _CACHE.get(text)
    if sent is None:
        _analyse_many([text])
        sent = _CACHE[text]
    return sent


# ---- names ----------------------------------------------------------------------------------

_QUOTED = re.compile(r"[‘'\"“«]([A-Z0-9][^'\"”’»]{1,80}?)[’'\"”»](?=[\s.,;:)!?]|$)")
_CODE = re.compile(r"^(?=.*\d)[A-Za-z0-9][\w.+-]*$|^[A-Z][a-z]*-[A-Z0-9]+$|^(?:II|III|IV|V|VI|VII|VIII|IX|X|XI|XII)$")


def _is_code(text: str) -> bool:
    """A model or version designation: X2, KR-100, 2.4, 4.x, Mk II, Rook-B."""
    return bool(_CODE.match(text)) and not re.fullmatch(r"\d{4}s?", text)


def _names(doc) -> list[_Name]:
    """Proper-noun runs (joined across "of"), quoted titles, and the common-noun subject head."""
    spans: list[tuple[int, int]] = []
    n = len(doc)
    i = 0
    while i < n:
        t = doc[i]
        if _name_token(t) or re.fullmatch(r"[A-Z][a-z]{2,}-\d+[a-z]?", t.text):
            j = i + 1
            while j < n and (_name_token(doc[j]) or (doc[j].lower_ in ("of", "v.", "vs.", "&", "-", "de")
                                                        and j + 1 < n and _name_token(doc[j + 1])
                                                        and doc[j + 1].pos_ == "PROPN")):
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    for m in _QUOTED.finditer(doc.text):
        span = doc.char_span(m.start(1), m.end(1), alignment_mode="expand")
        if span is not None:
            spans = [s for s in spans if s[1] <= span.start or s[0] >= span.end]
            spans.append((span.start, span.end))
    for ent in doc.ents:  # NER spans of proper names not already covered (lowercase product names etc.)
        if ent.label_ in ("PERSON", "ORG", "GPE", "LOC", "FAC", "PRODUCT", "WORK_OF_ART", "EVENT", "LAW") and \
                not any(s[0] < ent.end and ent.start < s[1] for s in spans) and \
                any(t.pos_ == "PROPN" for t in ent):
            spans.append((ent.start, ent.end))
    # common-noun subjects (Copper, ethanol, the compound zelarin) are names too
    for t in doc:
        if t.dep_ in ("nsubj", "nsubjpass") and t.pos_ == "NOUN" and t.head.dep_ == "ROOT" and \
                not any(s[0] <= t.i < s[1] for s in spans) and t.lemma_.lower() not in _CLASSES:
            kids = list(t.children)
            category = [c for c in kids if c.dep_ == "compound" and c.lemma_.lower() in _CATEGORY_NOUNS]
            bare = not kids
            if bare or (category and all(c.dep_ in ("det", "compound") for c in kids)):
                spans.append((t.i, t.i + 1))  # "Copper ...", "The compound zelarin ..."
    out = []
    for start, end in sorted(set(spans)):
        toks = [doc[k] for k in range(start, end)]
        words = [_fold(w.text).strip("'’.") for w in toks if not re.fullmatch(r"\W+", w.text)
                 and w.text not in ("'s", "’s")]
        words = [w[:-2] if w.endswith(("'s", "’s")) else w for w in words]
        significant = frozenset(w for w in words if w and w not in _TITLES and not _is_code(w))
        titled = words and words[0] in _TITLES and words[0] not in ("the", "a", "an", "of", "and", "st", "saint")
        if titled and (len(significant) == 1 or (len(words) > 1 and words[1] == "of")):
            continue  # "Lady Rodney", "Prince of Anhalt-Bernburg": a title held by many, not a person
        if not significant:
            codes = [w for w in words if re.fullmatch(r"[a-z]{3,}-\d+[a-z]?", w)]
            if not codes:
                continue
            significant = frozenset(codes)  # "Cobalt-60", "Orbis-7": the designation is the name
        key = " ".join(w for w in words if w not in ("the", "a", "an"))
        order = tuple(w for w in words if w in significant)
        first = order[0] if order else ""
        lead = [w for w in toks if not re.fullmatch(r"\W+", w.text) and _fold(w.text).strip("'’.") in significant]
        droppable = 0
        for w in lead[:-2]:  # descriptors before a name of two words or more ("Composer Ilse Brandauer")
            if w.text[:1].islower() or w.lower_ in _OCCUPATIONS:
                droppable += 1
            else:
                break
        out.append(_Name(key=key, tokens=significant, first=first, order=order, droppable=droppable,
                         start=start, end=end, person=doc[end - 1].ent_type_ == "PERSON"))
    return out


def _name_token(t) -> bool:
    if t.i > 0 and t.doc[t.i - 1].text.startswith("°"):
        return False  # the C of "78 °C"
    if t.ent_type_ in ("NORP", "LANGUAGE") and (t.pos_ == "ADJ" or re.search(r"(an|ese|ish|ic|i|ch)$", t.lower_)):
        return False  # nationalities and languages ("French", "South Korean") are not what a claim is about
    if t.i == 0 and t.text[:1].isupper() and t.pos_ != "PROPN" and len(t.doc) > 1 and \
            (re.fullmatch(r"\d+(\.\d+)+|\d+\.x", t.doc[1].text) or t.doc[1].pos_ == "PROPN") and \
            t.lower_ not in _TITLES and not t.is_stop and t.lower_ not in _CATEGORY_NOUNS | _VERSION_NOUNS:
        return True  # "Tessellate 3.0 shipped ...": a name the tagger took for a verb
    if t.i == 0 and t.text[:1].isupper() and len(t.doc) > 1 and t.doc[1].text in ("'s", "’s", "'") and \
            not t.is_stop:
        return True  # "Hawthorn's compiler": a capitalised possessor
    if t.pos_ == "ADV" and t.text[:1].isupper() and not t.is_stop and t.lower_.endswith("ly") and \
            (not t.is_sent_start or (t.dep_ == "advmod" and t.head.pos_ == "VERB" and t.head.i == t.i + 1 and
                                     not any(c.dep_ in ("nsubj", "nsubjpass") for c in t.head.children))):
        return True  # "Ledgerly charges ...": a product name the tagger took for an adverb
    if t.pos_ == "PROPN":
        return t.text not in ("'s", "’s") and t.lower_ not in _MONTHS and not re.fullmatch(r"\d{4}", t.text)
    # capitalised mid-sentence words the tagger called NOUN/ADJ (Codex, Accord, Aurore)
    return (t.i > 0 and t.text[:1].isupper() and t.pos_ in ("NOUN", "ADJ") and t.lower_ not in _MONTHS
            and not t.is_sent_start and t.ent_type_ not in ("NORP", "DATE", "ORDINAL")
            and t.lemma_.lower() not in _CLASSES and t.lower_ not in _CLASSES)


#: Words that make a different place or thing of a name: "Greater Oslo" is not Oslo, "New York" not York.
_NAME_QUALIFIERS = {"greater", "new", "old", "north", "south", "east", "west", "northern", "southern", "eastern",
                    "western", "upper", "lower", "inner", "outer", "central", "metropolitan", "little", "great",
                    "grand", "port", "fort", "saint", "st", "san", "santa", "junior", "jr", "senior", "sr"}


def _names_match(a: _Name, b: _Name) -> bool:
    if not a.tokens or not b.tokens:
        return False
    if a.tokens <= b.tokens:
        small, big = a, b
    elif b.tokens <= a.tokens:
        small, big = b, a
    else:
        return False
    if small.tokens == big.tokens:
        return True
    # the shorter name must end the longer one, after descriptors only: "Ilse Brandauer" is "Composer Ilse
    # Brandauer", but "James Adam" is not "James Adam Reuben", "Frederick" not "Frederick Heinrich", and
    # "Blood, Sweat & Tears" not "The Essential Blood, Sweat & Tears"
    extra = len(big.order) - len(small.order)
    if extra <= 0 or big.order[extra:] != small.order or extra > big.droppable and len(small.order) > 1:
        return False
    if len(small.order) == 1 and extra > big.droppable and not _surname_only(small, big):
        return False
    return not ((big.tokens - small.tokens) & _NAME_QUALIFIERS)


def _surname_only(small: _Name, big: _Name) -> bool:
    """'Kroll' for 'Anneliese Kroll': a surname alone for a person's two-word name."""
    return len(big.order) - big.droppable == 2 and big.order[-1] == small.order[0] and big.person


# ---- dates ----------------------------------------------------------------------------------

_M = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE_PATTERNS = [
    ("day", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_M})\.?,?\s+(\d{{3,4}})\b", re.I)),
    ("mdy", re.compile(rf"\b({_M})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{3,4}})\b", re.I)),
    ("month", re.compile(rf"\b(?:(early|mid|middle|late)[\s-]+)?({_M})\.?\s+(?:of\s+)?(\d{{3,4}})\b", re.I)),
    ("season", re.compile(r"\b(?:(early|mid|middle|late)[\s-]+)?(spring|summer|autumn|fall|winter)\s+(?:of\s+)?"
                          r"(\d{4})\b", re.I)),
    ("decade", re.compile(r"\b(?:(early|mid|middle|late)[\s-]+)?(\d{3}0)s\b", re.I)),
    ("century", re.compile(r"\b(?:(early|mid|middle|late)[\s-]+)?(\d{1,2})(?:st|nd|rd|th)[\s-]+century\b", re.I)),
    ("year", re.compile(r"(?<![\d,.$€£:/-])(?:(early|mid|middle|late)[\s-]+)?(1\d{3}|20\d{2})(?![\d,.:/]\d|s\b|\d)",
                        re.I)),
    # years before 1000 only where they cannot be anything else: "died 875", "(973 – 1024)", "in 628."
    ("oldyear", re.compile(r"(?:\b(?:born|died|b\.|d\.|c\.|ca\.|circa|in|since|until|after|before)\s+|\(\s*)"
                           r"(\d{3})(?=\s*(?:[)–-]|,|;|\.(?!\d)|$|\s+(?:AD|BC|CE|BCE|and|when|after|before)\b))")),
]


def _ordinal_day(y: int, m: int, d: int) -> int:
    m = max(1, min(12, m))
    d = max(1, min(d, 28 if m == 2 else 30 if m in (4, 6, 9, 11) else 31))
    return _dt.date(max(1, min(y, 9999)), m, d).toordinal()


def _year_range(y0: int, y1: int) -> tuple[int, int]:
    return _ordinal_day(y0, 1, 1), _ordinal_day(y1, 12, 31)


def _part(range_: tuple[int, int], part: str | None) -> tuple[int, int]:
    lo, hi = range_
    if not part:
        return lo, hi
    third = (hi - lo) // 3
    part = part.lower()
    if part == "early":
        return lo, lo + third + 31
    if part == "late":
        return hi - third - 31, hi
    return lo + third - 31, hi - third + 31


def _dates(doc) -> list[_Date]:
    text = doc.text
    taken: list[tuple[int, int]] = []
    out: list[_Date] = []
    for kind, pattern in _DATE_PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            g = m.groups()
            if kind == "day":
                y, mo, d = int(g[2]), _MONTHS[g[1].lower()], int(g[0])
                lo = hi = _ordinal_day(y, mo, d)
            elif kind == "mdy":
                y, mo, d = int(g[2]), _MONTHS[g[0].lower()], int(g[1])
                lo = hi = _ordinal_day(y, mo, d)
            elif kind == "month":
                y, mo = int(g[2]), _MONTHS[g[1].lower()]
                if g[1].lower() == "may" and not g[0] and not re.search(r"\b(in|of|since|until|by|from|during)\s+$",
                                                                        text[: m.start()], re.I):
                    continue  # "may 2019" without a preposition is more likely the verb
                lo, hi = _ordinal_day(y, mo, 1), _ordinal_day(y, mo, 31)
                lo, hi = _part((lo, hi), g[0])
            elif kind == "season":
                y = int(g[2])
                m0, m1 = _SEASONS[g[1].lower()]
                # seasons differ by hemisphere and convention: allow a month either side
                lo = _ordinal_day(y if m0 > 1 else y, max(1, m0 - 1), 1)
                hi = _ordinal_day(y + (1 if m1 > 12 else 0), ((m1 - 1) % 12) + 1, 31)
                if g[1].lower() == "winter":
                    lo = _ordinal_day(y - 1, 11, 1)
                    hi = _ordinal_day(y + 1, 3, 31)
            elif kind == "decade":
                y = int(g[1])
                lo, hi = _part(_year_range(y, y + 9), g[0])
            elif kind == "century":
                c = int(g[1])
                lo, hi = _part(_year_range((c - 1) * 100, (c - 1) * 100 + 99), g[0])
            elif kind == "oldyear":
                lo, hi = _year_range(int(g[0]), int(g[0]))
                start = m.start(1)
                taken.append((start, m.end()))
                span = doc.char_span(start, m.end(), alignment_mode="expand")
                prep, modifier = _date_relation(span.root)
                out.append(_Date(lo=lo, hi=hi, start=start, end=m.end(), root=span.root.i, prep=prep,
                                 modifier=modifier, text=g[0]))
                continue
            else:
                y = int(g[1])
                if not 1000 <= y <= 2100:
                    continue
                after = text[m.end():m.end() + 20].lower()
                unit = re.match(r"\s*([a-z%°]+)", after)
                if unit and (unit.group(1) in _UNITS or unit.group(1) in _CURRENCY_WORDS or
                             _plural_count_noun(doc, m.end())):
                    continue  # "1500 metres", "2000 people"
                before = text[max(0, m.start() - 12):m.start()].lower()
                if re.search(r"(version|v|release|model|no\.|number|route|#)\s*$", before):
                    continue
                lo, hi = _part(_year_range(y, y), g[0])
            before = text[max(0, m.start() - 14):m.start()].lower()
            if re.search(r"\b(c\.|ca\.|circa|around|about|approximately|roughly)\s*$", before):
                lo, hi = lo - 730, hi + 730
            taken.append((m.start(), m.end()))
            span = doc.char_span(m.start(), m.end(), alignment_mode="expand")
            root = span.root
            prep, modifier = _date_relation(root)
            out.append(_Date(lo=lo, hi=hi, start=m.start(), end=m.end(), root=root.i, prep=prep,
                             modifier=modifier, text=m.group(0)))
    return out


def _plural_count_noun(doc, char_end: int) -> bool:
    span = doc.char_span(char_end, min(len(doc.text), char_end + 1), alignment_mode="expand")
    if span is None:
        return False
    nxt = doc[span.start] if span.start < len(doc) else None
    if nxt is not None and nxt.idx < char_end:
        nxt = doc[span.start + 1] if span.start + 1 < len(doc) else None
    return bool(nxt is not None and nxt.tag_ == "NNS" and nxt.lemma_ not in ("census", "season"))


def _date_relation(root) -> tuple[str, bool]:
    """(preposition governing the date, whether it is a noun modifier such as 'the 2019 season')."""
    t = root
    if t.dep_ in ("nummod", "compound", "amod", "npadvmod", "nmod") and t.head.pos_ in ("NOUN", "PROPN") and \
            t.head.i > t.i:
        head = t.head
        # "the 1998 season", "the 2019 expansion" -> a modifier whose noun may itself be a date value
        prep = head.head.lower_ if head.dep_ == "pobj" and head.head.pos_ == "ADP" else ""
        return prep, True
    if t.dep_ == "pobj" and t.head.pos_ == "ADP":
        prep = t.head.lower_
        if prep == "of" and t.head.head.pos_ == "NOUN":  # "the autumn of 1819", "the end of 2016"
            outer = t.head.head
            if outer.dep_ == "pobj" and outer.head.pos_ == "ADP":
                return outer.head.lower_, False
        if prep == "of" and t.head.head.lower_ == "as":
            return "as of", False
        return prep, False
    return "", False


# ---- versions -------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"\b(?:version|v\.?|release|rev\.?)\s*(\d+(?:\.\d+)*(?:\.x)?)\b", re.I)


def _norm_version(text: str) -> str:
    v = _fold(text).strip(".")
    v = re.sub(r"^(version|v\.?|release)\s*", "", v)
    v = re.sub(r"(\.0)+$|\.x$", "", v)
    return v


def _versions(doc, sent: _Sentence) -> frozenset[str]:
    """Designations of a version, model, edition or part: '2.4', 'x2', 'kr-100', 'edition:2', 'year:2020'."""
    out: set[str] = set()
    for m in _VERSION_RE.finditer(doc.text):
        out.add(_norm_version(m.group(1)))
    for m in re.finditer(r"\b[A-Z][A-Za-z]*-[A-Z0-9][A-Za-z0-9]*\b", doc.text):  # Rook-A, KR-100, Orbis-7
        out.add(_fold(m.group(0)))
    for m in re.finditer(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
                         r"[\s-]+(generation|edition|volume|series|season|model|instalment|installment|part|gen)\b",
                         doc.text, re.I):
        n = _ORDINALS.get(m.group(1).lower()) or int(re.sub(r"\D", "", m.group(1)))
        out.add(f"{m.group(2).lower()}:{n}")
    for m in re.finditer(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
                         r"\s+([A-Z][a-z]+)", doc.text):  # "4th Duke of X" vs "10th Duke of X"
        n = _ORDINALS.get(m.group(1).lower()) or int(re.sub(r"\D", "", m.group(1)))
        out.add(f"ord:{m.group(2).lower()}:{n}")
    for t in doc:  # "John I, Prince of X": the pronoun-looking I after a name is a regnal number
        if t.text == "I" and t.i > 0 and doc[t.i - 1].pos_ == "PROPN" and doc[t.i - 1].text[:1].isupper() and \
                (t.i + 1 == len(doc) or doc[t.i + 1].text in (",", "(", "of", ")")):
            out.add("i")
    for t in doc:
        if t.i in sent.date_tokens and not any(d.modifier for d in sent.dates if d.root == t.i):
            continue
        text = t.text
        if _is_code(text) and not t.like_num and (t.pos_ in ("PROPN", "NOUN", "X") or t.i in sent.name_at):
            if re.search(r"[A-Za-z]", text) and re.search(r"\d|^[IVX]+$", text):
                if re.fullmatch(r"[IVX]+", text) and not (t.i > 0 and doc[t.i - 1].pos_ == "PROPN"):
                    continue
                out.add(_fold(text))
                continue
        if t.like_num and re.fullmatch(r"\d+(?:\.\d+)*(?:\.x)?|\d+\.x", text):
            head = t.head
            if t.dep_ in ("nummod", "compound", "appos", "npadvmod", "nmod") and head.i < t.i and \
                    head.pos_ in ("PROPN", "NOUN") and (head.pos_ == "PROPN" or head.lemma_ in _VERSION_NOUNS or
                                                        head.text[:1].isupper()):
                out.add(_norm_version(text))  # "Larch 3", "Route 9", "Fennel DB 2.4", "Version 5"
            elif t.i > 0 and (doc[t.i - 1].pos_ == "PROPN" or t.i - 1 in sent.name_at) and \
                    t.dep_ not in ("pobj", "dobj"):
                out.add(_norm_version(text))
            elif re.fullmatch(r"\d+\.x", text):
                out.add(_norm_version(text))
    for d in sent.dates:
        if d.modifier:
            head = doc[d.root].head
            if head.lemma_ not in ("season", "year", "census", "election", "period", "decade"):
                out.add(f"year:{_dt.date.fromordinal(d.lo).year}")
    return frozenset(out)


# ---- temporal scope -------------------------------------------------------------------------


def _temporal_markers(doc) -> set[str]:
    words = {t.lower_ for t in doc}
    out = words & {"since", "until", "till", "before", "after", "formerly", "previously", "later", "now",
                   "currently", "today", "still", "former", "once", "then", "initially", "originally",
                   "eventually", "subsequently"}
    if re.search(r"\bno longer\b", doc.text, re.I):
        out.add("no longer")
    if re.search(r"\bas of\b", doc.text, re.I):
        out.add("as of")
    if re.search(r"\bfrom\b[^.;]{1,40}?\b(to|until|through|till)\b", doc.text, re.I) or \
            re.search(r"\b\d{3,4}\s*[–-]\s*\d{2,4}\b", doc.text):
        out.add("from-to")
    return out


def _tense(doc) -> str:
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if root is None:
        return ""
    tags = {root.tag_} | {c.tag_ for c in root.children if c.dep_ in ("aux", "auxpass")}
    if tags & {"VBD"}:
        return "past"
    if tags & {"VBZ", "VBP"} or root.tag_ in ("VBZ", "VBP"):
        return "present"
    return ""


# ---- quantities -----------------------------------------------------------------------------


def _number_value(t) -> float | None:
    text = t.text.replace(",", "").replace("\u2009", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    if t.lower_ in _WORD_NUMBERS and t.pos_ == "NUM":
        return float(_WORD_NUMBERS[t.lower_])
    return None


def _precision(text: str) -> float:
    """Half a unit in the last significant place: '250,000' -> 5000, '1.2' -> 0.05, '14' -> 0.5."""
    text = text.replace(",", "")
    if "." in text:
        return 0.5 * 10 ** -len(text.split(".")[1])
    stripped = text.rstrip("0")
    zeros = len(text) - len(stripped) if stripped else 0
    return 0.5 * 10 ** zeros


def _quantities(doc, sent: _Sentence) -> list[_Qty]:
    out: list[_Qty] = []
    used: set[int] = set()
    for t in doc:
        if t.i in used or t.i in sent.date_tokens:
            continue
        value = _number_value(t)
        if value is None:
            continue
        if t.i in sent.name_at or (t.i > 0 and doc[t.i - 1].pos_ == "PROPN" and t.dep_ != "pobj"
                                   and t.head.i < t.i) or _is_code(t.text) and not t.like_num:
            continue  # part of a name or a version ("Larch 3")
        if t.i > 0 and doc[t.i - 1].lower_ in ("version", "v", "route", "no.", "number", "#", "platform", "gate"):
            continue
        prev = doc[t.i - 1].lower_ if t.i > 0 else ""
        following = doc[t.i + 1] if t.i + 1 < len(doc) else None
        if prev in ("age", "aged") or (prev == "at" and following is not None and not following.like_num and
                                       following.pos_ not in ("NOUN", "SYM", "PROPN") and
                                       following.lower_ not in _UNITS and not following.text.startswith("°")):
            continue  # "at 88", "at the age of 71"
        if t.i + 1 < len(doc) and doc[t.i + 1].text in (":", "/", "-", "–") and t.i + 2 < len(doc) and \
                doc[t.i + 2].like_num:
            continue  # times, scores, ranges written with punctuation
        raw = t.text
        j = t.i + 1
        # "1.2 million", "2 million"
        while j < len(doc) and doc[j].lower_ in _MULTIPLIERS and doc[j].lower_ not in ("m", "k"):
            value *= _MULTIPLIERS[doc[j].lower_]
            used.add(j)
            raw_mult = _MULTIPLIERS[doc[j].lower_]
            j += 1
            break
        else:
            raw_mult = 1.0
        prec = _precision(raw) * raw_mult
        # approximation and bounds from the words before the number
        window = " ".join(x.lower_ for x in doc[max(0, t.i - 3):t.i])
        lo, hi = value - prec, value + prec
        if re.search(r"\b(nearly|almost|just under|close to|approaching)$", window):
            lo, hi = value * 0.88, value + prec
        elif re.search(r"\b(about|around|roughly|approximately|approx|some|circa|c\.|~|estimated|an estimated)$",
                       window):
            lo, hi = value * 0.9 - prec, value * 1.1 + prec
        elif re.search(r"\b(over|more than|above|at least|upwards of|exceeding|in excess of|just over|"
                       r"greater than)$", window):
            lo, hi = value, float("inf")
        elif re.search(r"\b(under|less than|fewer than|below|up to|at most|no more than)$", window):
            lo, hi = 0.0, value
        # unit
        dim, count_classes, unit_tok = "", frozenset(), None
        before = doc[t.i - 1] if t.i > 0 else None
        currency = None
        if before is not None and before.text in _CURRENCY_SYMBOLS:
            currency = _CURRENCY_SYMBOLS[before.text]
        nxt = doc[j] if j < len(doc) else None
        nxt2 = doc[j + 1] if j + 1 < len(doc) else None
        if currency:
            dim = f"money:{currency}"
        elif nxt is not None:
            low = nxt.lower_
            if low == "°" and nxt2 is not None and nxt2.text.upper() in ("C", "F"):
                dim, unit_tok = "temp", nxt2
                if nxt2.text.upper() == "F":
                    value, lo, hi = [(x - 32) * 5 / 9 if x != float("inf") else x for x in (value, lo, hi)]
            elif low in ("°c", "°f", "℃"):
                dim, unit_tok = "temp", nxt
                if low == "°f":
                    value, lo, hi = [(x - 32) * 5 / 9 if x != float("inf") else x for x in (value, lo, hi)]
            elif low in ("square", "sq") and nxt2 is not None and nxt2.lower_ in _UNITS:
                base = _UNITS[nxt2.lower_]
                dim, unit_tok = "area", nxt2
                value, lo, hi = [x * base[1] ** 2 for x in (value, lo, hi)]
            elif low in _UNITS or nxt.lemma_.lower() in _UNITS:
                dim_name, factor = _UNITS.get(low) or _UNITS[nxt.lemma_.lower()]
                if not (low in ("m", "t", "s", "h", "g", "n", "w", "l") and nxt.pos_ not in ("NOUN", "PROPN", "X")):
                    dim, unit_tok = dim_name, nxt
                    value, lo, hi = [x * factor for x in (value, lo, hi)]
            elif low in _CURRENCY_WORDS:
                dim, unit_tok = f"money:{_CURRENCY_WORDS[low]}", nxt
                if low in ("cent", "cents"):
                    value, lo, hi = [x / 100 for x in (value, lo, hi)]
            elif t.dep_ == "nummod" and t.head.pos_ == "NOUN" and t.head.i > t.i:
                noun = t.head
                lemma = noun.lemma_.lower()
                if lemma in _UNITS:
                    dim_name, factor = _UNITS[lemma]
                    dim, unit_tok = dim_name, noun
                    value, lo, hi = [x * factor for x in (value, lo, hi)]
                else:
                    dim, unit_tok = f"count:{lemma}", noun
                    count_classes = _COUNT_CLASSES.get(lemma, frozenset())
            elif nxt.pos_ == "NOUN" and nxt.tag_ == "NNS":
                lemma = nxt.lemma_.lower()
                dim, unit_tok = f"count:{lemma}", nxt
                count_classes = _COUNT_CLASSES.get(lemma, frozenset())
        if dim == "" and t.dep_ == "nummod" and t.head.lower_ in ("%", "percent"):
            dim, unit_tok = "percent", t.head
        if dim == "" and nxt is not None and nxt.lower_ == "half" or t.lower_ == "half":
            continue
        if dim.startswith("count:") and dim[6:] in ("time", "times"):
            continue  # "15 times" is a frequency, not a count of things
        keys, nouns = _quantity_attribute(doc, t, unit_tok)
        if dim.startswith("count:"):
            keys = keys | {dim[6:]} | count_classes
        out.append(_Qty(value=value, lo=lo, hi=hi, dim=dim, count_classes=count_classes, token=t.i,
                        keys=frozenset(keys), nouns=frozenset(nouns), text=raw))
    return out


def _keys_of(lemma: str) -> set[str]:
    lemma = lemma.lower()
    return {lemma, *(_CLASSES.get(lemma, ())), "stem:" + _stem(lemma)}


def _quantity_attribute(doc, num, unit_tok) -> tuple[set[str], set[str]]:
    """What a number measures: the noun it is 'of', an adjective (42 km long), the verb, the subject."""
    keys: set[str] = set()
    nouns: set[str] = set()
    anchor = unit_tok if unit_tok is not None and unit_tok.i != num.i else num
    if anchor.dep_ != "pobj" and num.dep_ == "pobj":
        anchor = num

    def add_noun(tok):
        if tok.pos_ in ("NOUN", "ADJ") and tok.lemma_.lower() not in ("number", "total", "figure", "value",
                                                                       "amount", "level", "rate"):
            keys.update(_keys_of(tok.lemma_))
            nouns.add(tok.lemma_.lower())
            for c in tok.children:
                if c.dep_ in ("amod", "compound") and c.pos_ in ("ADJ", "NOUN", "VERB") and \
                        c.lemma_.lower() not in ("total", "overall", "current", "official", "global"):
                    keys.update(_keys_of(c.lemma_))

    # "GB of memory", "leaves of parchment": what the unit is of
    for c in (unit_tok.children if unit_tok is not None else ()):
        if c.dep_ == "prep" and c.lower_ == "of":
            for p in c.children:
                if p.dep_ == "pobj":
                    add_noun(p)
    # "a maximum depth of 86 metres", "a capacity of 28,500"
    if anchor.dep_ == "pobj" and anchor.head.lower_ == "of" and anchor.head.head.pos_ in ("NOUN",):
        add_noun(anchor.head.head)
    # "a 5,000 mAh battery": the unit modifies a noun
    if unit_tok is not None and unit_tok.dep_ in ("compound", "nmod", "amod") and unit_tok.head.pos_ == "NOUN":
        add_noun(unit_tok.head)
    if num.dep_ in ("compound", "nummod") and num.head.pos_ == "NOUN" and num.head is not unit_tok and \
            num.head.lemma_.lower() not in _UNITS:
        add_noun(num.head)
    # "42 kilometres long"
    for tok in (anchor, anchor.head):
        if tok.pos_ == "ADJ":
            keys.update(_keys_of(tok.lemma_))
            nouns.add(tok.lemma_.lower())
        if tok.dep_ == "npadvmod" and tok.head.pos_ == "ADJ":
            keys.update(_keys_of(tok.head.lemma_))
            nouns.add(tok.head.lemma_.lower())
    # governing verb, and an attribute noun subject ("the population was 247,312")
    verb = anchor
    while verb.dep_ not in ("ROOT",) and verb.pos_ not in ("VERB", "AUX"):
        verb = verb.head
    if verb.pos_ in ("VERB", "AUX") or (verb.dep_ == "ROOT" and verb.lemma_.lower() in _CLASSES):
        lemma = _lemma(verb)
        if lemma not in _LIGHT_VERBS:
            keys.update(_keys_of(lemma))
        for c in verb.children:
            if c.dep_ in ("nsubj", "nsubjpass") and c.pos_ == "NOUN" and \
                    (lemma in _LIGHT_VERBS or lemma in ("rate", "measure", "stand")) and \
                    (c.lemma_.lower() in _CLASSES or any(x.dep_ in ("poss", "prep") for x in c.children)):
                add_noun(c)  # "Rennvik's population was ...", "the battery in the Hexa X2 is rated at ..."
            if c.dep_ == "acomp" and c.pos_ == "ADJ":
                keys.update(_keys_of(c.lemma_))
                nouns.add(c.lemma_.lower())
            if c.dep_ == "dobj" and c.pos_ == "NOUN" and c is not unit_tok and c is not num and \
                    lemma in _LIGHT_VERBS and not any(x.i == num.i for x in c.subtree):
                add_noun(c)
    return keys, nouns


# ---- predicates -----------------------------------------------------------------------------


def _preds(doc) -> list[_Pred]:
    out = []
    for t in doc:
        lemma = _lemma(t)
        if t.pos_ == "VERB":
            pass
        elif t.pos_ == "ADJ" and t.dep_ in ("acomp", "attr", "conj", "oprd", "ROOT", "amod"):
            if t.dep_ == "amod" and lemma not in _STATES and lemma not in _CLASSES:
                continue
        elif not (t.pos_ in ("NOUN", "PROPN") and (lemma in _CLASSES or lemma in _STATES or
                                                   (t.dep_ == "attr" and t.pos_ == "NOUN") or
                                                   _stem(lemma) in _NOUN_STEMS or _first_event(t) or
                                                   (lemma, "chief") in _MULTIWORD_ROLES)):
            continue
        classes = set(_CLASSES.get(lemma, ()))
        particle = next((c.lower_ for c in t.children if c.dep_ in ("prt", "prep", "dobj", "acomp", "advmod")
                         and (lemma, c.lower_) in _PHRASES), None)
        if particle:
            classes.add(_PHRASES[(lemma, particle)])
        if any(c.dep_ == "prep" and c.lower_ == "to" and any(x.lower_ == "trial" for x in c.children)
               for c in t.children):
            classes.add("tried")  # "went to trial"
        for c in t.children:
            if (lemma, c.lower_) in _MULTIWORD_ROLES:
                classes.add(_MULTIWORD_ROLES[(lemma, c.lower_)])
        if _first_event(t):
            classes.add("first_event:" + lemma)
        if lemma in ("fight", "play") and any(c.dep_ == "nsubjpass" for c in t.children):
            classes.add("hold_event")  # "the battle was fought", "the final was played"
        if lemma == "first" or lemma == "person":
            continue
        if _repeated(t):
            # "re-released", "rebuilt", "reopened again": another occurrence, not the single event
            classes = {"re:" + c for c in classes} or {"re:" + lemma}
        antonym = lemma in _ANTONYM_VERBS
        if antonym:
            classes.add(_ANTONYM_VERBS[lemma])
        out.append(_Pred(i=t.i, lemma=lemma, classes=frozenset(classes), neg=_negation(t), antonym=antonym))
    return out


_MULTIWORD_ROLES = {("executive", "chief"): "ceo", ("officer", "executive"): "ceo", ("director", "managing"): "ceo",
                    ("editor", "chief"): "editor"}


def _repeated(t) -> bool:
    doc = t.doc
    if t.i >= 2 and doc[t.i - 1].text in ("-", "–") and doc[t.i - 2].lower_ == "re":
        return True
    if t.lower_.startswith("re-") or any(c.lower_ in ("again", "re") for c in t.children):
        return True
    lemma = t.lemma_.lower()
    return lemma.startswith("re") and lemma[2:] in _CLASSES and lemma not in _CLASSES


def _first_event(t) -> bool:
    """A noun marked as the first of its kind: 'its first commercial flight', 'the maiden voyage'."""
    return t.pos_ == "NOUN" and any(c.dep_ == "amod" and c.lower_ in ("first", "maiden", "inaugural", "initial")
                                    for c in t.children) and t.lemma_.lower() not in _GENERIC_PERSON


def _lemma(t) -> str:
    """spaCy's lemma, repaired where the small model drops an 'e': "staged" -> "stag", "rated" -> "rat".
    A consonant-vowel-consonant stem would have doubled its consonant ("ratted"), so "rated" is from "rate"."""
    lemma = t.lemma_.lower()
    if t.pos_ in ("VERB", "AUX") and t.lower_ == lemma + "ed" and len(re.findall(r"[aeiouy]+", lemma)) == 1 and \
            re.search(r"(?:^|[^aeiou])[aeiou][bcdfgklmnprstvz]$", lemma):
        return lemma + "e"
    return lemma


#: Stems of predicate nouns we accept as predicates even outside the class table (conductor).
_NOUN_STEMS = {"conduct", "compat", "support", "access", "membership"}


def _negation(t) -> str:
    """How a predicate is negated: not/never/no longer on it or its copula, 'no X', or a privative head."""
    heads = [t]
    if t.dep_ in ("acomp", "attr", "oprd", "xcomp") or (t.pos_ in ("ADJ", "NOUN") and t.head.pos_ == "AUX"):
        heads.append(t.head)
    if t.dep_ == "conj":
        heads.append(t.head)
    for h in heads:
        for c in h.children:
            if c.dep_ == "neg" or (c.dep_ == "advmod" and c.lower_ == "never"):
                if c.lower_ == "never":
                    return "never"
                if c.lower_ == "no" and any(x.lower_ == "longer" for x in h.children):
                    return "no longer"
                return "not"
    # "contains no X", "No licence is needed"
    for c in t.children:
        if c.dep_ in ("dobj", "nsubjpass", "attr") and any(d.dep_ == "det" and d.lower_ in ("no", "neither")
                                                            for d in c.children):
            return "no"
        if c.dep_ in ("dobj", "attr") and c.lower_ in ("none", "nothing"):
            return "no"
    if t.pos_ in ("NOUN", "PROPN") and any(d.dep_ == "det" and d.lower_ == "no" for d in t.children):
        return "no"
    if t.pos_ in ("NOUN", "PROPN") and t.dep_ in ("dobj", "nsubjpass") and t.head.pos_ == "VERB":
        inherited = _negation(t.head)  # "does not charge fees": the fees are not charged either
        if inherited:
            return inherited
    # privative governors: "lacks X", "without X", "free of charge", "breaks compatibility"
    h = t.head
    if t.dep_ in ("dobj", "pobj", "attr") and t.pos_ in ("NOUN", "PROPN"):
        gov = h.head if h.pos_ == "ADP" else h
        if h.lower_ == "without" or gov.lemma_.lower() in _PRIVATIVE_HEADS or \
                (h.lower_ == "of" and gov.lower_ == "free"):
            return "privative"
    if t.dep_ == "xcomp" and h.lemma_.lower() in ("fail", "refuse", "decline"):
        return "privative"
    return ""


# =============================================================================================
# Relations between a predicate and the parse: arguments, identity, attached values
# =============================================================================================


def _clause_verb(tok):
    """The verb (or copula) whose clause contains tok."""
    t = tok
    seen = 0
    while t.pos_ not in ("VERB", "AUX") and t.dep_ != "ROOT" and seen < 30:
        t = t.head
        seen += 1
    return t


def _is_passive(v) -> bool:
    return any(c.dep_ in ("nsubjpass", "auxpass") for c in v.children) or \
        (v.tag_ == "VBN" and v.dep_ in ("acl", "advcl", "amod") and not any(c.dep_ == "nsubj" for c in v.children))


def _subject_of(v):
    """The subject of verb v, inherited through conj/xcomp/advcl/acl/relcl where it has none."""
    for _ in range(6):
        subjects = [c for c in v.children if c.dep_ in ("nsubj", "nsubjpass", "csubj", "expl")]
        if not subjects:  # a parse that left the subject unattached: "Stratus SDK 5 breaks ...", "Ledgerly charges"
            subjects = [c for c in v.children if c.i < v.i and (c.dep_ == "dep" and c.pos_ in ("PROPN", "NOUN") or
                                                               c.dep_ == "advmod" and c.pos_ == "ADV" and
                                                               _name_token(c))]
        # "The chemist Irene Vasquez was born": the parser may split an appositive into two subjects
        subj = next((c for c in subjects if c.pos_ == "PROPN"), subjects[0] if subjects else None)
        if subj is not None and subj.dep_ != "expl":
            return subj
        if v.dep_ in ("conj", "xcomp") and v.head.pos_ in ("VERB", "AUX"):
            v = v.head
            continue
        if v.dep_ in ("advcl",) and v.head.pos_ in ("VERB", "AUX"):
            s = next((c for c in v.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            return s
        if v.dep_ in ("acl", "relcl") and v.head.pos_ in ("NOUN", "PROPN", "PRON"):
            head = v.head
            # "an album by the band X, released in 1968": after a comma, the participle belongs to the
            # noun that the by/of-phrase modifies, not to the band
            top = head
            while top.dep_ in ("compound", "appos", "conj", "flat", "nmod") and top.head.i != top.i:
                top = top.head  # up to the noun phrase that contains the name
            if top.dep_ == "pobj" and top.head.head.pos_ in ("NOUN", "PROPN") and \
                    (top.head.lower_ == "by" or (top.head.lower_ in ("of", "from") and
                                                 any(t.text == "," for t in v.doc[top.i:v.i]))):
                head = top.head.head
            elif top is not head and top.pos_ == "NOUN":
                head = top  # "an album by the band, Blood, Sweat & Tears, released ...": the album
            # "'Salt Harbour' is a drama directed by ...": the drama is the copula's subject
            if head.dep_ == "attr" and head.head.pos_ in ("AUX", "VERB"):
                s = next((c for c in head.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                if s is not None:
                    return s
            return head
        return None
    return None


def _theme_tokens(sent: _Sentence, p: _Pred) -> list:
    """The argument a predicate is about: the patient of role/creation verbs, else the subject."""
    doc = sent.doc
    t = doc[p.i]
    if t.pos_ == "VERB":
        passive = _is_passive(t)
        if passive:
            s = next((c for c in t.children if c.dep_ == "nsubjpass" and c.pos_ == "PROPN"), None) or \
                next((c for c in t.children if c.dep_ == "nsubjpass"), None)
            return [s] if s is not None else ([_subject_of(t)] if _subject_of(t) is not None else [])
        obj = next((c for c in t.children if c.dep_ in ("dobj",) and (p.lemma, c.lower_) not in _PHRASES), None)
        agentive = p.classes & (_ROLE_ALWAYS | _ROLE_MARKED | _ROLE_AT_TIME | {"acquire", "sign", "build", "release",
                                                                             "hold_event", "open", "support",
                                                                             "accept", "contain", "require",
                                                                             "ended", "cancelled", "possess"})
        if obj is not None and p.lemma != "have" and agentive - {"support", "accept", "contain", "require", "possess"}:
            return [obj]  # "Solveig Andersen founded Nordic Loom": about Nordic Loom
        s = _subject_of(t)
        return [s] if s is not None else []
    if t.pos_ in ("NOUN", "PROPN") and t.dep_ == "ROOT" and t.tag_ in ("NNS", "VBZ"):
        # a verb the tagger took for a plural noun: "The Kairo web framework ships with ..."
        subj = [c for c in t.children if c.dep_ in ("compound", "nsubj") and c.i < t.i]
        if subj:
            return subj[-1:]
    if t.pos_ in ("NOUN", "PROPN"):
        # relational nouns: "the founder of X", "X's headquarters", "X has its headquarters"
        owners = [c for c in t.children if c.dep_ == "poss"]
        owners += [p2 for c in t.children if c.dep_ == "prep" and c.lower_ in ("of", "for") for p2 in c.children
                   if p2.dep_ == "pobj"]
        if owners:
            return owners
        if t.dep_ in ("dobj", "attr", "pobj", "conj"):
            v = _clause_verb(t)
            s = _subject_of(v) if v.pos_ in ("VERB", "AUX") else None
            return [s] if s is not None else []
        if t.dep_ in ("nsubj", "nsubjpass"):
            return []
        return []
    # adjectives: the copula's subject
    v = t.head if t.dep_ in ("acomp", "attr", "oprd") else _clause_verb(t)
    s = _subject_of(v) if v.pos_ in ("VERB", "AUX") else None
    if t.dep_ == "amod" and t.head.pos_ in ("NOUN", "PROPN"):
        if t.head.dep_ in ("attr", "oprd", "xcomp") and t.head.head.pos_ in ("AUX", "VERB"):
            s2 = _subject_of(t.head.head)  # "X remains an independent company", "X is a stable isotope"
            if s2 is not None:
                return [s2]
        return [t.head]
    return [s] if s is not None else []


def _identity(sent: _Sentence, tok, depth: int = 0) -> set:
    """Identity keys of the thing an NP head denotes: ('name', Name) or ('noun', lemma, frozenset(names))."""
    if tok is None or depth > 3:
        return set()
    out: set = set()
    if tok.i in sent.name_at:
        out.add(("name", sent.name_at[tok.i].key))
    elif tok.pos_ == "PRON":
        subj = _subject_of(_clause_verb(tok.head)) if tok.dep_ == "poss" else None
        if subj is not None and subj is not tok.head and subj.pos_ != "PRON" and depth < 3:
            out |= _identity(sent, subj, depth + 1)  # "Nordwind Airlines operated its first flight"
        elif tok.lower_ in ("it", "they", "he", "she", "its", "their", "his", "her", "this"):
            out.add(("pron", tok.lower_))
    else:
        owners: set[str] = set()
        compounds: set[str] = set()
        for c in tok.children:
            if c.dep_ == "poss":
                owners |= {k[1] for k in _identity(sent, c, depth + 1) if k[0] == "name"} or \
                    ({"<pron>"} if c.pos_ == "PRON" else set())
            elif c.dep_ in ("compound", "nmod", "amod") and c.i in sent.name_at:
                compounds.add(sent.name_at[c.i].key)
            elif c.dep_ == "compound" and c.pos_ == "NOUN":  # "the Rust programming language"
                compounds |= {sent.name_at[g.i].key for g in c.children
                              if g.dep_ in ("compound", "amod") and g.i in sent.name_at}
            elif c.dep_ == "prep" and c.lower_ in ("of",):
                for p in c.children:
                    if p.dep_ == "pobj":
                        keys = {k[1] for k in _identity(sent, p, depth + 1) if k[0] == "name"}
                        qualified = any(m.dep_ in ("compound", "amod") and m.pos_ in ("NOUN", "ADJ", "PROPN")
                                        and m.lower_ not in _ORDINALS for m in tok.children)
                        if tok.lemma_.lower() in _CATEGORY_NOUNS and not qualified:
                            compounds |= keys  # "the town of Vellmar", "version 2.4 of Fennel DB"
                        else:
                            owners |= keys
        for key in compounds:
            out.add(("name", key))  # "the Kairo web framework" is Kairo
        if compounds and tok.lemma_.lower() not in _CATEGORY_NOUNS:
            out.add(("noun", tok.lemma_.lower(), frozenset(compounds)))  # ... or a store of Halcyon Coffee
        if not compounds:
            if "<pron>" in owners:
                owners.discard("<pron>")
                subj = _subject_of(_clause_verb(tok))
                if subj is not None and subj is not tok:
                    owners |= {k[1] for k in _identity(sent, subj, depth + 1) if k[0] == "name"}
            definite = any(c.dep_ in ("det", "poss") and c.lower_ in _ANAPHORIC_DETS for c in tok.children)
            if definite and not owners and not any(c.dep_ == "appos" for c in tok.children):
                out.add(("pron", tok.lemma_.lower()))  # "the film", "this company": anaphoric, unknown
            else:
                out.add(("noun", tok.lemma_.lower(), frozenset(owners)))
    for c in tok.children:  # appositions name the same thing: "Edmund Hale, the founder of X"
        if c.dep_ == "appos":
            out |= {k for k in _identity(sent, c, depth + 1) if k[0] == "name"}
    if tok.dep_ == "appos" and depth == 0:
        out |= {k for k in _identity(sent, tok.head, depth + 1) if k[0] == "name"}
    return out


_ANAPHORIC_DETS = {"the", "this", "that", "these", "those", "its", "his", "her", "their", "our", "such"}


def _ids_match(x: set, y: set, sx: _Sentence, sy: _Sentence) -> bool | None:
    """True/False when both identities are known; None when either is unknown (a pronoun, nothing)."""
    kx = {k for k in x if k[0] != "pron"}
    ky = {k for k in y if k[0] != "pron"}
    if not kx or not ky:
        return None
    names_x = [n for n in sx.names if ("name", n.key) in kx]
    names_y = [n for n in sy.names if ("name", n.key) in ky]
    if any(_names_match(a, b) for a in names_x for b in names_y):
        return True
    nouns_x = [k for k in kx if k[0] == "noun"]
    nouns_y = [k for k in ky if k[0] == "noun"]
    for a in nouns_x:
        for b in nouns_y:
            same_head = a[1] == b[1] or (_CLASSES.get(a[1], frozenset()) & _CLASSES.get(b[1], frozenset()))
            if not same_head:
                continue
            if not a[2] or not b[2]:
                return True  # one side does not say whose: underspecified, not different
            na = [n for n in sx.names if n.key in a[2]]
            nb = [n for n in sy.names if n.key in b[2]]
            if any(_names_match(p, q) for p in na for q in nb):
                return True
    return False


def _roles(sent: _Sentence, p: _Pred) -> tuple[list, list]:
    """(agent-ish tokens, patient tokens) of a verb: active subject / by-agent, and object / passive subject."""
    t = sent.doc[p.i]
    if t.pos_ != "VERB":
        return [], _theme_tokens(sent, p)
    if _is_passive(t):
        agent = [pp for c in t.children if c.dep_ == "agent" for pp in c.children if pp.dep_ == "pobj"]
        s = next((c for c in t.children if c.dep_ == "nsubjpass" and c.pos_ == "PROPN"), None) or \
            next((c for c in t.children if c.dep_ == "nsubjpass"), None) or _subject_of(t)
        return agent, [s] if s is not None else []
    s = _subject_of(t)
    obj = next((c for c in t.children if c.dep_ == "dobj" and (p.lemma, c.lower_) not in _PHRASES), None)
    if obj is None:
        return [], [s] if s is not None else []
    return [s] if s is not None else [], [obj]


def _clause_args(sent: _Sentence, p: _Pred) -> list:
    """Core arguments of the predicate's clause: roles of a verb; for a noun or adjective, its clause
    verb's subject, object and prepositional objects ('put their signatures to the Treaty')."""
    t = sent.doc[p.i]
    if t.pos_ == "VERB":
        return [x for r in _roles(sent, p) for x in r]
    v = _clause_verb(t)
    out = [c for c in v.children if c.dep_ in ("nsubj", "nsubjpass", "dobj")]
    out += [x for c in v.children if c.dep_ == "prep" and c.lower_ in ("to", "of", "for", "on", "with")
            for x in c.children if x.dep_ == "pobj"]
    return out


def _actor(sent: _Sentence, p: _Pred) -> list:
    """Who or what the clause is about: the by-agent of a passive, else the (inherited) subject."""
    t = sent.doc[p.i]
    agent = [pp for c in t.children if c.dep_ == "agent" for pp in c.children if pp.dep_ == "pobj"]
    if agent:
        return agent
    if t.pos_ == "VERB" and _is_passive(t):
        return []  # the subject of a passive is the patient, not who acts
    s = _subject_of(t)
    return [s] if s is not None and s.dep_ != "csubj" else []


def _names_in(ids: set) -> bool:
    """A name among the identity keys, directly or as the owner of a noun ('Halvard Berg's son')."""
    return any(k[0] == "name" or (k[0] == "noun" and k[2]) for k in ids)


def _has_name(ids: set) -> bool:
    return any(k[0] == "name" for k in ids)


def _ids_of(sent: _Sentence, tokens: list) -> set:
    out: set = set()
    for t in tokens:
        if t is not None:
            out |= _identity(sent, t)
    return out


def _same_theme(sa: _Sentence, pa: _Pred, sb: _Sentence, pb: _Pred, shared: list, lenient: bool = False) -> bool:
    """Whether two predicates are about the same thing; False whenever either side cannot tell (a pronoun,
    "the film"). `lenient` (polarity and states, whose objects are compared separately) also accepts the
    same subject when an object is a plain common noun ("served two terms" / "never served")."""
    ta, tb = sa.doc[pa.i], sb.doc[pb.i]
    if ta.pos_ == "VERB" and tb.pos_ == "VERB":
        _, pat_a = _roles(sa, pa)
        _, pat_b = _roles(sb, pb)
        ia, ib = _ids_of(sa, pat_a), _ids_of(sb, pat_b)
        match = _ids_match(ia, ib, sa, sb)
        if match and not lenient and not (_names_in(ia) or _names_in(ib)) and \
                not (sa.kind_subjects & sb.kind_subjects):
            return False  # "a trailer was launched" / "published a trailer": no name, no identity
        if match and not (_has_name(ia) or _has_name(ib)):
            # plain common-noun objects ("offline editing") say nothing about who: the actors must agree
            if _ids_match(_ids_of(sa, _actor(sa, pa)), _ids_of(sb, _actor(sb, pb)), sa, sb) is False:
                return False
        if lenient and not match and not (_has_name(ia) and _has_name(ib)):
            xa = _actor(sa, pa) or [x for x in [_subject_of(ta)] if x is not None]
            xb = _actor(sb, pb) or [x for x in [_subject_of(tb)] if x is not None]
            return bool(_ids_match(_ids_of(sa, xa), _ids_of(sb, xb), sa, sb))
        return bool(match)
    ia = _ids_of(sa, _theme_tokens(sa, pa))
    ib = _ids_of(sb, _theme_tokens(sb, pb))
    match = _ids_match(ia, ib, sa, sb)
    if match and not lenient and not (_names_in(ia) or _names_in(ib)) and not (sa.kind_subjects & sb.kind_subjects):
        return False
    if match:
        return True
    if match is False and (ta.pos_ == "VERB") != (tb.pos_ == "VERB"):
        # a noun against a verb ("put their signatures to the Treaty" / "the Treaty was signed"):
        # compare the noun's clause arguments with the verb's
        ca = _ids_of(sa, _clause_args(sa, pa)) | ia
        cb = _ids_of(sb, _clause_args(sb, pb)) | ib
        return bool(_ids_match(ca, cb, sa, sb))
    return False


#: Edges into a subject or similar argument: a date inside "Frederick (1122 - 1190)" is not the date of the
#: clause's event. (Objects are left out: "opened its first store in Vancouver" attaches the place to "store".)
_ARGUMENT_EDGES = {"nsubj", "nsubjpass", "attr", "appos", "poss", "csubj", "oprd", "dative", "agent"}


def _governs(sent: _Sentence, p: _Pred, tok_i: int, allow_conj: bool = True) -> int:
    """0 if token tok_i is not attached to predicate p; 1 attached directly; 2 through a conjoined verb."""
    doc = sent.doc
    pt = doc[p.i]
    anchors = {pt.i}
    if pt.pos_ != "VERB":
        v = _clause_verb(pt)
        if v.lemma_.lower() in _LIGHT_VERBS | _OCCURRENCE_VERBS | {"serve"} or pt.dep_ in ("acomp", "attr") or \
                any(c.startswith("first_event:") for c in p.classes):
            anchors.add(v.i)
    t = doc[tok_i]
    steps = 0
    while steps < 12:
        if t.i in anchors:
            return 1
        if steps > 0 and t.dep_ in _ARGUMENT_EDGES and t.head.i in anchors:
            break  # inside an argument ("Frederick (1122 – 1190) was ..."): not a value of the predicate
        if t.dep_ in ("relcl", "ccomp", "advcl", "csubj", "parataxis", "acl") and t.i not in anchors:
            if t.dep_ == "acl" and t.tag_ == "VBN" and t.i in anchors:
                return 1
            break
        if t.pos_ == "VERB" and t.i not in anchors and t.dep_ != "conj":
            break
        if t.dep_ == "conj" and t.pos_ == "VERB" and t.head.i in anchors and allow_conj:
            return 2
        if t.head is t:
            break
        t = t.head
        steps += 1
    return 0


def _attached(sent: _Sentence, p: _Pred, token_indices: Sequence[int]) -> list[int]:
    """Indices (from token_indices) attached to p; direct attachments win over ones through a conj verb."""
    direct = [i for i in token_indices if _governs(sent, p, i) == 1]
    if direct:
        return direct
    return [i for i in token_indices if _governs(sent, p, i) == 2]


# =============================================================================================
# Values: places and persons
# =============================================================================================

_LOC_PREPS = {"in", "at", "near", "outside", "inside", "within", "on", "out", "into"}


def _places(sent: _Sentence) -> list[tuple[_Name, int]]:
    """(place name, token index) for names used as a location: after in/at/near, or a host's subject."""
    doc = sent.doc
    out = []
    for n in sent.names:
        root = doc[n.start:n.end].root
        if any(doc[i].i in sent.date_tokens for i in range(n.start, n.end)):
            continue
        tok = root
        ok = False
        # the name may modify a noun ("a Seattle garage", "the Clydebank shipyard", "the village of Calder")
        if tok.dep_ in ("compound", "nmod", "amod") and tok.head.pos_ == "NOUN":
            tok = tok.head
        if tok.dep_ == "pobj" and tok.head.lower_ == "of" and tok.head.head.pos_ == "NOUN" and \
                tok.head.head.lemma_.lower() in _CATEGORY_NOUNS | {"town", "outskirts", "centre", "center",
                                                                   "heart", "suburbs", "area", "old"}:
            tok = tok.head.head
        if tok.dep_ == "poss" and tok.head.dep_ == "pobj":  # "in Tallinn's old town"
            tok = tok.head
        if tok.dep_ == "pobj" and tok.head.lower_ in _LOC_PREPS:
            ok = True
        if tok.dep_ == "appos" and tok.head.dep_ == "pobj" and tok.head.head.lower_ in _LOC_PREPS:
            ok = True  # "in Austin, Texas"
        if tok.dep_ == "conj":
            h = tok.head
            while h.dep_ == "conj":
                h = h.head
            if h.dep_ == "pobj" and h.head.lower_ in _LOC_PREPS:
                ok = True
        if root.dep_ == "nsubj" and root.head.lemma_.lower() == "host":
            ok = True
        if ok:
            if tok.dep_ == "pobj" and tok.head.lower_ == "on" and not \
                    any(w in n.key.split() for w in ("street", "road", "avenue", "square", "island")):
                continue
            out.append((n, root.i))
    return out


def _place_level(name: _Name) -> str:
    key = name.key
    if key in _REGION_LEVEL:
        return _REGION_LEVEL[key]
    words = key.split()
    if words and (words[-1] in _PLACE_FEATURES or words[0] in ("mount", "lake", "river", "cape", "port")):
        return "feature:" + (words[-1] if words[-1] in _PLACE_FEATURES else words[0])
    return "local"


def _containers(sent: _Sentence, tok_i: int) -> set[str]:
    """Names that contain a place in the same sentence: 'Austin, Texas', 'in the Atacama Desert in Chile'."""
    doc = sent.doc
    t = doc[tok_i]
    out = set()
    for c in t.subtree:
        if c.i != tok_i and c.i in sent.name_at and c.i not in range(sent.name_at[tok_i].start,
                                                                     sent.name_at[tok_i].end):
            out.add(sent.name_at[c.i].key)
    h = t.head
    if t.dep_ == "appos" and h.i in sent.name_at:
        out.add(sent.name_at[h.i].key)
    return out


# =============================================================================================
# The judge
# =============================================================================================


def judge(a: str, b: str) -> Verdict | None:
    """Whether two claim sentences contradict; None when they are compatible or we cannot tell."""
    if not a or not b or _fold(a).strip() == _fold(b).strip():
        return None
    _analyse_many([a, b])
    sa, sb = _analyse(a), _analyse(b)
    shared = _shared_names(sa, sb)
    if not shared and not _shared_subject_noun(sa, sb):
        return None
    if _version_conflict(sa, sb) or _qualifier_conflict(sa, sb) or _descriptor_conflict(sa, sb):
        return None
    for rule in (_rule_exclusive, _rule_polarity, _rule_date, _rule_place, _rule_person, _rule_number):
        verdict = rule(sa, sb, shared)
        if verdict is not None:
            return verdict
    return None


def _shared_names(sa: _Sentence, sb: _Sentence) -> list[tuple[_Name, _Name]]:
    return [(x, y) for x in sa.names for y in sb.names if _names_match(x, y)]


def _shared_subject_noun(sa: _Sentence, sb: _Sentence) -> bool:
    return bool(sa.kind_subjects & sb.kind_subjects)


def _version_conflict(sa: _Sentence, sb: _Sentence) -> bool:
    va, vb = sa.versions, sb.versions
    if not va or not vb:
        return False
    if va & vb:
        # shared designations; still different if each has one of the same kind the other lacks
        ka = {v.split(":")[0] for v in va - vb if ":" in v}
        kb = {v.split(":")[0] for v in vb - va if ":" in v}
        return bool(ka & kb)
    return True


def _core_nouns(sent: _Sentence) -> dict[str, list]:
    """Head nouns of the subject/object arguments (and their 'of' heads), by lemma."""
    out: dict[str, list] = defaultdict(list)
    for t in sent.doc:
        if t.pos_ not in ("NOUN", "PROPN"):
            continue
        core = t.dep_ in ("nsubj", "nsubjpass", "dobj", "attr", "ROOT", "appos")
        if not core and t.dep_ == "pobj" and t.head.head.dep_ in ("nsubj", "nsubjpass", "dobj", "attr"):
            core = True
        if not core and t.dep_ == "poss" and t.head.dep_ in ("nsubj", "nsubjpass", "dobj", "attr"):
            core = True
        if core:
            out[t.lemma_.lower()].append(t)
    return out


def _modifiers(sent: _Sentence, tok) -> dict[str, set[str]]:
    mods: dict[str, set[str]] = defaultdict(set)
    for c in tok.children:
        low = c.lower_.rstrip("'s").rstrip("’s")
        lemma = c.lemma_.lower()
        if c.dep_ in ("amod", "compound", "nmod", "poss", "npadvmod") or (c.dep_ == "advmod" and c.pos_ == "ADJ"):
            for word in {low, lemma}:
                if word in _DIRECTION:
                    mods["direction"].add(word.replace("ern", ""))
                elif word in _ORDER:
                    mods["order"].add(word)
                elif word in _GENDER:
                    mods["gender"].add(word.rstrip("s").replace("women", "woman").replace("men", "man")
                                       .replace("female", "woman").replace("male", "man"))
                elif word in _SCOPE:
                    mods["scope"].add(word.rstrip("s"))
            if c.i in sent.name_at:
                mods["name"].add(sent.name_at[c.i].key)
            for g in c.children:  # "the women's singles title": women's modifies singles
                if g.dep_ == "poss" and g.lower_ in _GENDER:
                    mods["gender"].add(g.lower_.replace("women", "woman").replace("men", "man"))
        if c.dep_ == "prep" and c.lower_ in ("in", "at", "for", "on"):
            for p in c.children:
                if p.dep_ == "pobj" and p.i in sent.name_at and p.i not in sent.date_tokens:
                    mods["name"].add(sent.name_at[p.i].key)
    return mods


def _qualifier_conflict(sa: _Sentence, sb: _Sentence) -> bool:
    """A shared noun qualified differently: the east wing / the west wing, the Ohio plant / the plant in Georgia."""
    na, nb = _core_nouns(sa), _core_nouns(sb)
    for lemma in set(na) & set(nb):
        if lemma in ("year", "time", "day"):
            continue
        for ta in na[lemma]:
            for tb in nb[lemma]:
                if ta.i in sa.name_at and tb.i in sb.name_at:
                    continue
                ma, mb = _modifiers(sa, ta), _modifiers(sb, tb)
                for cls in set(ma) & set(mb):
                    xa, xb = ma[cls], mb[cls]
                    if cls == "name":
                        xa = {k for k in xa if not _name_in(k, sa, sb)}
                        xb = {k for k in xb if not _name_in(k, sb, sa)}
                        if xa and xb:
                            return True
                    elif xa and xb and not (xa & xb):
                        return True
    return False


def _descriptors(sent: _Sentence) -> set[str]:
    """Nationalities describing the subject: 'X is an English footballer', 'the American chemist X'."""
    out = set()
    for ent in sent.doc.ents:
        if ent.label_ != "NORP":
            continue
        head = ent.root.head
        if head.pos_ in ("NOUN", "PROPN") and (head.dep_ in ("attr", "appos", "nsubj", "nsubjpass", "compound")
                                               or head.i in sent.name_at):
            out.add(_fold(ent.text))
    return out


def _descriptor_conflict(sa: _Sentence, sb: _Sentence) -> bool:
    """Two people or things of the same name told apart by nationality: an English footballer and an
    American politician called John Smith are not the same John Smith."""
    da, db = _descriptors(sa), _descriptors(sb)
    return bool(da and db and not (da & db))


def _name_in(key: str, own: _Sentence, other: _Sentence) -> bool:
    name = next((n for n in own.names if n.key == key), None)
    return name is not None and any(_names_match(name, m) for m in other.names)


def _aligned(sa: _Sentence, sb: _Sentence, wanted: set[str] | None = None,
             allow_stem: bool = True) -> list[tuple[_Pred, _Pred, set[str]]]:
    """Predicate pairs that express the same relation: same lemma, shared class, or shared stem."""
    out = []
    for pa in sa.preds:
        for pb in sb.preds:
            common = set(pa.classes & pb.classes)
            if pa.lemma == pb.lemma and not pa.classes:
                common.add(pa.lemma)
            if allow_stem and not common and len(pa.lemma) > 3 and _stem(pa.lemma) == _stem(pb.lemma) and \
                    pa.lemma not in _LIGHT_VERBS:
                common.add("stem:" + _stem(pa.lemma))
            if pa.lemma in _LIGHT_VERBS and pb.lemma in _LIGHT_VERBS:
                common -= {pa.lemma}
            if wanted is not None:
                common &= wanted
            if common:
                out.append((pa, pb, common))
    return out


def _attr_name(classes: Iterable[str]) -> str:
    names = {"bear": "birth", "die": "death", "found": "founding", "locate": "location", "direct": "director",
             "write": "author", "release": "release", "hold_event": "venue", "sign": "signing",
             "build": "construction", "open": "opening", "acquire": "acquisition", "consecrate": "consecration"}
    for c in sorted(classes):
        if c in names:
            return names[c]
    c = sorted(classes)[0]
    return c.replace("stem:", "")


def _dates_compatible(sa: _Sentence, sb: _Sentence) -> bool:
    """For timeless facts (who wrote a book): only explicit scoping or disjoint dates keep them apart."""
    scoped = {"since", "until", "till", "from-to", "as of", "formerly", "previously", "no longer"}
    if sa.temporal & scoped or sb.temporal & scoped:
        return False
    if sa.dates and sb.dates:
        return any(x.lo <= y.hi and y.lo <= x.hi for x in sa.dates for y in sb.dates)
    return True


def _time_compatible(sa: _Sentence, sb: _Sentence, allow_one_dated: bool = False) -> bool:
    """Both statements speak of the same time: same dates, or neither dated and no change markers."""
    da = [(d.lo, d.hi) for d in sa.dates]
    db = [(d.lo, d.hi) for d in sb.dates]
    scoped = {"since", "until", "till", "from-to", "as of", "formerly", "previously", "no longer", "now",
              "currently", "today"}
    if (sa.temporal & scoped) != (sb.temporal & scoped) and (sa.temporal & scoped or sb.temporal & scoped):
        return False
    if da and db:
        return any(x[0] <= y[1] and y[0] <= x[1] for x in da for y in db)
    if da or db:
        return allow_one_dated and (sa.tense == sb.tense or not sa.tense or not sb.tense)
    return not sa.tense or not sb.tense or sa.tense == sb.tense


# ---- date -----------------------------------------------------------------------------------


_OCCURRENCE_VERBS = {"take", "operate", "make", "hold", "occur", "happen", "be", "fly", "run", "stage", "have",
                     "play", "conduct", "complete", "perform", "undertake", "come"}


def _rule_date(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    for pa, pb, common in _aligned(sa, sb):
        common = {c for c in common if c in _SINGLE_EVENT or c.startswith("first_event:")}
        if not common:
            continue
        if all(c.startswith("first_event:") for c in common):
            va, vb = _clause_verb(sa.doc[pa.i]), _clause_verb(sb.doc[pb.i])
            if not (va.lemma_.lower() in _OCCURRENCE_VERBS and vb.lemma_.lower() in _OCCURRENCE_VERBS or
                    va.lemma_.lower() == vb.lemma_.lower()):
                continue
        single = common
        if common <= _NEEDS_MARK_DATE and not (sa.first and sb.first) and not _specific_event(sa, sb, pa, pb):
            continue
        if common & _REPEATABLE and _extra_qualifiers(sa, sb, pa, pb):
            continue
        if pa.neg or pb.neg:
            continue
        da = [d for d in sa.dates if not d.modifier and d.prep in ("", "in", "on", "at", "during", "of", "around")
              and _attached(sa, pa, [d.root])]
        db = [d for d in sb.dates if not d.modifier and d.prep in ("", "in", "on", "at", "during", "of", "around")
              and _attached(sb, pb, [d.root])]
        if not da or not db:
            continue
        if not _same_theme(sa, pa, sb, pb, shared):
            continue
        if any(x.lo <= y.hi and y.lo <= x.hi for x in da for y in db):
            continue
        attr = _attr_name(single)
        return Verdict("date", f"{attr} date",
                       f"{attr} date: {', '.join(d.text for d in da)} vs {', '.join(d.text for d in db)}")
    return None


def _specific_event(sa, sb, pa, pb) -> bool:
    """The subject is one specific occurrence: it carries a year or an edition ('the 2017 final')."""
    return bool({v for v in sa.versions if v.startswith("year:")} & {v for v in sb.versions if v.startswith("year:")})


def _extra_qualifiers(sa, sb, pa, pb) -> bool:
    """A repeatable event with a place on one side only or different places ('released in the UK in 1990')."""
    pla = [n.key for n, i in _places(sa) if _attached(sa, pa, [i])]
    plb = [n.key for n, i in _places(sb) if _attached(sb, pb, [i])]
    return bool(pla or plb) and set(pla) != set(plb)


# ---- place ----------------------------------------------------------------------------------


def _rule_place(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    places_a, places_b = _places(sa), _places(sb)
    if not places_a or not places_b:
        return None
    for pa, pb, common in _aligned(sa, sb, _SINGLE_PLACE | {"ipo"}):
        if common <= _NEEDS_MARK_PLACE and not _unique_place_marked(sa, sb, pa, pb, common):
            continue
        if pa.neg or pb.neg:
            continue
        xa = [(n, i) for n, i in places_a if _attached(sa, pa, [i])]
        xb = [(n, i) for n, i in places_b if _attached(sb, pb, [i])]
        if not xa or not xb:
            continue
        if not _same_theme(sa, pa, sb, pb, shared):
            continue
        if "locate" in common and not _time_compatible(sa, sb):
            continue
        if common & {"hold_event", "open"} and not _time_compatible(sa, sb, allow_one_dated=True):
            continue
        # the place of the subject itself is not a value ("Mount Kellan", "Tallinn's old town")
        all_a = {n.key for n, _ in xa} | {c for _, i in xa for c in _containers(sa, i)}
        all_b = {n.key for n, _ in xb} | {c for _, i in xb for c in _containers(sb, i)}
        names_a = [n for n in sa.names if n.key in all_a]
        names_b = [n for n in sb.names if n.key in all_b]
        if any(_names_match(x, y) for x in names_a for y in names_b):
            continue
        # any place of one sentence among the other's places or their containers: containment we can see
        every_a = [n for n in sa.names if n.key in {m.key for m, _ in places_a} | {c for _, i in places_a
                                                                                  for c in _containers(sa, i)}]
        every_b = [n for n in sb.names if n.key in {m.key for m, _ in places_b} | {c for _, i in places_b
                                                                                  for c in _containers(sb, i)}]
        if any(_names_match(x, y) for x in names_a for y in every_b) or \
                any(_names_match(x, y) for x in names_b for y in every_a):
            continue
        levels_a = {_place_level(n) for n in names_a}
        levels_b = {_place_level(n) for n in names_b}
        comparable = [(x, y) for x, _ in xa for y, _ in xb if _place_level(x) == _place_level(y)]
        if not comparable:
            continue
        if levels_a != levels_b and (levels_a | levels_b) & {"continent", "region"}:
            continue
        x, y = comparable[0]
        attr = _attr_name(common)
        return Verdict("place", f"{attr} place", f"{attr} place: {x.key} vs {y.key}")
    return None


def _unique_place_marked(sa, sb, pa, pb, common) -> bool:
    if "locate" in common:
        # "X is headquartered in", "X is based in": one headquarters; "X has offices in": many
        if pa.lemma in ("headquarter", "headquarters", "base", "hq") or pb.lemma in ("headquarter", "headquarters",
                                                                                      "base", "hq"):
            return True
        return bool(sa.marks & {"main", "principal", "primary", "flagship", "sole", "only"} and
                    sb.marks & {"main", "principal", "primary", "flagship", "sole", "only"}) or \
            (_is_singular_definite(sa, pa) and _is_singular_definite(sb, pb))
    if "hold_event" in common:
        return (sa.first and sb.first) or _specific_event(sa, sb, pa, pb) or _named_event(sa, pa) and \
            _named_event(sb, pb)
    return sa.first and sb.first


def _is_singular_definite(sent: _Sentence, p: _Pred) -> bool:
    """'The Sunfield plant is located in': a named, singular subject (not 'offices', not 'a store')."""
    themes = _theme_tokens(sent, p)
    return bool(themes) and all(t.tag_ in ("NNP", "NN") and t.i in sent.name_at or
                                (t.tag_ == "NN" and any(c.i in sent.name_at for c in t.children))
                                for t in themes if t is not None)


def _named_event(sent: _Sentence, p: _Pred) -> bool:
    themes = _theme_tokens(sent, p)
    return any(t is not None and t.i in sent.name_at for t in themes)


# ---- person in a unique role ----------------------------------------------------------------


def _agents(sent: _Sentence, p: _Pred) -> list[_Name]:
    """Who fills the role: the subject of an active verb, the by-agent of a passive, the holder of a role noun."""
    doc = sent.doc
    t = doc[p.i]
    cands = []
    if t.pos_ == "VERB":
        if "win" in p.classes and p.lemma == "go":
            cands = [pp for c in t.children if c.dep_ == "prep" and c.lower_ == "to" for pp in c.children
                     if pp.dep_ == "pobj"]
        elif _is_passive(t):
            cands = [pp for c in t.children if c.dep_ == "agent" for pp in c.children if pp.dep_ == "pobj"]
        else:
            s = _subject_of(t)
            if s is not None:
                cands = [s]
                # "the first person to reach the summit ... was Ewan Harrow"
                if s.lemma_.lower() in _GENERIC_PERSON and s.dep_ == "nsubj" and s.head.pos_ == "AUX":
                    cands = [c for c in s.head.children if c.dep_ == "attr"]
            elif t.dep_ in ("relcl", "acl") and t.head.lemma_.lower() in _GENERIC_PERSON:
                h = t.head
                if h.dep_ == "nsubj" and h.head.pos_ == "AUX":
                    cands = [c for c in h.head.children if c.dep_ == "attr"]
    else:
        v = t.head
        if t.dep_ == "attr" and v.pos_ in ("AUX", "VERB"):
            cands = [c for c in v.children if c.dep_ in ("nsubj",)]
        elif t.dep_ == "nsubj" and v.pos_ in ("AUX",):
            cands = [c for c in v.children if c.dep_ == "attr"]
        elif t.dep_ == "pobj" and v.lower_ == "as" and v.head.pos_ == "VERB":
            s = _subject_of(v.head)
            cands = [s] if s is not None else []
        elif t.dep_ == "appos":
            cands = [v]
        elif t.dep_ == "dobj" and t.head.pos_ == "VERB":
            # "the first person to reach the summit ... was Ewan Harrow": the verb's agent
            verb = t.head
            return _agents(sent, _Pred(i=verb.i, lemma=verb.lemma_.lower(), classes=frozenset(), neg="",
                                       antonym=False))
        cands += [c for c in t.children if c.dep_ == "appos"]
        cands += [c for c in t.children if c.dep_ == "compound" and c.i in sent.name_at and c.pos_ == "PROPN"
                  and doc[sent.name_at[c.i].end - 1].i > t.i]
    out = []
    for c in cands:
        if c is None:
            continue
        ids = [sent.name_at[x.i] for x in [c, *[y for y in c.children if y.dep_ == "appos"]] if x.i in sent.name_at]
        out.extend(ids)
    return out


_SHARED_ROLE = re.compile(r"\bco-?(?:found|author|writ|direct|creat|own|chair|lead|produc)|\bone of the \w+ers\b", re.I)


def _rule_person(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    if _SHARED_ROLE.search(sa.doc.text) or _SHARED_ROLE.search(sb.doc.text):
        return None  # a co-founder or one of the authors shares the role: another holder is no conflict
    roles = _ROLE_ALWAYS | _ROLE_MARKED | _ROLE_AT_TIME
    for pa, pb, common in _aligned(sa, sb, roles, allow_stem=False):
        if pa.neg or pb.neg:
            continue
        if common <= _ROLE_MARKED:
            ok = (sa.first and sb.first) or (sa.marks & {"lead", "chief", "principal", "sole"} and
                                             sb.marks & {"lead", "chief", "principal", "sole"})
            if "win" in common:
                ok = ok or _specific_event(sa, sb, pa, pb)
            if not ok:
                continue
        if common <= _ROLE_AT_TIME or (common <= {"direct"} and sa.doc[pa.i].pos_ == sb.doc[pb.i].pos_ == "NOUN"):
            # offices held in turn ("the Director of the Secret Service"): one holder at a time
            if (sa.temporal | sb.temporal) & {"since", "until", "till", "from-to", "as of", "formerly", "no longer"} \
                    or any(v.startswith("ord:") for v in sa.versions | sb.versions):
                continue
            at_time = (sa.first and sb.first) or (sa.time_points and sb.time_points and _time_compatible(sa, sb))
            at_time = at_time or (not sa.time_points and not sb.time_points and _time_compatible(sa, sb) and
                                  sa.tense == sb.tense == "present")
            if not at_time:
                continue
        elif not _dates_compatible(sa, sb) and not (sa.first and sb.first):
            continue
        if not (_unique_role_noun(sa, pa) and _unique_role_noun(sb, pb)) or \
                _role_compounds(sa, pa) != _role_compounds(sb, pb):
            continue  # "an American film director of Westerns", "an associate art director"
        ag_a, ag_b = _agents(sa, pa), _agents(sb, pb)
        if not ag_a or not ag_b:
            continue
        # the persons must not be named in the other sentence at all (succession, co-authorship)
        if any(_names_match(x, y) for x in ag_a for y in sb.names) or \
                any(_names_match(x, y) for x in ag_b for y in sa.names):
            continue
        # and the role must be about the same thing, not about the persons
        theme_a = [n for n in sa.names if n not in ag_a]
        theme_b = [n for n in sb.names if n not in ag_b]
        if not any(_names_match(x, y) for x in theme_a for y in theme_b):
            continue
        if not _same_theme(sa, pa, sb, pb, shared) and not _role_noun_theme_match(sa, pa, sb, pb):
            continue
        attr = _attr_name(common)
        return Verdict("person_role", attr, f"{attr}: {ag_a[0].key} vs {ag_b[0].key}")
    return None


def _unique_role_noun(sent: _Sentence, p: _Pred) -> bool:
    """A role noun names the one holder only when definite ('the author', 'its first CEO'), not 'a director
    of Westerns'; and what it is the role of must not be a plural ('director of Westerns')."""
    t = sent.doc[p.i]
    if t.pos_ != "NOUN":
        return True
    dets = [c for c in t.children if c.dep_ in ("det", "poss")]
    if any(d.lower_ in ("a", "an", "one", "another", "some", "any") for d in dets):
        return False
    owners = [x for c in t.children if c.dep_ == "prep" and c.lower_ == "of" for x in c.children if x.dep_ == "pobj"]
    return not any(o.tag_ == "NNS" or (o.tag_ == "NNPS" and o.i not in sent.name_at) for o in owners)


def _role_compounds(sent: _Sentence, p: _Pred) -> frozenset[str]:
    t = sent.doc[p.i]
    if t.pos_ != "NOUN":
        return frozenset()
    return frozenset(c.lemma_.lower() for c in t.children if c.dep_ in ("compound", "amod") and c.pos_ == "NOUN")


def _role_noun_theme_match(sa, pa, sb, pb) -> bool:
    """Role nouns ('the author of X') vs verbs ('X was written by'): compare the names around them."""
    def owners(sent, p):
        ids = set()
        for t in _theme_tokens(sent, p):
            ids |= {k[1] for k in _identity(sent, t) if k[0] == "name"}
            ids |= {n for k in _identity(sent, t) if k[0] == "noun" for n in k[2]}
        return [n for n in sent.names if n.key in ids]
    oa, ob = owners(sa, pa), owners(sb, pb)
    return any(_names_match(x, y) for x in oa for y in ob)


# ---- number ---------------------------------------------------------------------------------


def _rule_number(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    if not sa.quantities or not sb.quantities:
        return None
    if not _time_compatible(sa, sb):
        return None
    for qa in sa.quantities:
        for qb in sb.quantities:
            if _yearlike(qa) or _yearlike(qb):
                continue
            if not _same_measure(qa, qb):
                continue
            if qa.lo <= qb.hi and qb.lo <= qa.hi:
                continue
            big = max(abs(qa.value), abs(qb.value)) or 1.0
            if abs(qa.value - qb.value) / big < 0.03:
                continue
            if not _number_subject_match(sa, sb, qa, qb, shared):
                continue
            attr = sorted(qa.nouns & qb.nouns or (qa.keys & qb.keys) - {k for k in qa.keys if k.startswith("stem:")}
                          or qa.nouns or {qa.dim or "value"})[0]
            return Verdict("number", attr, f"{attr}: {qa.text} vs {qb.text}")
    return None


def _yearlike(q: _Qty) -> bool:
    """'2011 lists', '628': a bare integer that may well be a year is not compared as a number."""
    if q.dim == "":
        return bool(re.fullmatch(r"\d{3,4}", q.text)) and 500 <= q.value <= 2100
    return q.dim.startswith("count:") and bool(re.fullmatch(r"\d{4}", q.text)) and 1000 <= q.value <= 2100


def _same_measure(qa: _Qty, qb: _Qty) -> bool:
    """Two numbers measure the same attribute in the same (or a convertible) unit."""
    da, db = qa.dim, qb.dim
    ka = {k for k in qa.keys if not k.startswith("count:")}
    kb = {k for k in qb.keys if not k.startswith("count:")}
    shared_keys = (ka & kb) - {"stem:" + _stem(w) for w in _LIGHT_VERBS}
    if da.startswith("count:") and db.startswith("count:"):
        if da != db and not (qa.count_classes & qb.count_classes):
            return False
        return bool(shared_keys)
    if da.startswith("count:") or db.startswith("count:"):
        count, other = (qa, qb) if da.startswith("count:") else (qb, qa)
        if other.dim != "":
            return False
        # "has a capacity of 28,500" vs "seats 42,000 spectators"; "population of 12,480" vs "31,900 residents"
        return bool(shared_keys & (other.keys - {count.dim[6:]})) and bool(other.nouns or other.keys)
    if da != db:
        return False
    if da == "":
        return bool(qa.nouns & qb.nouns) or bool(shared_keys & {k for k in ka if not k.startswith("stem:")}
                                                 - _LIGHT_VERBS)
    # the same physical unit: an explicit attribute on both sides must agree
    if qa.nouns and qb.nouns and not (qa.nouns & qb.nouns) and not shared_keys:
        return False
    if da in ("percent",) or da.startswith("money:") or da == "time":
        return bool(shared_keys)
    return bool(shared_keys) or not (qa.nouns and qb.nouns)


def _number_subject_match(sa, sb, qa, qb, shared) -> bool:
    """The numbers are about the same thing: the clause subjects (or what they belong to) match."""
    def subject_ids(sent, q):
        v = _clause_verb(sent.doc[q.token])
        s = _subject_of(v) if v.pos_ in ("VERB", "AUX") or v.dep_ == "ROOT" else None
        ids = _identity(sent, s) if s is not None else set()
        if s is not None and s.lemma_.lower() in _CLASSES or (s is not None and s.dep_ == "expl"):
            ids = {("noun", k[1], k[2]) for k in ids if k[0] == "noun" and k[2]}
            ids |= {("name", n) for k in _identity(sent, s) if k[0] == "noun" for n in k[2]}
        return ids
    ia, ib = subject_ids(sa, qa), subject_ids(sb, qb)
    # attribute nouns owned by a name: "Rennvik's population", "the battery in the Hexa X2"
    ia = _lift_attribute_owners(sa, ia, qa)
    ib = _lift_attribute_owners(sb, ib, qb)
    match = _ids_match(ia, ib, sa, sb)
    if match:
        return True
    if match is False:
        # one side's subject may be an attribute noun whose owner is named in a prepositional phrase
        return _owner_overlap(sa, ia, sb, ib) or _part_of_subject(sa, ia, sb, ib) or _part_of_subject(sb, ib, sa, ia)
    return False


def _lift_attribute_owners(sent: _Sentence, ids: set, q: _Qty) -> set:
    """An attribute noun as subject stands for its owner: "Rennvik's population", "the battery in the
    Hexa X2" (the battery is what the number measures), "There are 22 stations along the X line"."""
    out = set(ids)
    v = _clause_verb(sent.doc[q.token])
    subj = next((c for c in v.children if c.dep_ in ("nsubj", "nsubjpass", "expl")), None)
    if subj is None:
        return out
    attribute = subj.dep_ == "expl" or subj.lemma_.lower() in _CLASSES or subj.lemma_.lower() in q.nouns
    if not attribute:
        return out
    for k in ids:
        if k[0] == "noun" and k[2]:
            out |= {("name", n) for n in k[2]}
    scope = v.subtree if subj.dep_ == "expl" else subj.subtree
    for c in scope:
        if c.i in sent.name_at and c.i not in sent.date_tokens:
            out.add(("name", sent.name_at[c.i].key))
    return out


def _part_of_subject(sx: _Sentence, ix: set, sy: _Sentence, iy: set) -> bool:
    """'The Pro plan of Ledgerly costs $29' / 'Ledgerly charges $49 for its Pro tier': a part of X on one
    side, X on the other, and the part's qualifiers ('Pro') named on the other side too."""
    names_y = [n for n in sy.names if ("name", n.key) in iy]
    for k in ix:
        if k[0] != "noun" or not k[2]:
            continue
        owners = [n for n in sx.names if n.key in k[2]]
        if not any(_names_match(o, n) for o in owners for n in names_y):
            continue
        heads = [t for t in sx.doc if t.lemma_.lower() == k[1] and t.pos_ == "NOUN"]
        words = {t.lower_ for t in sy.doc}
        quals = {c.lower_ for h in heads for c in h.children if c.dep_ in ("amod", "compound")}
        if quals and quals <= words:
            return True
    return False


def _owner_overlap(sa, ia, sb, ib) -> bool:
    na = [n for n in sa.names if ("name", n.key) in ia]
    nb = [n for n in sb.names if ("name", n.key) in ib]
    return any(_names_match(x, y) for x in na for y in nb)


# ---- polarity -------------------------------------------------------------------------------


def _object_lemmas(sent: _Sentence, p: _Pred) -> set[str]:
    """Content words of what the predicate says about its subject (object, complement, key prepositions)."""
    doc = sent.doc
    t = doc[p.i]
    out: set[str] = set()
    heads = []
    for c in t.children:
        if c.dep_ in ("dobj", "attr", "acomp", "oprd", "xcomp", "dative"):
            heads.append(c)
        elif c.dep_ == "nsubjpass":
            heads.append(c)
        elif c.dep_ == "prep" and c.lower_ not in ("since", "until", "in", "on", "at", "during", "by", "after",
                                                   "before", "for", "from") or \
                (c.dep_ == "prep" and c.lower_ in ("to", "with", "of", "over", "under")):
            heads.extend(x for x in c.children if x.dep_ == "pobj")
        elif c.dep_ == "prt":
            out.add(c.lemma_.lower())
    if t.pos_ in ("NOUN", "ADJ"):
        for c in t.children:
            if c.dep_ in ("compound", "amod") and c.pos_ in ("NOUN", "PROPN", "ADJ"):
                out.add(c.lemma_.lower())
            if c.dep_ == "prep":
                heads.extend(x for x in c.children if x.dep_ == "pobj")
    if t.pos_ == "ADJ":
        out |= {c.lemma_.lower() for c in t.children if c.dep_ == "advmod" and c.pos_ == "ADV"
                and c.lower_ not in ("not", "never", "very", "also", "still", "now", "fully", "only")}
    for h in heads:
        for x in h.subtree:
            if x.like_num or _is_code(x.text):
                out.add(_norm_version(x.text))
            if x.pos_ in ("NOUN", "PROPN", "ADJ", "VERB") and not x.is_stop and x.i not in sent.date_tokens and \
                    x.lemma_.lower() not in ("only", "new", "other", "good", "well", "any", "own"):
                out.add(x.lemma_.lower())
    return out


def _rule_polarity(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    for pa, pb, common in _aligned(sa, sb):
        na = bool(pa.neg) != pa.antonym
        nb = bool(pb.neg) != pb.antonym
        if na == nb:
            continue
        if pa.lemma in _LIGHT_VERBS or pb.lemma in _LIGHT_VERBS:
            continue
        neg_p, neg_s, pos_p, pos_s = (pa, sa, pb, sb) if na else (pb, sb, pa, sa)
        if not _polarity_time_ok(neg_p, neg_s, pos_p, pos_s):
            continue
        if not _same_theme(sa, pa, sb, pb, shared, lenient=True):
            continue
        oa = _object_lemmas(sa, pa)
        ob = _object_lemmas(sb, pb)
        neg_obj = oa if na else ob
        pos_obj = ob if na else oa
        if neg_obj and pos_obj and not (neg_obj & pos_obj):
            continue  # "does not support A" / "supports B"
        if neg_obj and not pos_obj and sa.doc[pa.i].pos_ == "VERB" and sb.doc[pb.i].pos_ == "VERB":
            continue  # "does not support A" / "is supported": only an unrestricted negation clashes with anything
        attr = _attr_name(common)
        return Verdict("polarity", attr,
                       f"{attr}: '{sa.doc[pa.i].text}' {'negated' if na else 'asserted'} vs "
                       f"'{sb.doc[pb.i].text}' {'negated' if nb else 'asserted'}")
    return None


def _polarity_time_ok(neg_p, neg_s, pos_p, pos_s) -> bool:
    """An undated negation and an undated assertion clash; 'never' clashes with any date; 'no longer' with
    a present-tense assertion; anything scoped by since/until or different dates does not."""
    if neg_p.neg == "never":
        return not ({"until", "till", "before"} & pos_s.temporal)
    if neg_p.neg == "no longer":
        return pos_s.tense == "present" and not pos_s.dates and not (pos_s.temporal & {"since", "until", "as of"})
    return _time_compatible(neg_s, pos_s)


# ---- exclusive states -----------------------------------------------------------------------


def _states(sent: _Sentence) -> list[tuple[str, _Pred]]:
    doc = sent.doc
    out = []
    for p in sent.preds:
        t = doc[p.i]
        if p.neg:
            continue
        for state in _STATES.get(p.lemma, ()):
            if state in ("completed", "cancelled", "acquired", "ended", "dead", "crashed", "settled") and \
                    t.pos_ not in ("VERB", "ADJ", "NOUN"):
                continue
            out.append((state, p))
        if "tried" in p.classes:
            out.append(("tried", p))
        if p.lemma == "open" and t.dep_ in ("amod", "compound") and t.head.lemma_.lower() == "source":
            out.append(("open_source", p))
        # ongoing: "still stands", "is actively maintained", "has operated without interruption since 1998"
        advs = {c.lower_ for c in t.children if c.dep_ in ("advmod", "npadvmod")}
        preps = {(c.lower_, x.lemma_.lower()) for o in [t, *[c for c in t.children if c.dep_ == "dobj"]]
                 for c in o.children if c.dep_ == "prep" for x in c.children}
        if t.pos_ in ("VERB", "ADJ") and (advs & {"still", "actively"} or ("without", "interruption") in preps or
                                          (p.lemma in ("remain", "continue") and not p.neg)):
            if p.lemma not in ("remain",) or any(c.dep_ in ("acomp", "xcomp") and c.lemma_.lower() in
                                                 ("open", "active", "operational", "available", "operate")
                                                 for c in t.children):
                out.append(("ongoing", p))
        if ("without", "incident") in preps or advs & {"safely", "successfully"}:
            out.append(("uneventful", p))
    # "open source" written as two words
    if re.search(r"\bopen[- ]source\b", sent.text, re.I) and not re.search(r"\bnot\b.{0,20}open[- ]source",
                                                                           sent.text, re.I):
        root = next((t for t in doc if t.dep_ == "ROOT"), None)
        if root is not None:
            out.append(("open_source", _Pred(i=root.i, lemma=root.lemma_.lower(), classes=frozenset(), neg="",
                                             antonym=False)))
    return out


def _rule_exclusive(sa: _Sentence, sb: _Sentence, shared) -> Verdict | None:
    sta, stb = _states(sa), _states(sb)
    for xa, pa in sta:
        for xb, pb in stb:
            if frozenset({xa, xb}) not in _EXCLUSIVE:
                continue
            if not _same_theme(sa, pa, sb, pb, shared, lenient=True):
                continue
            if xa in _OBJECT_STATES or xb in _OBJECT_STATES:
                if not (_event_words(sa, pa) & _event_words(sb, pb)):
                    continue
            if not _exclusive_time_ok(xa, sa, xb, sb):
                continue
            if xa == "ended" and xb == "ongoing" or xb == "ended" and xa == "ongoing":
                ended_p, ended_s, on_p, on_s = (pa, sa, pb, sb) if xa == "ended" else (pb, sb, pa, sa)
                if not _ended_matches_ongoing(ended_s, ended_p, on_s, on_p):
                    continue
            return Verdict("exclusive_predicate", f"{xa}/{xb}",
                           f"'{sa.doc[pa.i].text}' ({xa}) vs '{sb.doc[pb.i].text}' ({xb})")
    return None


def _event_words(sent: _Sentence, p: _Pred) -> set[str]:
    """Nouns in the predicate's phrase other than its subject: 'crashed during its first test flight'."""
    t = sent.doc[p.i]
    subj = {x.i for c in t.children if c.dep_ in ("nsubj", "nsubjpass") for x in c.subtree}
    return {x.lemma_.lower() for x in t.subtree if x.pos_ == "NOUN" and x.i not in subj and x.i != t.i}


def _ended_matches_ongoing(es, ep, os_, op) -> bool:
    """'ceased publication' vs 'still published'; 'discontinued' vs 'operated without interruption'."""
    objs = {c.lemma_.lower() for c in es.doc[ep.i].children if c.dep_ in ("dobj", "xcomp")}
    if not objs:
        return True
    stems = {_stem(w) for w in objs}
    classes = {c for w in objs for c in _CLASSES.get(w, ())}
    return _stem(op.lemma) in stems or bool(classes & op.classes) or \
        op.lemma in ("stand", "operate", "exist", "run", "maintain")


def _exclusive_time_ok(xa: str, sa: _Sentence, xb: str, sb: _Sentence) -> bool:
    """An event state (died in 2019) clashes with the other state unless that one is dated before it."""
    if xa in _EVENT_STATES and xb not in _EVENT_STATES:
        event_s, other_s = sa, sb
    elif xb in _EVENT_STATES and xa not in _EVENT_STATES:
        event_s, other_s = sb, sa
    else:
        if {xa, xb} == {"cancelled", "completed"}:
            cs, ds = (sa, sb) if xa == "cancelled" else (sb, sa)
            if cs.dates and ds.dates:
                return max(d.hi for d in ds.dates) >= min(d.lo for d in cs.dates)
            return True
        return _time_compatible(sa, sb, allow_one_dated=True) or not (sa.dates and sb.dates)
    if {"until", "till", "before"} & other_s.temporal:
        return False
    if other_s.tense == "present" or "since" in other_s.temporal or "still" in other_s.temporal:
        return True
    if other_s.dates and event_s.dates:
        return max(d.hi for d in other_s.dates) >= min(d.lo for d in event_s.dates)
    return not other_s.dates


# =============================================================================================
# Candidate generation and objects
# =============================================================================================


@dataclass
class ContradictionResult:
    contradictions: list[Contradiction] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    #: pairs judged (for reports and benchmarks)
    pairs_judged: int = 0


_CONFIDENCE = {"date": 0.75, "number": 0.7, "place": 0.7, "person_role": 0.7, "exclusive_predicate": 0.65,
               "polarity": 0.65}
#: A name referenced by more claims than this is too common to pick out a subject ("united states", a
#: concept such as "film"); concepts get a lower cap, as they name kinds rather than things.
_MAX_NAME_FANOUT = {"entity": 200, "concept": 40}


def find_contradictions(bank, claim_ids: list[str], run_id: str | None, k: int = 20,
                        chunk: int = 2000) -> ContradictionResult:
    """Contradictions between the given (new) claims and active claims of other documents.

    Candidates per claim: claims of other documents that reference an entity or concept with the same
    normalised name (DuckDB `edges` + `names`; names shared by too many claims are skipped), plus the
    claim's k nearest active claims in Chroma; a candidate pair is kept only if the two claims reference
    an entity of a common name (a lone first name or surname does not count). Each unordered pair is
    judged once, in canonical order. Existing contradictions (same deterministic id) are kept as they
    are: never rewritten, deleted or downgraded. Claims are read in chunks, each in its own short read
    session; judging happens outside the lock.

    With an LLM configured (`settings.llm == "ollama"`), the LLM judges the same candidate pairs too, in
    batches and within a per-cycle budget (`llm_judge`): its verdict decides where it answers, since it
    reads the sentences the rules only parse; where it does not (error, budget spent) the rules' verdict
    stands. Each contradiction is then tagged `judge:llm` or `judge:rules`.
    """
    try:
        return _find(bank, claim_ids, run_id, k, chunk)
    finally:  # the bank keeps the parses; holding them here would only weigh on the phases after this one
        with _cache_lock:
            _CACHE.clear()


def _find(bank, claim_ids: list[str], run_id: str | None, k: int, chunk: int) -> ContradictionResult:
    result = ContradictionResult()
    ids = list(dict.fromkeys(claim_ids))
    seen: set[tuple[str, str]] = set()
    own: dict[str, tuple[str, str]] = {}  # claim id -> (statement as judged, its document's title)
    llm = llm_judge.LLMJudge(bank.settings) if llm_judge.enabled(bank.settings) else None
    for start in range(0, len(ids), chunk):
        todo, sources, ctr_ids = _candidate_pairs(bank, ids[start:start + chunk], k, seen)
        for c in {c.id: c for pair in todo for c in pair}.values():
            if c.id not in own:
                own[c.id] = (_judged_text(c, sources), _title_of(c, sources))
        texts = [_judged_pair(own[a.id], own[b.id]) for a, b in todo]
        _analyse_stored(bank, (t for pair in texts for t in pair))
        llm_verdicts = llm.contradictions([(own[a.id], own[b.id]) for a, b in todo]) if llm else [None] * len(todo)
        for (a, b), (text_a, text_b), judged in zip(todo, texts, llm_verdicts):
            result.pairs_judged += 1
            verdict, by = judge(text_a, text_b), "rules"
            if judged is not None and judged.answer is not None:
                found, by = judged.answer.as_verdict(), "llm"
                verdict = Verdict(*found) if found else None
            if verdict is not None:
                _add(result, a, b, verdict, ctr_ids[(a.id, b.id)], sources, run_id)
                if llm is not None:
                    result.contradictions[-1].tags.append(f"judge:{by}")
    return result


def _candidate_pairs(bank, claim_ids: list[str], k: int, seen: set[tuple[str, str]]):
    """(claim pairs to judge, their source documents, contradiction id per pair) for one chunk."""
    with bank.reading() as db:
        new = {i: c for i, c in db.get_objects(claim_ids).items()
               if isinstance(c, Claim) and c.status.value == "active"}
        if not new:
            return [], {}, {}
        candidates, _ = _name_candidates(db, list(new))
        _ann_candidates(bank, new, candidates, k)
        other_ids = {c for cs in candidates.values() for c in cs} - set(new)
        others = {i: c for i, c in db.get_objects(list(other_ids)).items()
                  if isinstance(c, Claim) and c.status.value == "active"}
        claims = {**others, **new}
        pairs: set[tuple[str, str]] = set()
        for cid, cands in candidates.items():
            a = claims.get(cid)
            if a is None:
                continue
            for other in cands:
                b = claims.get(other)
                if b is None or b.id == a.id or set(a.source_ids) & set(b.source_ids):
                    continue
                pairs.add(tuple(sorted((a.id, b.id))))
        pairs -= seen
        seen |= pairs
        entities = _referenced_entities(db, {c for p in pairs for c in p})
        sources = {d.id: d for d in db.sources_by_ids(list({s for p in pairs for c in p
                                                            for s in claims[c].source_ids}))}
        # the same subject in the graph: the two claims reference an entity of the same name, named in them
        # (worked out once per claim: a claim is in many pairs)
        in_pairs = {c for p in pairs for c in p}
        titles = {c: _title_of(claims[c], sources) for c in in_pairs}
        named = {c: _named_in(entities.get(c, {}), claims[c], titles[c]) for c in in_pairs}
        subject = {c: _subject_name(claims[c]) for c in in_pairs}  # or the same proper-name subject
        pairs = {p for p in pairs if _share_a_name(named[p[0]], named[p[1]], titles[p[0]], titles[p[1]])
                 or subject[p[0]] and subject[p[0]] == subject[p[1]]}
        ctr_ids = {p: stable_id("ctr", *p) for p in pairs}
        where, params = id_filter("id", list(ctr_ids.values()))
        existing = {r[0] for r in db.sql(f"SELECT id FROM objects WHERE {where}", params)}
    todo = [(claims[p[0]], claims[p[1]]) for p in sorted(pairs) if ctr_ids[p] not in existing]
    todo = [(a, b) for a, b in todo if not _different_document_subjects(a, b, sources)]
    return todo, sources, ctr_ids


def _referenced_names(db, claim_ids: Iterable[str], kind: str | None = None) -> dict[str, set[str]]:
    """Normalised names of the entities (and concepts) each claim references (graph edges in DuckDB)."""
    ids = list(claim_ids)
    names_by_claim: dict[str, set[str]] = defaultdict(set)
    if not ids:
        return names_by_claim
    rows = db.sql(
        "SELECT e.head, n.name FROM edges e JOIN names n ON n.object_id = e.tail "
        "WHERE e.edge_type = 'references' AND e.head IN (SELECT unnest(?))"
        + (" AND n.type = ?" if kind else ""), [ids, kind] if kind else [ids])
    for head, name in rows:
        if len(name) >= 3 and not name.isdigit() and ":" not in name:  # not a blocking key
            names_by_claim[head].add(name)
    return names_by_claim


def _subject_name(claim: Claim) -> str:
    """The claim's proper-name subject ('Okafor' and 'Dr. Okafor' give 'okafor', 'Lumen DB 2.0'): the
    extractor's subject, titles dropped; '' for pronouns and common nouns ('it', 'the film'), which never
    match. Documents about different people of one name are told apart by `_different_document_subjects`."""
    words = [w for w in re.findall(r"[\w.]+", claim.subject) if _fold(w).strip(".") not in _TITLES]
    return _fold(" ".join(words)) if words and all(w[:1].isupper() or w[:1].isdigit() for w in words) else ""


def _share_a_name(a: dict[str, str], b: dict[str, str], title_a: str = "", title_b: str = "") -> bool:
    """Whether two claims' entities ({normalised name: kind}) name the same subject: the same name of two
    words or more, or one that ends the other ('ilse brandauer' / 'composer ilse brandauer'). A one-word
    name counts only when it is not a person and both documents' titles contain it ('quillpad'): a lone
    first name or surname ('george', 'neugebauer') does not identify anyone across documents."""
    sa, sb = set(a), set(b)
    titles = (f" {_base_title(title_a)} ", f" {_base_title(title_b)} ")
    for name in sa & sb:
        if len(name.split()) >= 2:
            return True
        if "person" not in (a[name], b[name]) and all(f" {name} " in t for t in titles):
            return True
    # one name ends the other ('ilse brandauer' / 'composer ilse brandauer'): compare word suffixes,
    # not all pairs (a canonical entity can carry dozens of names)
    return bool(_suffixes(sa) & sb or _suffixes(sb) & sa)


def _named_in(names: dict[str, str], claim: Claim, title: str) -> dict[str, str]:
    """The names of a claim's entities that the claim or its document's title uses. A canonical entity
    carries every alias of its members: "After Charles died in 1574" references the canonical "Charles",
    whose aliases include "Earl Charles", a name that says nothing about whom this claim means."""
    words = f" {normalise_name(claim.statement)} {normalise_name(title)} "
    return {name: kind for name, kind in names.items() if f" {name} " in words}


def _suffixes(names: set[str]) -> set[str]:
    """The endings of two words or more of each name, without the name itself."""
    out = set()
    for name in names:
        words = name.split()
        out.update(" ".join(words[i:]) for i in range(1, len(words) - 1))
    return out


def _referenced_entities(db, claim_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """{claim id: {normalised entity name: entity kind}} for the entities each claim references."""
    ids = list(claim_ids)
    out: dict[str, dict[str, str]] = defaultdict(dict)
    if not ids:
        return out
    rows = db.sql(
        "SELECT e.head, n.name, n.object_id FROM edges e "
        "JOIN names n ON n.object_id = e.tail AND n.type IN ('entity', 'canonical_entity') "
        "WHERE e.edge_type = 'references' AND e.head IN (SELECT unnest(?))", [ids])
    rows = [r for r in rows if len(r[1]) >= 3 and not r[1].isdigit() and ":" not in r[1]]  # not 'acronym:ll'
    # the kinds in a second query: joining `objects` into the first read every object's JSON (3x slower)
    where, params = id_filter("id", sorted({r[2] for r in rows}))
    kinds = dict(db.sql(f"SELECT id, json_extract_string(data, '$.entity_kind') FROM objects WHERE {where}", params))
    for head, name, entity in rows:
        out[head][name] = kinds.get(entity) or "other"
    return out


def _name_candidates(db, claim_ids: list[str]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Claims that reference an entity/concept of the same normalised name (and each claim's names)."""
    names_by_claim = _referenced_names(db, claim_ids)
    all_names = sorted({n for ns in names_by_claim.values() for n in ns})
    out: dict[str, set[str]] = {c: set() for c in claim_ids}
    if not all_names:
        return out, names_by_claim
    fan = db.sql(
        "WITH refs AS (SELECT n.name, replace(n.type, 'canonical_', '') AS type, e.head FROM names n "
        "              JOIN edges e ON e.tail = n.object_id "
        "              AND e.edge_type = 'references' WHERE n.name IN (SELECT unnest(?))), "
        "     counts AS (SELECT name, type, count(*) AS c FROM refs GROUP BY name, type) "
        "SELECT r.name, r.head FROM refs r JOIN counts USING (name, type) "
        "WHERE (r.type = 'entity' AND counts.c <= ?) OR (r.type = 'concept' AND counts.c <= ?)",
        [all_names, _MAX_NAME_FANOUT["entity"], _MAX_NAME_FANOUT["concept"]])
    claims_by_name: dict[str, set[str]] = defaultdict(set)
    for name, head in fan:
        if head.startswith("clm-"):
            claims_by_name[name].add(head)
    for cid, names in names_by_claim.items():
        for name in names:
            out[cid] |= claims_by_name.get(name, set())
    return out, names_by_claim


def _ann_candidates(bank, new: dict[str, Claim], out: dict[str, set[str]], k: int) -> None:
    """The k nearest active claims by embedding (the claim's own vector from Chroma)."""
    if k <= 0:
        return
    try:
        vectors = bank.vectors.get_embeddings(list(new))
    except Exception:  # noqa: BLE001 - a missing vector store only loses the ANN half of the candidates
        return
    ids = sorted(vectors)  # batched queries: one query per claim cost most of the phase on 150k vectors
    # any claim: the caller keeps only active ones (it reads every candidate from DuckDB anyway)
    for cid, found in zip(ids, bank.vectors.query_many([vectors[i] for i in ids], k + 1, f"{Claim.id_prefix}-",
                                                       over=8)):
        out.setdefault(cid, set()).update(other for other, _score in found if other != cid)


_PRONOUN_START = re.compile(r"^(He|She|It|They)\b(?!')")


def _judged_text(claim: Claim, sources: dict) -> str:
    """The statement, with a leading he/she/it/they replaced by the document's subject when the extractor
    resolved it to that subject ("He died in 2016" in the article on X -> "X died in 2016"). Any other
    pronoun stays, and `judge` treats it as unknown."""
    statement = claim.statement
    if not _PRONOUN_START.match(statement) or not claim.subject:
        return statement
    title = _title_of(claim, sources)
    if not title or _fold(claim.subject).strip() != _fold(title) or len(title.split()) > 8:
        return statement
    return _PRONOUN_START.sub(title, statement, count=1)


def _title_of(claim: Claim, sources: dict) -> str:
    title = next((sources[s].title for s in claim.source_ids if s in sources), "")
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()


_HONORIFIC = re.compile(r"^(?:(?:Dr|Mr|Mrs|Ms|Prof|Sir|Dame)\.?\s+)+")


def _judged_pair(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    """The two statements as judged, from (statement with its pronoun resolved, document title) each: the
    documents' titles, which name their subjects, become one opaque proper name, so that a title that
    reads like a sentence ("Drive a Crooked Road is a 1954 film ...") parses as the name it is; a title
    that is a name of capitalised words stands for its last word alone too ("Okafor founded ...")."""
    (ta, title_a), (tb, title_b) = a, b
    for title in {_HONORIFIC.sub("", title_a), _HONORIFIC.sub("", title_b)}:  # "Dr. Mara Okafor" is "Mara Okafor"
        if len(title.split()) < 2 or len(title) > 80 or (title not in ta and title not in tb):
            continue
        pattern = re.compile(rf"(?<![\w'’]){re.escape(title)}(?![\w'’])(?!\s+[A-Z])")
        digest = stable_id("t", _fold(title)).split("-")[1]
        name = "Zq" + "".join("bcdfghjklmnpqrstv"[int(ch, 16)] for ch in digest[:6])
        ta, tb = _replace_title(pattern, name, ta), _replace_title(pattern, name, tb)
        words = title.split()
        if len(words) <= 4 and all(w[:1].isupper() for w in words):  # a person's name: "Okafor" is Mara Okafor
            surname = re.compile(rf"(?<![\w'’]){re.escape(words[-1])}(?![\w'’])(?!\s+[A-Z])")
            ta, tb = _replace_title(surname, name, ta), _replace_title(surname, name, tb)
    return ta, tb


def _replace_title(pattern: re.Pattern, name: str, text: str) -> str:
    """Occurrences of a title not inside a longer name: "Kevin Hennessy" in "Neil Kevin Hennessy" is not
    Kevin Hennessy (a capitalised word before it, other than a determiner, extends the name)."""
    def swap(m: re.Match) -> str:
        before = re.search(r"([A-Z][\w'’.-]*)\s+$", text[:m.start()])
        if before and before.group(1).lower().rstrip(".") not in ("dr", "mr", "mrs", "ms", "prof", "sir", "the", "a", "an", "in", "on", "at", "by", "for", "from",
                                                      "with", "of", "to", "and", "but", "when", "after", "before",
                                                      "since", "during", "while", "as", "its", "his", "her"):
            return m.group(0)
        return name
    return pattern.sub(swap, text)


def _different_document_subjects(a: Claim, b: Claim, sources: dict) -> bool:
    """'John Smith (footballer)' and 'John Smith (politician)': same name, different documents' subjects."""
    ta = next((sources[s].title for s in a.source_ids if s in sources), "")
    tb = next((sources[s].title for s in b.source_ids if s in sources), "")
    if not ta or not tb or ta == tb:
        return False
    if _base_title(ta) == _base_title(tb):
        return True
    # "Juan Carlos" in the article "Juan Carlos I of Spain" and in the article "Juan Carlos Salazar": each
    # claim is about its own document's subject, and the titles extend the name differently
    ext_a, ext_b = _title_extension(a.subject, ta), _title_extension(b.subject, tb)
    return bool(ext_a and ext_b and ext_a != ext_b)


def _title_extension(subject: str, title: str) -> str:
    """The capitalised words a title adds to a claim's subject name when the title contains that name:
    'Juan Carlos' in 'Juan Carlos I of Spain' -> 'spain', 'Neugebauer' in 'Gerry Neugebauer' -> 'gerry';
    '' when the title does not contain the subject or adds no name ('The history of Lumen Labs')."""
    subject_words = _base_title(subject).split()
    title_words = re.sub(r"\s*\([^)]*\)\s*$", "", title).replace(",", " ").split()
    folded = [_fold(w).strip(".'’") for w in title_words]
    if not subject_words or not set(subject_words) <= set(folded):
        return ""
    extra = [f for w, f in zip(title_words, folded) if f not in subject_words and w[:1].isupper()
             and f not in _TITLES and f not in ("the", "a", "an", "i") and not f.isdigit()]
    return " ".join(extra)


@lru_cache(maxsize=100_000)
def _base_title(title: str) -> str:
    return _fold(re.sub(r"\s*\([^)]*\)\s*$", "", title)).strip()


def _source_label(claim: Claim, sources: dict) -> str:
    doc = next((sources[s] for s in claim.source_ids if s in sources), None)
    return doc.path if doc is not None else (claim.source_ids[0] if claim.source_ids else "unknown source")


def _add(result: ContradictionResult, a: Claim, b: Claim, verdict: Verdict, ctr_id: str, sources: dict,
         run_id: str | None) -> None:
    where_a, where_b = _source_label(a, sources), _source_label(b, sources)
    subject = a.subject or b.subject or verdict.attribute
    title = f"Conflicting {verdict.attribute} of {subject}"[:200]
    description = (f"«{a.statement}» ({where_a}) contradicts «{b.statement}» ({where_b}). "
                   f"{verdict.kind}: {verdict.explanation}.")
    confidence = round(min(_CONFIDENCE.get(verdict.kind, 0.6), a.confidence + 0.2, b.confidence + 0.2), 3)
    ctr = Contradiction(
        id=ctr_id, title=title, description=description, claim_ids=[a.id, b.id], derived_from=[a.id, b.id],
        attribute=verdict.attribute, resolution="open", explanation=verdict.explanation,
        source_ids=list(dict.fromkeys([*a.source_ids, *b.source_ids])),
        source_spans=[*a.source_spans, *b.source_spans], confidence=confidence, tags=[verdict.kind],
        run_id=run_id,
    )
    question = Question(
        id=stable_id("qst", ctr.id), title=f"Which is right about {verdict.attribute} of {subject}?"[:200],
        question=f"Which is right: «{a.statement}» ({where_a}) or «{b.statement}» ({where_b})?",
        about=[a.id, b.id, ctr.id], derived_from=[ctr.id], source_ids=list(ctr.source_ids),
        tags=["contradiction", verdict.kind], confidence=confidence, run_id=run_id,
    )
    result.contradictions.append(ctr)
    result.questions.append(question)
    result.edges.append(Edge.between(ctr.id, a.id, EdgeType.CONTRADICTS))
    result.edges.append(Edge.between(ctr.id, b.id, EdgeType.CONTRADICTS))
